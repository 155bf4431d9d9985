"""One batched search over B games against B vmapped batch-1 searches (what self-play runs
with `selfplay.per_game_randomness: true`, so that each game's noise comes from its own key;
docs/scaling.md).

    python benchmarks/bench_per_game_search.py [--config experiments/connect_four.yaml]
        [--batch 256] [--rounds 5]

Prints the median time per search of each, interleaved rounds, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

from azjax import envs
from azjax.config import load_config
from azjax.core.network import init_network, make_network
from azjax.core.search import make_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="experiments/connect_four.yaml")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    config = load_config(args.config)
    env = envs.make(config.game)
    _, apply_fn = make_network(config.network, env.num_actions)
    variables = init_network(config.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    search = make_search(env, apply_fn, config.search)
    states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(1), args.batch))

    @jax.jit
    def batched(key, states):
        return search(variables, key, states).policy

    @jax.jit
    def per_game(key, states):
        def one(k, game):
            return search(variables, k, jax.tree.map(lambda x: x[None], game)).policy[0]

        return jax.vmap(one)(jax.random.split(key, args.batch), states)

    methods = {"one batched search": batched, "vmap of batch-1 searches": per_game}
    for fn in methods.values():  # compile
        fn(jax.random.PRNGKey(2), states).block_until_ready()
    times = {name: [] for name in methods}
    for r in range(args.rounds):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn(jax.random.PRNGKey(r), states).block_until_ready()
            times[name].append(time.perf_counter() - start)
    print(f"{config.game}: B = {args.batch}, {config.search.algorithm} "
          f"{config.search.num_simulations} simulations, median of {args.rounds} rounds")
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, value in medians.items():
        print(f"{name:<28} {1000 * value:9.1f} ms")
    batched_s, per_game_s = medians.values()
    print(f"per-game / batched time ratio: {per_game_s / batched_s:.2f}x")


if __name__ == "__main__":
    main()
