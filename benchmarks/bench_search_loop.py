"""What a search costs per simulation: azjax's search loop against stock mctx's policies.

    python benchmarks/bench_search_loop.py [--game connect_four] [--batch 64] [--plies 0 20]
                                            [--simulations 32 512] [--algorithms gumbel puct]
                                            [--rounds 3]

Both sides search the same positions (after `--plies` uniformly random moves) with the same
root and recurrent functions, keys and arguments: `mctx.gumbel_muzero_policy` /
`mctx.muzero_policy` as installed, and azjax's `gumbel_muzero_search` / `muzero_search`
(`azjax.core.policies` over `azjax.core.tree_search`). A tiny network (an MLP with 32 hidden
units) keeps the network's share small, so the difference is the walk and the backup. The
table shows milliseconds per search of the whole batch, microseconds per simulation and game,
and whether the two returned the same actions and action weights; medians of interleaved
rounds. A cost per simulation that grows with the simulations is work proportional to the
tree's size on every simulation.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import mctx
import numpy as np

from azjax import envs
from azjax.config import NetworkConfig
from azjax.core.network import init_network, make_network
from azjax.core.policies import gumbel_muzero_search, muzero_search
from azjax.core.search import make_recurrent_fn, make_root_fn


def build_calls(env, apply, variables, states, algorithms, simulations):
    """{(algorithm, sims, side): compiled search(key) -> (action [B], weights [B, A])}."""
    root = make_root_fn(env, apply)(variables, states)
    recurrent_fn = make_recurrent_fn(env, apply)
    invalid = ~states.legal_action_mask
    sides = {"gumbel": (mctx.gumbel_muzero_policy, gumbel_muzero_search),
             "puct": (mctx.muzero_policy, muzero_search)}
    calls = {}
    for algorithm in algorithms:
        options = ({"max_num_considered_actions": min(16, env.num_actions),
                    "qtransform": mctx.qtransform_completed_by_mix_value}
                   if algorithm == "gumbel" else
                   {"qtransform": mctx.qtransform_by_parent_and_siblings})
        for sims in simulations:
            for side, policy in zip(("mctx", "azjax"), sides[algorithm], strict=True):
                def run(key, policy=policy, sims=sims, options=options):
                    out = policy(variables, key, root, recurrent_fn, num_simulations=sims,
                                 invalid_actions=invalid, **options)
                    return out.action, out.action_weights

                calls[algorithm, sims, side] = jax.jit(run).lower(
                    jax.random.PRNGKey(0)).compile()
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--plies", type=int, nargs="+", default=[0, 20])
    parser.add_argument("--simulations", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--algorithms", nargs="+", default=["gumbel", "puct"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    env = envs.make(args.game)
    net = NetworkConfig(kind="mlp", hidden=(32,))
    _, apply = make_network(net, env.num_actions)
    variables = init_network(net, env.num_actions, env.observation_shape, jax.random.PRNGKey(0))
    print(f"{args.game}, batch {args.batch}, {jax.default_backend()}, mctx {mctx.__version__}, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'plies':>5} {'search':>7} {'sims':>5} {'mctx ms':>9} {'azjax ms':>9} "
          f"{'mctx us/sim/game':>17} {'azjax us/sim/game':>18} {'speed-up':>9} {'same':>5}")
    for plies in args.plies:
        states = envs.random_positions(env, jax.random.PRNGKey(1 + plies), args.batch, plies)
        calls = build_calls(env, apply, variables, states, args.algorithms, args.simulations)
        times = {name: [] for name in calls}
        same = {}
        for r in range(args.rounds):
            for name, fn in calls.items():
                start = time.perf_counter()
                out = jax.block_until_ready(fn(jax.random.PRNGKey(r)))
                times[name].append(time.perf_counter() - start)
                same.setdefault(name[:2], []).append(jax.device_get(out))
        for algorithm in args.algorithms:
            for sims in args.simulations:
                theirs = statistics.median(times[algorithm, sims, "mctx"])
                ours = statistics.median(times[algorithm, sims, "azjax"])
                outs = same[algorithm, sims]  # mctx, azjax, mctx, azjax, ... per round
                equal = all(np.array_equal(a, b) for m, z in zip(outs[::2], outs[1::2],
                                                                  strict=True)
                            for a, b in zip(m, z, strict=True))
                per = lambda t, sims=sims: t / sims / args.batch * 1e6  # noqa: E731
                print(f"{plies:>5} {algorithm:>7} {sims:>5} {theirs * 1e3:9.1f} "
                      f"{ours * 1e3:9.1f} {per(theirs):17.2f} {per(ours):18.2f} "
                      f"{theirs / ours:8.1f}x {str(equal):>5}")


if __name__ == "__main__":
    main()
