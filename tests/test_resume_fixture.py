"""A run checkpointed by an earlier azjax resumes with this one and trains the same.

`fixtures/run_before_layout/` is a tiny tic-tac-toe run (its config.yaml) stopped at its
iteration-2 checkpoint by the code before the package was split into layers; only what a
resume reads is kept (config.yaml, metrics.jsonl, checkpoints/2). The same code then resumed it
to iteration 4 and wrote `run_before_layout_params_at_4.msgpack`, the snapshot's params. This
code must resume the same checkpoint to the same bytes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import HANG_S, REPO_ROOT, optimised_env

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_checkpoint_written_before_the_layout_change_resumes_to_the_same_params(tmp_path):
    """Resumed by the CLI in its own process, compiled as users' runs are (the suite's faster,
    unoptimised compiles agree with the fixture's code only to the last bits of a float)."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "run_before_layout", run_dir)
    done = subprocess.run(
        [sys.executable, "-m", "azjax", "train", str(run_dir / "config.yaml"), "--run-dir",
         str(run_dir), "--no-progress", "--set", "budget.max_iterations=4"],
        cwd=REPO_ROOT, env=optimised_env(), capture_output=True, text=True, timeout=HANG_S,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = (run_dir / "snapshots" / "4" / "params.msgpack").read_bytes()
    expected = (FIXTURES / "run_before_layout_params_at_4.msgpack").read_bytes()
    assert resumed == expected
    # The fixture itself is left as it was (the test trains on a copy).
    assert not (FIXTURES / "run_before_layout" / "snapshots").exists()
