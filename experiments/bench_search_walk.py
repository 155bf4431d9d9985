"""A config's self-play search with mctx's own tree walk against azjax's batched one.

    python experiments/bench_search_walk.py [CONFIG] [KEY=VALUE ...] [--plies 12 40 80]
                                            [--rounds 5]

Times one search of the config's self-play batch (its network at initialisation, its search,
its simulations, noise on) from positions after `--plies` uniformly random moves, with mctx's
vmapped `simulate` and with `azjax.core.mctx_simulate.batched_simulate` (root rule once, interior
rule alone in the loop, walks stopped at terminal nodes), checks that the two searches return
the same actions and policies bit for bit, and prints the medians of interleaved rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

import envs
from azjax.config import load_config
from azjax.core import mctx_simulate
from azjax.core.network import init_network, make_network
from azjax.core.search import make_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/draughts.yaml")
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE config overrides")
    parser.add_argument("--plies", type=int, nargs="+", default=[12, 40, 80])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    cfg = load_config(args.config, args.overrides)
    env = envs.make(cfg.game)
    _, apply_fn = make_network(cfg.network, env.num_actions)
    variables = init_network(cfg.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    search = make_search(env, apply_fn, cfg.search)
    batch = cfg.selfplay.batch_size
    print(f"{cfg.game}: batch {batch}, {cfg.search.algorithm} {cfg.search.num_simulations} "
          f"simulations, {cfg.network.kind} network; {jax.devices()[0].device_kind}")
    print(f"{'plies':>5} | {'mctx walk (ms)':>14} | {'batched walk (ms)':>17} | speed-up"
          " | same output")
    for plies in args.plies:
        states = envs.random_positions(env, jax.random.PRNGKey(plies), batch, plies)
        searches, outputs = [], []
        for enabled in (False, True):
            mctx_simulate.install(enabled)  # read at trace time: one jitted function per side
            searches.append(jax.jit(lambda v, k, s: search(v, k, s, noise=True)))
            outputs.append(jax.device_get(searches[-1](variables, jax.random.PRNGKey(1), states)))
        mctx_simulate.install(True)
        same = all(np.array_equal(a, b) for a, b in
                   zip(jax.tree.leaves(outputs[0]), jax.tree.leaves(outputs[1]), strict=True))
        times = ([], [])
        for round_ in range(args.rounds):
            for side, fn in enumerate(searches):
                start = time.perf_counter()
                jax.block_until_ready(fn(variables, jax.random.PRNGKey(round_), states))
                times[side].append(time.perf_counter() - start)
        stock, batched = (1e3 * statistics.median(t) for t in times)
        print(f"{plies:>5} | {stock:>14.1f} | {batched:>17.1f} | {stock / batched:>7.2f}x | {same}")


if __name__ == "__main__":
    main()
