"""How a draughts agent's games against a baseline go: material, draw counter and search value.

    python tools/draughts_game_trace.py draughts --against mcts:1000 --games 8 \
        --simulations 1024 --seed 1 [--opening-plies 2] [--every 6] [--save games.npz]

The agent plays one colour in every game (White for an odd seed, Black for an even one), move by
move in a host loop over a batch of games, so the traces can be kept; `azjax eval` plays the
same match faster inside one compiled loop, but keeps only the results. Each game may open with
uniformly random plies (`--opening-plies`, as arenas against alpha-beta do: two deterministic
players would otherwise replay the same game in every slot). Per game it prints the
result, the length, the final material and the whole game's material balance seen from the agent
(men 1, kings 1.5) every `--every` plies, with the draw counter and the agent's search value.
What such traces show for the shipped model is in docs/results.md ("Draughts").
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent
from azjax.evaluation.players import make_opponent


def _material(board: np.ndarray, sign: int) -> tuple[int, int, int, int]:
    """(my men, my kings, their men, their kings) of an int8 [32] board (+ Black)."""
    mine = board * sign
    return (int(np.sum(mine == 1)), int(np.sum(mine == 2)), int(np.sum(mine == -1)),
            int(np.sum(mine == -2)))


def _boards(env, states, games: int) -> np.ndarray:
    """int8 [B, 32]: each game's board (`env.board`, + Black)."""
    return np.stack([env.board(jax.tree.map(lambda x, g=g: x[g], states)) for g in range(games)])


def play(agent: Agent, opponent_name: str, games: int, simulations: int, seed: int,
         opening_plies: int = 0) -> dict:
    """Plays the games, each opening with `opening_plies` uniformly random plies; returns
    per-ply arrays [T, B], the final boards [B, 32] and the agent's result per game [B]."""
    env = agent.env
    opponent = jax.jit(make_opponent(env, opponent_name))
    random_player = jax.jit(make_opponent(env, "random"))
    step = jax.jit(jax.vmap(env.step))
    me = seed % 2  # White (player 1) for odd seeds, Black for even ones
    key = jax.random.PRNGKey(seed)
    states = jax.vmap(env.init)(jax.random.split(key, games))
    trace = {"board": [], "player": [], "counter": [], "value": []}
    returns = np.zeros((games, 2), np.float32)  # a finished game's later steps add zeros
    start = time.time()
    for ply in range(env.max_game_length):
        done = np.asarray(states.terminated | states.truncated)
        if done.all():
            break
        k_agent, k_opponent = jax.random.split(jax.random.fold_in(key, ply))
        out = agent.search_output(k_agent, states, num_simulations=simulations)
        mover = np.asarray(states.current_player)
        if ply < opening_plies:  # the opponent's search would be thrown away: skip it
            action = np.asarray(random_player(k_opponent, states))
        else:
            theirs = np.asarray(opponent(k_opponent, states))
            action = np.where(mover == me, np.asarray(out.action), theirs)
        trace["board"].append(_boards(env, states, games))
        trace["player"].append(np.where(done, -1, mover))
        trace["counter"].append(np.asarray(states.counter))
        trace["value"].append(np.asarray(out.value))
        states = step(states, jnp.asarray(action, jnp.int32))
        returns += np.asarray(states.rewards)
        if ply % 20 == 0:
            print(f"ply {ply}: {time.time() - start:.0f} s, {int((~done).sum())} games live",
                  flush=True)
    result = {name: np.array(values) for name, values in trace.items()}
    result["me"] = me
    result["final_board"] = _boards(env, states, games)
    result["rewards_me"] = returns[:, me]
    return result


def report(trace: dict, every: int) -> None:
    me = int(trace["me"])
    sign = 1 if me == 0 else -1
    outcomes = {1.0: "win", 0.0: "draw", -1.0: "loss"}
    for game in range(trace["final_board"].shape[0]):
        live = trace["player"][:, game] >= 0
        length = int(live.sum())
        balance = []
        for ply in range(0, length, every):
            men, kings, their_men, their_kings = _material(trace["board"][ply, game], sign)
            to_move = "*" if trace["player"][ply, game] == me else " "
            balance.append(f"{ply}:{men}+{kings}K/{their_men}+{their_kings}K "
                           f"c{trace['counter'][ply, game]} v{trace['value'][ply, game]:+.2f}"
                           f"{to_move}")
        result = outcomes.get(float(trace["rewards_me"][game]), "?")
        diffs = [m + 1.5 * k - tm - 1.5 * tk for m, k, tm, tk in
                 (_material(trace["board"][p, game], sign) for p in range(length))]
        print(f"game {game}: agent is player {me}, {result} after {length} plies, final "
              f"{_material(trace['final_board'][game], sign)} (my men, kings, theirs), "
              f"balance {min(diffs):+.1f} .. {max(diffs):+.1f}")
        print("   " + " ".join(balance))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", help="a game id (shipped model), run dir or model dir")
    parser.add_argument("--against", default="mcts:1000")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--simulations", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--opening-plies", type=int, default=0,
                        help="uniformly random plies opening each game")
    parser.add_argument("--every", type=int, default=6, help="plies between balance readings")
    parser.add_argument("--save", default=None, help="write the traces to this .npz")
    args = parser.parse_args()
    agent = Agent.load(args.agent)
    if agent.env.name != "draughts":
        raise SystemExit(f"{args.agent} plays {agent.env.name}; this trace reads draughts boards")
    trace = play(agent, args.against, args.games, agent.search_simulations(args.simulations),
                 args.seed, args.opening_plies)
    report(trace, args.every)
    if args.save:
        np.savez(args.save, **trace)


if __name__ == "__main__":
    main()
