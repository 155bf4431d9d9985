"""Opening a run dir: start afresh or resume, and what may change on resume.

- a run dir with a checkpoint resumes from it; the saved config wins, except for what does not
  change what is trained (`azjax.config.RESUME_FREE_KEYS`), taken from the requested one;
- a damaged newest checkpoint (`RunCheckpointer.newest_intact`) is passed over for the newest
  intact one, which the resume takes; nothing is moved or deleted;
- every error about the run dir (no intact checkpoint, other game, changed config, a run that
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
    game_from_mapping,
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
      the saved config with the requested values of `RESUME_FREE_KEYS`, and the newest intact
      checkpoint's meta with "iteration" (its iteration), "changed" (the free keys that
      differ, as "section.key: saved X, requested Y") and "damaged" ({iteration: why} for
      each newer checkpoint passed over as damaged, newest first; {} when none was).

    Raises:
      CheckpointError / ConfigError: another game's run, a changed config, no intact
        checkpoint, or a run that stopped before its first checkpoint.
    """
    checkpoint_dir = run_dir / "checkpoints"
    if not checkpoint_dir.is_dir() or not any(p.name.isdigit() for p in checkpoint_dir.iterdir()):
        _check_nothing_to_lose(run_dir, requested)
        return requested, None
    reader = RunCheckpointer(run_dir, read_only=True)
    try:
        if reader.latest_iteration() is None:
            _check_nothing_to_lose(run_dir, requested)
            return requested, None
        latest, meta, damaged = reader.newest_intact()
    finally:
        reader.close()
    try:
        # Another game is refused before the saved config is built, which would make it (and
        # import its module from the directory the checkpoint names).
        saved_game = game_from_mapping(meta["config"].get("game", ExperimentConfig.game))
        if saved_game != requested.game:
            raise CheckpointError(f"{run_dir} holds a {saved_game} run; this config trains "
                                  f"{requested.game} (choose another --run-dir)")
        saved = config_from_saved(meta["config"])
    except (KeyError, AttributeError, ConfigError) as error:
        raise CheckpointError(f"checkpoint {checkpoint_dir / str(latest)} has a bad config: "
                              f"{error}") from None
    diffs = _config_differences(saved, requested)
    if diffs:
        raise ConfigError(f"{run_dir} was started with another config; only "
                          f"{_free_keys_text()} may change on resume. "
                          f"Differences: {'; '.join(diffs)}")
    changed = _config_differences(saved, requested, free=True)
    return _resumed_config(saved, requested), {**meta, "iteration": latest, "changed": changed,
                                               "damaged": damaged}


def _check_nothing_to_lose(run_dir: Path, requested: ExperimentConfig) -> None:
    """A run dir without a checkpoint starts afresh. Where an earlier run logged iterations
    or saved snapshots, it was killed before its first checkpoint, which the loop writes after
    iteration 1: if it trained what `requested` trains (its config.yaml differs at most in
    `RESUME_FREE_KEYS`) and got no further than iteration 1, starting afresh trains that
    iteration again, the same, and rewrites its files, so the same command goes on. Anything
    more would mix two runs in one dir, so it is refused."""
    records = read_metrics(run_dir / "metrics.jsonl")
    logged = max((r["iteration"] for r in records if isinstance(r.get("iteration"), int)),
                  default=0)
    folder = run_dir / "snapshots"
    snapshots = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    if logged < 1 and not snapshots:
        return
    if logged <= 1 and snapshots <= {"1"} and _trains_the_same(run_dir, requested):
        return
    raise CheckpointError(
        f"{run_dir} holds a run that stopped before its first checkpoint "
        f"(metrics.jsonl or snapshots/, but nothing in checkpoints/ to resume from), past "
        f"its first iteration or with another config than this one; delete {run_dir} to "
        f"start again, or choose another --run-dir")


def _trains_the_same(run_dir: Path, requested: ExperimentConfig) -> bool:
    """Whether the run dir's config.yaml trains what `requested` does (False without one)."""
    import yaml

    try:
        data = yaml.safe_load((run_dir / "config.yaml").read_text())
        # Compared as text first: building the saved config would import its game's code.
        if not isinstance(data, dict) or data.get("game") != requested.game:
            return False
        saved = config_from_saved(data)
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError):  # ConfigError too
        return False
    return not _config_differences(saved, requested)


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
