"""The host loop of `azjax train`: iterate, evaluate, log, checkpoint, resume.

Everything heavy is a compiled call (`Learner.iteration`, the evaluator); this file only
decides when to call what, and keeps the run dir consistent:
- a run dir with a checkpoint resumes from it; the saved config wins, except for what does not
  change what is trained (`azjax.config.RESUME_FREE_KEYS`), taken from the requested one;
- every error about the run dir (corrupt checkpoint, other game, changed config) is raised
  before anything on disk is touched;
- iteration keys are `fold_in(root, iteration)`, so a resumed run replays the same randomness
  and ends with the same parameters as a run never stopped.

`train` is a few named steps over two records: `_Segment`, what one call works with and never
changes, and `_LoopState`, what changes from one iteration to the next.

On several devices or processes (`azjax.core.placement`) every process runs this same loop over its
own shards; all of them save the checkpoint together (orbax writes one), only process 0 writes
metrics, snapshots and plots and prints (`_MainProcess`), and the decision to stop is process 0's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

from azjax import envs
from azjax.config import (
    RESUME_FIXED_KEYS,
    RESUME_FREE_KEYS,
    ConfigError,
    ExperimentConfig,
    config_from_saved,
    config_to_dict,
    free_on_resume,
    with_game_dir,
)
from azjax.core.learner import Learner, RunState
from azjax.core.placement import local_copy, make_mesh, mesh_description, updates_on_one_device
from azjax.evaluation.measure import PROGRESS_LINE_EVERY_S, shows_a_bar
from azjax.model_files import CheckpointError, save_model
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.compute import ComputeTotals, FlopCosts, flop_costs
from azjax.training.metrics import MetricsLogger, plot_curves, read_metrics

__all__ = ["TrainingError", "RunResult", "train", "open_run"]


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a NaN loss); the last good checkpoint is kept."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What `train` returns.

    Attributes:
      run_dir: the run dir, as given.
      iterations: the iterations the run has trained (over all its segments).
      wall_s: its wall seconds (over all its segments).
      final_metrics: the record of the last iteration this call trained ({} if none).
      time_to_perfect_s: `wall_s` at the first evaluation meeting the perfect-play bar, or None.
      stopped_by: "SIGINT" / "SIGTERM" when a signal ended the run early, else None.
    """

    run_dir: Path
    iterations: int
    wall_s: float
    final_metrics: dict[str, Any]
    time_to_perfect_s: float | None
    stopped_by: str | None = None


# ---- opening a run dir -------------------------------------------------------------------------


def _config_differences(saved: ExperimentConfig, requested: ExperimentConfig, *,
                        free: bool = False) -> list[str]:
    """'section.key: saved X, requested Y' for each key that differs: the keys that may not
    change on resume, or (free=True) those that may."""
    a, b = config_to_dict(saved), config_to_dict(requested)
    diffs = []
    for section in a:
        if isinstance(a[section], dict):
            diffs += [f"{section}.{k}: saved {a[section][k]!r}, requested {b[section].get(k)!r}"
                      for k in a[section] if a[section][k] != b[section].get(k)
                      and free_on_resume(f"{section}.{k}") == free]
        elif a[section] != b[section] and not free:
            diffs.append(f"{section}: saved {a[section]!r}, requested {b[section]!r}")
    return diffs


def _resumed_config(saved: ExperimentConfig, requested: ExperimentConfig) -> ExperimentConfig:
    """The saved config with the requested values of what may change on resume."""
    merged = config_to_dict(saved)
    for section, values in config_to_dict(requested).items():
        if isinstance(values, dict):
            merged[section].update({k: v for k, v in values.items()
                                    if free_on_resume(f"{section}.{k}")})
    return config_from_saved(merged)


def _free_keys_text() -> str:
    """`RESUME_FREE_KEYS` for people, e.g. "budget.*, eval.* (but gating) and train.lr_floor":
    a section's fixed keys (`RESUME_FIXED_KEYS`) named after its wildcard."""
    parts = []
    for pattern in RESUME_FREE_KEYS:
        section = pattern.split(".", 1)[0] + "."
        fixed = [key.removeprefix(section).rstrip("*") for key in RESUME_FIXED_KEYS
                 if pattern == section + "*" and key.startswith(section)]
        parts.append(pattern + (f" (but {', '.join(fixed)})" if fixed else ""))
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _check_nothing_to_lose(run_dir: Path) -> None:
    """A run dir without a checkpoint starts afresh, unless an earlier run got far enough to
    log iterations or save snapshots (killed before its first checkpoint): mixing a new run
    into its metrics and snapshots would corrupt both, so it is refused."""
    logged = any(r.get("iteration", 0) >= 1 for r in read_metrics(run_dir / "metrics.jsonl"))
    snapshots = run_dir / "snapshots"
    if logged or (snapshots.is_dir() and any(snapshots.iterdir())):
        raise CheckpointError(
            f"{run_dir} holds a run that stopped before its first checkpoint "
            f"(metrics.jsonl or snapshots/, but nothing in checkpoints/ to resume from); "
            f"delete {run_dir} to start again, or choose another --run-dir")


def open_run(run_dir: Path, requested: ExperimentConfig
             ) -> tuple[ExperimentConfig, dict[str, Any] | None]:
    """Checks a run dir before anything is written.

    Args:
      run_dir: the run dir (it may not exist yet).
      requested: the config asked for.

    Returns:
      (config, resume): for a fresh run `requested` and None; for a run dir with a checkpoint
      the saved config with the requested values of `RESUME_FREE_KEYS`, and the latest
      checkpoint's meta with "iteration" (its iteration) and "changed" (the free keys that
      differ, as "section.key: saved X, requested Y").

    Raises:
      CheckpointError / ConfigError: another game's run, a changed config, a corrupt checkpoint,
        or a run that stopped before its first checkpoint.
    """
    checkpoint_dir = run_dir / "checkpoints"
    if not checkpoint_dir.is_dir() or not any(p.name.isdigit() for p in checkpoint_dir.iterdir()):
        _check_nothing_to_lose(run_dir)
        return requested, None
    reader = RunCheckpointer(run_dir, read_only=True)
    latest = reader.latest_iteration()
    if latest is None:
        _check_nothing_to_lose(run_dir)
        return requested, None
    meta = reader.restore_meta(latest)
    reader.close()
    try:
        saved = config_from_saved(meta["config"])
    except (KeyError, ConfigError) as error:
        raise CheckpointError(f"checkpoint {checkpoint_dir / str(latest)} has a bad config: "
                              f"{error}") from None
    if saved.game != requested.game:
        raise CheckpointError(f"{run_dir} holds a {saved.game} run; this config trains "
                              f"{requested.game} (choose another --run-dir)")
    diffs = _config_differences(saved, requested)
    if diffs:
        raise ConfigError(f"{run_dir} was started with another config; only "
                          f"{_free_keys_text()} may change on resume. "
                          f"Differences: {'; '.join(diffs)}")
    changed = _config_differences(saved, requested, free=True)
    return _resumed_config(saved, requested), {**meta, "iteration": latest, "changed": changed}


# ---- what the loop talks to: process 0's output, the progress display, signals -----------------


class _BackgroundPlotter:
    """Redraws curves.png in a worker thread (matplotlib is slow next to an iteration);
    a request made while a drawing is still running is skipped."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azjax-plot")
        self._future = None

    def submit(self, run_dir: Path) -> None:
        if self._future is None or self._future.done():
            self._future = self._pool.submit(plot_curves, run_dir)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _print_line(line: str) -> None:
    """Prints `line` above any progress bar, flushed: a log file shows it at once."""
    tqdm.write(line)
    sys.stdout.flush()


class _MainProcess:
    """What only process 0 does: print, write config.yaml, snapshots, plots and the end record.
    Every other process runs the same loop with `enabled=False`, where these do nothing."""

    def __init__(self, run_dir: Path, *, enabled: bool):
        self.run_dir, self.enabled = run_dir, enabled
        self._plotter = _BackgroundPlotter()

    def say(self, line: str) -> None:
        """Prints `line` above the progress bar (flushed: a log file shows it at once)."""
        if self.enabled:
            _print_line(line)

    def write_config(self, config: ExperimentConfig) -> None:
        """config.yaml: the config the run goes on with."""
        if self.enabled:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config),
                                                                     sort_keys=False))

    def snapshot(self, iteration: int, params: Any, config: ExperimentConfig,
                 meta: dict[str, Any]) -> None:
        """snapshots/<iteration>: `params` as a self-contained model."""
        if self.enabled:
            save_model(self.run_dir / "snapshots" / str(iteration), params, config, meta)

    def plot_soon(self) -> None:
        """Redraws the curves in the background."""
        if self.enabled:
            self._plotter.submit(self.run_dir)

    def close(self) -> None:
        """Waits for a drawing under way, then draws the final curves."""
        self._plotter.close()
        if self.enabled:
            plot_curves(self.run_dir)

    def write_end(self, summary: dict[str, Any]) -> None:
        """The last line of metrics.jsonl (after its logger has closed)."""
        if self.enabled:
            with (self.run_dir / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(summary) + "\n")


def _bar_counts_wall(config: ExperimentConfig) -> bool:
    return not config.budget.max_iterations and bool(config.budget.max_wall_s)


def _progress_bar(config: ExperimentConfig, iteration: int, wall: float, *, enabled: bool,
                  desc: str, file: Any = None) -> tqdm:
    """The training bar: it counts toward the budget, wall seconds (with an ETA) when only
    `budget.max_wall_s` caps the run, else iterations."""
    by_wall = _bar_counts_wall(config)
    wall_format = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
                   "[{elapsed}<{remaining}{postfix}]")
    return tqdm(total=config.budget.max_wall_s if by_wall else (config.budget.max_iterations
                                                                or None),
                initial=min(round(wall), config.budget.max_wall_s) if by_wall else iteration,
                unit="s" if by_wall else "it", disable=not enabled, desc=desc,
                dynamic_ncols=True, file=file, bar_format=wall_format if by_wall else None)


def _advance(bar: tqdm, count: float) -> None:
    """Moves the bar to `count`, held at its total: tqdm drops a total that `n` overshoots,
    and the wall-seconds format cannot print a missing total (the last iteration ends past
    the budget)."""
    bar.update((min(count, bar.total) if bar.total else count) - bar.n)


def _duration(seconds: float) -> str:
    """`seconds` as `1h02m`, `3m05s` or `42s`."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _eta_s(config: ExperimentConfig, record: dict[str, Any], start: tuple[int, float]
           ) -> float | None:
    """Seconds of `wall_s` left until the budget is spent, at this segment's pace so far;
    None before the pace is known."""
    budget = config.budget
    done, spent = record["iteration"] - start[0], record["wall_s"] - start[1]
    left = []
    if budget.max_wall_s:
        left.append(budget.max_wall_s - record["wall_s"])
    if budget.max_iterations and done > 0 and spent > 0:
        left.append((budget.max_iterations - record["iteration"]) * spent / done)
    return min(left) if left else None


def _progress_line(config: ExperimentConfig, record: dict[str, Any],
                   start: tuple[int, float] | None) -> str:
    """Iteration `record`'s progress as one plain line (rate, ETA, loss), in place of the bar
    off a terminal; `start` is (iteration, wall_s) where this segment of the run began, None
    for the segment's last line (no ETA: the run is ending)."""
    budget = config.budget
    eta = _eta_s(config, record, start) if start is not None else None
    return (f"train {config.game}: iteration {record['iteration']}"
            + (f"/{budget.max_iterations}" if budget.max_iterations else "")
            + f", wall {_duration(record['wall_s'])}"
            + (f" of {_duration(budget.max_wall_s)}" if budget.max_wall_s else "")
            + (f", ETA {_duration(eta)}" if eta is not None else "")
            + f", {record['positions_per_s']:,.0f} positions/s, "
            f"loss {record.get('loss', float('nan')):.3f}")


class _Progress:
    """The training's progress: a tqdm bar on a terminal, else a plain line every
    `PROGRESS_LINE_EVERY_S` seconds and at the end."""

    def __init__(self, config: ExperimentConfig, iteration: int, wall_s: float, *,
                 enabled: bool, line_every_s: float = PROGRESS_LINE_EVERY_S):
        on_terminal = shows_a_bar(sys.stderr)  # where tqdm draws
        self._config = config
        self._lines = enabled and not on_terminal
        self._start = (iteration, wall_s)
        self._line_every_s = line_every_s
        self._last_line_at: float | None = None
        self._unprinted: dict[str, Any] | None = None
        self._bar = _progress_bar(config, iteration, wall_s, enabled=enabled and on_terminal,
                                  desc=f"train {config.game}")

    def advance(self, record: dict[str, Any]) -> None:
        """Shows iteration `record` (its positions/s, loss and wall_s)."""
        self._bar.set_postfix(pos_s=f"{record['positions_per_s']:.0f}",
                              loss=f"{record.get('loss', float('nan')):.3f}",
                              wall=f"{record['wall_s']:.0f}s")
        _advance(self._bar, record["wall_s"] if _bar_counts_wall(self._config)
                 else record["iteration"])
        if self._lines:
            self._unprinted = record
            now = time.monotonic()
            if self._last_line_at is None or now - self._last_line_at >= self._line_every_s:
                self._print_line(now)

    def _print_line(self, now: float, *, last: bool = False) -> None:
        _print_line(_progress_line(self._config, self._unprinted,
                                   None if last else self._start))
        self._last_line_at, self._unprinted = now, None

    def close(self) -> None:
        """Closes the bar, or prints the last iteration's line if it is still unprinted."""
        self._bar.close()
        if self._unprinted is not None:
            self._print_line(time.monotonic(), last=True)


class _StopRequests:
    """The first SIGINT/SIGTERM asks the loop to stop after the current iteration (it then
    checkpoints and exits normally); a second one interrupts at once."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.signal_name: str | None = None
        self._say = say
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        self._say(f"{self.signal_name}: stopping after this iteration and saving a checkpoint "
                  "(send it again to stop now)")

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():  # where handlers can be set
            self._previous = {sig: signal.signal(sig, self._handle)
                              for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _budget_left(config: ExperimentConfig, iteration: int, wall_s: float,
                 next_cost_s: float = 0.0) -> bool:
    """Whether another iteration may start: under `budget.max_iterations`, and with
    `wall_s + next_cost_s` (the next iteration's expected cost: the last one's training and
    evaluation) under `budget.max_wall_s`, so the last snapshot lands inside the budget."""
    budget = config.budget
    if budget.max_iterations and iteration >= budget.max_iterations:
        return False
    return not (budget.max_wall_s and wall_s + next_cost_s >= budget.max_wall_s)


def _agreed(flag: bool) -> bool:
    """Process 0's value of `flag` in every process (each has its own clock)."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.int32(flag)))


# ---- the loop ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Segment:
    """What one `train` call (one segment of a run, resumed or not) works with, unchanged."""

    config: ExperimentConfig
    run_dir: Path
    learner: Learner
    evaluator: Any  # `azjax.evaluation.evaluator.Evaluator` or what `evaluator_factory` builds
    checkpointer: RunCheckpointer
    logger: MetricsLogger
    main: _MainProcess
    # Evaluation and snapshots work on a plain copy of the replicated params (every process
    # evaluates alike, so that gating and the perfect-play stop agree without messages).
    host_params: Callable[[Any], Any]
    train_key: jax.Array
    eval_key: jax.Array
    started: float  # time.perf_counter() when the call started
    wall_offset: float  # the wall seconds of the run's earlier segments
    positions_per_iteration: int
    costs: FlopCosts  # FLOPs per network evaluation and per trained sample

    def wall_s(self) -> float:
        """The run's wall seconds so far, earlier segments included."""
        return self.wall_offset + time.perf_counter() - self.started


@dataclasses.dataclass
class _LoopState:
    """What changes from one iteration to the next."""

    state: RunState
    iteration: int
    time_to_perfect: float | None
    untrained: Any  # the untrained network's params, until the first evaluation scores them
    snapshotted: int  # the last iteration snapshotted in this segment, or the one resumed from
    compute: ComputeTotals  # the run's FLOPs and evaluation seconds so far
    last_record: dict[str, Any] = dataclasses.field(default_factory=dict)
    budget_spent: bool = False
    stop_early: bool = False  # the perfect-play bar met with budget.stop_when_perfect
    state_is_whole: bool = True  # False while an iteration holds `state`'s donated buffers
    unlogged: dict[str, Any] | None = None  # this iteration's record, until it is logged
    train_s: float = 0.0  # the last iteration's training and evaluation: the look-ahead
    eval_s: float = 0.0


def train(config: ExperimentConfig, run_dir: str | Path, *, show_progress: bool = True,
          evaluator_factory: Callable[..., Any] | None = None) -> RunResult:
    """Trains (or resumes) `config` in `run_dir` until the budget is spent, on every device of
    every process (games and training batches split over them; see `azjax.core.placement`).

    Args:
      config: the experiment; on resume only its `RESUME_FREE_KEYS` may differ from the saved one.
      run_dir: the run dir: a fresh one, or one with a checkpoint to resume from.
      show_progress: show progress (a bar on a terminal, a line per iteration off one).
      evaluator_factory: builds the evaluator, called as the `Evaluator` class is
        (`env, config, apply_fn, search_fn, *, params_example`); default `Evaluator`.

    Returns:
      The run's `RunResult`.

    Raises:
      CheckpointError / ConfigError: see `open_run` (raised before anything is written).
      TrainingError: a non-finite loss; the last good checkpoint is kept.
    """
    segment, loop = _start(config, Path(run_dir), evaluator_factory, time.perf_counter())
    progress = _Progress(segment.config, loop.iteration, segment.wall_s(),
                         enabled=show_progress and segment.main.enabled)
    loop.budget_spent = not _agreed(_budget_left(segment.config, loop.iteration,
                                                 segment.wall_s()))
    stop = _StopRequests(segment.main.say)
    try:
        stop.install()
        while not (loop.budget_spent or loop.stop_early or _agreed(stop.signal_name is not None)):
            record = _iterate(segment, loop)
            if loop.iteration % segment.config.eval.every_iterations == 0 or loop.budget_spent:
                _evaluate_and_snapshot(segment, loop, record)
            _log_and_checkpoint(segment, loop, record)
            progress.advance(record)
        _stop(segment, loop, stop.signal_name)
    except Exception as error:
        _keep_work_on_error(segment, loop, error)
        raise
    finally:
        stop.restore()
        segment.main.close()
        progress.close()
        segment.logger.close()
        segment.checkpointer.close()
    wall = segment.wall_s()
    summary = {"event": "end", "iteration": loop.iteration, "wall_s": wall,
               "time_to_perfect_s": loop.time_to_perfect, "stopped_by": stop.signal_name,
               "flops/total": sum(loop.compute.flops.values()),
               **loop.compute.wall_fields(wall)}
    segment.main.write_end(summary)
    return RunResult(segment.run_dir, loop.iteration, segment.wall_s(), loop.last_record,
                     loop.time_to_perfect, stopped_by=stop.signal_name)


def _start(config: ExperimentConfig, run_dir: Path, evaluator_factory: Callable | None,
           started: float) -> tuple[_Segment, _LoopState]:
    """Opens the run dir (errors before anything is written), builds the learner and the
    evaluator, starts or restores the run state and logs where the segment runs."""
    from azjax.evaluation.evaluator import Evaluator  # late: imports baselines and oracles

    # The game was made (and a game of your own checked with `envs.check_env`) when the config
    # was built; the run records where its module was found.
    config, resume = open_run(run_dir, with_game_dir(config))
    env = envs.make(config.game)
    mesh = make_mesh()
    # Checks that the batches split over the mesh.
    learner = Learner(env, config, mesh=mesh, updates_on_one_device=updates_on_one_device(mesh))
    main = _MainProcess(run_dir, enabled=jax.process_index() == 0)
    host_params = local_copy if learner.mesh is not None else lambda params: params
    init_key, train_key, eval_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpointer = RunCheckpointer(run_dir, keep=config.checkpoint.keep)
    if resume is None:
        state, wall_offset, time_to_perfect = learner.init_state(init_key), 0.0, None
    else:
        # With a mesh the target carries its shardings: each process reads only its shards.
        state = checkpointer.restore_state(resume["iteration"], learner.abstract_state())
        wall_offset = float(resume.get("wall_s", 0.0))
        time_to_perfect = resume.get("time_to_perfect_s")
        if resume["changed"]:
            main.say(f"resuming with {'; '.join(resume['changed'])}")
    if resume is None or resume["changed"]:
        main.write_config(config)
    iteration = int(state.iteration)
    logger = MetricsLogger(run_dir, resume_iteration=iteration if resume else None,
                           enabled=main.enabled)
    evaluator = (evaluator_factory or Evaluator)(
        env, config, learner.apply_fn, learner.search_fn,
        params_example=host_params(state.train.params))
    learner.compile(state)
    segment = _Segment(config, run_dir, learner, evaluator, checkpointer, logger, main,
                       host_params, train_key, eval_key, started, wall_offset,
                       int(np.prod(state.selfplay.previous.player.shape)),
                       flop_costs(env, config, learner.update_flops()))
    _announce(segment, mesh, iteration, resume)
    compute = (ComputeTotals() if resume is None else ComputeTotals.from_saved(
        resume, read_metrics(run_dir / "metrics.jsonl"), iteration))
    return segment, _LoopState(state, iteration, time_to_perfect,
                               _untrained_params(segment, state, init_key, resume),
                               snapshotted=iteration, compute=compute)


def _announce(segment: _Segment, mesh: Any, iteration: int,
              resume: dict[str, Any] | None) -> None:
    """Prints the mesh; logs the segment's first record (where it runs, what changed)."""
    layout = mesh_description(mesh)
    ways = f"{layout['devices']} way(s)"
    split = (f"games split {ways}; replay and updates on the first device"
             if segment.learner.split else f"games and training batches split {ways}")
    segment.main.say(f"mesh: {layout['processes']} process(es) x "
                     f"{layout['devices_per_process']} {layout['platform']} device(s); {split}")
    # The first line of metrics.jsonl (and one per resumed segment): where the run ran.
    segment.logger.log({
        "event": "resume" if resume else "start", "iteration": iteration,
        "wall_s": segment.wall_s(), **layout, "updates_on_one_device": segment.learner.split,
        **segment.costs.as_record(),
        **({"config_changed": resume["changed"]} if resume and resume["changed"] else {})})


def _untrained_params(segment: _Segment, state: RunState, init_key: jax.Array,
                      resume: dict[str, Any] | None) -> Any:
    """The untrained network, scored at the first evaluation (once the evaluator has compiled
    in the background) for comparison; None when the run has scored it already. The state
    itself is donated, hence a copy; a run stopped before its first evaluation rebuilds it
    from its seed on resume."""
    if resume is None:
        return segment.host_params(jax.tree.map(jnp.copy, state.train.params))
    if not any(k.startswith("untrained/") for r in read_metrics(segment.run_dir / "metrics.jsonl")
               for k in r):
        return segment.learner.initial_params(init_key)
    return None


def _iterate(segment: _Segment, loop: _LoopState) -> dict[str, Any]:
    """Trains one iteration; returns its record (self-play results, losses, speed) and
    decides whether the budget is spent after it."""
    step_start = time.perf_counter()
    loop.state_is_whole = False  # the iteration donates `state`'s buffers
    state, metrics = segment.learner.iteration(
        loop.state, jax.random.fold_in(segment.train_key, loop.iteration))
    if not math.isfinite(float(metrics.get("loss", 0.0))):
        last = segment.checkpointer.latest_iteration()
        raise TrainingError(
            f"loss is {metrics['loss']} at iteration {loop.iteration + 1}; stopped. The last "
            f"good checkpoint ({'none' if last is None else f'iteration {last}'}) is kept.")
    loop.state, loop.iteration = state, loop.iteration + 1
    loop.state_is_whole = True
    iteration, positions = loop.iteration, segment.positions_per_iteration
    finished = max(int(metrics["selfplay/games_finished"]), 1)
    record = {"iteration": iteration, "wall_s": segment.wall_s(),
              "positions": iteration * positions,
              "positions_per_s": positions / (time.perf_counter() - step_start),
              "selfplay/first_player_win_rate":
                  float(metrics["selfplay/first_player_wins"]) / finished,
              "selfplay/draw_rate": float(metrics["selfplay/draws"]) / finished,
              **{k: float(v) for k, v in metrics.items()}}
    record.update(loop.compute.add_iteration(metrics, segment.costs))
    loop.unlogged = record
    loop.train_s = time.perf_counter() - step_start
    # Decided once: when the next iteration (trained and evaluated as this one and the last
    # evaluation were) would end past the budget, this one is evaluated, snapshotted and the
    # last, however long its checkpoint takes to write.
    loop.budget_spent = _budget_spent(segment, loop)
    return record


def _budget_spent(segment: _Segment, loop: _LoopState) -> bool:
    """Whether the next iteration, costing what the last training and evaluation did, would
    end past the budget (process 0's clock decides)."""
    return not _agreed(_budget_left(segment.config, loop.iteration, segment.wall_s(),
                                    loop.train_s + loop.eval_s))


def _evaluate_and_snapshot(segment: _Segment, loop: _LoopState, record: dict[str, Any]) -> None:
    """Scores the untrained baseline if not yet done, gates, evaluates this iteration's params
    into `record`, snapshots them and prints the summary line."""
    from azjax.evaluation.evaluator import arenas_due

    config, iteration = segment.config, loop.iteration
    started = time.perf_counter()  # the untrained network's scores and gating count too
    if loop.untrained is not None:
        _score_untrained(segment, loop)
    if config.eval.gating:
        _gate(segment, loop, record)
    eval_start = time.perf_counter()
    eval_metrics = segment.evaluator.evaluate(
        segment.host_params(loop.state.train.params),
        jax.random.fold_in(segment.eval_key, iteration),
        arenas=arenas_due(config, iteration, last=loop.budget_spent))
    loop.eval_s = time.perf_counter() - eval_start
    record.update(eval_metrics)
    record["eval/seconds"] = time.perf_counter() - started
    loop.compute.eval_wall_s += record["eval/seconds"]
    record["wall_s"] = segment.wall_s()
    perfect = bool(eval_metrics.get("eval/perfect", False))
    loop.stop_early = perfect and config.budget.stop_when_perfect
    if perfect and loop.time_to_perfect is None:
        loop.time_to_perfect = record["wall_s"]
        record["time_to_perfect_s"] = loop.time_to_perfect
    loop.snapshotted = iteration
    _snapshot(segment, loop, record, eval_metrics)
    segment.main.say(segment.evaluator.summary_line(iteration, record))
    # An evaluation after which the next iteration no longer fits ends the run: its iteration
    # has just been evaluated and snapshotted.
    loop.budget_spent = _budget_spent(segment, loop)


def _score_untrained(segment: _Segment, loop: _LoopState) -> None:
    """Logs the untrained network's scores as iteration 0, under `untrained/`."""
    scores = segment.evaluator.evaluate(loop.untrained, jax.random.fold_in(segment.eval_key, 0))
    segment.logger.log({"iteration": 0, "wall_s": segment.wall_s(),
                        **{k.replace("eval/", "untrained/", 1): v for k, v in scores.items()}})
    segment.main.say(segment.evaluator.summary_line(0, {"wall_s": segment.wall_s(), **scores})
                     + " (untrained)")
    loop.untrained = None


def _gate(segment: _Segment, loop: _LoopState, record: dict[str, Any]) -> None:
    """AlphaGo Zero's gate: self-play goes on with the trained params if they beat its own."""
    accepted, score = segment.evaluator.gate(
        segment.host_params(loop.state.train.params),
        segment.host_params(loop.state.selfplay_params),
        jax.random.fold_in(jax.random.fold_in(segment.eval_key, loop.iteration), 1))
    record.update({"gating/score": score, "gating/accepted": accepted})
    if accepted:  # a copy: the run state must not hold one buffer twice
        loop.state = loop.state.replace(
            selfplay_params=jax.tree.map(jnp.copy, loop.state.train.params))


def _log_and_checkpoint(segment: _Segment, loop: _LoopState, record: dict[str, Any]) -> None:
    """Logs the iteration's record; redraws the curves and checkpoints when they are due."""
    record.update(loop.compute.wall_fields(record["wall_s"]))
    segment.logger.log(record)
    loop.unlogged, loop.last_record = None, record
    if loop.iteration % segment.config.eval.every_iterations == 0:
        segment.main.plot_soon()
    if loop.iteration % segment.config.checkpoint.every_iterations == 0:
        _save(segment, loop)


def _save(segment: _Segment, loop: _LoopState) -> None:
    """Checkpoints the whole run state, with what a resume needs (collective: every process)."""
    config, iteration = segment.config, int(loop.state.iteration)
    meta = {"config": config_to_dict(config), "wall_s": segment.wall_s(),
            "iteration": iteration, "time_to_perfect_s": loop.time_to_perfect,
            "seed": config.seed, "game": config.game, "compute": loop.compute.as_meta()}
    segment.checkpointer.save(iteration, loop.state, meta)


def _snapshot(segment: _Segment, loop: _LoopState, record: dict[str, Any],
              eval_metrics: dict[str, Any], **more: Any) -> None:
    """The params of `record`'s iteration as a self-contained model in snapshots/."""
    segment.main.snapshot(record["iteration"], segment.host_params(loop.state.train.params),
                          segment.config,
                          {"iteration": record["iteration"], "wall_s": record["wall_s"],
                           "positions": record["positions"], "eval": eval_metrics,
                           "time_to_perfect_s": loop.time_to_perfect, **more})


def _stop(segment: _Segment, loop: _LoopState, signal_name: str | None) -> None:
    """Checkpoints the last iteration (if not yet) and, after a signal, snapshots it."""
    if segment.checkpointer.latest_iteration() != loop.iteration:
        _save(segment, loop)
    if signal_name is not None and loop.snapshotted != loop.iteration:
        # A signal stops the run between evaluations: the last iteration it trained still gets
        # a snapshot (not evaluated, to stop promptly), so "the last snapshot" that `azjax
        # export` and `Agent.load` take is the last iteration trained. (One left by an
        # abandoned branch of the run at this iteration is replaced.)
        try:  # last_record is that iteration's: this segment trained it
            _snapshot(segment, loop, loop.last_record, {}, stopped_by=signal_name)
        except Exception as error:  # the checkpoint is saved: stop cleanly all the same
            segment.main.say(f"could not write the snapshot of iteration {loop.iteration}: "
                             f"{error}")


def _keep_work_on_error(segment: _Segment, loop: _LoopState, error: Exception) -> None:
    """An error between iterations (an evaluation, a snapshot, a plot) keeps the iterations
    done since the last checkpoint. Not after a NaN loss (the last good checkpoint is the one
    to keep), nor with several processes (saving is collective)."""
    if not (loop.state_is_whole and not isinstance(error, TrainingError)
            and jax.process_count() == 1
            and segment.checkpointer.latest_iteration() != loop.iteration):
        return
    try:
        if loop.unlogged is not None:  # its self-play and losses, not its evaluation
            segment.logger.log({**loop.unlogged, "error": f"{type(error).__name__}: {error}"})
        _save(segment, loop)
        segment.main.say(f"checkpointed iteration {loop.iteration} before stopping on the error")
    except Exception:  # the original error is the one to report
        pass
