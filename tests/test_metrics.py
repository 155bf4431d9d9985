"""Run plots: curves.png for every run, oracle.png with one panel per oracle set."""

from __future__ import annotations

import json

import matplotlib.image

from azjax.training.metrics import plot_curves


def test_oracle_sets_get_one_panel_each_with_their_names(tmp_path):
    (tmp_path / "config.yaml").write_text("game: connect_four\n")
    names = ["Test_L1_R1", "Test_L1_R2", "Test_L1_R3", "Test_L2_R1", "Test_L2_R2", "Test_L3_R1"]
    with (tmp_path / "metrics.jsonl").open("w") as f:
        for i, wall in enumerate([100.0, 200.0, 300.0]):
            record = {"iteration": 10 * (i + 1), "wall_s": wall, "loss/value": 0.3 - 0.01 * i}
            for j, name in enumerate(names):
                record[f"eval/oracle/set/{name}/raw"] = 30.0 - i - j
                record[f"eval/oracle/set/{name}/search"] = 20.0 - i - j
            f.write(json.dumps(record) + "\n")
    assert plot_curves(tmp_path) == tmp_path / "curves.png"
    image = matplotlib.image.imread(tmp_path / "oracle.png")
    assert image.shape[1] > image.shape[0] > 400  # a 2 x 3 grid, wider than tall


def test_no_oracle_png_without_oracle_sets(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "wall_s": 1.0,
                                                        "loss/value": 0.5}) + "\n")
    plot_curves(tmp_path)
    assert (tmp_path / "curves.png").is_file() and not (tmp_path / "oracle.png").exists()


def test_the_arena_panel_shows_every_opponent_the_run_met():
    from azjax.training.metrics import _arena_keys

    records = [{"wall_s": 1.0, "eval/vs_random/score": 0.9, "eval/vs_random/wins": 9},
               {"wall_s": 2.0, "eval/vs_random/score": 1.0, "eval/vs_mcts:100/score": 0.6},
               {"wall_s": 3.0, "untrained/vs_greedy/score": 0.1}]
    assert _arena_keys(records) == ["eval/vs_random/score", "eval/vs_mcts:100/score"]
