"""tools/lever_protocol.py: the comparison at equal time and FLOPs; a tiny protocol end to end."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import HANG_S, REPO_ROOT

_SPEC = importlib.util.spec_from_file_location("lever_protocol",
                                               REPO_ROOT / "tools" / "lever_protocol.py")
lever = importlib.util.module_from_spec(_SPEC)
sys.modules["lever_protocol"] = lever  # its dataclass looks its module up
_SPEC.loader.exec_module(lever)


def _records(points):
    """Evaluation records (iteration, train_wall_s, flops, search, raw) of two oracle sets,
    A at the errors given and B 2 points above: their means 1 point above."""
    return [{"iteration": i, "wall_s": t + 1.0, "train_wall_s": t, "flops/total": f,
             "eval/oracle/search_error": s + 1.0, "eval/oracle/raw_error": r + 1.0,
             "eval/oracle/set/A/search": s, "eval/oracle/set/A/raw": r,
             "eval/oracle/set/B/search": s + 2.0, "eval/oracle/set/B/raw": r + 2.0}
            for i, t, f, s, r in points]


def test_the_pair_is_compared_at_the_shorter_run_s_end_by_time_and_by_flops():
    # the baseline runs to 100 s / 1000 FLOPs, the variant to 60 s but 2000 FLOPs
    baseline = _records([(10, 50.0, 500.0, 20.0, 40.0), (20, 100.0, 1000.0, 10.0, 30.0)])
    variant = _records([(10, 30.0, 1000.0, 16.0, 36.0), (20, 60.0, 2000.0, 8.0, 28.0)])
    compared = lever.compare_pair(baseline, variant)
    at, (base, var) = compared["train_wall_s", "search"]
    # 60 s: the baseline 20 -> 10 between 50 and 100 s, a fifth of the way; mean of A and A + 2
    assert at == 60.0 and base == pytest.approx(18.0 + 1.0) and var == pytest.approx(9.0)
    at, (base, var) = compared["flops/total", "raw"]
    # 1000 FLOPs: the baseline's end, the variant's first evaluation
    assert at == 1000.0 and base == pytest.approx(31.0) and var == pytest.approx(37.0)


def test_a_curve_starts_at_the_untrained_network_at_zero():
    records = [{"iteration": 0, "wall_s": 3.0, "untrained/oracle/search_error": 50.0,
                "untrained/oracle/raw_error": 60.0}] + _records([(5, 10.0, 100.0, 20.0, 30.0)])
    xs, ys = lever.curve(records, "flops/total", lambda r: r["eval/oracle/search_error"])
    assert list(xs) == [0.0, 100.0] and list(ys) == [50.0, 21.0]


def test_a_run_s_budget_is_wall_seconds_iterations_or_both(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("game: tic_tac_toe\n")
    base = [f"v={config}", "--out", str(tmp_path / "out")]

    def budget(*extra):
        args = lever._parse(base + list(extra))
        return args.budget_s, args.iterations

    assert budget() == (1800.0, 0)
    assert budget("--iterations", "5") == (0.0, 5)
    assert budget("--iterations", "5", "--budget-s", "60") == (60.0, 5)
    run = lever.Run("v", config, (), 1, False)
    command = lever.train_command(run, tmp_path / "run", 0.0, 2, iterations=5)
    assert "budget.max_iterations=5" in command and "budget.max_wall_s=0.0" in command
    assert lever.budget_text(60.0, 5) == "60 s or 5 iterations"
    with pytest.raises(SystemExit):
        lever._parse(base + ["--budget-s", "0"])  # no budget at all


def test_the_protocol_end_to_end_on_tiny_tic_tac_toe(tmp_path):
    """Two runs of 4 iterations side by side (sims8 searches twice as much per move), then
    the table rebuilt from their run dirs alone. Iteration budgets: the runs are the same
    length however slow the machine."""
    config = tmp_path / "tiny.yaml"
    config.write_text(f"base: {REPO_ROOT / 'experiments' / 'tic_tac_toe.yaml'}\n"
                      "network: {hidden: [32]}\n"
                      "search: {num_simulations: 4, max_num_considered_actions: 4}\n"
                      "selfplay: {batch_size: 8}\nreplay: {capacity: 512}\n"
                      "train: {batch_size: 16, updates_per_iteration: 2}\n")
    out = tmp_path / "out"
    command = [sys.executable, str(REPO_ROOT / "tools" / "lever_protocol.py"),
               f"sims8={config}", "--set", "sims8:search.num_simulations=8",
               "--baseline", str(config), "--iterations", "4", "--eval-every", "2",
               "--out", str(out), "--side-by-side"]
    # the timeout only ends a hung process; the runs stop by iterations
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.strip("| ").split(" | ") for line in (out / "table.md").read_text()
            .splitlines()[2:4]]
    assert [row[:2] for row in rows] == [["baseline@1", "4"], ["sims8", "4"]]
    runs = {name: lever.load_run(out, name) for name in ("baseline@1", "sims8")}
    for records in runs.values():  # evaluated every 2 iterations, the last at the run's end
        assert [r["iteration"] for r in records if "eval/oracle/search_error" in r] == [2, 4]
    # Same iterations, twice the search: the pair meets at the baseline's FLOPs.
    base, sims8 = (lever.summary(records) for records in runs.values())
    assert base["flops"] < sims8["flops"]
    at, _ = lever.compare_pair(runs["baseline@1"], runs["sims8"])["flops/total", "search"]
    assert at == base["flops"]
    assert f"{at:.3g} FLOPs" in (out / "table.md").read_text()
    assert (out / "curves.png").stat().st_size > 0
    assert not (out / "sims8" / "checkpoints").exists()  # the replay buffer is not kept
    launched = (out / "sims8" / "log.txt").read_text().splitlines()[0]
    assert "taskset -c" in launched and "budget.max_iterations=4" in launched
    # the table is rebuilt from the run dirs alone, the same
    table = (out / "table.md").read_text()
    (out / "table.md").unlink()
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "lever_protocol.py"),
                    "--report-only", "--out", str(out)], check=True, capture_output=True,
                   timeout=HANG_S)
    assert (out / "table.md").read_text() == table
