"""The host loop of `azjax train`: iterate, evaluate, log, checkpoint, resume.

Everything heavy is a compiled call (`Learner.iteration`, the evaluator); this file only
decides when to call what, and keeps the run dir consistent:
- a run dir with a checkpoint resumes from it; the saved config wins, except for what does not
  change what is trained (`budget.*`, `checkpoint.*`, `eval.*` but gating), taken from the
  requested one;
- every error about the run dir (corrupt checkpoint, other game, changed config) is raised
  before anything on disk is touched;
- iteration keys are `fold_in(root, iteration)`, so a resumed run replays the same randomness
  and ends with the same parameters as a run never stopped.

On several devices or processes (`azjax.core.placement`) every process runs this same loop over its
own shards; all of them save the checkpoint together (orbax writes one), only process 0 writes
metrics, snapshots and plots and prints, and the decision to stop is process 0's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import threading
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

import envs
from azjax.config import ConfigError, ExperimentConfig, config_from_saved, config_to_dict
from azjax.core.learner import Learner, RunState
from azjax.core.placement import local_copy, make_mesh, mesh_description, updates_on_one_device
from azjax.model_files import CheckpointError, save_model
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.metrics import MetricsLogger, plot_curves, read_metrics

__all__ = ["TrainingError", "RunResult", "train", "open_run"]


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a NaN loss); the last good checkpoint is kept."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    iterations: int
    wall_s: float
    final_metrics: dict[str, Any]
    time_to_perfect_s: float | None
    stopped_by: str | None = None  # "SIGINT" / "SIGTERM" when a signal ended the run early


# What may change when a run resumes: budget, checkpointing and evaluation do not change the
# parameters the run trains (evaluations draw their own keys), so a longer budget or a cheaper
# evaluation cadence does not need a new run; gating does (self-play then uses the gate's
# winner). Three training keys may change too: `train.lr_decay_steps` and `train.lr_floor`,
# so that a run given a longer (or shorter) budget can fit its learning-rate schedule to it
# (the new schedule applies from the resumed update step on), and `train.updates_per_call`,
# which groups the same update steps into fewer compiled calls. The resume event in
# metrics.jsonl records them.
_ALL = None
_FREE_ON_RESUME = {"budget": _ALL, "checkpoint": _ALL,
                   "eval": _ALL, "train": {"lr_decay_steps", "lr_floor", "updates_per_call"}}
_FIXED_ON_RESUME = {"eval": {"gating", "gating_games", "gating_threshold"}}


def _free_on_resume(section: str, key: str) -> bool:
    if section not in _FREE_ON_RESUME or key in _FIXED_ON_RESUME.get(section, ()):
        return False
    free = _FREE_ON_RESUME[section]
    return free is _ALL or key in free


def _config_differences(saved: ExperimentConfig, requested: ExperimentConfig, *,
                        free: bool = False) -> list[str]:
    """'section.key: saved X, requested Y' for each key that differs: the keys that may not
    change on resume, or (free=True) those that may."""
    a, b = config_to_dict(saved), config_to_dict(requested)
    diffs = []
    for section in a:
        if isinstance(a[section], dict):
            diffs += [f"{section}.{k}: saved {a[section][k]!r}, requested {b[section].get(k)!r}"
                      for k in a[section]
                      if a[section][k] != b[section].get(k) and _free_on_resume(section, k) == free]
        elif a[section] != b[section] and not free:
            diffs.append(f"{section}: saved {a[section]!r}, requested {b[section]!r}")
    return diffs


def _resumed_config(saved: ExperimentConfig, requested: ExperimentConfig) -> ExperimentConfig:
    """The saved config with the requested values of what may change on resume."""
    merged = config_to_dict(saved)
    for section, values in config_to_dict(requested).items():
        if isinstance(values, dict):
            merged[section].update({k: v for k, v in values.items()
                                    if _free_on_resume(section, k)})
    return config_from_saved(merged)


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


def open_run(run_dir: Path, requested: ExperimentConfig):
    """Checks a run dir before anything is written. Returns (config, resume meta or None).

    Raises:
      CheckpointError / ConfigError: another game's run, a changed config, a corrupt checkpoint.
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
        raise ConfigError(f"{run_dir} was started with another config; only budget.*, "
                          f"checkpoint.*, eval.* (but gating), train.lr_decay_steps, "
                          f"train.lr_floor and train.updates_per_call may change on resume. "
                          f"Differences: {'; '.join(diffs)}")
    changed = _config_differences(saved, requested, free=True)
    return _resumed_config(saved, requested), {**meta, "iteration": latest, "changed": changed}


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


class _StopRequests:
    """The first SIGINT/SIGTERM asks the loop to stop after the current iteration (it then
    checkpoints and exits normally); a second one interrupts at once."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        tqdm.write(f"{self.signal_name}: stopping after this iteration and saving a checkpoint "
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


def train(config: ExperimentConfig, run_dir: str | Path, *, show_progress: bool = True,
          evaluator_factory=None) -> RunResult:
    """Trains (or resumes) `config` in `run_dir` until the budget is spent, on every device of
    every process (games and training batches split over them; see `azjax.core.placement`)."""
    from azjax.evaluation.evaluator import (  # late: imports baselines and oracles
        Evaluator,
        arenas_due,
    )

    segment_start = time.perf_counter()
    run_dir = Path(run_dir)
    config, resume = open_run(run_dir, config)
    env = envs.make(config.game)
    mesh = make_mesh()
    # Checks that the batches split over the mesh.
    learner = Learner(env, config, mesh=mesh, updates_on_one_device=updates_on_one_device(mesh))
    is_main = jax.process_index() == 0
    # Evaluation and snapshots work on a plain copy of the replicated params (every process
    # evaluates alike, so that gating and the perfect-play stop agree without messages).
    host_params = local_copy if learner.mesh is not None else lambda params: params
    init_key, train_key, eval_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpointer = RunCheckpointer(run_dir, keep=config.checkpoint.keep)
    if resume is None:
        state = learner.init_state(init_key)
        wall_offset, time_to_perfect = 0.0, None
    else:
        # With a mesh the target carries its shardings: each process reads only its shards.
        state = checkpointer.restore_state(resume["iteration"], learner.abstract_state())
        wall_offset = float(resume.get("wall_s", 0.0))
        time_to_perfect = resume.get("time_to_perfect_s")
        if resume["changed"] and is_main:
            tqdm.write(f"resuming with {'; '.join(resume['changed'])}")
    if (resume is None or resume["changed"]) and is_main:  # the config the run goes on with
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config),
                                                            sort_keys=False))
    iteration = int(state.iteration)
    logger = MetricsLogger(run_dir, resume_iteration=iteration if resume else None,
                           enabled=is_main)
    evaluator = (evaluator_factory or Evaluator)(env, config, learner,
                                                 params_example=host_params(state.train.params))
    learner.compile(state)
    positions_per_iteration = int(np.prod(state.selfplay.previous.player.shape))

    def wall_s() -> float:
        return wall_offset + time.perf_counter() - segment_start

    def save(run_state: RunState) -> None:
        meta = {"config": config_to_dict(config), "wall_s": wall_s(),
                "iteration": int(run_state.iteration), "time_to_perfect_s": time_to_perfect,
                "seed": config.seed, "game": config.game}
        checkpointer.save(int(run_state.iteration), run_state, meta)

    def snapshot(run_state: RunState, record: dict[str, Any], eval_metrics: dict[str, Any],
                 **more: Any) -> None:
        """The params of `record`'s iteration as a self-contained model in snapshots/."""
        save_model(run_dir / "snapshots" / str(record["iteration"]),
                   host_params(run_state.train.params), config,
                   {"iteration": record["iteration"], "wall_s": record["wall_s"],
                    "positions": record["positions"], "eval": eval_metrics,
                    "time_to_perfect_s": time_to_perfect, **more})

    layout = mesh_description(mesh)
    if is_main:
        ways = f"{layout['devices']} way(s)"
        split = (f"games split {ways}; replay and updates on the first device" if learner.split
                 else f"games and training batches split {ways}")
        tqdm.write(f"mesh: {layout['processes']} process(es) x {layout['devices_per_process']} "
                   f"{layout['platform']} device(s); {split}")
    # The first line of metrics.jsonl (and one per resumed segment): where the run ran.
    logger.log({"event": "resume" if resume else "start", "iteration": iteration,
                "wall_s": wall_s(), **layout, "updates_on_one_device": learner.split,
                **({"config_changed": resume["changed"]} if resume and resume["changed"] else {})})
    # The untrained network is scored at the first evaluation (once the evaluator has
    # compiled in the background), for comparison; the state itself is donated, hence a copy.
    # A run stopped before its first evaluation rebuilds it from its seed on resume.
    if resume is None:
        untrained = host_params(jax.tree.map(jnp.copy, state.train.params))
    elif not any(k.startswith("untrained/") for r in read_metrics(run_dir / "metrics.jsonl")
                 for k in r):
        untrained = learner.initial_params(init_key)
    else:
        untrained = None
    by_wall = _bar_counts_wall(config)
    bar = _progress_bar(config, iteration, wall_s(),
                        enabled=show_progress and is_main, desc=f"train {config.game}")
    plotter = _BackgroundPlotter()
    last_record: dict[str, Any] = {}
    snapshotted = iteration  # the last iteration snapshotted here, or the one resumed from
    stop_early = False  # the perfect-play bar met with budget.stop_when_perfect
    budget_spent = not _agreed(_budget_left(config, iteration, wall_s()))
    stop = _StopRequests()
    state_is_whole = True  # False while an iteration holds `state`'s donated buffers
    unlogged: dict[str, Any] | None = None  # this iteration's record, until it is logged
    train_s = eval_s = 0.0  # the last iteration's training and evaluation: the look-ahead
    try:
        stop.install()
        while not (budget_spent or stop_early or _agreed(stop.signal_name is not None)):
            step_start = time.perf_counter()
            state_is_whole = False  # the iteration donates `state`'s buffers
            new_state, metrics = learner.iteration(state, jax.random.fold_in(train_key, iteration))
            if not math.isfinite(float(metrics.get("loss", 0.0))):
                last = checkpointer.latest_iteration()
                raise TrainingError(
                    f"loss is {metrics['loss']} at iteration {iteration + 1}; stopped. The last "
                    f"good checkpoint ({'none' if last is None else f'iteration {last}'}) is kept.")
            state, iteration = new_state, iteration + 1
            state_is_whole = True
            finished = max(int(metrics["selfplay/games_finished"]), 1)
            record = {"iteration": iteration, "wall_s": wall_s(),
                      "positions": iteration * positions_per_iteration,
                      "positions_per_s": positions_per_iteration
                      / (time.perf_counter() - step_start),
                      "selfplay/first_player_win_rate":
                          float(metrics["selfplay/first_player_wins"]) / finished,
                      "selfplay/draw_rate": float(metrics["selfplay/draws"]) / finished,
                      **{k: float(v) for k, v in metrics.items()}}
            unlogged = record
            train_s = time.perf_counter() - step_start
            # Decided once: when the next iteration (trained and evaluated as this one and the
            # last evaluation were) would end past the budget, this one is evaluated,
            # snapshotted and the last, however long its checkpoint takes to write.
            budget_spent = not _agreed(_budget_left(config, iteration, wall_s(),
                                                    train_s + eval_s))
            if iteration % config.eval.every_iterations == 0 or budget_spent:
                if untrained is not None:
                    baseline = evaluator.evaluate(untrained, jax.random.fold_in(eval_key, 0))
                    baseline = {k.replace("eval/", "untrained/", 1): v
                                for k, v in baseline.items()}
                    logger.log({"iteration": 0, "wall_s": wall_s(), **baseline})
                    bar.write(evaluator.summary_line(0, {
                        "wall_s": wall_s(), **{k.replace("untrained/", "eval/", 1): v
                                               for k, v in baseline.items()}}) + " (untrained)")
                    untrained = None
                if config.eval.gating:
                    accepted, gate_score = evaluator.gate(
                        host_params(state.train.params), host_params(state.selfplay_params),
                        jax.random.fold_in(jax.random.fold_in(eval_key, iteration), 1))
                    record.update({"gating/score": gate_score, "gating/accepted": accepted})
                    if accepted:  # a copy: the run state must not hold one buffer twice
                        state = state.replace(
                            selfplay_params=jax.tree.map(jnp.copy, state.train.params))
                eval_start = time.perf_counter()
                eval_metrics = evaluator.evaluate(
                    host_params(state.train.params), jax.random.fold_in(eval_key, iteration),
                    arenas=arenas_due(config, iteration, last=budget_spent))
                eval_s = time.perf_counter() - eval_start
                record.update(eval_metrics)
                record["wall_s"] = wall_s()
                perfect = bool(eval_metrics.get("eval/perfect", False))
                stop_early = perfect and config.budget.stop_when_perfect
                if perfect and time_to_perfect is None:
                    time_to_perfect = record["wall_s"]
                    record["time_to_perfect_s"] = time_to_perfect
                snapshotted = iteration
                if is_main:
                    snapshot(state, record, eval_metrics)
                    bar.write(evaluator.summary_line(iteration, record))
                # An evaluation after which the next iteration no longer fits ends the run:
                # its iteration has just been evaluated and snapshotted.
                budget_spent = not _agreed(_budget_left(config, iteration, wall_s(),
                                                        train_s + eval_s))
            logger.log(record)
            unlogged, last_record = None, record
            if iteration % config.eval.every_iterations == 0 and is_main:
                plotter.submit(run_dir)
            if iteration % config.checkpoint.every_iterations == 0:
                save(state)
            bar.set_postfix(pos_s=f"{record['positions_per_s']:.0f}",
                            loss=f"{record.get('loss', float('nan')):.3f}",
                            wall=f"{record['wall_s']:.0f}s")
            _advance(bar, record["wall_s"] if by_wall else iteration)
        if checkpointer.latest_iteration() != iteration:
            save(state)
        if stop.signal_name is not None and is_main and snapshotted != iteration:
            # A signal stops the run between evaluations: the last iteration it trained still
            # gets a snapshot (not evaluated, to stop promptly), so "the last snapshot" that
            # `azjax export` and `Agent.load` take is the last iteration trained. (One left
            # by an abandoned branch of the run at this iteration is replaced.)
            try:  # last_record is that iteration's: this segment trained it
                snapshot(state, last_record, {}, stopped_by=stop.signal_name)
            except Exception as error:  # the checkpoint is saved: stop cleanly all the same
                tqdm.write(f"could not write the snapshot of iteration {iteration}: {error}")
    except Exception as error:
        # An error between iterations (an evaluation, a snapshot, a plot) keeps the iterations
        # done since the last checkpoint. Not after a NaN loss (the last good checkpoint is the
        # one to keep), nor with several processes (saving is collective).
        if (state_is_whole and not isinstance(error, TrainingError)
                and jax.process_count() == 1 and checkpointer.latest_iteration() != iteration):
            try:
                if unlogged is not None and is_main:  # its self-play and losses, not its eval
                    logger.log({**unlogged, "error": f"{type(error).__name__}: {error}"})
                save(state)
                tqdm.write(f"checkpointed iteration {iteration} before stopping on the error")
            except Exception:  # the original error is the one to report
                pass
        raise
    finally:
        stop.restore()
        plotter.close()
        if is_main:
            plot_curves(run_dir)
        bar.close()
        logger.close()
        checkpointer.close()
    summary = {"event": "end", "iteration": iteration, "wall_s": wall_s(),
               "time_to_perfect_s": time_to_perfect, "stopped_by": stop.signal_name}
    if is_main:
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(summary) + "\n")
    return RunResult(run_dir, iteration, wall_s(), last_record, time_to_perfect,
                     stopped_by=stop.signal_name)
