"""`azjax export`: a run's snapshot as a self-contained model directory with a model card."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax.agent import default_simulations, resolve_model_dir, with_search_overrides
from azjax.model_files import CheckpointError, load_model, save_model
from azjax.training.metrics import machine_description, read_metrics
from azjax.training.model_card import model_card

__all__ = ["export_model"]


def export_model(run_dir: str | Path, snapshot: str | None, to: str | Path, *,
                 num_simulations: int | None = None,
                 evaluate: Callable[[Path], dict[str, Any]] | None = None,
                 storage_dtype: str = "float32",
                 search_overrides: list[str] | None = None,
                 average: list[int] | None = None) -> Path:
    """Copies a snapshot of `run_dir` to `to`, adding the search defaults, the run's
    provenance and a Markdown model card (MODEL_CARD.md).

    Args:
      run_dir: the run dir.
      snapshot: the snapshot's iteration (default: the newest).
      to: the model directory to write (an earlier export there is replaced).
      num_simulations: the model's default search simulations (default: the run's evaluation
        setting).
      evaluate: measures the exported model (given its directory) and returns metrics under
        the training run's `eval/...` keys; they replace the snapshot's training-time figures
        in the card, which stay in model.json as `training_eval`.
      storage_dtype: the params' dtype on disk (`save_model`); the evaluation measures the
        params as stored.
      search_overrides: `KEY=VALUE` changes to how the model searches by default (e.g.
        `search.matmul_dtype=float32` for a run that searched in bfloat16), validated like
        `Agent.with_search`; the card is measured under them.
      average: snapshot iterations whose params are averaged into the exported model
        (stochastic weight averaging: the mean of weights along one run's low-learning-rate
        tail). The newest of them supplies the config and provenance (`snapshot`, if given,
        must be that one).

    Returns:
      `to`, as written by `save_model`.

    Raises:
      CheckpointError: no such snapshot, a target overlapping the run dir or not a model
        directory, or averaged snapshots of different networks.
      ValueError: num_simulations < 1, or a bad `average` list.
    """
    run_dir, to = Path(run_dir), Path(to)
    if average:
        source, params, config, meta = _averaged_snapshots(run_dir, average, snapshot)
    else:
        source = (resolve_model_dir(run_dir) if snapshot is None
                  else _snapshot_dir(run_dir, snapshot))
        params, config, meta = load_model(source)
    _check_target(run_dir, to)
    trained = config
    if search_overrides:
        config = with_search_overrides(config, search_overrides)
    if num_simulations is not None and num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    extra = _provenance(run_dir, source, params, config, meta, num_simulations, average)
    if evaluate is not None:
        # Measured from a staging copy: `to` (e.g. a shipped model) is replaced only once the
        # evaluation has succeeded.
        scratch = Path(tempfile.mkdtemp(prefix=f".{to.name}.staging-", dir=to.parent))
        try:
            metrics = evaluate(save_model(scratch / to.name, params, config, extra,
                                          storage_dtype=storage_dtype))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        earlier = extra.pop("eval", None)
        if (earlier or {}).get("eval/measured_at") != "export":  # re-exports keep the run's
            extra["training_eval"] = earlier
        extra["eval"] = {"eval/measured_at": "export", **metrics}
    card = model_card(config, extra, storage_dtype, trained=trained, run_dir=run_dir,
                      spec=_model_spec(to, config.game))
    return save_model(to, params, config, extra, storage_dtype=storage_dtype,
                      text_files={"MODEL_CARD.md": card})


def _provenance(run_dir: Path, source: Path, params: Any, config, meta: dict[str, Any],
                num_simulations: int | None, average: list[int] | None) -> dict[str, Any]:
    """model.json's entries beside the config: the snapshot's own, the search defaults, where
    and from what the model was trained."""
    return {
        **{k: v for k, v in meta.items() if k not in ("format_version", "game", "config")},
        "num_simulations": num_simulations or default_simulations(config),
        "search": {key: getattr(config.search, key) for key in (
            "algorithm", "contempt", "material_utility", "symmetry_average", "greedy_action",
            "prior_temperature", "endgame_table", "quiescence", "quiescence_moves",
            "alphabeta_depth", "alphabeta_nodes")},
        "seed": config.seed,
        "num_params": sum(int(leaf.size) for leaf in jax.tree.leaves(params)),
        # Self-play searches: one per position, each with the training search's simulations.
        "training_simulations": int(meta.get("positions") or 0) * config.search.num_simulations,
        "machine": machine_description(),
        "source": str(source),
        **({"averaged_snapshots": sorted(average)} if average else {}),
        "time_to_perfect_s": _time_to_perfect(run_dir, meta),
        "resume_changes": _resume_changes(run_dir, meta),
    }


def _snapshot_dir(run_dir: Path, iteration: int | str) -> Path:
    source = run_dir / "snapshots" / str(iteration)
    if not (source / "model.json").is_file():
        raise CheckpointError(f"no snapshot {iteration} in {run_dir / 'snapshots'}")
    return source


def _averaged_snapshots(run_dir: Path, iterations: list[int], snapshot: str | None
                        ) -> tuple[Path, Any, Any, dict[str, Any]]:
    """(source, mean params, config, meta) of the snapshots `iterations` of one run; the
    newest supplies source, config and meta. Refuses fewer than two distinct snapshots, a
    `snapshot` other than the newest, and snapshots of different networks."""
    if len(set(iterations)) != len(iterations) or len(iterations) < 2:
        raise ValueError(f"--average needs two or more distinct snapshots, got {iterations}")
    newest = max(iterations)
    if snapshot is not None and str(snapshot) != str(newest):
        raise ValueError(f"with --average the exported snapshot is the newest averaged one "
                         f"({newest}), not {snapshot}")
    sources = {it: _snapshot_dir(run_dir, it) for it in sorted(iterations)}
    loaded = {it: load_model(source) for it, source in sources.items()}
    _, config, meta = loaded[newest]
    for it, (_, other, _) in loaded.items():
        if (other.game, other.network) != (config.game, config.network):
            raise CheckpointError(f"snapshot {it} of {run_dir} has another game or network "
                                  f"than snapshot {newest}; only one run's weights average")
    # The mean in float64, so that the order of the sum does not round the result.
    trees = [params for params, _, _ in loaded.values()]
    mean = jax.tree.map(lambda *leaves: np.mean(np.stack(leaves).astype(np.float64), axis=0)
                        .astype(np.asarray(leaves[0]).dtype), *trees)
    return sources[newest], mean, config, meta


def _check_target(run_dir: Path, to: Path) -> None:
    """Refuses a target that would overwrite anything but an earlier model export."""
    run, target = run_dir.resolve(), to.resolve()
    if target == run or run in target.parents or target in run.parents:
        raise CheckpointError(f"--to {to} overlaps the run dir {run_dir}; export elsewhere")
    if target.exists() and not (target / "model.json").is_file():
        raise CheckpointError(f"--to {to} exists and is not a model directory (no model.json); "
                              "refusing to replace it")


def _time_to_perfect(run_dir: Path, meta: dict[str, Any]) -> float | None:
    """The run's `wall_s` when it first met the perfect-play bar, if the snapshot is at or past
    that point (else None: an earlier snapshot is not credited with it)."""
    if "time_to_perfect_s" in meta:  # recorded with the snapshot
        return meta["time_to_perfect_s"]
    times = [r["time_to_perfect_s"] for r in read_metrics(run_dir / "metrics.jsonl")
             if r.get("time_to_perfect_s") is not None]
    reached = min(times, default=None)
    return reached if reached is not None and reached <= meta.get("wall_s", 0.0) else None


def _resume_changes(run_dir: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The config changes the run took when it resumed, up to the snapshot's iteration:
    [{"iteration", "changes"}] from metrics.jsonl's `resume` records (a re-export keeps the
    ones its model recorded)."""
    if "resume_changes" in meta:
        return meta["resume_changes"]
    iteration = meta.get("iteration") or 0
    return [{"iteration": r["iteration"], "changes": list(r["config_changed"])}
            for r in read_metrics(run_dir / "metrics.jsonl")
            if r.get("event") == "resume" and r.get("config_changed")
            and r.get("iteration", 0) <= iteration]


def _model_spec(to: Path, game: str) -> str:
    """How `azjax eval` / `azjax play` / `Agent.load` name the model: its game id where it is
    the shipped model of that game, else its directory."""
    from azjax.agent import MODELS_DIR

    return game if to.resolve() == (MODELS_DIR / game).resolve() else str(to)
