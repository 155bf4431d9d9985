"""How closely a search on a clock keeps to its time per move, and how far it searches.

    python benchmarks/bench_movetime.py [--game connect_four] [--movetime 0.05 0.2 1]
                                        [--batch 1] [--moves 20] [--keep-tree]
                                        [--set KEY=VALUE ...]

The shipped agent of `--game` thinks `--movetime` seconds per move (`Agent.player`) in
`--moves` positions of a game it plays against itself (a batch of `--batch` such games at
once, sharing the clock). The table shows, per time: the seconds a move took (median, and the
worst), their ratio to the asked time, and the simulations per move reached (median, min, max).
Compiling happens before the clock starts and is not counted. `--set` changes the agent's
search (as `azjax eval --set`), e.g. `search.endgame_table=4` to weigh a table's lookups.
"""

from __future__ import annotations

import argparse
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent


def play(agent: Agent, movetime: float, batch: int, moves: int, keep_tree: bool):
    """(seconds per move, simulations per move) over `moves` moves of self-play games."""
    env = agent.env
    player = agent.player(movetime=movetime, keep_tree=keep_tree)
    init = jax.jit(jax.vmap(env.init))
    step = jax.jit(jax.vmap(env.step))
    states = init(jax.random.split(jax.random.PRNGKey(0), batch))
    player.move(jax.random.PRNGKey(1), states)  # compiles, and measures the speed once
    player.reset()
    seconds, simulations = [], []
    for ply in range(moves):
        if bool(jnp.all(states.terminated | states.truncated)):
            states = init(jax.random.split(jax.random.PRNGKey(ply + 2), batch))
            player.reset()
        move = player.move(jax.random.PRNGKey(ply + 2), states)
        seconds.append(move.seconds)
        simulations.append(int(np.median(move.simulations)))
        states = step(states, jnp.asarray(move.action))
        player.played(move.action)
    return seconds, simulations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--movetime", type=float, nargs="+", default=[0.05, 0.2, 1.0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--keep-tree", action="store_true")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a search override (repeatable)")
    args = parser.parse_args()
    agent = Agent.load(args.game).with_search(args.overrides)
    print(f"{args.game}, batch {args.batch}, {args.moves} moves per time, keep tree "
          f"{args.keep_tree}, overrides {args.overrides or 'none'}; "
          f"{jax.devices()[0].device_kind}")
    print(f"{'movetime s':>10} | {'median s':>9} | {'max s':>7} | {'median/asked':>12} | "
          f"{'sims median':>11} | {'sims min':>8} | {'sims max':>8}")
    for movetime in args.movetime:
        seconds, sims = play(agent, movetime, args.batch, args.moves, args.keep_tree)
        median = statistics.median(seconds)
        print(f"{movetime:>10.3f} | {median:>9.4f} | {max(seconds):>7.4f} | "
              f"{median / movetime:>12.3f} | {statistics.median(sims):>11.0f} | "
              f"{min(sims):>8} | {max(sims):>8}")


if __name__ == "__main__":
    main()
