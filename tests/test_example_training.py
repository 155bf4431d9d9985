"""A tiny run of the worked example's own config, as `azjax train examples/hexapawn.yaml` runs
it from the repository root: the game found beside the config, scored on its oracle folder."""

from __future__ import annotations

import json

from conftest import REPO_ROOT
from typer.testing import CliRunner

from azjax.apps.cli import app

# The CLI would switch this process's compilation cache to ~/.cache; keep the tests' one.
RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})
TINY = ["network.hidden=[16]", "selfplay.batch_size=16", "train.batch_size=16",
        "train.updates_per_iteration=2", "search.num_simulations=4",
        "search.max_num_considered_actions=4", "eval.every_iterations=2",
        "eval.oracle_positions=64", "budget.max_iterations=2", "budget.max_wall_s=0",
        "replay.capacity=512"]


def test_the_example_config_trains_and_scores_on_its_oracle(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the config names its oracle folder from the repository root
    run_dir = tmp_path / "hexapawn"
    args = ["train", "examples/hexapawn.yaml", "--run-dir", str(run_dir), "--no-progress"]
    for override in TINY:
        args += ["--set", override]
    out = RUNNER.invoke(app, args)
    assert out.exit_code == 0, out.output
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    scored = [r for r in records if "eval/oracle/search_error" in r]
    assert [r["iteration"] for r in scored] == [2]
    assert 0.0 <= scored[-1]["eval/oracle/search_error"] <= 100.0
    config = (run_dir / "config.yaml").read_text()
    assert "game: hexapawn:Hexapawn" in config and "game_dir:" in config
