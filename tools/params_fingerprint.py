"""A fingerprint of the parameters a short training run reaches: proof that a refactor left
training unchanged, bit for bit.

Trains CONFIG (small sizes by default, evaluation off) for --iterations iterations in a
temporary run dir through `azjax.train`, then prints the SHA-256 of the final parameters
(every leaf's bytes, in tree order) and of the replay buffer's size. Run it before and after a
change, on one device and with forced host devices, and compare the lines:

    python tools/params_fingerprint.py experiments/connect_four.yaml --iterations 3
    XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python tools/params_fingerprint.py experiments/connect_four.yaml --iterations 3

Several processes (the fully sharded layout): train with `azjax train CONFIG --run-dir DIR
--coordinator ...` in each process, with the overrides `--print-overrides` lists, then
`python tools/params_fingerprint.py DIR --hash-run-dir`.

Equal hashes mean equal parameters; the same machine and jax version are needed (float results
depend on both).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Annotated

import jax
import numpy as np
import typer

import azjax

SMALL = [
    "network.width=64", "network.blocks=1", "network.value_hidden=16",
    "selfplay.batch_size=64", "train.batch_size=256", "train.updates_per_iteration=4",
    "replay.capacity=20000", "replay.window_start=0", "replay.window_growth=0",
    "train.warmup_steps=2", "train.lr_decay_steps=100",
    "eval.oracle=false", "eval.opponents=[]", "eval.every_iterations=1000",
    "checkpoint.every_iterations=1000",
]


def fingerprint(params) -> str:
    """SHA-256 of every leaf's bytes, in the pytree's order."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(params):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def main(config_path: str, iterations: int = 3, small: bool = True,
         override: Annotated[list[str] | None, typer.Option("--set")] = None,
         hash_run_dir: bool = False, print_overrides: bool = False) -> None:
    """Trains CONFIG for ITERATIONS iterations and prints the parameters' fingerprint (with
    --hash-run-dir: the newest snapshot of the run dir CONFIG_PATH)."""
    overrides = (SMALL if small else []) + list(override or []) + [
        f"budget.max_iterations={iterations}", "budget.max_wall_s=0"]
    if print_overrides:
        print(" ".join(f"--set '{o}'" for o in overrides))
        return
    if hash_run_dir:
        print(f"run dir params={fingerprint(azjax.Agent.load(Path(config_path)).params)}")
        return
    config = azjax.load_config(config_path, overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        result = azjax.train(config, run_dir, show_progress=False)
        agent = azjax.Agent.load(Path(run_dir))
        print(f"devices={jax.device_count()} iterations={result.iterations} "
              f"positions={result.final_metrics.get('replay/size')} "
              f"params={fingerprint(agent.params)}")


if __name__ == "__main__":
    typer.run(main)
