"""What a search costs per simulation as the tree grows: mctx's backup against azjax's.

    python experiments/bench_search_depth.py [--game connect_four] [--batch 64]
                                             [--simulations 32 128 512] [--algorithms gumbel puct]
                                             [--rounds 3]

A tiny network (an MLP with 32 hidden units) keeps the network's share small, so the table shows
the search's own cost: milliseconds per search of the whole batch and microseconds per
simulation and game, with mctx's own `backward` and with `azjax.core.mctx_backward.batched_backward`
(the same trees). A cost per simulation that grows with the simulations is work proportional
to the tree's size on every simulation. Medians over interleaved rounds, from the start
position.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

import envs
from azjax.config import NetworkConfig, SearchConfig
from azjax.core import mctx_backward
from azjax.core.network import init_network, make_network
from azjax.core.search import make_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--simulations", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--algorithms", nargs="+", default=["gumbel", "puct"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    env = envs.make(args.game)
    net = NetworkConfig(kind="mlp", hidden=(32,))
    _, apply = make_network(net, env.num_actions)
    variables = init_network(net, env.num_actions, env.observation_shape, jax.random.PRNGKey(0))
    states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(1), args.batch))

    # One compiled search per (algorithm, simulations, backup): the backup is chosen at trace.
    calls = {}
    for algorithm in args.algorithms:
        search = make_search(env, apply, SearchConfig(
            algorithm=algorithm, max_num_considered_actions=min(16, env.num_actions)))
        for sims in args.simulations:
            for backup in ("mctx", "azjax"):
                mctx_backward.install(backup == "azjax")
                fn = jax.jit(lambda v, k, s, search=search, sims=sims: search(
                    v, k, s, num_simulations=sims, noise=False))
                calls[algorithm, sims, backup] = fn.lower(
                    variables, jax.random.PRNGKey(0), states).compile()
    mctx_backward.install(True)

    times = {name: [] for name in calls}
    for r in range(args.rounds):
        for name, fn in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(variables, jax.random.PRNGKey(r), states))
            times[name].append(time.perf_counter() - start)

    print(f"{args.game}, batch {args.batch}, {jax.default_backend()}, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'search':>8} {'sims':>6} {'mctx ms':>9} {'azjax ms':>9} "
          f"{'mctx us/sim/game':>17} {'azjax us/sim/game':>18} {'speed-up':>9}")
    for algorithm in args.algorithms:
        for sims in args.simulations:
            ours = statistics.median(times[algorithm, sims, "azjax"])
            theirs = statistics.median(times[algorithm, sims, "mctx"])
            per = lambda t, sims=sims: t / sims / args.batch * 1e6  # noqa: E731
            print(f"{algorithm:>8} {sims:>6} {theirs * 1e3:9.1f} {ours * 1e3:9.1f} "
                  f"{per(theirs):17.2f} {per(ours):18.2f} {theirs / ours:8.1f}x")


if __name__ == "__main__":
    main()
