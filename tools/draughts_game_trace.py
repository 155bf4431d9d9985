"""How a draughts agent's games against a baseline or an engine go: material, draw counter and
search value, and where the lost games were lost.

    python tools/draughts_game_trace.py draughts --against mcts:1000 --games 8 \
        --simulations 1024 --seed 1 [--opening-plies 2] [--every 6] [--save games.npz] \
        [--pdn games.pdn]
    python tools/draughts_game_trace.py draughts --against cb:PATH/cake.so@0.1 --games 20 \
        --seed 0 --opening-plies 3

The agent plays one colour in every game (White for an odd seed, Black for an even one; with
`--both-colours`, Black in the even games and White in the odd ones), move by
move in a host loop over a batch of games, so the traces can be kept; `azjax eval` plays the
same match faster inside one compiled loop, but keeps only the results. Each game may open with
uniformly random plies (`--opening-plies`, as arenas against alpha-beta do: two deterministic
players would otherwise replay the same game in every slot). Per game it prints the
result, the length, the final material and the whole game's material balance seen from the agent
(men 1, kings 1.5) every `--every` plies, with the draw counter and the agent's search value.
An engine opponent (`cb:PATH[@SECONDS]`, docs/engines.md) moves on the host, one game at a
time; a game it forfeits counts as its loss.

The summary at the end places each lost game's decisive moment: the ply after which the agent's
material balance (men 1, kings 1.5) stayed below zero to the end (for a loss with material
level or ahead at the end, the last ply), in the opening (before ply 20), the middle game, or
the ending (10 pieces or fewer on the board), with the balance and the pieces left there.
What such traces show for the shipped model is in docs/results.md ("Draughts"). `--pdn FILE`
appends the games to FILE in PDN, to replay the lost ones in CheckerBoard.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent
from azjax.config import is_engine_name
from azjax.evaluation.players import make_opponent

OPENING_PLIES = 20  # plies of the opening, for the summary
ENDING_PIECES = 10  # pieces on the board at most in an ending, for the summary


def _material(board: np.ndarray, sign: int) -> tuple[int, int, int, int]:
    """(my men, my kings, their men, their kings) of an int8 [32] board (+ Black)."""
    mine = board * sign
    return (int(np.sum(mine == 1)), int(np.sum(mine == 2)), int(np.sum(mine == -1)),
            int(np.sum(mine == -2)))


def _boards(env, states, games: int) -> np.ndarray:
    """int8 [B, 32]: each game's board (`env.board`, + Black)."""
    return np.stack([env.board(jax.tree.map(lambda x, g=g: x[g], states)) for g in range(games)])


def play(agent: Agent, opponent_name: str, games: int, simulations: int, seed: int,
         opening_plies: int = 0, both_colours: bool = False) -> dict:
    """Plays the games, each opening with `opening_plies` uniformly random plies; returns
    per-ply arrays [T, B], the final boards [B, 32] and the agent's result per game [B]."""
    env = agent.env
    engine = None
    if is_engine_name(opponent_name):
        from azjax.evaluation.checkerboard import engine_player

        engine = engine_player(env, opponent_name, report=print)
        engine.start(games)
    else:
        opponent = jax.jit(make_opponent(env, opponent_name))
    random_player = jax.jit(make_opponent(env, "random"))
    step = jax.jit(jax.vmap(env.step))
    # The agent's player id per game: White (1) for odd seeds, Black (0) for even ones.
    me = (np.arange(games) if both_colours else np.full(games, seed)) % 2
    key = jax.random.PRNGKey(seed)
    states = jax.vmap(env.init)(jax.random.split(key, games))
    trace = {"board": [], "player": [], "counter": [], "value": [], "action": []}
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
        elif engine is not None:
            theirs, _ = engine.move(states, (mover != me) & ~done)
            action = np.where(mover == me, np.asarray(out.action), theirs)
        else:
            theirs = np.asarray(opponent(k_opponent, states))
            action = np.where(mover == me, np.asarray(out.action), theirs)
        trace["board"].append(_boards(env, states, games))
        trace["player"].append(np.where(done, -1, mover))
        trace["counter"].append(np.asarray(states.counter))
        trace["value"].append(np.asarray(out.value))
        trace["action"].append(np.asarray(action, np.int32))
        forfeit = (action < 0) & ~done  # an engine's forfeit: the env scores it as its loss
        states = step(states, jnp.asarray(action, jnp.int32))
        returns[forfeit] = np.where(np.arange(2)[None] == me[forfeit][:, None], 1.0, -1.0)
        returns += np.asarray(states.rewards)
        if ply % 20 == 0:
            print(f"ply {ply}: {time.time() - start:.0f} s, {int((~done).sum())} games live",
                  flush=True)
    if engine is not None:
        engine.close()
    result = {name: np.array(values) for name, values in trace.items()}
    result["me"] = me
    result["final_board"] = _boards(env, states, games)
    result["rewards_me"] = returns[np.arange(games), me]
    return result


def report(trace: dict, every: int) -> None:
    outcomes = {1.0: "win", 0.0: "draw", -1.0: "loss"}
    for game in range(trace["final_board"].shape[0]):
        me = int(trace["me"][game])
        sign = 1 if me == 0 else -1
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


def decisive_moments(trace: dict) -> list[tuple[int, int, str, float, int]]:
    """For each lost game: (game, ply, phase, balance, pieces) at its decisive ply (see the
    module docstring)."""
    out = []
    for game in range(trace["final_board"].shape[0]):
        if float(trace["rewards_me"][game]) != -1.0:
            continue
        sign = 1 if int(trace["me"][game]) == 0 else -1
        length = int((trace["player"][:, game] >= 0).sum())
        material = [_material(trace["board"][p, game], sign) for p in range(length)]
        diffs = [m + 1.5 * k - tm - 1.5 * tk for m, k, tm, tk in material]
        ply = length - 1
        while diffs[-1] < 0 and ply > 0 and diffs[ply - 1] < 0:
            ply -= 1
        pieces = sum(material[ply])
        phase = ("opening" if ply < OPENING_PLIES else "ending" if pieces <= ENDING_PIECES
                 else "middle game")
        out.append((game, ply, phase, diffs[ply], pieces))
    return out


def summary(trace: dict) -> None:
    """Results, and where the lost games were lost (phase, ply, material)."""
    rewards = trace["rewards_me"]
    wins, draws, losses = (int((rewards == v).sum()) for v in (1.0, 0.0, -1.0))
    print(f"agent: +{wins} ={draws} -{losses} over {len(rewards)} games")
    moments = decisive_moments(trace)
    for phase in ("opening", "middle game", "ending"):
        mine = [m for m in moments if m[2] == phase]
        if mine:
            plies = sorted(m[1] for m in mine)
            print(f"  lost in the {phase}: {len(mine)} (decisive ply median "
                  f"{plies[len(plies) // 2]}, range {plies[0]}-{plies[-1]}; balance there "
                  f"{np.mean([m[3] for m in mine]):+.1f} on average, "
                  f"{np.mean([m[4] for m in mine]):.1f} pieces on the board)")


def write_pdn(agent: Agent, opponent_name: str, trace: dict, path: str) -> None:
    """Appends the traced games to `path` in PDN (`azjax.envs.pdn`), in game order, each with
    the agent's colour and its result (a forfeit included, which the board does not show)."""
    from azjax.envs.pdn import pdn_game, result_of_winner

    names = agent.record_name, opponent_name
    with open(path, "a", encoding="utf-8") as file:
        for game, me in enumerate(trace["me"]):
            moved = (trace["player"][:, game] >= 0) & (trace["action"][:, game] >= 0)
            reward = trace["rewards_me"][game]
            winner = None if reward == 0 else (me if reward > 0 else 1 - me)
            black, white = names if me == 0 else names[::-1]
            file.write(pdn_game(agent.env, trace["action"][moved, game].tolist(), black=black,
                                white=white, event="draughts_game_trace", round_=str(game + 1),
                                result=result_of_winner(winner)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", help="a game id (shipped model), run dir or model dir")
    parser.add_argument("--against", default="mcts:1000")
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--simulations", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--opening-plies", type=int, default=0,
                        help="uniformly random plies opening each game")
    parser.add_argument("--both-colours", action="store_true",
                        help="the agent plays Black in the even games, White in the odd ones")
    parser.add_argument("--every", type=int, default=6, help="plies between balance readings")
    parser.add_argument("--save", default=None, help="write the traces to this .npz")
    parser.add_argument("--pdn", default=None, help="append the games to this file in PDN")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a search override for the agent, as "
                        "`azjax eval --set` (repeatable), e.g. search.endgame_table=4")
    args = parser.parse_args()
    agent = Agent.load(args.agent).with_search(args.overrides)
    if agent.env.name != "draughts":
        raise SystemExit(f"{args.agent} plays {agent.env.name}; this trace reads draughts boards")
    trace = play(agent, args.against, args.games, agent.search_simulations(args.simulations),
                 args.seed, args.opening_plies, args.both_colours)
    report(trace, args.every)
    summary(trace)
    if args.save:
        np.savez(args.save, **trace)
    if args.pdn:
        write_pdn(agent, args.against, trace, args.pdn)
        print(f"the games are saved in {args.pdn} (PDN)")


if __name__ == "__main__":
    main()
