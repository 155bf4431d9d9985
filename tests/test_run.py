"""The training loop end to end: resume == no stop, traced once, SIGKILL-safe, clear errors."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import chex
import jax
import numpy as np
import pytest
import yaml
from conftest import HANG_S, REPO_ROOT, TINY_RUN_CONFIG, tiny_config

from azjax.config import (
    BudgetConfig,
    CheckpointConfig,
    ConfigError,
    EvalConfig,
    config_to_dict,
)
from azjax.core.steps import learning_rate
from azjax.model_files import CheckpointError
from azjax.training.loop import TrainingError, train
from azjax.training.metrics import read_metrics
from azjax.training.trainer import Trainer

CONFIG = TINY_RUN_CONFIG


def _with_budget(config, iterations):
    return dataclasses.replace(config, budget=BudgetConfig(max_iterations=iterations))


@pytest.fixture(scope="module")
def straight_run(tiny_run):
    return tiny_run


def _params(run_dir, iteration):
    from azjax.model_files import load_model

    return load_model(Path(run_dir) / "snapshots" / str(iteration))[0]


def _tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def test_run_dir_has_metrics_curves_snapshots_and_tensorboard(straight_run):
    run_dir, result = straight_run
    assert result.iterations == 4
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["event"] == "start" and records[-1]["event"] == "end"
    iterations = [r["iteration"] for r in records if "loss" in r]
    assert iterations == [1, 2, 3, 4]
    walls = [r["wall_s"] for r in records if "loss" in r]
    assert walls == sorted(walls) and walls[0] > 0
    second = next(r for r in records if r["iteration"] == 2 and "loss" in r)
    assert "eval/vs_random/score" in second and "eval/oracle/search_error" in second
    assert all(0 < r["train/grad_norm"] < 1e3 for r in records if "loss" in r)
    untrained = next(r for r in records if r["iteration"] == 0 and "wall_s" in r
                     and "untrained/oracle/raw_error" in r)
    assert 0 <= untrained["untrained/oracle/raw_error"] <= 100
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == ["2", "4"]
    assert (run_dir / "curves.png").stat().st_size > 10_000
    assert any((run_dir / "tensorboard").iterdir())
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == config_to_dict(
        _with_budget(CONFIG, 4))


def test_resume_ends_with_the_same_parameters_as_no_stop(straight_run, tmp_path):
    run_dir, _ = straight_run
    train(_with_budget(CONFIG, 2), tmp_path, show_progress=False)
    # As if stopped before its first evaluation: the untrained baseline is scored on resume.
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines(keepends=True)
    baseline = next(json.loads(line) for line in lines if "untrained/" in line)
    (tmp_path / "metrics.jsonl").write_text("".join(x for x in lines if "untrained/" not in x))
    # The budget, checkpointing and evaluation may change on resume: none changes the training.
    resumed = dataclasses.replace(
        _with_budget(CONFIG, 4), checkpoint=CheckpointConfig(every_iterations=1, keep=3),
        eval=dataclasses.replace(CONFIG.eval, every_iterations=1, arena_games=4))
    result = train(resumed, tmp_path, show_progress=False)
    assert result.iterations == 4
    for a, b in zip(jax.tree.leaves(_params(run_dir, 4)), jax.tree.leaves(_params(tmp_path, 4)),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    events = [json.loads(line).get("event") for line in
              (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert events.count("resume") == 1
    rebuilt = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "untrained/" in str(r)]
    assert len(rebuilt) == 1  # the same network: the same oracle scores
    for key in ("untrained/oracle/raw_error", "untrained/oracle/search_error"):
        assert rebuilt[0][key] == baseline[key]


def test_each_compiled_function_traces_once():
    trainer = Trainer(__import__("azjax.envs", fromlist=["make"]).make(CONFIG.game), CONFIG)
    chex.clear_trace_counter()
    steps = trainer.steps

    def play(*args):  # each piece in a function of its own: chex counts traces per function
        return steps.play(*args)

    def add(*args):
        return steps.add(*args)

    def update(*args):
        return steps.update(*args)

    trainer.play_step = jax.jit(chex.assert_max_traces(play, n=1), donate_argnums=(2,))
    trainer.add_step = jax.jit(chex.assert_max_traces(add, n=1), donate_argnums=(0,))
    trainer.update_step = jax.jit(chex.assert_max_traces(update, n=1), donate_argnums=(0,))
    run = trainer.init_state(jax.random.PRNGKey(0))
    for i in range(3):  # assert_max_traces raises on a second trace
        run, _ = trainer.iteration(run, jax.random.PRNGKey(i))
    for step in (trainer.play_step, trainer.add_step, trainer.update_step):
        assert step._cache_size() == 1


def test_ahead_of_time_compiled_steps_run_the_same_iteration():
    trainer = Trainer(__import__("azjax.envs", fromlist=["make"]).make(CONFIG.game), CONFIG)
    run = trainer.init_state(jax.random.PRNGKey(0))
    trainer.compile(run)
    for step in (trainer.play_step, trainer.add_step, trainer.update_step):
        assert not hasattr(step, "lower")  # now an executable, not a jit
    run, metrics = trainer.iteration(run, jax.random.PRNGKey(1))
    assert int(run.iteration) == 1 and np.isfinite(metrics["loss"])


def test_updates_scanned_in_one_call_equal_the_loop_of_one_step_calls():
    """`train.updates_per_call`: the same K keys, so the same batches and the same parameters
    (to float rounding) as K calls of one step; a grouping that does not divide K is refused."""
    config = tiny_config(train=dataclasses.replace(tiny_config().train, updates_per_iteration=6))
    env = __import__("azjax.envs", fromlist=["make"]).make(config.game)
    results = []
    for per_call in (1, 3):
        cfg = dataclasses.replace(config, train=dataclasses.replace(config.train,
                                                                    updates_per_call=per_call))
        trainer = Trainer(env, cfg)
        run = trainer.init_state(jax.random.PRNGKey(0))
        trainer.compile(run)
        for i in range(2):
            run, metrics = trainer.iteration(run, jax.random.PRNGKey(i))
        results.append((run.train, metrics))
    (loop, loop_metrics), (scan, scan_metrics) = results
    assert int(loop.step) == int(scan.step) == 12
    assert jax.tree.all(jax.tree.map(lambda a, b: np.allclose(a, b, atol=1e-6),
                                     loop.params, scan.params))
    assert abs(loop_metrics["loss"] - scan_metrics["loss"]) < 1e-6
    with pytest.raises(ConfigError, match=r"train.updates_per_call: must be >= 1 and divide "
                                          r"train.updates_per_iteration \(6\)"):
        dataclasses.replace(config, train=dataclasses.replace(config.train, updates_per_call=4))


def test_a_changed_config_or_another_game_is_refused_without_touching_the_run(straight_run):
    run_dir, _ = straight_run
    before = _tree_digest(run_dir)
    changed = dataclasses.replace(_with_budget(CONFIG, 6),
                                  search=dataclasses.replace(CONFIG.search, num_simulations=8))
    with pytest.raises(ConfigError,
                       match=r"search.num_simulations: saved 4, requested 8") as refused:
        train(changed, run_dir, show_progress=False)
    assert ("only budget.*, checkpoint.*, eval.* (but gating), train.lr_decay_steps, "  # what
            "train.lr_floor and train.updates_per_call may change on resume"  # may change
            in str(refused.value))
    gated = dataclasses.replace(_with_budget(CONFIG, 6),
                                eval=dataclasses.replace(CONFIG.eval, gating=True))
    with pytest.raises(ConfigError, match=r"eval.gating: saved False, requested True"):
        train(gated, run_dir, show_progress=False)
    faster = dataclasses.replace(_with_budget(CONFIG, 6),
                                 train=dataclasses.replace(CONFIG.train, learning_rate=0.5))
    with pytest.raises(ConfigError, match=r"train.learning_rate: saved 0.001, requested 0.5"):
        train(faster, run_dir, show_progress=False)
    other_game = dataclasses.replace(_with_budget(CONFIG, 6), game="connect_four")
    with pytest.raises(CheckpointError, match="holds a tic_tac_toe run"):
        train(other_game, run_dir, show_progress=False)
    assert _tree_digest(run_dir) == before


@pytest.mark.parametrize("schedule", ["cosine", "warmup_cosine"])
def test_the_cosine_schedules_end_at_the_configured_floor(schedule):
    for floor in (0.01, 0.0025, 0.0):
        config = dataclasses.replace(CONFIG.train, learning_rate=0.002, lr_schedule=schedule,
                                     lr_decay_steps=100, warmup_steps=10, lr_floor=floor)
        lr = learning_rate(config)
        assert float(lr(10 if schedule == "warmup_cosine" else 0)) == pytest.approx(0.002)
        assert 0.002 * floor < float(lr(60)) < 0.002  # still decaying
        np.testing.assert_allclose([float(lr(100)), float(lr(10_000))], 0.002 * floor,
                                   rtol=1e-5, atol=1e-12)


def test_a_resumed_run_may_stretch_its_learning_rate_schedule(tmp_path):
    """A run resumed with a longer cosine and a lower floor logs the change and trains on
    under the new schedule from the first update after the resume."""
    cosine = dataclasses.replace(CONFIG, train=dataclasses.replace(
        CONFIG.train, lr_schedule="cosine", lr_decay_steps=4))
    stretched = dataclasses.replace(cosine, train=dataclasses.replace(
        cosine.train, lr_decay_steps=400, lr_floor=0.0025))
    train(_with_budget(cosine, 2), tmp_path, show_progress=False)
    train(_with_budget(stretched, 4), tmp_path, show_progress=False)
    records = read_metrics(tmp_path / "metrics.jsonl")
    resume = [r for r in records if r.get("event") == "resume"]
    assert sorted(resume[0]["config_changed"]) == [
        "budget.max_iterations: saved 2, requested 4",
        "train.lr_decay_steps: saved 4, requested 400",
        "train.lr_floor: saved 0.01, requested 0.0025"]
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    # Resuming from it keeps the new schedule.
    assert saved["train"]["lr_decay_steps"] == 400 and saved["train"]["lr_floor"] == 0.0025
    # Each iteration records the rate of its last update step, under the schedule then in force.
    steps = CONFIG.train.updates_per_iteration
    rates = {r["iteration"]: r["train/learning_rate"] for r in records
             if "event" not in r and r["iteration"] > 0}  # 0: the untrained baseline
    expected = [float(learning_rate((cosine if i <= 2 else stretched).train)(i * steps - 1))
                for i in (1, 2, 3, 4)]
    np.testing.assert_allclose([rates[i] for i in (1, 2, 3, 4)], expected, rtol=1e-6)
    assert rates[3] > 5 * rates[2]  # the stretched cosine, back near its peak


def test_a_resumed_run_may_group_its_update_steps_into_fewer_calls(tmp_path):
    plain = dataclasses.replace(CONFIG, eval=EvalConfig(every_iterations=100, oracle=False,
                                                        opponents=()))  # training only
    grouped = dataclasses.replace(plain, train=dataclasses.replace(
        CONFIG.train, updates_per_call=CONFIG.train.updates_per_iteration))
    for name, resumed in (("kept", plain), ("grouped", grouped)):
        train(_with_budget(plain, 1), tmp_path / name, show_progress=False)
        train(_with_budget(resumed, 2), tmp_path / name, show_progress=False)
    resume = next(r for r in read_metrics(tmp_path / "grouped" / "metrics.jsonl")
                  if r.get("event") == "resume")
    assert (f"train.updates_per_call: saved 1, requested {CONFIG.train.updates_per_iteration}"
            in resume["config_changed"])
    for a, b in zip(jax.tree.leaves(_params(tmp_path / "kept", 2)),
                    jax.tree.leaves(_params(tmp_path / "grouped", 2)), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)  # the same steps, grouped


def test_a_nan_loss_stops_with_a_clear_error_and_keeps_the_last_checkpoint(tmp_path,
                                                                           monkeypatch):
    real_iteration = Trainer.iteration

    def poisoned(self, run, key):
        run, metrics = real_iteration(self, run, key)
        if int(run.iteration) == 3:
            metrics["loss"] = float("nan")
        return run, metrics

    monkeypatch.setattr(Trainer, "iteration", poisoned)
    with pytest.raises(TrainingError, match="loss is nan at iteration 3.*iteration 2"):
        train(_with_budget(CONFIG, 6), tmp_path, show_progress=False)
    # the first iteration's checkpoint and the last good one (every 2, keep 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["1", "2"]


def test_an_evaluation_error_keeps_the_iterations_done_since_the_last_checkpoint(tmp_path):
    class BrokenEvaluator:  # e.g. an oracle file found corrupt when first read
        def __init__(self, env, config, apply_fn, search_fn, *, params_example=None):
            assert callable(apply_fn) and callable(search_fn) and params_example is not None
            self.opponents = {}

        def evaluate(self, *args, **kwargs):
            raise RuntimeError("oracle file is corrupt")

    config = _with_budget(dataclasses.replace(
        CONFIG, checkpoint=CheckpointConfig(every_iterations=100, keep=2)), 4)
    with pytest.raises(RuntimeError, match="oracle file is corrupt"):
        train(config, tmp_path, show_progress=False, evaluator_factory=BrokenEvaluator)
    from azjax.training.checkpoint import RunCheckpointer

    checkpointer = RunCheckpointer(tmp_path, keep=2)
    assert checkpointer.latest_iteration() == config.eval.every_iterations  # not none
    checkpointer.close()
    # That iteration's self-play and losses are logged, with the error in place of its eval.
    last = read_metrics(tmp_path / "metrics.jsonl")[-1]
    assert last["iteration"] == config.eval.every_iterations
    assert last["error"] == "RuntimeError: oracle file is corrupt"
    assert "loss" in last and not any(k.startswith("eval/") for k in last)


def test_a_run_killed_before_its_first_checkpoint_is_not_mixed_into_a_new_one(tmp_path):
    (tmp_path / "snapshots" / "2").mkdir(parents=True)
    metrics = '{"event": "start", "iteration": 0}\n{"iteration": 1, "loss": 1.0}\n'
    (tmp_path / "metrics.jsonl").write_text(metrics)
    with pytest.raises(CheckpointError, match="stopped before its first checkpoint"):
        train(CONFIG, tmp_path, show_progress=False)
    assert (tmp_path / "metrics.jsonl").read_text() == metrics
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "snapshots"]


@pytest.mark.parametrize("stop_when_perfect", [True, False])
def test_the_perfect_play_bar_ends_the_run_only_when_asked(tmp_path, monkeypatch,
                                                           stop_when_perfect):
    """An evaluation meeting the bar records the time to perfect play either way; the run
    stops there only with `budget.stop_when_perfect`."""
    from azjax.evaluation.evaluator import Evaluator

    real_evaluate = Evaluator.evaluate
    monkeypatch.setattr(Evaluator, "evaluate",
                        lambda self, params, key, **kwargs: {
                            **real_evaluate(self, params, key, **kwargs), "eval/perfect": True})
    config = dataclasses.replace(CONFIG, budget=BudgetConfig(
        max_iterations=4, stop_when_perfect=stop_when_perfect))
    result = train(config, tmp_path, show_progress=False)
    assert result.iterations == (2 if stop_when_perfect else 4)
    assert result.time_to_perfect_s is not None
    first = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
             if "time_to_perfect_s" in r and r.get("iteration") == 2]
    assert first and first[0]["time_to_perfect_s"] == result.time_to_perfect_s


# ---- through the CLI, in subprocesses -----------------------------------------------------------


def _cli(*args, timeout=HANG_S):
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(REPO_ROOT / ".jax_cache"),
               PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "azjax", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def _write_config(path: Path, config) -> Path:
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    return path


@pytest.mark.parametrize(("override", "message"), [
    ("search.num_simulationz=3", "unknown config key 'search.num_simulationz'"),
    ("search.num_simulations=lots", "search.num_simulations: expected an integer"),
])
def test_cli_rejects_bad_config_in_one_line(tmp_path, override, message):
    config = _write_config(tmp_path / "tiny.yaml", CONFIG)
    out = _cli("train", str(config), "--run-dir", str(tmp_path / "run"), "--set", override)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"error: {out.stderr.strip()[7:]}"]
    assert message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()


def test_cli_reports_a_corrupt_checkpoint_and_changes_nothing(straight_run, tmp_path):
    """Every checkpoint damaged, without checksums (written before they existed): the run
    stops in one line naming the newest one, and changes nothing. (One damaged checkpoint is
    passed over for an older one: tests/test_integrity.py.)"""
    run_dir, _ = straight_run
    copy = tmp_path / "run"
    subprocess.run(["cp", "-r", str(run_dir), str(copy)], check=True)
    steps = sorted((p for p in (copy / "checkpoints").iterdir() if p.name.isdigit()),
                   key=lambda p: int(p.name))
    for step in steps:
        (step / "checksums.json").unlink()
        for file in (step / "state").rglob("*"):
            if file.is_file():
                file.write_bytes(b"garbage")
    before = _tree_digest(copy)
    config = _write_config(tmp_path / "tiny.yaml", _with_budget(CONFIG, 6))
    out = _cli("train", str(config), "--run-dir", str(copy))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"error: checkpoint {steps[-1]} is corrupt")
    assert "; no checkpoint is intact (the older ones, " in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert _tree_digest(copy) == before


def test_sigint_stops_after_the_iteration_with_a_checkpoint(tmp_path):
    """Ctrl-C (or SIGTERM) finishes the current iteration, checkpoints and snapshots it and
    returns (resuming from a checkpoint is tested above)."""
    import threading

    config = _with_budget(dataclasses.replace(
        CONFIG, checkpoint=CheckpointConfig(every_iterations=100, keep=2),
        eval=dataclasses.replace(CONFIG.eval, every_iterations=100)), 200)
    run_dir = tmp_path / "run"
    metrics = run_dir / "metrics.jsonl"

    def interrupt_after_first_iteration():
        deadline = time.monotonic() + HANG_S  # only a safety net for a hung run
        while time.monotonic() < deadline:
            if metrics.is_file() and '"loss"' in metrics.read_text():
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs as a background job
    threading.Thread(target=interrupt_after_first_iteration, daemon=True).start()
    result = train(config, run_dir, show_progress=False)
    assert result.stopped_by == "SIGINT" and 1 <= result.iterations < 200
    assert signal.getsignal(signal.SIGINT) is before  # handler restored
    from azjax.training.checkpoint import RunCheckpointer

    checkpointer = RunCheckpointer(run_dir, keep=2)
    assert checkpointer.latest_iteration() == result.iterations  # saved despite every=100
    checkpointer.close()
    # and snapshotted, unevaluated, between evaluations (the first is due at iteration 100)
    snapshot = json.loads((run_dir / "snapshots" / str(result.iterations) / "model.json")
                          .read_text())
    assert snapshot["iteration"] == result.iterations and snapshot["eval"] == {}
    assert snapshot["stopped_by"] == "SIGINT"
    from azjax.training.export import export_model

    card = (export_model(run_dir, None, tmp_path / "exported") / "MODEL_CARD.md").read_text()
    assert f"iteration {result.iterations}," in card and "Not evaluated: SIGINT stopped" in card
    end = json.loads(metrics.read_text().splitlines()[-1])
    assert end["event"] == "end" and end["stopped_by"] == "SIGINT"


def test_gating_keeps_selfplay_on_the_best_params(tmp_path):
    """With gating on, self-play params change only at evaluations, and only to the trained
    params of that moment; the gate's score is logged."""
    config = _with_budget(dataclasses.replace(
        CONFIG, eval=dataclasses.replace(CONFIG.eval, gating=True, gating_games=8,
                                         gating_threshold=0.0)), 2)
    trainer = Trainer(__import__("azjax.envs", fromlist=["make"]).make(config.game), config)
    run = trainer.init_state(jax.random.PRNGKey(0))
    start = jax.tree.map(np.asarray, run.selfplay_params)
    run, _ = trainer.iteration(run, jax.random.PRNGKey(1))
    for a, b in zip(jax.tree.leaves(start), jax.tree.leaves(run.selfplay_params), strict=True):
        np.testing.assert_array_equal(a, b)  # training moved train.params, not these
    result = train(config, tmp_path, show_progress=False)
    gates = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
             if "gating/score" in r]
    assert result.iterations == 2 and len(gates) == 1 and gates[0]["gating/accepted"] is True


def test_the_wall_seconds_bar_closes_when_the_last_iteration_overshoots_the_budget():
    # The last iteration ends past `budget.max_wall_s`; tqdm then drops the bar's total, which
    # the wall-seconds format once failed to print, raising from `train`'s cleanup (seen on a
    # GPU run that had finished its budget).
    import io

    from azjax.training.progress import advance, progress_bar

    config = dataclasses.replace(CONFIG, budget=BudgetConfig(max_wall_s=60))
    out = io.StringIO()
    bar = progress_bar(config, 0, 0.0, enabled=True, desc="train", file=out)
    advance(bar, 30.4)
    advance(bar, 61.7)
    bar.close()
    assert bar.n == 60
    assert "100%" in out.getvalue() and "60/60 s" in out.getvalue()


def test_progress_off_a_terminal_is_plain_lines_not_bar_frames(tmp_path, capsys):
    """`azjax train ... > log 2>&1`: plain progress lines (the first and the last iteration at
    least) and the evaluation summaries, no carriage-return frames of a bar (pytest's captured
    streams are not terminals)."""
    train(_with_budget(CONFIG, 2), tmp_path, show_progress=True)
    captured = capsys.readouterr()
    assert "\r" not in captured.out + captured.err
    lines = captured.out.splitlines()
    for i in (1, 2):
        assert any(line.startswith(f"train tic_tac_toe: iteration {i}/2, wall ")
                   and "positions/s, loss " in line for line in lines), lines
    assert any(line.startswith("iter     2 |") for line in lines)  # the evaluation's summary
    assert any(line.endswith("(untrained)") for line in lines)


def test_an_iteration_starts_only_when_one_like_the_last_fits_the_wall_budget():
    from azjax.training.stopping import over_budget

    config = dataclasses.replace(CONFIG, budget=BudgetConfig(max_wall_s=100))
    assert over_budget(config, 5, 50.0, next_cost_s=40.0) is None  # ends at 90 s
    assert over_budget(config, 5, 70.0, next_cost_s=40.0) == "wall clock"  # would end at 110 s
    assert over_budget(config, 5, 100.0) == "wall clock"  # spent, whatever the cost
    assert over_budget(config, 5, 99.0) is None  # nothing known of the next one's cost yet
    iterations = dataclasses.replace(CONFIG, budget=BudgetConfig(max_iterations=3))
    assert over_budget(iterations, 2, 1e9, next_cost_s=1e9) is None  # no wall budget to spend
    assert over_budget(iterations, 3, 0.0) == "iterations"


def test_the_loop_stops_for_the_budget_then_perfect_play_then_a_signal():
    from azjax.training.stopping import StopRequests, stop_reason

    requests = StopRequests(print)
    perfect = {"iteration": 2, "eval/perfect": True}
    asked = dataclasses.replace(CONFIG, budget=BudgetConfig(max_iterations=4,
                                                            stop_when_perfect=True))
    assert stop_reason(asked, None, {}, requests) is None  # nothing trained yet
    assert stop_reason(asked, None, {"iteration": 1, "loss": 1.0}, requests) is None
    assert stop_reason(asked, "iterations", perfect, requests) == "iterations"
    assert stop_reason(asked, None, perfect, requests) == "perfect play"
    assert stop_reason(CONFIG, None, perfect, requests) is None  # not asked to stop there
    requests.signal_name = "SIGTERM"
    assert stop_reason(CONFIG, None, perfect, requests) == "SIGTERM"


def test_plain_progress_lines_come_every_few_seconds_with_rate_eta_and_loss(capsys):
    from azjax.training.progress import Progress

    config = dataclasses.replace(CONFIG, budget=BudgetConfig(max_iterations=10))
    progress = Progress(config, 2, 8.0, enabled=True, line_every_s=3600)
    for iteration in range(3, 8):  # 2 s per iteration
        progress.advance({"iteration": iteration, "wall_s": 8.0 + 2 * (iteration - 2),
                          "positions_per_s": 1234.4, "loss": 0.5})
    progress.close()
    lines = capsys.readouterr().out.splitlines()
    # The first line at once, then none for an hour; close() prints the last iteration's
    # (without an ETA: the run is ending).
    assert lines == [
        "train tic_tac_toe: iteration 3/10, wall 10s, ETA 14s, 1,234 positions/s, loss 0.500",
        "train tic_tac_toe: iteration 7/10, wall 18s, 1,234 positions/s, loss 0.500",
    ]
