"""Self-contained model files: a network's params and the config that made them.

A model directory holds `params.msgpack` (flax serialization) and `model.json` (format
version, game, resolved config and whatever the writer adds, such as measured strengths). The
config names the game; for a game of your own, its import path and `game_dir`, the directory
its module was found in, so that loading the model imports that module again (running its
code) from any working directory. Run
snapshots (`run_dir/snapshots/<iteration>/`) and exported models share this format, and it is
what `Agent.load`, the evaluation and the apps read.
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
from flax import serialization

from azjax.config import (
    ConfigError,
    ExperimentConfig,
    config_from_saved,
    config_to_dict,
    locate_game,
)

__all__ = [
    "CheckpointError",
    "MODEL_FORMAT_VERSION",
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
    from azjax import envs
    from azjax.core.network import init_network  # late: keeps this module light

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
    if not isinstance(meta.get("config"), dict):
        raise CheckpointError(f"{meta_path}: bad config (no config mapping)")
    try:
        # A game of your own is imported from its recorded directory, else from the folder
        # holding this model (a model kept beside its game's module), else the working one.
        saved = locate_game(meta["config"], (str(directory.resolve().parent),))
    except ConfigError as error:
        raise CheckpointError(f"{meta_path}: {error}") from None
    try:
        config = config_from_saved(saved)
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
