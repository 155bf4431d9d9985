"""Where a training iteration's time goes: the self-play chunk against the K update steps.

Builds the `Trainer` of each config (the same compiled functions `azjax train` runs), then
times its self-play chunk (B games x T steps, adding to the replay buffer) and its update step
(one optimizer step on a sampled batch, `train.updates_per_call` of them per compiled call),
and scales the update by the config's `train.updates_per_iteration`. Self-play: median of
`--rounds` chunks after one warm-up; update steps: `--updates` of them timed back to back, after
one warm-up call. Evaluation is not included (it runs every `eval.every_iterations`).

    python benchmarks/bench_iteration.py                                  # draughts, connect four
    python benchmarks/bench_iteration.py experiments/draughts.yaml --set selfplay.batch_size=256
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

from azjax import envs
from azjax.config import load_config
from azjax.core.layout import make_mesh, updates_on_one_device
from azjax.training.metrics import machine_description
from azjax.training.trainer import Trainer

DEFAULT_CONFIGS = ["experiments/draughts.yaml", "experiments/connect_four.yaml"]


def time_iteration(path: str, overrides: list[str], rounds: int, updates: int) -> dict:
    """Seconds of one self-play chunk and one update step of the config at `path`."""
    config = load_config(path, overrides)
    # Every device, laid out as `azjax train` lays them out (e.g. XLA_FLAGS=
    # --xla_force_host_platform_device_count=2: games on two, updates on the first).
    mesh = make_mesh()
    trainer = Trainer(envs.make(config.game), config, mesh=mesh,
                      updates_on_one_device=updates_on_one_device(mesh))
    run = trainer.init_state(jax.random.PRNGKey(config.seed))
    trainer.compile(run)
    key = jax.random.PRNGKey(1)
    chunk_s = []
    for i in range(rounds + 1):  # the first call warms up
        start = time.perf_counter()
        run, _ = trainer.selfplay_step(run, jax.random.fold_in(key, i))
        jax.block_until_ready(run)
        chunk_s.append(time.perf_counter() - start)
    train = run.train
    # Calls as `Trainer.iteration` makes them: train.updates_per_call steps each.
    per_call = config.train.updates_per_call
    calls, window = trainer.update_inputs(jax.random.fold_in(key, 1000), config.replay.capacity)
    timed = max(1, updates // per_call)
    if len(calls) < timed + 1:
        raise SystemExit(f"--updates {updates}: more than the iteration's "
                         f"{config.train.updates_per_iteration} update steps")
    for i, call_keys in enumerate(calls[:timed + 1]):  # the first call warms up
        if i == 1:
            jax.block_until_ready(train)
            start = time.perf_counter()
        train, _ = trainer.update_step(train, run.replay, call_keys, window)
    jax.block_until_ready(train)
    update_s = (time.perf_counter() - start) / (timed * per_call)
    positions = int(np.prod(run.selfplay.previous.player.shape))
    return {"config": path + "".join(f" {o}" for o in overrides), "positions": positions,
            "selfplay_s": statistics.median(chunk_s[1:]), "update_s": update_s,
            "updates": config.train.updates_per_iteration, "batch": config.train.batch_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT_CONFIGS)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="override a key of every config, e.g. selfplay.batch_size=256")
    parser.add_argument("--rounds", type=int, default=3, help="timed self-play chunks")
    parser.add_argument("--updates", type=int, default=32, help="timed update steps")
    args = parser.parse_args()
    rows = [time_iteration(path, args.overrides, args.rounds, args.updates)
            for path in args.configs]
    print(f"machine: {machine_description()}")
    print("| config | positions / chunk | self-play chunk s | update ms (batch) | K | "
          "updates s | iteration s | positions/s | self-play share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        train_s = r["update_s"] * r["updates"]
        total = r["selfplay_s"] + train_s
        print(f"| {r['config']} | {r['positions']:,} | {r['selfplay_s']:.2f} | "
              f"{1e3 * r['update_s']:.1f} ({r['batch']}) | {r['updates']} | {train_s:.2f} | "
              f"{total:.2f} | {r['positions'] / total:,.0f} | "
              f"{100 * r['selfplay_s'] / total:.0f}% |")


if __name__ == "__main__":
    main()
