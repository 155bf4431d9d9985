"""Games by name: `make(spec)` resolves a game spec to one shared `Env`, `register(id, factory)`
adds an id, `available()` lists the ids.

A spec is, tried in this order:
  1. a registered id (`tic_tac_toe`, `connect_four`, `draughts`, ... and `register`'s);
  2. `pgx:<id>`, pgx's game `<id>` wrapped with `envs.from_pgx` (needs the pgx package);
  3. an import path `module.sub:Attr`: a subclass of `Env` (called with no arguments) or a
     function returning an `Env`, in any importable module;
  4. the name of an entry point in the `azjax.games` group, whose object is one of those, so
     that an installed package ships games without touching azjax.
Keyword arguments follow in call syntax, `mygames.othello4:Othello4(size=4)`, as Python
literals (`game_spec` writes that form from a mapping). A module is looked up in the installed
packages (`sys.path`), then in the directories the caller names (a config file's own), then in
the working directory; a directory where it is found joins `sys.path` from then on.

A game from an import path or an entry point is imported, built and checked with
`envs.check_env` at its first `make` (once per process); every failure is a `ValueError` of one
line that names the module, the attribute or the check.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from azjax.envs.connect_four import ConnectFour
from azjax.envs.core import Env
from azjax.envs.draughts import Draughts
from azjax.envs.tic_tac_toe import TicTacToe

__all__ = ["ENTRY_POINT_GROUP", "available", "game_dir", "game_spec", "make", "register"]

ENTRY_POINT_GROUP = "azjax.games"

_REGISTRY: dict[str, Callable[[], Env]] = {
    "tic_tac_toe": TicTacToe,
    "connect_four": ConnectFour,
    "draughts": Draughts,
    "draughts_tactics": lambda: Draughts(planes="tactics"),
}
_INSTANCES: dict[str, Env] = {}
_DIRS: dict[str, str] = {}  # spec -> the directory its module was found in ("" if installed)


def register(game_id: str, factory: Callable[[], Env]) -> None:
    """Adds a game, so that `make`, configs (`game: <id>`), `azjax play <id>` and
    `azjax serve` find it.

    Args:
      game_id: the id to register it under.
      factory: builds the game (called once, at its first `make`).

    Raises:
      ValueError: if the id is taken.
    """
    if game_id in _REGISTRY:
        raise ValueError(f"a game is already registered as {game_id!r}")
    _REGISTRY[game_id] = factory


def available() -> tuple[str, ...]:
    """The registered game ids, sorted."""
    return tuple(sorted(_REGISTRY))


def game_spec(target: str, kwargs: Mapping[str, Any] | None = None) -> str:
    """The spec string of a game and its keyword arguments: `module:Attr(a=1, b='x')`.

    Args:
      target: an id, import path or entry point name.
      kwargs: keyword arguments for its class or factory (Python literals: numbers, strings,
        booleans, None, lists and mappings of them), written in sorted order.

    Returns:
      `target` alone without kwargs, else `target(key=value, ...)`; `make` reads it back.

    Raises:
      ValueError: a key that is not an identifier, or a value that is not a literal.
    """
    if not kwargs:
        return target
    parts = []
    for key in sorted(kwargs):
        value = kwargs[key]
        if not (isinstance(key, str) and key.isidentifier()):
            raise ValueError(f"game {target!r}: keyword {key!r} is not a Python identifier")
        try:
            if ast.literal_eval(repr(value)) != value:
                raise ValueError
        except (ValueError, SyntaxError):
            raise ValueError(f"game {target!r}: keyword {key}={value!r} is not a literal "
                             "(numbers, strings, booleans, null, lists, mappings)") from None
        parts.append(f"{key}={value!r}")
    return f"{target}({', '.join(parts)})"


def _parse(spec: str) -> tuple[str, dict[str, Any]]:
    """(target, kwargs) of a spec string; `target(k=v, ...)` carries keyword arguments."""
    spec = spec.strip()
    if not spec.endswith(")") or "(" not in spec:
        return spec, {}
    target, _, arguments = spec.partition("(")
    try:
        call = ast.parse("f(" + arguments, mode="eval").body
        if not isinstance(call, ast.Call) or call.args or any(k.arg is None
                                                              for k in call.keywords):
            raise ValueError
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (ValueError, SyntaxError):
        raise ValueError(f"game {spec!r}: arguments are written as keyword=literal, e.g. "
                         "mygames:Board(size=4)") from None
    return target.strip(), kwargs


def game_dir(spec: str) -> str:
    """Where the module of a game made from an import path was found.

    Args:
      spec: a spec `make` has resolved in this process.

    Returns:
      The directory to put on `sys.path` to import it again (absolute), or "" for registered,
      pgx and entry-point games, modules of installed packages, and specs not made yet.
    """
    target, kwargs = _parse(spec)
    return _DIRS.get(game_spec(target, kwargs), "")


def make(spec: str, *, search_dirs: Sequence[str | Path] = ()) -> Env:
    """The game a spec names (see the module docstring); one shared instance per spec, so jit
    caches are shared.

    Args:
      spec: a registered id, `pgx:<id>`, an import path `module.sub:Attr` or an entry point
        name of the `azjax.games` group, optionally with keyword arguments `(size=4)`.
      search_dirs: directories to look for a module in when the installed packages lack it,
        before the working directory (a config file's directory, the one a run recorded).

    Returns:
      The shared `Env` instance.

    Raises:
      ValueError: one line: an unknown id; a module that is not found or fails to import (the
        module and its error); a missing attribute (module and attribute); an object that is
        not an `Env` class or factory; a game that fails `envs.check_env` (the check and what
        it says).
    """
    target, kwargs = _parse(spec)
    key = game_spec(target, kwargs)
    if key in _INSTANCES:
        return _INSTANCES[key]
    if target in _REGISTRY:
        env = _build(_REGISTRY[target], kwargs, target)
    elif target.startswith("pgx:"):
        if kwargs:
            raise ValueError(f"game {spec!r}: a pgx game takes no arguments")
        env = _make_pgx(target[4:])
    elif ":" in target:
        obj, _DIRS[key] = _import_attribute(target, search_dirs)
        env = _checked(_build(obj, kwargs, key), key)
    else:
        env = _checked(_build(_entry_point(target), kwargs, key), key)
    _INSTANCES[key] = env
    return env


# ---- pgx -------------------------------------------------------------------------------------

# Longest games of some pgx environments, for self-play's chunking (steps, passes included).
_PGX_GAME_LENGTHS = {"tic_tac_toe": 9, "connect_four": 42, "othello": 130}


def _make_pgx(pgx_id: str) -> Env:
    from azjax.envs.pgx_adapter import from_pgx

    try:
        import pgx
    except ImportError:
        raise ValueError(f"'pgx:{pgx_id}' needs the pgx package (pip install pgx)") from None
    if pgx_id not in pgx.available_envs():
        raise ValueError(f"unknown pgx game {pgx_id!r}; pgx has: "
                         f"{', '.join(pgx.available_envs())}")
    return from_pgx(pgx.make(pgx_id), max_game_length=_PGX_GAME_LENGTHS.get(pgx_id, 0))


# ---- import paths and entry points -----------------------------------------------------------


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _is_missing(error: ModuleNotFoundError, module: str) -> bool:
    """Whether `error` says `module` itself (or a package above it) is not there, rather than
    something the module imports."""
    return error.name is not None and (module == error.name or
                                       module.startswith(error.name + "."))


def _import_from(module: str, directory: str) -> Any:
    """`module` imported with `directory` appended to `sys.path` (kept there when it is found:
    the module may import its neighbours later); None when it is not there."""
    top = module.split(".")[0]
    if not ((Path(directory) / top).is_dir() or (Path(directory) / f"{top}.py").is_file()):
        return None
    added = directory not in sys.path
    if added:
        sys.path.append(directory)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if not _is_missing(error, module):
            raise
        if added:
            sys.path.remove(directory)
        return None


def _import_module(module: str, search_dirs: Sequence[str | Path]) -> Any:
    """The module from the installed packages, else the first of `search_dirs` and the working
    directory that holds it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if not _is_missing(error, module):
            raise
        missing = error.name
    dirs = list(dict.fromkeys(str(Path(d).resolve()) for d in (*search_dirs, os.getcwd()) if d))
    for directory in dirs:
        found = _import_from(module, directory)
        if found is not None:
            return found
    where = ", ".join(dirs[:-1] + [f"the working directory {dirs[-1]}"])
    raise ModuleNotFoundError(f"no module named {missing!r} in the installed packages or in "
                              f"{where}", name=missing)


def _found_in(module: Any) -> str:
    """The `sys.path` entry a module was imported from ("" for an installed distribution's)."""
    from importlib.metadata import packages_distributions

    top_name = module.__name__.split(".")[0]
    if top_name in packages_distributions():
        return ""
    top = sys.modules[top_name]
    if getattr(top, "__file__", None):
        path = Path(top.__file__).resolve()
        return str(path.parent.parent if path.name == "__init__.py" else path.parent)
    locations = list(getattr(top, "__path__", []))  # a namespace package
    return str(Path(locations[0]).resolve().parent) if locations else ""


def _import_attribute(target: str, search_dirs: Sequence[str | Path]) -> tuple[Any, str]:
    """(the object `module:Attr` names, the directory its module was found in)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"game {target!r}: an import path is module:Attr, e.g. "
                         "mygames.othello4:Othello4")
    try:
        module = _import_module(module_name, search_dirs)
    except ModuleNotFoundError as error:
        if error.name is not None and _is_missing(error, module_name):
            raise ValueError(f"cannot import module {module_name!r} (game {target!r}): "
                             f"{error}") from None
        raise ValueError(f"importing module {module_name!r} (game {target!r}) failed: "
                         f"{_first_line(error)}") from None
    except Exception as error:  # the module's own code failed
        raise ValueError(f"importing module {module_name!r} (game {target!r}) failed: "
                         f"{_first_line(error)}") from None
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            where = getattr(module, "__file__", None) or module_name
            raise ValueError(f"module {module_name!r} ({where}) has no attribute {attribute!r} "
                             f"(game {target!r})")
        obj = getattr(obj, part)
    return obj, _found_in(module)


def _entry_point(name: str) -> Any:
    """The object of the `azjax.games` entry point `name`."""
    from importlib.metadata import entry_points

    points = entry_points(group=ENTRY_POINT_GROUP)
    found = [p for p in points if p.name == name]
    if not found:
        installed = sorted({p.name for p in points})
        raise ValueError(
            f"unknown game {name!r}; available games: {', '.join(available())} (and any pgx "
            "game as pgx:<id>, a game of your own as module:Class, or an installed "
            f"{ENTRY_POINT_GROUP} entry point: {', '.join(installed) or 'none installed'})")
    try:
        return found[0].load()
    except Exception as error:
        raise ValueError(f"entry point {name!r} ({found[0].value}, group {ENTRY_POINT_GROUP}) "
                         f"does not load: {_first_line(error)}") from None


def _short(obj: Any) -> str:
    """`42 (an int)`: an object's repr, cut short, and its type."""
    text = repr(obj)
    text = text if len(text) <= 40 else text[:37] + "..."
    name = type(obj).__name__
    return f"{text} ({'an' if name[0] in 'aeiou' else 'a'} {name})"


def _build(obj: Any, kwargs: dict[str, Any], label: str) -> Env:
    """The `Env` that `obj` (an instance, an `Env` subclass or a factory) gives."""
    if isinstance(obj, Env) and not kwargs:
        return obj
    if isinstance(obj, type) and not issubclass(obj, Env):
        raise ValueError(f"game {label!r}: {obj.__module__}.{obj.__qualname__} is a class but "
                         "not a subclass of envs.Env")
    if not callable(obj):
        raise ValueError(f"game {label!r} names {_short(obj)}, not a subclass of envs.Env or "
                         "a function returning one")
    try:
        env = obj(**kwargs)
    except Exception as error:
        raise ValueError(f"game {label!r}: building it raised {_first_line(error)}") from None
    if not isinstance(env, Env):
        raise ValueError(f"game {label!r}: its factory returned {_short(env)}, not an envs.Env")
    return env


def _failed_check(error: BaseException) -> str:
    """The innermost public check of `azjax.envs.conformance` the error passed through."""
    from azjax.envs import conformance

    names = []
    traceback = error.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code.co_filename == conformance.__file__ and not code.co_name.startswith("_"):
            names.append(code.co_name)
        traceback = traceback.tb_next
    return names[-1] if names else "check_env"


def _checked(env: Env, spec: str) -> Env:
    """`env` once it passes `check_env`."""
    from azjax.envs.conformance import check_env

    try:
        check_env(env)
    except Exception as error:
        what = (str(error).strip().splitlines() or [""])[0] if isinstance(
            error, AssertionError) else _first_line(error)
        raise ValueError(f"game {spec!r} fails envs.{_failed_check(error)}: {what}") from None
    return env
