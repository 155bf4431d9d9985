"""Run checkpoints (orbax) and params-only snapshots / exported models.

Layout of a run dir::

    run_dir/checkpoints/<iteration>/   orbax: the whole RunState + meta (config, wall_s, ...)
    run_dir/snapshots/<iteration>/     params.msgpack + model.json, one per evaluation (and one
                                       unevaluated where a signal stopped the run), kept
    run_dir/metrics.jsonl, events.*, curves.png, config.yaml

Checkpoints are written synchronously and atomically (orbax writes a temporary directory and
renames it), so a process killed at any moment leaves the previous checkpoints intact. A
snapshot (and an exported model) is self-contained: the network's params and the resolved
config, with a format version.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import serialization

from azjax.config import ConfigError, ExperimentConfig, config_from_saved, config_to_dict

__all__ = [
    "CheckpointError",
    "MODEL_FORMAT_VERSION",
    "RunCheckpointer",
    "STORAGE_DTYPES",
    "load_model",
    "save_model",
    "snapshot_dirs",
]

MODEL_FORMAT_VERSION = 1
_MODEL_JSON = "model.json"
_PARAMS_FILE = "params.msgpack"


class CheckpointError(RuntimeError):
    """A checkpoint or model that is missing, corrupt or does not fit the run."""


class RunCheckpointer:
    """Saves and restores whole-run checkpoints under `run_dir/checkpoints`."""

    def __init__(self, run_dir: str | Path, *, keep: int = 3, read_only: bool = False):
        self.directory = Path(run_dir).absolute() / "checkpoints"
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=not read_only,
            read_only=read_only,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=not read_only,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options,
                                              item_names=("state", "meta"))

    def latest_iteration(self) -> int | None:
        return self._manager.latest_step()

    def all_iterations(self) -> list[int]:
        return list(self._manager.all_steps())

    def save(self, iteration: int, state: Any, meta: dict[str, Any]) -> None:
        self._manager.save(iteration, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)
        self._manager.wait_until_finished()

    def restore_meta(self, iteration: int) -> dict[str, Any]:
        try:
            restored = self._manager.restore(
                iteration, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
            return dict(restored["meta"])
        except Exception as error:  # orbax raises many types for damaged files
            raise CheckpointError(
                f"checkpoint {self.directory / str(iteration)} is corrupt or unreadable "
                f"(meta: {type(error).__name__}: {error}){self._fallback_hint(iteration)}"
            ) from None

    def restore_state(self, iteration: int, abstract_state: Any) -> Any:
        try:
            restored = self._manager.restore(
                iteration, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
            return restored["state"]
        except Exception as error:
            raise CheckpointError(
                f"checkpoint {self.directory / str(iteration)} is corrupt or does not match "
                f"this run's state ({type(error).__name__}: {str(error)[:300]})"
                f"{self._fallback_hint(iteration)}") from None

    def _fallback_hint(self, iteration: int) -> str:
        """How to resume from an older checkpoint, when one is kept (nothing is deleted)."""
        older = [i for i in self.all_iterations() if i < iteration]
        if not older:
            return ""
        return (f". Older checkpoints: {', '.join(map(str, older))}; to resume from "
                f"{older[-1]}, move {self.directory / str(iteration)} out of checkpoints/")

    def close(self) -> None:
        self._manager.close()


def snapshot_dirs(run_dir: str | Path) -> list[Path]:
    """A run's snapshot directories (`snapshots/<iteration>/`), oldest first; [] if none."""
    root = Path(run_dir) / "snapshots"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and p.name.isdigit()),
                  key=lambda p: int(p.name))


# Storage dtypes a model's params may be written in; they are float32 again once loaded.
STORAGE_DTYPES = ("float32", "float16", "bfloat16")


def save_model(directory: str | Path, params: Any, config: ExperimentConfig,
               extra: dict[str, Any] | None = None, *, storage_dtype: str = "float32",
               text_files: dict[str, str] | None = None) -> Path:
    """Writes a self-contained model (params + config + format version), atomically: it is
    written in full beside `directory`, then swapped in by renames, so a crash leaves either
    the old model or the new one (at worst the old one under a hidden `.NAME.old-*` sibling).

    storage_dtype: the float params as written ("float16" halves a shipped model's size;
      `load_model` casts them back to float32, so only their rounding remains).
    text_files: more files to write into the model, name -> text (e.g. its model card).
    """
    if storage_dtype not in STORAGE_DTYPES:
        raise ValueError(f"storage dtype {storage_dtype!r}: choose one of {STORAGE_DTYPES}")
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.new-", dir=directory.parent))
    try:
        stored = jax.tree.map(lambda x: x.astype(storage_dtype)
                              if np.issubdtype(x.dtype, np.floating) else x,
                              jax.tree.map(np.asarray, jax.device_get(params)))
        (tmp / _PARAMS_FILE).write_bytes(serialization.to_bytes(stored))
        meta = {"format_version": MODEL_FORMAT_VERSION, "game": config.game,
                "config": config_to_dict(config), **(extra or {})}
        if storage_dtype != "float32":
            meta["storage_dtype"] = storage_dtype
        (tmp / _MODEL_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        for name, text in (text_files or {}).items():
            (tmp / name).write_text(text)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if directory.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
        os.replace(directory, old / directory.name)
    os.replace(tmp, directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return directory


def _check_leaf(value, spec) -> None:
    if value.shape != spec.shape or value.dtype != spec.dtype:
        raise ValueError(f"a stored array is {value.dtype}{list(value.shape)}, the config's "
                         f"network needs {spec.dtype}{list(spec.shape)}")


def load_model(directory: str | Path) -> tuple[Any, ExperimentConfig, dict[str, Any]]:
    """(params, config, meta) of a model saved by `save_model`.

    Raises:
      CheckpointError: naming the directory and what is missing or corrupt.
    """
    import envs
    from azjax.network import init_network  # late: keeps this module light

    directory = Path(directory)
    meta_path, params_path = directory / _MODEL_JSON, directory / _PARAMS_FILE
    if not meta_path.is_file() or not params_path.is_file():
        raise CheckpointError(f"{directory} is not an azjax model: it needs {_MODEL_JSON} and "
                              f"{_PARAMS_FILE}")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{meta_path} is corrupt: {error}") from None
    version = meta.get("format_version")
    if version != MODEL_FORMAT_VERSION:
        raise CheckpointError(f"{meta_path}: model format {version!r} is not supported "
                              f"(this azjax reads format {MODEL_FORMAT_VERSION})")
    try:
        config = config_from_saved(meta["config"])
    except (KeyError, ConfigError) as error:
        raise CheckpointError(f"{meta_path}: bad config ({error})") from None
    env = envs.make(config.game)
    # Shapes only (no initialisation work): the stored arrays fill the template.
    template = jax.eval_shape(lambda: init_network(
        config.network, env.num_actions, env.observation_shape, jax.random.PRNGKey(0)))["params"]
    storage_dtype = meta.get("storage_dtype", "float32")
    if storage_dtype not in STORAGE_DTYPES:
        raise CheckpointError(f"{meta_path}: unknown storage_dtype {storage_dtype!r} "
                              f"(this azjax reads {', '.join(STORAGE_DTYPES)})")
    try:
        params = serialization.from_bytes(template, params_path.read_bytes())
        stored = jax.tree.map(lambda spec: jax.ShapeDtypeStruct(
            spec.shape, storage_dtype if jax.numpy.issubdtype(spec.dtype, jax.numpy.floating)
            else spec.dtype), template)
        jax.tree.map(_check_leaf, params, stored)
        params = jax.tree.map(lambda x, spec: jax.numpy.asarray(x, spec.dtype), params, template)
    except Exception as error:
        raise CheckpointError(f"{params_path} is corrupt or does not fit its config "
                              f"({type(error).__name__}: {error})") from None
    return params, config, meta
