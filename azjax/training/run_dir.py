"""Opening a run dir: start afresh or resume, and what may change on resume.

- a run dir with a checkpoint resumes from it; the saved config wins, except for what does not
  change what is trained (`azjax.config.RESUME_FREE_KEYS`), taken from the requested one;
- every error about the run dir (corrupt checkpoint, other game, changed config, a run that
  stopped before its first checkpoint) is raised here, before anything on disk is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from azjax.config import (
    RESUME_FIXED_KEYS,
    RESUME_FREE_KEYS,
    ConfigError,
    ExperimentConfig,
    config_from_saved,
    config_to_dict,
    free_on_resume,
)
from azjax.model_files import CheckpointError
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.metrics import read_metrics

__all__ = ["open_run"]


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
