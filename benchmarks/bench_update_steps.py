"""How to run the K update steps of an iteration: a Python loop over one jitted step (what
`azjax.training.trainer.Trainer` does) or one jitted `lax.scan` over the K steps.

    python benchmarks/bench_update_steps.py [--config experiments/tic_tac_toe.yaml] [--rounds 5]

Fills the replay buffer with one self-play chunk, then times K updates both ways, interleaved,
and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from azjax import envs
from azjax.config import load_config
from azjax.core import replay as replay_lib
from azjax.training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="experiments/tic_tac_toe.yaml")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    config = load_config(args.config)
    trainer = Trainer(envs.make(config.game), config)
    run = trainer.init_state(jax.random.PRNGKey(0))
    run, _ = trainer.selfplay_step(run, jax.random.PRNGKey(1))
    steps = config.train.updates_per_iteration
    window = replay_lib.window_size(config.replay, run.iteration)
    keys = jax.random.split(jax.random.PRNGKey(2), steps)

    def python_loop(train):
        for key in keys:
            train, _ = trainer.update_step(train, run.replay, key, window)
        return train

    @jax.jit
    def scanned(train, replay, keys):
        def body(train, key):
            return trainer.steps.update(train, replay, key, window)

        return jax.lax.scan(body, train, keys)[0]

    def copy(tree):
        return jax.tree.map(jnp.copy, tree)

    jax.block_until_ready(python_loop(copy(run.train)))  # compile both first
    jax.block_until_ready(scanned(copy(run.train), run.replay, keys))
    times = {"python loop over a jitted step": [], "one jitted lax.scan": []}
    for _ in range(args.rounds):
        for name in times:
            train = copy(run.train)
            start = time.perf_counter()
            if name.startswith("python"):
                jax.block_until_ready(python_loop(train))
            else:
                jax.block_until_ready(scanned(train, run.replay, keys))
            times[name].append(time.perf_counter() - start)
    loop, scan = (statistics.median(v) for v in times.values())
    print(f"{config.game}: K = {steps} updates of batch {config.train.batch_size}, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'method':<34} {'seconds':>9} {'ms/update':>10}")
    for name, value in zip(times, (loop, scan), strict=True):
        print(f"{name:<34} {value:9.3f} {1000 * value / steps:10.2f}")
    print(f"scan / loop time ratio: {scan / loop:.2f}x")


if __name__ == "__main__":
    main()
