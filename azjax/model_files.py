"""Self-contained model files: a network's params and the config that made them.

A model directory holds `params.msgpack` (flax serialization), `model.json` (format
version, game, resolved config and whatever the writer adds, such as measured strengths), any
text files the writer adds (a model card) and, written last, `checksums.json`: the sha256 of
every other file, which loading checks first, so that a damaged file is refused by name
instead of loading as wrong weights. A directory without `checksums.json` (a model written
before models carried one) loads unchecked. The checkpoints of a run carry the same file
(`write_checksums`, `verify_checksums`).

The config names the game; for a game of your own, its import path and `game_dir`, the
directory its module was found in. Loading such a model imports that module, and so runs its
code, only when the module is installed or the caller trusts it (`trust_game=True`, or inside
`envs.trust_game_code()`); otherwise it is refused in one line (docs/trust.md). Run snapshots
(`run_dir/snapshots/<iteration>/`) and exported models share this format, and it is what
`Agent.load`, the evaluation and the apps read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import jax
import numpy as np
from flax import serialization

from azjax.config import (
    ConfigError,
    ExperimentConfig,
    config_from_saved,
    config_to_dict,
    game_from_mapping,
    locate_game,
)

__all__ = [
    "CHECKSUMS_FILE",
    "CheckpointError",
    "MODEL_FORMAT_VERSION",
    "STORAGE_DTYPES",
    "check_rules",
    "load_model",
    "save_model",
    "snapshot_dirs",
    "error_line",
    "verify_checksums",
    "write_checksums",
]

MODEL_FORMAT_VERSION = 1
CHECKSUMS_FILE = "checksums.json"
_MODEL_JSON = "model.json"
_PARAMS_FILE = "params.msgpack"
_CHECKSUMS_SCRATCH = ".checksums-"  # the prefix of a checksums file being written


class CheckpointError(RuntimeError):
    """A checkpoint or model that is missing, corrupt or does not fit the run."""


def check_rules(recorded: str | None, env: Any, spec: str, what: str | Path) -> None:
    """Refuses a model or run trained under other rules than its game plays here.

    Args:
      recorded: the rules `what` records (`Env.rules` when it was saved); None when it records
        none.
      env: the game its spec makes now.
      spec: that spec, for the message.
      what: the model or run directory, for the message.

    Raises:
      CheckpointError: one line, when the rules differ, or when `what` records none and the
        game has variants (it was saved before rules were recorded: which it learnt is unknown).
    """
    if recorded == env.rules or (recorded is None and not env.rules):
        return
    learnt = ("records no rules (saved before rules were recorded)" if recorded is None
              else f"was trained under the rules {recorded!r}")
    raise CheckpointError(f"{what} {learnt}, but its game {spec!r} plays the rules "
                          f"{env.rules!r} here; a model plays only the rules it learnt (a "
                          f"game's spec can name them, as draughts(draw_rule='openspiel') does)")


def snapshot_dirs(run_dir: str | Path) -> list[Path]:
    """A run's snapshot directories (`snapshots/<iteration>/`), oldest first; [] if none."""
    root = Path(run_dir) / "snapshots"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and p.name.isdigit()),
                  key=lambda p: int(p.name))


def _sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def write_checksums(directory: str | Path) -> Path:
    """Writes `directory/checksums.json`: the sha256 of every file below it, so that
    `verify_checksums` finds one damaged later. Call it once the directory is complete; it
    is written to a scratch file and renamed, so a crash leaves no half-written one.

    Format: `{"format_version": 1, "algorithm": "sha256", "files": {PATH: HEX}}`, PATH
    relative to `directory` with `/` separators, sorted.

    Args:
      directory: a model directory or a checkpoint's directory.

    Returns:
      The path of the checksums file.
    """
    directory = Path(directory)
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = path.relative_to(directory).as_posix()
        if name != CHECKSUMS_FILE and not name.startswith(_CHECKSUMS_SCRATCH):
            files[name] = _sha256(path)
    text = json.dumps({"format_version": 1, "algorithm": "sha256", "files": files},
                      indent=2) + "\n"
    # A fresh name, created with the umask's permissions (mkstemp's would be owner-only).
    scratch = directory / f"{_CHECKSUMS_SCRATCH}{os.getpid()}-{uuid.uuid4().hex}"
    try:
        with scratch.open("x") as file:
            file.write(text)
        os.replace(scratch, directory / CHECKSUMS_FILE)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise
    return directory / CHECKSUMS_FILE


def _listed_files(checksums: Path) -> dict[str, str]:
    """The `files` mapping of a checksums file, each path inside its directory."""
    try:
        data = json.loads(checksums.read_text())
        files = data["files"]
        if data.get("algorithm") != "sha256" or not isinstance(files, dict):
            raise ValueError("not sha256 over a mapping of files")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{checksums} is damaged ({type(error).__name__}: "
                              f"{error_line(error)})") from None
    for name, digest in files.items():
        path = PurePosixPath(name)
        if (not isinstance(digest, str) or path.is_absolute() or ".." in path.parts
                or not name or path.as_posix() != name):
            raise CheckpointError(f"{checksums} is damaged: it lists {name!r}, not a file "
                                  "of its directory")
    return files


def verify_checksums(directory: str | Path) -> bool:
    """Checks every file `directory/checksums.json` lists against its sha256.

    Args:
      directory: a directory `write_checksums` wrote into.

    Returns:
      True when every listed file is there and unchanged; False when the directory has no
      checksums file (written before they were), which is then not checked.

    Raises:
      CheckpointError: one line naming the first file that is missing or differs, or the
        checksums file itself when it is unreadable.
    """
    directory = Path(directory)
    checksums = directory / CHECKSUMS_FILE
    if not checksums.is_file():
        return False
    root = directory.resolve()
    for name, digest in _listed_files(checksums).items():
        path = directory / name
        if not path.resolve().is_relative_to(root) or not path.is_file():
            raise CheckpointError(f"{path} is missing ({checksums} lists it)")
        if _sha256(path) != digest:
            raise CheckpointError(f"{path} is damaged: its sha256 differs from the one in "
                                  f"{checksums}")
    return True


def error_line(error: BaseException, limit: int = 200) -> str:
    """An error's message as one line of at most `limit` characters, for messages that quote
    a library's error (TensorStore puts whole JSON specs over several lines in its own).

    Args:
      error: the exception.
      limit: the most characters kept; a cut message ends in "...".

    Returns:
      Its message with every run of whitespace (newlines included) made one space.
    """
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


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

    `checksums.json` (`write_checksums`) is written last, over every other file.
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
                "rules": _game_rules(config.game), "config": config_to_dict(config),
                **(extra or {})}
        if storage_dtype != "float32":
            meta["storage_dtype"] = storage_dtype
        (tmp / _MODEL_JSON).write_text(json.dumps(meta, indent=2) + "\n")
        for name, text in (text_files or {}).items():
            (tmp / name).write_text(text)
        write_checksums(tmp)
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


def _game_rules(spec: str) -> str:
    """The rules of a game made in this process (`Env.rules`)."""
    from azjax import envs

    return envs.make(spec).rules


def _check_leaf(value, spec) -> None:
    if value.shape != spec.shape or value.dtype != spec.dtype:
        raise ValueError(f"a stored array is {value.dtype}{list(value.shape)}, the config's "
                         f"network needs {spec.dtype}{list(spec.shape)}")


def load_model(directory: str | Path, *, trust_game: bool = False
               ) -> tuple[Any, ExperimentConfig, dict[str, Any]]:
    """(params, config, meta) of a model saved by `save_model`.

    Its files are checked against `checksums.json` first (when it has one). Its game resolves
    as `envs.make(spec, trusted=False)` does: a registered id, a pgx game, an entry point, or
    an import path naming an `Env` subclass or a marked game factory in a module that is
    installed; a module found only beside the model or in its recorded `game_dir` is imported
    (running its code) only under trust.

    Args:
      directory: the model directory.
      trust_game: import the game's module from where the model says it is, even when it is
        not installed (also granted inside `envs.trust_game_code()`).

    Raises:
      CheckpointError: one line naming the directory or file and what is missing, damaged
        or corrupt, or why its game is refused (with how to trust it).
    """
    from azjax import envs
    from azjax.core.network import init_network  # late: keeps this module light

    directory = Path(directory)
    meta_path, params_path = directory / _MODEL_JSON, directory / _PARAMS_FILE
    if not meta_path.is_file() or not params_path.is_file():
        raise CheckpointError(f"{directory} is not an azjax model: it needs {_MODEL_JSON} and "
                              f"{_PARAMS_FILE}")
    verify_checksums(directory)
    meta = _read_meta(meta_path)
    config = _saved_config(meta, meta_path, trusted=trust_game)
    env = envs.make(config.game)
    check_rules(meta.get("rules"), env, config.game, directory)
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
                              f"({type(error).__name__}: {error_line(error)})") from None
    return params, config, meta


def _read_meta(meta_path: Path) -> dict[str, Any]:
    """model.json, checked for its format version and a config mapping."""
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{meta_path} is corrupt: {error_line(error)}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path} is corrupt: not a JSON object")
    version = meta.get("format_version")
    if version != MODEL_FORMAT_VERSION:
        raise CheckpointError(f"{meta_path}: model format {version!r} is not supported "
                              f"(this azjax reads format {MODEL_FORMAT_VERSION})")
    if not isinstance(meta.get("config"), dict):
        raise CheckpointError(f"{meta_path}: bad config (no config mapping)")
    return meta


def _saved_config(meta: dict[str, Any], meta_path: Path, *, trusted: bool) -> ExperimentConfig:
    """The config of a model's meta, once its game is made under the model's trust: its
    module from the installed packages, else (trusted) from its recorded `game_dir`, the
    folder holding the model directory (a model kept beside its game's module) or the
    working directory."""
    from azjax import envs

    data = meta["config"]
    parent = str(meta_path.parent.resolve().parent)
    try:
        game = game_from_mapping(data.get("game", ExperimentConfig.game))
        if isinstance(game, str):  # made here first, so the steps below find it made
            recorded = data.get("game_dir")
            dirs = ((recorded,) if isinstance(recorded, str) and recorded else ()) + (parent,)
            try:
                envs.make(game, search_dirs=dirs, trusted=trusted)
            except ValueError as error:
                raise ConfigError(f"game: {error}") from None
        saved = locate_game(data, (parent,))
    except ConfigError as error:
        raise CheckpointError(f"{meta_path}: {error}") from None
    try:
        return config_from_saved(saved)
    except (KeyError, ConfigError) as error:
        raise CheckpointError(f"{meta_path}: bad config ({error})") from None
