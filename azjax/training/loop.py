"""The host loop of `azjax train`: iterate, evaluate, log, checkpoint, until a reason to stop.

Everything heavy is a compiled call (`Trainer.iteration`, the evaluator); this file only
decides when to call what. `train` reads top to bottom: start or resume the run
(`azjax.training.segment`), train one iteration after another until `stop_reason`
(`azjax.training.stopping`) gives a reason to stop, save the last checkpoint and write the end
record. Iteration keys are `fold_in(root, iteration)`, so a resumed run replays the same
randomness and ends with the same parameters as a run never stopped.

On several devices or processes (`azjax.core.layout`) every process runs this same loop over
its own shards; all of them save the checkpoint together (orbax writes one), only process 0
writes metrics, snapshots and plots and prints (`azjax.training.main_process`), and the
decision to stop is process 0's.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from azjax.config import ExperimentConfig, config_to_dict
from azjax.core.steps import RunState
from azjax.model_files import CheckpointError
from azjax.training.progress import Progress
from azjax.training.run_dir import open_run
from azjax.training.segment import LoopState, Segment, start_segment
from azjax.training.stopping import (
    BUDGET_REASONS,
    StopNow,
    StopRequests,
    agreed,
    over_budget,
    stop_reason,
)

__all__ = ["CheckpointWriteError", "TrainingError", "RunResult", "train", "open_run"]


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a NaN loss); the last good checkpoint is kept."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written (a full or read-only disk); the older ones stand.

    Attributes:
      iteration: the iteration whose checkpoint failed.
    """

    def __init__(self, message: str, iteration: int):
        super().__init__(message)
        self.iteration = iteration


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


def train(config: ExperimentConfig, run_dir: str | Path, *, show_progress: bool = True,
          evaluator_factory: Callable[..., Any] | None = None) -> RunResult:
    """Trains (or resumes) `config` in `run_dir` until the budget is spent, on every device of
    every process (games and training batches split over them; see `azjax.core.layout`).

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
      CheckpointWriteError, OSError: a full or read-only disk; metrics.jsonl holds whole
        records only, and the last good checkpoint stands (a note on the error says which).
      StopNow: a second Ctrl-C or SIGTERM, once the iteration in flight is trained (or at
        once during an evaluation); that iteration is checkpointed first.
      KeyboardInterrupt: a third, as soon as the compiled call in flight returns; the last
        checkpoint stands.
    """
    segment, loop = start_segment(config, Path(run_dir), evaluator_factory, time.perf_counter())
    progress = Progress(segment.config, loop.iteration, segment.wall_s(),
                        enabled=show_progress and segment.main.enabled)
    loop.budget_spent = _budget_spent(segment, loop)  # no iteration's cost is known yet
    requests = StopRequests(segment.main.say)
    failed = True
    try:
        requests.install()
        while stop_reason(segment.config, loop.budget_spent, loop.last_record, requests) is None:
            record = _iterate(segment, loop)
            requests.check()  # a second signal during the iteration: stop, keeping it
            # Decided as soon as the iteration is trained: when the next one would end past the
            # budget, this one is the last, so it is evaluated and snapshotted.
            loop.budget_spent = _budget_spent(segment, loop)
            if loop.iteration % segment.config.eval.every_iterations == 0 or loop.budget_spent:
                with requests.interruptible():  # the state is whole: a second signal stops
                    _evaluate_and_snapshot(segment, loop, record)
                # An evaluation after which the next iteration no longer fits ends the run.
                loop.budget_spent = _budget_spent(segment, loop)
            _log_and_checkpoint(segment, loop, record)
            progress.advance(record)
        _finish(segment, loop, requests.signal_name)
        failed = False
    except BaseException as error:
        if isinstance(error, Exception | StopNow):
            _keep_work_on_error(segment, loop, error)
        if not isinstance(error, TrainingError):  # whose message says it
            error.add_note(_what_stands(segment.run_dir, error.iteration if isinstance(
                error, CheckpointWriteError) else None))
        raise
    finally:
        _close(segment, progress, requests, failed=failed)
    return _end(segment, loop, requests.signal_name)


# ---- one iteration -------------------------------------------------------------------------


def _budget_spent(segment: Segment, loop: LoopState) -> str | None:
    """Why the next iteration, costing what the last training and evaluation did, does not fit
    the budget (`over_budget`); None when it does. Process 0's clock decides."""
    return agreed(over_budget(segment.config, loop.iteration, segment.wall_s(),
                              loop.train_s + loop.eval_s), BUDGET_REASONS)


def _iterate(segment: Segment, loop: LoopState) -> dict[str, Any]:
    """Trains one iteration, which moves the loop's run state and iteration on; returns its
    record (self-play results, losses, speed, FLOPs)."""
    step_start = time.perf_counter()
    loop.state_is_whole = False  # the iteration donates `state`'s buffers
    state, metrics = segment.trainer.iteration(
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
    return record


def _evaluate_and_snapshot(segment: Segment, loop: LoopState, record: dict[str, Any]) -> None:
    """Scores the untrained baseline if not yet done, gates, evaluates this iteration's params
    into `record`, snapshots them and prints the summary line."""
    started = time.perf_counter()  # the untrained network's scores and gating count too
    if loop.untrained is not None:
        _score_untrained(segment, loop.untrained)
        loop.untrained = None
    if segment.config.eval.gating:
        loop.state, gating = _gate(segment, loop.state, loop.iteration)
        record.update(gating)
    eval_metrics, loop.eval_s = _evaluate(segment, loop.state, loop.iteration,
                                          last=loop.budget_spent is not None)
    record.update(eval_metrics)
    record["eval/seconds"] = time.perf_counter() - started
    loop.compute.eval_wall_s += record["eval/seconds"]
    record["wall_s"] = segment.wall_s()
    if eval_metrics.get("eval/perfect", False) and loop.time_to_perfect is None:
        loop.time_to_perfect = record["time_to_perfect_s"] = record["wall_s"]
    loop.snapshotted = loop.iteration
    _snapshot(segment, loop, record, eval_metrics)
    segment.main.say(segment.evaluator.summary_line(loop.iteration, record))


def _score_untrained(segment: Segment, params: Any) -> None:
    """Logs the untrained network's scores as iteration 0, under `untrained/`."""
    scores = segment.evaluator.evaluate(params, jax.random.fold_in(segment.eval_key, 0))
    segment.logger.log({"iteration": 0, "wall_s": segment.wall_s(),
                        **{k.replace("eval/", "untrained/", 1): v for k, v in scores.items()}})
    segment.main.say(segment.evaluator.summary_line(0, {"wall_s": segment.wall_s(), **scores})
                     + " (untrained)")


def _gate(segment: Segment, state: RunState, iteration: int
          ) -> tuple[RunState, dict[str, Any]]:
    """AlphaGo Zero's gate: self-play goes on with the trained params if they beat its own.
    Returns the run state self-play goes on from and the gate's record fields."""
    accepted, score = segment.evaluator.gate(
        segment.host_params(state.train.params), segment.host_params(state.selfplay_params),
        jax.random.fold_in(jax.random.fold_in(segment.eval_key, iteration), 1))
    if accepted:  # a copy: the run state must not hold one buffer twice
        state = state.replace(selfplay_params=jax.tree.map(jnp.copy, state.train.params))
    return state, {"gating/score": score, "gating/accepted": accepted}


def _evaluate(segment: Segment, state: RunState, iteration: int, *, last: bool
              ) -> tuple[dict[str, Any], float]:
    """The trained params' `eval/...` metrics (the arenas when due, always on the `last`
    iteration) and the seconds they took."""
    from azjax.evaluation.evaluator import arenas_due

    started = time.perf_counter()
    metrics = segment.evaluator.evaluate(
        segment.host_params(state.train.params), jax.random.fold_in(segment.eval_key, iteration),
        arenas=arenas_due(segment.config, iteration, last=last))
    return metrics, time.perf_counter() - started


def _log_and_checkpoint(segment: Segment, loop: LoopState, record: dict[str, Any]) -> None:
    """Logs the iteration's record; redraws the curves and checkpoints when they are due."""
    record.update(loop.compute.wall_fields(record["wall_s"]))
    segment.logger.log(record)
    loop.unlogged, loop.last_record = None, record
    if loop.iteration % segment.config.eval.every_iterations == 0:
        segment.main.plot_soon()
    # The run's first iteration is always checkpointed: a run killed at any later moment
    # resumes with the same command, whatever checkpoint.every_iterations is.
    if loop.iteration % segment.config.checkpoint.every_iterations == 0 or loop.iteration == 1:
        _save(segment, loop)


def _save(segment: Segment, loop: LoopState) -> None:
    """Checkpoints the whole run state, with what a resume needs (collective: every process).

    Raises:
      CheckpointWriteError: the checkpoint could not be written; orbax writes it in a
        temporary directory renamed when complete, so the older checkpoints stand.
    """
    config, iteration = segment.config, int(loop.state.iteration)
    meta = {"config": config_to_dict(config), "wall_s": segment.wall_s(),
            "iteration": iteration, "time_to_perfect_s": loop.time_to_perfect,
            "seed": config.seed, "game": config.game, "rules": segment.trainer.env.rules,
            "compute": loop.compute.as_meta(),
            "start_positions_sha256": segment.trainer.starts_digest}
    try:
        segment.checkpointer.save(iteration, loop.state, meta)
    except Exception as error:  # orbax raises many types for one full disk
        raise CheckpointWriteError(
            f"could not write checkpoint {segment.checkpointer.directory / str(iteration)}: "
            f"{failure_reason(error)}", iteration) from error


def _snapshot(segment: Segment, loop: LoopState, record: dict[str, Any],
              eval_metrics: dict[str, Any], **more: Any) -> None:
    """The params of `record`'s iteration as a self-contained model in snapshots/."""
    segment.main.snapshot(record["iteration"], segment.host_params(loop.state.train.params),
                          segment.config,
                          {"iteration": record["iteration"], "wall_s": record["wall_s"],
                           "positions": record["positions"], "eval": eval_metrics,
                           "time_to_perfect_s": loop.time_to_perfect, **more})


# ---- the end -------------------------------------------------------------------------------


def _finish(segment: Segment, loop: LoopState, signal_name: str | None) -> None:
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


def _end(segment: Segment, loop: LoopState, stopped_by: str | None) -> RunResult:
    """Writes the end record (the last line of metrics.jsonl); returns the run's result."""
    wall = segment.wall_s()
    summary = {"event": "end", "iteration": loop.iteration, "wall_s": wall,
               "time_to_perfect_s": loop.time_to_perfect, "stopped_by": stopped_by,
               "flops/total": sum(loop.compute.flops.values()),
               **loop.compute.wall_fields(wall)}
    segment.main.write_end(summary)
    return RunResult(segment.run_dir, loop.iteration, segment.wall_s(), loop.last_record,
                     loop.time_to_perfect, stopped_by=stopped_by)


def _keep_work_on_error(segment: Segment, loop: LoopState, error: Exception | StopNow
                        ) -> None:
    """An error between iterations (an evaluation, a snapshot, a plot), or a second signal,
    keeps the iterations done since the last checkpoint. Not after a NaN loss (the last good
    checkpoint is the one to keep), nor after a checkpoint that could not be written, nor with
    several processes (saving is collective). Nor when the iteration's record cannot be logged
    (a full disk): the resumed run then trains that iteration again and logs it."""
    if not (loop.state_is_whole
            and not isinstance(error, TrainingError | CheckpointWriteError)
            and jax.process_count() == 1
            and segment.checkpointer.latest_iteration() != loop.iteration):
        return
    try:
        stopped = isinstance(error, StopNow)
        if loop.unlogged is not None:  # its self-play and losses, not its evaluation
            segment.logger.log({**loop.unlogged, "error": f"{type(error).__name__}: {error}"})
        _save(segment, loop)
        segment.main.say(f"checkpointed iteration {loop.iteration} before stopping"
                         + ("" if stopped else " on the error"))
    except Exception:  # the original error is the one to report
        pass


def _close(segment: Segment, progress: Progress, requests: StopRequests, *,
           failed: bool) -> None:
    """Restores the signal handlers, draws the last curves and closes the logs and the
    checkpointer. After an error (`failed`) a second one here (the same full disk) is dropped:
    the first is the one to report."""
    first = None
    for close in (requests.restore, segment.main.close, progress.close, segment.logger.close,
                  segment.checkpointer.close):
        try:
            close()
        except Exception as error:
            first = first or error
    if first is not None and not failed:
        raise first


def _what_stands(run_dir: Path, failed: int | None) -> str:
    """What a stopped run keeps, for the note on its error: its newest checkpoint but the one
    whose save `failed`."""
    done = [int(p.name) for p in (run_dir / "checkpoints").glob("*")
            if p.name.isdigit() and int(p.name) != failed]
    if not done:
        return "no checkpoint was written yet: the same command starts the run again"
    return (f"the last checkpoint (iteration {max(done)}) stands: the same command resumes "
            f"from it")


_REASONS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def failure_reason(error: BaseException) -> str:
    """Why a write failed, in a few words: the strerror of an OSError in `error`'s chain (or
    its group), else a known one its message quotes (`No space left on device`), else its
    first line."""
    chain, seen = [error], set()
    while chain:
        cause = chain.pop(0)
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        quoted = [os.strerror(code) for code in _REASONS if os.strerror(code) in str(cause)]
        if quoted:
            return quoted[0]
        chain += [c for c in (cause.__cause__, cause.__context__) if c is not None]
        chain += list(getattr(cause, "exceptions", ()))
    first = (str(error).strip().splitlines() or [""])[0][:200]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
