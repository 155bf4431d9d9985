"""Compute accounting: the FLOPs a run spends, by part, and its evaluation time apart.

Runs on different CPUs compare by compute, not only by clock. Every iteration record of
metrics.jsonl gets:
- `flops/<part>` and `flops/total`: the FLOPs spent so far over the whole run (resumed segments
  continue the totals), and `iteration_flops/<part>`, `iteration_flops/total`: this
  iteration's. A part is every `<part>/network_evaluations` metric (self-play's counted by its
  searches, `SelfPlayStats.network_evaluations`; any other part that evaluates the network
  by its own) times the FLOPs of one evaluation, and `train`: the update steps
  (`train/update_steps`) x `train.batch_size` x the FLOPs of one trained sample;
- `eval_wall_s`: the seconds spent evaluating so far (each evaluation's are its `eval/seconds`),
  and `train_wall_s` = `wall_s` - `eval_wall_s`: self-play, training and checkpointing.

The costs per evaluation and per trained sample are measured once per segment from XLA's cost
analysis and written in the segment's `start` / `resume` record (`FlopCosts.as_record`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from azjax.config import ExperimentConfig
from azjax.core import replay as replay_lib
from azjax.core.network import count_flops, init_network, make_network
from azjax.core.search import symmetry_averaged_apply, symmetry_permutations
from azjax.core.steps import make_steps
from azjax.envs.core import Env
from azjax.training.trainer import start_positions_of

__all__ = ["ComputeTotals", "FlopCosts", "costs_from_counts", "flop_costs",
           "forward_flops_per_evaluation", "iteration_flops", "update_flops"]

EVALUATIONS = "/network_evaluations"  # the suffix of a part's evaluation count
FORWARD_BATCH = 256  # a realistic batch: XLA's count at batch 1 can misreport


@dataclasses.dataclass(frozen=True)
class FlopCosts:
    """What one unit of each kind of work costs.

    Attributes:
      per_evaluation: FLOPs of one network evaluation on the search's path (its matmul dtype,
        symmetry averaging if on; no material head).
      per_trained_sample: FLOPs of one update step / `train.batch_size`.
      trained_sample_source: "cost_analysis" (one compiled update step); "3x forward" when
        XLA's analysis reported nothing; "3x forward (XLA undercounted)" when it reported less
        than one forward pass per sample, which no update can cost (XLA:GPU leaves the
        update's cuBLAS matmuls out of its count).
      train_batch: `train.batch_size`.
    """

    per_evaluation: float
    per_trained_sample: float
    trained_sample_source: str
    train_batch: int

    def as_record(self) -> dict[str, Any]:
        """The costs as `start` / `resume` record fields."""
        return {"flops_per_evaluation": self.per_evaluation,
                "flops_per_trained_sample": self.per_trained_sample,
                "flops_per_trained_sample_source": self.trained_sample_source}


def forward_flops_per_evaluation(env: Env, config: ExperimentConfig,
                                 batch_size: int = FORWARD_BATCH) -> float:
    """FLOPs of one evaluation of the network as the search calls it, from XLA's cost analysis
    of a forward pass over `batch_size` observations, divided by `batch_size`."""
    _, apply_fn = make_network(config.network, env.num_actions,
                               matmul_dtype=config.search.matmul_dtype)
    if config.search.symmetry_average:
        apply_fn = symmetry_averaged_apply(env, apply_fn)
    variables = jax.eval_shape(lambda key: init_network(
        config.network, env.num_actions, env.observation_shape, key), jax.random.PRNGKey(0))
    return count_flops(apply_fn, variables, env.observation_shape, batch_size) / batch_size


def update_flops(env: Env, config: ExperimentConfig, compiled: Any = None) -> float:
    """FLOPs of one update step at `train.batch_size` (sampling, augmentation, forward,
    backward and the optimizer), from XLA's cost analysis of one compiled step.

    Always a single step on one device: XLA's analysis counts a scan's body once (so not the
    `updates_per_call` scan), and a partitioned program's is one device's share.

    Args:
      env: the game; config: the experiment.
      compiled: that step already compiled (`Trainer.compiled_update`), or None to compile one.

    Returns:
      The step's floating-point operations (0.0 if XLA reports none).
    """
    if compiled is None:
        train = dataclasses.replace(config.train, updates_per_call=1)
        steps = make_steps(env, config.network, config.search, config.selfplay, train,
                           config.replay, gating=config.eval.gating,
                           starts=start_positions_of(env, config))
        key = jax.random.PRNGKey(0)
        abstract = jax.eval_shape(steps.init, key)
        compiled = jax.jit(steps.update).lower(
            abstract.train, abstract.replay, key,
            replay_lib.window_size(config.replay, 0)).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    return float((analysis or {}).get("flops", 0.0))


def flop_costs(env: Env, config: ExperimentConfig, update_flops: float) -> FlopCosts:
    """The run's `FlopCosts`, from one update step's FLOPs (`update_flops`).

    A trained sample costs a forward and a backward pass, so XLA's count is kept only when it
    is at least one forward pass per sample; else the sample is counted as 3 forward passes.
    """
    forward = forward_flops_per_evaluation(env, config)
    copies = len(symmetry_permutations(env)) if config.search.symmetry_average else 1
    return costs_from_counts(forward, forward / copies, update_flops, config.train.batch_size)


def costs_from_counts(per_evaluation: float, forward: float, update_flops: float,
                      batch: int) -> FlopCosts:
    """`FlopCosts` from XLA's counts, checked as `flop_costs` says.

    Args:
      per_evaluation: FLOPs of one evaluation as the search runs it.
      forward: FLOPs of one plain forward pass of one observation (`per_evaluation` over the
        symmetric copies the search averages, if it does).
      update_flops: one update step's FLOPs (0.0: XLA reported none); batch: its samples.
    """
    if update_flops / batch >= forward:
        return FlopCosts(per_evaluation, update_flops / batch, "cost_analysis", batch)
    source = "3x forward" if update_flops <= 0 else "3x forward (XLA undercounted)"
    return FlopCosts(per_evaluation, 3.0 * forward, source, batch)


def iteration_flops(metrics: dict[str, Any], costs: FlopCosts) -> dict[str, float]:
    """This iteration's FLOPs by part: every `<part>/network_evaluations` metric x the FLOPs
    per evaluation, and `train`: `train/update_steps` x the batch x the FLOPs per sample."""
    parts = {key[:-len(EVALUATIONS)]: float(value) * costs.per_evaluation
             for key, value in metrics.items() if key.endswith(EVALUATIONS)}
    parts["train"] = (float(metrics.get("train/update_steps", 0)) * costs.train_batch
                      * costs.per_trained_sample)
    return parts


@dataclasses.dataclass
class ComputeTotals:
    """A run's running totals: FLOPs by part and seconds spent evaluating."""

    flops: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_wall_s: float = 0.0

    def add_iteration(self, metrics: dict[str, Any], costs: FlopCosts) -> dict[str, float]:
        """Adds an iteration's work; returns its record fields (`iteration_flops/*` and the
        running `flops/*`)."""
        parts = iteration_flops(metrics, costs)
        for part, flops in parts.items():
            self.flops[part] = self.flops.get(part, 0.0) + flops
        fields = {f"iteration_flops/{part}": flops for part, flops in parts.items()}
        fields["iteration_flops/total"] = sum(parts.values())
        fields.update({f"flops/{part}": flops for part, flops in self.flops.items()})
        fields["flops/total"] = sum(self.flops.values())
        return fields

    def wall_fields(self, wall_s: float) -> dict[str, float]:
        """`eval_wall_s` and `train_wall_s` at `wall_s`."""
        return {"eval_wall_s": self.eval_wall_s, "train_wall_s": wall_s - self.eval_wall_s}

    def as_meta(self) -> dict[str, Any]:
        """The totals as JSON for a checkpoint's meta (`from_saved` reads them back)."""
        return {"flops": dict(self.flops), "eval_wall_s": self.eval_wall_s}

    @classmethod
    def from_saved(cls, meta: dict[str, Any] | None,
                   records: list[dict[str, Any]], iteration: int) -> ComputeTotals:
        """The totals a resumed run continues: the checkpoint meta's, else (a checkpoint
        written before compute was counted) the last record up to `iteration` that has them,
        else zero."""
        saved = (meta or {}).get("compute")
        if saved is not None:
            return cls(dict(saved.get("flops", {})), float(saved.get("eval_wall_s", 0.0)))
        logged = [r for r in records if r.get("iteration", 0) <= iteration
                  and "flops/total" in r and "event" not in r]  # iteration records
        if not logged:
            return cls()
        last = logged[-1]
        flops = {k.split("/", 1)[1]: float(v) for k, v in last.items()
                 if k.startswith("flops/") and k != "flops/total"}
        return cls(flops, float(last.get("eval_wall_s", 0.0)))
