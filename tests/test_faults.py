"""Faults end in one line and lose nothing.

A run killed at any moment resumes with the same command and ends with the parameters of a run
never stopped, bit for bit; a full or read-only disk (simulated: the suite may run as root,
where permissions stop no write) ends in one `error:` line, with no half-written file and the
last good checkpoint standing; a value out of its bounds, bad YAML in `--set` or a malformed
model.json is one line too; a second Ctrl-C during a compiled call stops once the iteration in
flight is trained, keeping it, and a third at once.
"""

from __future__ import annotations

import builtins
import dataclasses
import errno
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import HANG_S, REPO_ROOT, TINY_RUN_CONFIG
from typer.testing import CliRunner

from azjax.apps.cli import app
from azjax.config import BudgetConfig, CheckpointConfig, config_to_dict
from azjax.model_files import CheckpointError
from azjax.training import metrics as metrics_module
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.metrics import append_line, read_metrics, write_atomic

ITERATIONS = 30
# Evaluated (and snapshotted) only at its last iteration; checkpoints at 1, then every 5.
CONFIG = dataclasses.replace(
    TINY_RUN_CONFIG, budget=BudgetConfig(max_iterations=ITERATIONS),
    checkpoint=CheckpointConfig(every_iterations=5, keep=2),
    eval=dataclasses.replace(TINY_RUN_CONFIG.eval, every_iterations=100))
RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})
ENV = dict(os.environ, AZJAX_COMPILATION_CACHE=str(REPO_ROOT / ".jax_cache"),
           PYTHONUNBUFFERED="1")
SAFETY_S = HANG_S  # only ends a hung process or thread; nothing waits on the clock otherwise


def _config_file(directory: Path, config=CONFIG) -> Path:
    path = directory / "tiny.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    return path


def _command(config_path: Path, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "azjax", "train", str(config_path), "--run-dir", str(run_dir),
            "--no-progress"]


def _final_params(run_dir: Path) -> bytes:
    return (run_dir / "snapshots" / str(ITERATIONS) / "params.msgpack").read_bytes()


def _leftovers(run_dir: Path) -> list[str]:
    """Temporary files and directories left in a run dir (metrics' `.tmp`, orbax's tmp dirs)."""
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if "tmp" in p.name)


def _check_metrics_whole(run_dir: Path) -> list[int]:
    """Every line of metrics.jsonl is a whole record; the iterations logged, in order."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # a torn line would fail here
    return [r["iteration"] for r in records if "loss" in r]


def _failed_training(config_path: Path, run_dir: Path) -> str:
    """`azjax train` of the config in `run_dir`, which must fail: its one error line."""
    out = RUNNER.invoke(app, ["train", str(config_path), "--run-dir", str(run_dir),
                              "--no-progress"])
    assert out.exit_code == 2
    return _one_error_line(out)


def _one_error_line(result) -> str:
    """The one line a failed command printed on standard error."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, bytes]:
    """The config file and the final parameters of a run never stopped."""
    directory = tmp_path_factory.mktemp("reference")
    path = _config_file(directory)
    out = subprocess.run(_command(path, directory / "run"), capture_output=True, text=True,
                         env=ENV, timeout=SAFETY_S, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    return path, _final_params(directory / "run")


# ---- SIGKILL at any moment ---------------------------------------------------------------------


def _inode(path: Path) -> int | None:
    return path.stat().st_ino if path.exists() else None


def _run_until_killed(command: list[str], run_dir: Path, at_iteration: int) -> int:
    """Starts `command`, SIGKILLs it once metrics.jsonl is its own (every segment replaces the
    file as it starts: a new inode) and shows `at_iteration` trained (0: once its last record
    is the start of a segment); returns the last iteration logged then."""
    metrics = run_dir / "metrics.jsonl"
    before = _inode(metrics)
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + SAFETY_S
    logged = -1
    while process.poll() is None and time.monotonic() < deadline:
        if _inode(metrics) not in (None, before):
            records = read_metrics(metrics)
            logged = max([r["iteration"] for r in records if "loss" in r], default=0)
            started = bool(records) and records[-1].get("event") in ("start", "resume")
            if logged >= at_iteration and (at_iteration > 0 or started):
                break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    return logged


def test_sigkill_at_random_moments_then_the_same_command_ends_bit_identical(reference, tmp_path):
    """Three kills at seeded random points (the first as training starts, before any
    checkpoint), each followed by the same command: the run ends with the parameters of the
    run never stopped, every iteration logged once, no temporary file left."""
    config_path, expected = reference
    run_dir = tmp_path / "run"
    command = _command(config_path, run_dir)
    rng = random.Random(0)
    targets = [0, rng.randint(2, 8), rng.randint(12, 20)]
    killed = [_run_until_killed(command, run_dir, at) for at in targets]
    assert killed == sorted(killed) and killed[-1] < ITERATIONS
    out = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=SAFETY_S,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert _final_params(run_dir) == expected
    assert _check_metrics_whole(run_dir) == list(range(1, ITERATIONS + 1))
    assert _leftovers(run_dir) == []


def test_a_run_killed_before_its_first_checkpoint_starts_again_with_the_same_command(tmp_path):
    """Killed between logging iteration 1 and checkpointing it: the same command starts the run
    again; another config is refused, the run dir untouched."""
    from azjax.training.loop import train

    first = dataclasses.replace(CONFIG, budget=BudgetConfig(max_iterations=1))
    train(first, tmp_path, show_progress=False)
    for checkpoint in (tmp_path / "checkpoints").iterdir():  # as if killed before the save
        shutil.rmtree(checkpoint)
    other = dataclasses.replace(first, search=dataclasses.replace(first.search,
                                                                  num_simulations=5))
    metrics = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(CheckpointError, match="stopped before its first checkpoint"):
        train(other, tmp_path, show_progress=False)
    assert (tmp_path / "metrics.jsonl").read_text() == metrics
    result = train(dataclasses.replace(first, budget=BudgetConfig(max_iterations=2)), tmp_path,
                   show_progress=False)
    assert result.iterations == 2
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r.get("event") for r in records if "event" in r] == ["start", "end"]
    assert [r["iteration"] for r in records if "loss" in r] == [1, 2]


# ---- a full disk -------------------------------------------------------------------------------


def _full_disk_error(path: Path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _resume_and_compare(config_path: Path, run_dir: Path, expected: bytes) -> None:
    out = RUNNER.invoke(app, ["train", str(config_path), "--run-dir", str(run_dir),
                              "--no-progress"])
    assert out.exit_code == 0, out.output
    assert _final_params(run_dir) == expected
    assert _check_metrics_whole(run_dir) == list(range(1, ITERATIONS + 1))


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(
        reference, tmp_path, monkeypatch):
    config_path, expected = reference
    run_dir = tmp_path / "run"
    real_save = RunCheckpointer.save

    def save(self, iteration, state, meta):
        if iteration < 5:
            return real_save(self, iteration, state, meta)
        try:  # as orbax reports it: its own error, caused by the file system's
            raise _full_disk_error(self.directory / f"{iteration}.orbax-checkpoint-tmp-1")
        except OSError as error:
            raise ValueError("save failed") from error

    monkeypatch.setattr(RunCheckpointer, "save", save)
    assert _failed_training(config_path, run_dir) == (
        f"error: could not write checkpoint {run_dir.absolute()}/checkpoints/5: No space left "
        f"on device; the last checkpoint (iteration 1) stands: the same command resumes "
        f"from it")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["1"]
    assert _check_metrics_whole(run_dir) == [1, 2, 3, 4, 5]
    assert _leftovers(run_dir) == []
    monkeypatch.undo()
    _resume_and_compare(config_path, run_dir, expected)


def test_a_full_disk_while_logging_is_one_line_and_leaves_no_partial_record(
        reference, tmp_path, monkeypatch):
    config_path, expected = reference
    run_dir = tmp_path / "run"
    real_write = metrics_module._write

    def write(file, data):
        if b'"iteration": 3,' in bytes(data) and b'"loss"' in bytes(data):
            real_write(file, data[:len(data) // 2])  # half the record, then the disk is full
            raise _full_disk_error(Path(file.name))
        return real_write(file, data)

    monkeypatch.setattr(metrics_module, "_write", write)
    assert _failed_training(config_path, run_dir) == (
        f"error: {run_dir}/metrics.jsonl: No space left on device; the last checkpoint "
        f"(iteration 1) stands: the same command resumes from it")
    assert _check_metrics_whole(run_dir) == [1, 2]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["1"]
    assert _leftovers(run_dir) == []
    monkeypatch.undo()
    _resume_and_compare(config_path, run_dir, expected)


def test_a_record_is_appended_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    append_line(path, '{"a": 1}')

    def write_a_little_then_fill_the_disk(file, data):
        file.write(data[:3])
        raise _full_disk_error(path)

    monkeypatch.setattr(metrics_module, "_write", write_a_little_then_fill_the_disk)
    with pytest.raises(OSError, match="No space left on device"):
        append_line(path, '{"b": 2}')
    assert path.read_text() == '{"a": 1}\n'


def test_a_file_is_replaced_whole_or_left_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    write_atomic(path, "old\n")

    def full(*args):
        raise _full_disk_error(path)

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        write_atomic(path, "new\n")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "metrics.jsonl"]


# ---- a read-only disk --------------------------------------------------------------------------


def _read_only(monkeypatch, root: Path) -> None:
    """Every write under `root` made from Python fails as on a read-only file system."""
    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def under(path) -> bool:
        return isinstance(path, (str, os.PathLike)) and Path(os.path.abspath(path)).is_relative_to(
            root.absolute())

    real_open, real_mkdir, real_os_open = builtins.open, os.mkdir, os.open

    def guarded_open(file, mode="r", *args, **kwargs):
        if under(file) and any(c in mode for c in "wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path, flags, *args, **kwargs):
        if under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_mkdir(path, *args, **kwargs):
        if under(path):
            if os.path.exists(path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
            refuse(path)
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    for name in ("replace", "rename", "remove", "unlink", "rmdir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path, *a, _real=real, **k: refuse(path)
                            if under(path) else _real(path, *a, **k))


def test_a_read_only_run_dir_is_one_line_and_changes_nothing(reference, tmp_path, monkeypatch):
    config_path, _ = reference
    fresh = tmp_path / "read_only" / "run"
    _read_only(monkeypatch, tmp_path / "read_only")
    assert _failed_training(config_path, fresh).endswith(": Read-only file system")
    assert not (tmp_path / "read_only").exists()
    monkeypatch.undo()

    # A run dir with a checkpoint, then the disk turns read-only: the resume refuses in one
    # line and leaves every file as it was.
    run_dir = tmp_path / "run"
    short = _config_file(tmp_path, dataclasses.replace(CONFIG, budget=BudgetConfig(
        max_iterations=2)))
    assert RUNNER.invoke(app, ["train", str(short), "--run-dir", str(run_dir),
                               "--no-progress"]).exit_code == 0
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    _read_only(monkeypatch, run_dir)
    line = _failed_training(config_path, run_dir)  # the first file the resume writes
    assert line.startswith(f"error: {run_dir}/") and line.endswith(": Read-only file system")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


# ---- values out of bounds, bad YAML, a malformed model -----------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["--set", "network.hidden=[1, 2"], "error: --set network.hidden=[1, 2: not valid YAML: "
                                        "expected ',' or ']', but got '<stream end>'"),
    (["--set", "seed=99999999999999999999999"], "error: seed: must be in [0, 4294967295]"),
    (["--set", "seed=-1"], "error: seed: must be in [0, 4294967295]"),
    (["--set", "search.num_simulations=100000000"],
     "error: search.num_simulations: must be in [1, 100000] (azjax.config.MAX_SIMULATIONS)"),
    (["--set", "eval.num_simulations=100001"], "error: eval.num_simulations: must be in "
                                               "[0, 100000]"),
    (["--set", "replay.capacity=99999999999"], "error: replay.capacity: must be at most "
                                               "2147483647 in size"),
])
def test_a_bad_config_value_is_one_line(tmp_path, args, expected):
    out = RUNNER.invoke(app, ["train", str(_config_file(tmp_path)), "--run-dir",
                              str(tmp_path / "run"), *args])
    assert out.exit_code == 2
    assert _one_error_line(out).startswith(expected)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["eval", "tic_tac_toe", "--simulations", "100000000"],
     "error: --simulations: must be in [1, 100000] (azjax.config.MAX_SIMULATIONS), got "
     "100000000"),
    (["eval", "tic_tac_toe", "--against", "tic_tac_toe", "--against-simulations", "100001"],
     "error: --against-simulations: must be in [1, 100000]"),
    (["eval", "tic_tac_toe", "--seed", "99999999999999999999999"],
     "error: --seed: must be in [0, 4294967295] (azjax.config.MAX_SEED"),
    (["play", "tic_tac_toe", "--simulations", "100000000"], "error: --simulations: must be in"),
    (["play", "tic_tac_toe", "--seed", "-1"], "error: --seed: must be in [0, 4294967295]"),
    (["export", "runs/x", "--simulations", "100000000"], "error: --simulations: must be in"),
    (["anchors", "tic_tac_toe", "--against", "greedy", "--out", "t.json", "--seed",
      "4294967296"], "error: --seed: must be in [0, 4294967295]"),
])
def test_an_option_out_of_its_bounds_is_one_line_naming_the_bound(tmp_path, monkeypatch, args,
                                                                   expected):
    monkeypatch.chdir(tmp_path)
    out = RUNNER.invoke(app, args)
    assert out.exit_code == 2
    assert _one_error_line(out).startswith(expected)
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("meta", ["[1, 2]", '"a string"', "{}", '{"format_version": 1}',
                                  "\xff\xfe not text"])
def test_a_malformed_model_json_is_one_line(tmp_path, meta):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_bytes(meta.encode("latin-1"))
    (model / "params.msgpack").write_bytes(b"")
    out = RUNNER.invoke(app, ["eval", str(model), "--against", "random", "--games", "2"])
    assert out.exit_code == 2
    assert _one_error_line(out).startswith(f"error: {model / 'model.json'}")


def test_the_console_script_prints_one_line_and_no_library_logs(tmp_path):
    """Through a real process: bad YAML in --set and an option out of its range (a usage
    error) are each one line on standard error, exit status 2."""
    config = _config_file(tmp_path)
    for args in (["train", str(config), "--set", "network.hidden=[1, 2"],
                 ["eval", "tic_tac_toe", "--games", "0"]):
        out = subprocess.run([sys.executable, "-m", "azjax", *args], capture_output=True,
                             text=True, env=ENV, timeout=SAFETY_S, stdin=subprocess.DEVNULL,
                             cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("error: "), out.stderr
    assert "--games" in out.stderr


# ---- Ctrl-C during a long compiled call --------------------------------------------------------


def _press_while_held(tmp_path, monkeypatch, presses: int, owner, name: str, held) -> tuple:
    """Trains CONFIG (or the one `owner`'s test sets) in tmp_path while `owner.name`, when
    `held(args)` says so, holds the main thread in C code that Python signal handlers cannot
    interrupt, as a long compiled call does (a pthread mutex another thread holds); SIGINT is
    sent `presses` times while it is held, each once the previous one was acknowledged.

    Returns:
      (the exception `train` raised, the lines the run said about SIGINT).
    """
    import ctypes

    from azjax.training import main_process
    from azjax.training.loop import train

    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(128)  # a pthread_mutex_t, with room to spare
    assert libc.pthread_mutex_init(mutex, None) == 0
    locked, blocked, said = threading.Event(), threading.Event(), []
    acknowledged = [threading.Event() for _ in range(presses)]

    def say(line):
        said.append(line)
        if "SIGINT" in line:
            acknowledged[sum("SIGINT" in s for s in said) - 1].set()

    def hold_then_press():
        libc.pthread_mutex_lock(mutex)
        locked.set()
        blocked.wait(SAFETY_S)
        for event in acknowledged:
            os.kill(os.getpid(), signal.SIGINT)
            event.wait(SAFETY_S)
        libc.pthread_mutex_unlock(mutex)

    real = getattr(owner, name)

    def holding(self, *args, **kwargs):
        if held(args) and not blocked.is_set():
            blocked.set()
            libc.pthread_mutex_lock(mutex)  # returns once every SIGINT is acknowledged
            libc.pthread_mutex_unlock(mutex)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, holding)
    monkeypatch.setattr(main_process, "print_line", say)
    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=hold_then_press, daemon=True).start()
    locked.wait(SAFETY_S)
    config = getattr(held, "config", CONFIG)
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(config, tmp_path, show_progress=False)
    assert all(event.is_set() for event in acknowledged)
    assert signal.getsignal(signal.SIGINT) is before
    return stopped.value, [line.split(":")[0] for line in said if "SIGINT" in line]


def _second_iteration(args) -> bool:
    return int(args[0].iteration) == 1


def test_a_second_ctrl_c_during_an_iteration_stops_once_it_is_trained_and_keeps_it(
        tmp_path, monkeypatch):
    """Both SIGINTs are acknowledged while the main thread is held; the second stops the run
    once the iteration in flight is trained, which is checkpointed first: nothing is lost."""
    from azjax.training.stopping import StopNow
    from azjax.training.trainer import Trainer

    error, said = _press_while_held(tmp_path, monkeypatch, 2, Trainer, "iteration",
                                    _second_iteration)
    assert said == ["SIGINT", "SIGINT again"]
    assert isinstance(error, StopNow) and str(error) == "a second SIGINT stopped the run"
    assert error.__notes__ == [
        "the last checkpoint (iteration 2) stands: the same command resumes from it"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["1", "2"]
    assert _check_metrics_whole(tmp_path) == [1, 2]


def test_a_third_ctrl_c_stops_at_once_from_the_last_checkpoint(tmp_path, monkeypatch):
    from azjax.training.stopping import StopNow
    from azjax.training.trainer import Trainer

    error, said = _press_while_held(tmp_path, monkeypatch, 3, Trainer, "iteration",
                                    _second_iteration)
    assert said == ["SIGINT", "SIGINT again", "SIGINT a third time"]
    assert not isinstance(error, StopNow)
    assert str(error) == "a third SIGINT stopped the run at once"
    assert error.__notes__ == [
        "the last checkpoint (iteration 1) stands: the same command resumes from it"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["1"]
    assert _check_metrics_whole(tmp_path) == [1]


def test_a_second_ctrl_c_during_an_evaluation_stops_it_at_once_and_keeps_the_iteration(
        tmp_path, monkeypatch):
    """Evaluated every 2 iterations: the SIGINTs come during the evaluation of iteration 2,
    which the second cuts short; iteration 2 is checkpointed, not snapshotted."""
    from azjax.evaluation.evaluator import Evaluator
    from azjax.training.stopping import StopNow

    def held(args):
        return True  # the run's first evaluation

    held.config = dataclasses.replace(CONFIG, eval=dataclasses.replace(CONFIG.eval,
                                                                       every_iterations=2))
    error, said = _press_while_held(tmp_path, monkeypatch, 2, Evaluator, "evaluate", held)
    assert said == ["SIGINT", "SIGINT again"]
    assert isinstance(error, StopNow)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["1", "2"]
    assert _check_metrics_whole(tmp_path) == [1, 2]
    assert not (tmp_path / "snapshots" / "2").exists()
