"""One `train` call is one segment of a run: started afresh or resumed from its checkpoint.

`start_segment` opens the run dir (every error about it raised before anything is written),
builds the trainer and the evaluator, starts or restores the run state and logs where the
segment runs. It returns the two records the loop carries: `Segment`, what the call works
with and never changes, and `LoopState`, what changes from one iteration to the next.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.config import ConfigError, ExperimentConfig, with_game_dir
from azjax.core.layout import local_copy, make_mesh, mesh_description, updates_on_one_device
from azjax.core.steps import RunState
from azjax.model_files import CheckpointError, check_rules
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.compute import ComputeTotals, FlopCosts, flop_costs
from azjax.training.main_process import MainProcess
from azjax.training.metrics import MetricsLogger, read_metrics
from azjax.training.run_dir import open_run
from azjax.training.trainer import Trainer

__all__ = ["LoopState", "Segment", "fallback_line", "start_segment"]


@dataclasses.dataclass(frozen=True)
class Segment:
    """What one `train` call (one segment of a run, resumed or not) works with, unchanged."""

    config: ExperimentConfig
    run_dir: Path
    trainer: Trainer  # the loop trains each iteration with it
    evaluator: Any  # `azjax.evaluation.evaluator.Evaluator` or what `evaluator_factory` builds
    checkpointer: RunCheckpointer
    logger: MetricsLogger
    main: MainProcess
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
class LoopState:
    """What changes from one iteration to the next."""

    state: RunState
    iteration: int
    time_to_perfect: float | None
    untrained: Any  # the untrained network's params, until the first evaluation scores them
    snapshotted: int  # the last iteration snapshotted in this segment, or the one resumed from
    compute: ComputeTotals  # the run's FLOPs and evaluation seconds so far
    last_record: dict[str, Any] = dataclasses.field(default_factory=dict)
    budget_spent: str | None = None  # why no further iteration fits the budget (`over_budget`)
    train_s: float = 0.0  # the last iteration's training and evaluation: the look-ahead
    eval_s: float = 0.0
    # What an error between iterations needs to keep the work done since the last checkpoint.
    state_is_whole: bool = True  # False while an iteration holds `state`'s donated buffers
    unlogged: dict[str, Any] | None = None  # this iteration's record, until it is logged


def start_segment(config: ExperimentConfig, run_dir: Path, evaluator_factory: Callable | None,
                  started: float) -> tuple[Segment, LoopState]:
    """Opens the run dir (errors before anything is written), builds the trainer and the
    evaluator, starts or restores the run state and logs where the segment runs.

    Args:
      config: the requested experiment (`open_run` says what a resume takes from it).
      run_dir: the run dir.
      evaluator_factory: builds the evaluator as `train` documents; None for `Evaluator`.
      started: time.perf_counter() when the call started.

    Returns:
      (segment, loop): what the call works with, and the loop's state at its start.
    """
    from azjax.evaluation.evaluator import Evaluator  # late: imports baselines and oracles

    # The game was made (and a game of your own checked with `envs.check_env`) when the config
    # was built; the run records where its module was found.
    config, resume = open_run(run_dir, with_game_dir(config))
    env = envs.make(config.game)
    if resume is not None:
        check_rules(resume.get("rules"), env, config.game, run_dir)
    mesh = make_mesh()
    # Checks that the batches split over the mesh.
    trainer = Trainer(env, config, mesh=mesh, updates_on_one_device=updates_on_one_device(mesh))
    if resume is not None:
        _check_start_positions(resume.get("start_positions_sha256"), trainer.starts_digest,
                               config, run_dir)
    main = MainProcess(run_dir, enabled=jax.process_index() == 0)
    host_params = local_copy if trainer.mesh is not None else lambda params: params
    init_key, train_key, eval_key = jax.random.split(jax.random.PRNGKey(config.seed), 3)

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpointer = RunCheckpointer(run_dir, keep=config.checkpoint.keep,
                                   damaged=resume["damaged"] if resume else ())
    if resume is None:
        state, wall_offset, time_to_perfect = trainer.init_state(init_key), 0.0, None
        if config.train.init_params:
            state = _warm_started(state, config, env)
            main.say(f"starting from the params of {config.train.init_params}")
    else:
        # With a mesh the target carries its shardings: each process reads only its shards.
        state, resume = _restore(checkpointer, trainer.abstract_state(), resume)
        if resume["damaged"]:
            main.say(fallback_line(resume["damaged"], resume["iteration"]))
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
        env, config, trainer.apply_fn, trainer.search_fn,
        params_example=host_params(state.train.params))
    trainer.compile(state)
    segment = Segment(config, run_dir, trainer, evaluator, checkpointer, logger, main,
                      host_params, train_key, eval_key, started, wall_offset,
                      int(np.prod(state.selfplay.previous.player.shape)),
                      flop_costs(env, config, trainer.update_flops()))
    _announce(segment, mesh, iteration, resume, split=trainer.split)
    compute = (ComputeTotals() if resume is None else ComputeTotals.from_saved(
        resume, read_metrics(run_dir / "metrics.jsonl"), iteration))
    untrained = _untrained_params(segment, state, resume,
                                  rebuild=lambda: trainer.initial_params(init_key))
    return segment, LoopState(state, iteration, time_to_perfect, untrained,
                              snapshotted=iteration, compute=compute)


def _check_start_positions(recorded: str | None, now: str | None, config: ExperimentConfig,
                           run_dir: Path) -> None:
    """Refuses to resume a run on other start positions than its checkpoint records, as a
    changed config is refused: the same file name with other positions would change the run
    silently. A checkpoint that records none (no file, or saved before digests) passes.

    Raises:
      ConfigError: one line naming the key, the file and both digests' heads.
    """
    if recorded is None or recorded == now:
        return
    now = now[:12] if now else "none"
    raise ConfigError(
        f"selfplay.start_positions: the positions in {config.selfplay.start_positions} are not "
        f"those {run_dir} was trained on (sha256 {recorded[:12]}, now {now}); restore the "
        f"file, or start another run with --run-dir")


def _restore(checkpointer: RunCheckpointer, abstract_state: RunState, resume: dict[str, Any]
             ) -> tuple[RunState, dict[str, Any]]:
    """The run state of the checkpoint `resume` names or, when it cannot be restored, of the
    newest older one that can (a checkpoint written before checksums existed shows its damage
    only when it is read), with that checkpoint's meta in the returned `resume`; each one
    passed over is added to `resume["damaged"]`. Nothing is moved or deleted.

    Raises:
      CheckpointError: no checkpoint restores (one line: the newest one's error).
    """
    damaged, first_error = dict(resume["damaged"]), None
    candidates = [i for i in checkpointer.all_iterations() if i <= resume["iteration"]]
    for iteration in reversed(candidates):
        try:
            meta = (resume if iteration == resume["iteration"]
                    else checkpointer.restore_meta(iteration))
            state = checkpointer.restore_state(iteration, abstract_state)
        except CheckpointError as error:
            damaged[iteration], first_error = str(error), first_error or error
            checkpointer.damaged.add(iteration)
            continue
        return state, {**meta, "iteration": iteration, "changed": resume["changed"],
                       "damaged": damaged}
    older = ", ".join(map(str, candidates[-2::-1]))
    raise CheckpointError(f"{first_error}" + (
        f"; no checkpoint is intact (the older ones, {older}, are damaged too)" if older
        else "")) from None


def fallback_line(damaged: dict[int, str], iteration: int) -> str:
    """The line a resume prints when it passes over damaged checkpoints.

    Args:
      damaged: {iteration: why} of the checkpoints passed over, newest first
        (`RunCheckpointer.newest_intact`).
      iteration: the checkpoint resumed from.

    Returns:
      One line: why each was passed over, and which one the run resumes from.
    """
    passed = "; ".join(f"checkpoint {i}: {why}" for i, why in damaged.items())
    return (f"{passed}; resuming from checkpoint {iteration}, the newest intact one (nothing "
            "moved or deleted)")


def _announce(segment: Segment, mesh: Any, iteration: int, resume: dict[str, Any] | None, *,
              split: bool) -> None:
    """Prints the mesh; logs the segment's first record (where it runs, what changed).
    `split`: replay and updates stay on the first device while the games split."""
    layout = mesh_description(mesh)
    ways = f"{layout['devices']} way(s)"
    where = (f"games split {ways}; replay and updates on the first device"
             if split else f"games and training batches split {ways}")
    segment.main.say(f"mesh: {layout['processes']} process(es) x "
                     f"{layout['devices_per_process']} {layout['platform']} device(s); {where}")
    # The first line of metrics.jsonl (and one per resumed segment): where the run ran.
    segment.logger.log({
        "event": "resume" if resume else "start", "iteration": iteration,
        "wall_s": segment.wall_s(), **layout, "updates_on_one_device": split,
        **segment.costs.as_record(),
        **({"start_positions_sha256": segment.trainer.starts_digest}
           if segment.trainer.starts_digest else {}),
        **({"config_changed": resume["changed"]} if resume and resume["changed"] else {}),
        **({"damaged_checkpoints": sorted(resume["damaged"])}
           if resume and resume["damaged"] else {})})


def _warm_started(state: RunState, config: ExperimentConfig, env: Any) -> RunState:
    """A fresh run's state with the params of `train.init_params` (`warm_start_params`), laid
    out as the random ones were; the optimizer's state does not depend on the params' values
    (zero moments), so it stands."""
    from azjax.training.warm_start import warm_start_params

    params = warm_start_params(config, env, state.train.params)  # its shapes only are read
    placed = jax.tree.map(lambda new, old: jax.device_put(new.astype(old.dtype), old.sharding),
                          params, state.train.params)
    state = state.replace(train=state.train.replace(params=placed))
    if state.selfplay_params is not None:
        state = state.replace(selfplay_params=jax.tree.map(jnp.copy, placed))
    return state


def _untrained_params(segment: Segment, state: RunState, resume: dict[str, Any] | None, *,
                      rebuild: Callable[[], Any]) -> Any:
    """The untrained network, scored at the first evaluation (once the evaluator has compiled
    in the background) for comparison; None when the run has scored it already. The state
    itself is donated, hence a copy; a run stopped before its first evaluation rebuilds it
    from its seed on resume (`rebuild`)."""
    if resume is None:
        return segment.host_params(jax.tree.map(jnp.copy, state.train.params))
    if not any(k.startswith("untrained/") for r in read_metrics(segment.run_dir / "metrics.jsonl")
               for k in r):
        return rebuild()
    return None
