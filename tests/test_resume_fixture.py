"""A run checkpointed by an earlier azjax resumes with this one and trains the same.

`fixtures/run_before_layout/` is a tiny tic-tac-toe run (the config below) stopped at its
iteration-2 checkpoint by the code before the package was split into layers; only what a
resume reads is kept (config.yaml, metrics.jsonl, checkpoints/2). The same code then resumed it
to iteration 4 and wrote `run_before_layout_params_at_4.msgpack`, the snapshot's params. This
code must resume the same checkpoint to the same bytes.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from conftest import tiny_config

from azjax.config import BudgetConfig, CheckpointConfig, EvalConfig
from azjax.training.loop import train

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _fixture_config(max_iterations: int):
    config = tiny_config(checkpoint=CheckpointConfig(every_iterations=2, keep=1),
                         eval=EvalConfig(every_iterations=100, arena_games=8,
                                         opponents=("random",)))
    return dataclasses.replace(config, budget=BudgetConfig(max_iterations=max_iterations))


def test_a_checkpoint_written_before_the_layout_change_resumes_to_the_same_params(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "run_before_layout", run_dir)
    train(_fixture_config(4), run_dir, show_progress=False)
    resumed = (run_dir / "snapshots" / "4" / "params.msgpack").read_bytes()
    expected = (FIXTURES / "run_before_layout_params_at_4.msgpack").read_bytes()
    assert resumed == expected
    # The fixture itself is left as it was (the test trains on a copy).
    assert not (FIXTURES / "run_before_layout" / "snapshots").exists()
