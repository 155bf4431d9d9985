"""Shared test set-up: JAX's persistent compilation cache in the checkout's `.jax_cache/`, so
reruns skip most compile time, for the tests and for every `azjax` command they run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

# The tests' programs are small and mostly compiled once, so compiling is most of what they cost.
# Two XLA flags make XLA's CPU backend compile them much faster: no LLVM optimisation passes,
# and the older fusion emitters instead of the new MLIR ones (docs/development.md: each takes
# a fifth to a third off; the programs run slower, which the tests' tiny batches hardly feel).
# Floats can differ from default code's in the last bits, so a test that compares bytes written
# by earlier code runs that code's way (`optimised_env`), and two programs that compute the same
# floats by differently fused kernels agree to rounding, not bit for bit. Set before jax
# starts its backend; subprocesses inherit them.
# {XLA option: (the tests' value, XLA's default, which users' runs compile with)}
_COMPILE_OPTIONS = {"xla_backend_optimization_level": (0, 3),
                    "xla_cpu_use_fusion_emitters": (False, True)}
FAST_COMPILE = tuple(f"--{name}={str(fast).lower()}"
                     for name, (fast, _) in _COMPILE_OPTIONS.items())
# (xdist's workers inherit the flags from the controller's conftest: they are taken out first.)
_USER_XLA_FLAGS = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                           if f not in FAST_COMPILE)
os.environ["XLA_FLAGS"] = " ".join(filter(None, [_USER_XLA_FLAGS, *FAST_COMPILE]))

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
# The one limit a test puts on a wait or a subprocess: it only ends a hung one. No test passes
# or fails on how long something took; a slow or busy machine makes the suite slower, not red.
HANG_S = 1800
# The shipped draughts model plays alpha-beta with the 4-piece endgame table by default; a CLI
# test that needs only a cheap search of its network plays the network's tree search instead.
GUMBEL_NO_TABLE = ("--set", "search.algorithm=gumbel", "--set", "search.endgame_table=0")
ORACLES = Path(os.environ.get("AZJAX_ORACLES", REPO_ROOT / "azjax" / "data" / "oracles"))
JAX_CACHE = REPO_ROOT / ".jax_cache"

# The CLI's own cache (`AZJAX_COMPILATION_CACHE`, by default in the home directory) is this one
# too, for the commands the tests run in this process (typer's CliRunner) and in subprocesses,
# which inherit the variable: the suite's compiled programs stay in the checkout.
os.environ["AZJAX_COMPILATION_CACHE"] = str(JAX_CACHE)
jax.config.update("jax_compilation_cache_dir", str(JAX_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

# `azjax play` searches on all cores here (its default is one, `AZJAX_PLAY_CORES`): the suite's
# games are a few moves long, compiling dominates them and compiles on every core, and in this
# process JAX's threads are started already, so confining them would only slow the compiles.
os.environ["AZJAX_PLAY_CORES"] = "0"

# Property tests check what the code computes, never how fast: no per-example deadline.
settings.register_profile("azjax", deadline=None)
settings.load_profile("azjax")


def run_node(driver: Path, payload: dict) -> list:
    """Runs a Node.js driver of the browser's JavaScript (tests/web/) on `payload` (JSON on its
    stdin) and returns what it printed (JSON); its stderr if it failed."""

    done = subprocess.run([shutil.which("node"), str(driver)], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run_optimised(fn, *args):
    """`fn(*args)`, jitted and compiled as users' programs are (`FAST_COMPILE` off for this one
    program): for the few tests whose program runs far longer than it compiles, such as a
    512-simulation search over hundreds of positions or an arena of draughts games by
    alpha-beta (a fraction of the run time for a second more of compiling)."""
    return jax.jit(fn).lower(*args).compile(compiler_options={
        name: default for name, (_, default) in _COMPILE_OPTIONS.items()})(*args)


def optimised_env() -> dict[str, str]:
    """The environment for a subprocess that compiles as users' runs do (no `FAST_COMPILE`)."""
    return dict(os.environ, XLA_FLAGS=_USER_XLA_FLAGS)


def tiny_config(**sections):
    """A tiny tic-tac-toe experiment for fast tests; `sections` replace whole sub-configs."""
    from azjax.config import (
        EvalConfig,
        ExperimentConfig,
        NetworkConfig,
        ReplayConfig,
        SearchConfig,
        SelfPlayConfig,
        TrainConfig,
    )

    defaults = dict(
        game="tic_tac_toe",
        network=NetworkConfig(kind="mlp", hidden=(32,)),
        search=SearchConfig(num_simulations=4, max_num_considered_actions=4),
        selfplay=SelfPlayConfig(batch_size=8, temperature_moves=9, random_opening_prob=0.5,
                                random_opening_max_moves=2),
        replay=ReplayConfig(capacity=512),
        train=TrainConfig(batch_size=16, updates_per_iteration=2),
        eval=EvalConfig(every_iterations=2, arena_games=8, opponents=("random",)),
    )
    defaults.update(sections)
    return ExperimentConfig(**defaults)


def _tiny_run_config():
    import dataclasses

    from azjax.config import BudgetConfig, CheckpointConfig

    return dataclasses.replace(tiny_config(checkpoint=CheckpointConfig(every_iterations=2, keep=2)),
                               budget=BudgetConfig(max_iterations=4))


TINY_RUN_CONFIG = _tiny_run_config()


class FakeClock:
    """Seconds that move `step` per reading."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A 4-iteration tiny tic-tac-toe run (snapshots at 2 and 4): (run_dir, RunResult)."""
    from azjax.training.loop import train

    run_dir = tmp_path_factory.mktemp("tiny_run")
    return run_dir, train(TINY_RUN_CONFIG, run_dir, show_progress=False)


@pytest.fixture(scope="session")
def play_server():
    """A running `azjax serve` app (tests/play_server.py), shared by the API and browser tests."""
    from play_server import PlayServer, make_service

    server = PlayServer(make_service())
    yield server
    server.stop()
