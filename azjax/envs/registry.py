"""Games by name: `make(spec)` resolves a game spec to one shared `Env`, `register(id, factory)`
adds an id, `available()` lists the ids.

A spec is, tried in this order:
  1. a registered id (`tic_tac_toe`, `connect_four`, `draughts`, ... and `register`'s);
  2. `pgx:<id>`, pgx's game `<id>` wrapped with `envs.from_pgx` (needs the pgx package);
  3. an import path `module.sub:Attr`: a subclass of `Env` (called with the spec's keyword
     arguments), an `Env` instance, or a game factory: a function marked with
     `@envs.game_factory` or passed to `envs.register`. Any other object (a plain function, a
     builtin such as `os:system`) is refused without being called;
  4. the name of an entry point in the `azjax.games` group, whose object the installed package
     declared a game (a class or a factory), so that a package ships games without touching
     azjax.
Keyword arguments follow in call syntax, `mygames.othello4:Othello4(size=4)`, as Python
literals (`game_spec` writes that form from a mapping). A module is looked up in the installed
packages (`sys.path`), then in the directories the caller names (a config file's own), then in
the working directory; a directory where it is found joins `sys.path` from then on.

Trust: importing a module runs its code. `make(spec, trusted=False)` (what loading a model or
a run dir uses) imports only modules that are already imported or that Python finds without
azjax's help, outside the working directory (installed packages, `PYTHONPATH`); a module found
only in `search_dirs` or the working directory is refused in one line that says how to allow
it: `trust_game_code()` around the load, `trust_game=True` in Python or `--trust-game` on the
command line.

A game from an import path or an entry point is imported, built and checked with
`envs.check_env` at its first `make` (once per process); every failure is a `ValueError` of one
line that names the module, the attribute or the check.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from azjax.envs.connect_four import ConnectFour
from azjax.envs.core import Env
from azjax.envs.draughts import Draughts
from azjax.envs.tic_tac_toe import TicTacToe

__all__ = ["ENTRY_POINT_GROUP", "available", "game_code_trusted", "game_dir", "game_factory",
           "game_spec", "make", "register", "trust_game_code"]

ENTRY_POINT_GROUP = "azjax.games"

_REGISTRY: dict[str, Callable[[], Env]] = {
    "tic_tac_toe": TicTacToe,
    "connect_four": ConnectFour,
    "draughts": Draughts,
    "draughts_tactics": lambda **rules: Draughts(planes="tactics", **rules),
}
_INSTANCES: dict[str, Env] = {}
_DIRS: dict[str, str] = {}  # spec -> the directory its module was found in ("" if installed)
# The game factories an import path may name: id -> the function (kept, so ids stay unique).
_FACTORIES: dict[int, Callable[..., Env]] = {}
# Directories `make` put on `sys.path` itself: a module there is not installed.
_ADDED_DIRS: set[str] = set()
_TRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar("azjax_trust_game_code",
                                                                default=False)


def register(game_id: str, factory: Callable[[], Env]) -> None:
    """Adds a game, so that `make`, configs (`game: <id>`), `azjax play <id>` and
    `azjax serve` find it. The factory also becomes a game factory that an import path may
    name (`game_factory`).

    Args:
      game_id: the id to register it under.
      factory: builds the game (called once, at its first `make`).

    Raises:
      ValueError: if the id is taken.
    """
    if game_id in _REGISTRY:
        raise ValueError(f"a game is already registered as {game_id!r}")
    _REGISTRY[game_id] = factory
    _FACTORIES[id(factory)] = factory


def game_factory(factory: Callable[..., Env]) -> Callable[..., Env]:
    """Marks a function as a game factory, so that an import path may name it
    (`game: mygames:small_board`, with keyword arguments if it takes some). A decorator:

        @envs.game_factory
        def small_board(size: int = 4) -> Env: ...

    An import path may name only an `Env` subclass, an `Env` instance or a function marked so:
    a model or config naming any other callable (`os:system`) is refused before it is called.

    Args:
      factory: a function returning an `Env`.

    Returns:
      `factory` itself, unchanged.
    """
    _FACTORIES[id(factory)] = factory
    return factory


@contextlib.contextmanager
def trust_game_code(trust: bool = True) -> Iterator[None]:
    """Within the block (this thread or task), loading a model or run dir may import its
    game's module from the directories it names (`make(..., trusted=False)` becomes
    `trusted=True`), running that module's code. The CLI's `--trust-game` sets this around a
    command.

    Args:
      trust: whether to trust; False leaves the block as untrusting as outside it.

    Yields:
      None.
    """
    token = _TRUSTED.set(bool(trust) or _TRUSTED.get())
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def game_code_trusted() -> bool:
    """Whether the caller is inside `trust_game_code()` (models may import their game's
    module from where they say it is)."""
    return _TRUSTED.get()


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
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
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


def make(spec: str, *, search_dirs: Sequence[str | Path] = (), trusted: bool = True) -> Env:
    """The game a spec names (see the module docstring); one shared instance per spec, so jit
    caches are shared.

    Args:
      spec: a registered id, `pgx:<id>`, an import path `module.sub:Attr` or an entry point
        name of the `azjax.games` group, optionally with keyword arguments `(size=4)`.
      search_dirs: directories to look for a module in when the installed packages lack it,
        before the working directory (a config file's directory, the one a run recorded).
      trusted: whether the spec's source may have a module imported from `search_dirs` or
        the working directory (running its code): True for what the user names (a config
        file, a command-line spec); False for what a model or run dir names, unless the user
        said so (`trust_game_code`, which makes it True).

    Returns:
      The shared `Env` instance.

    Raises:
      ValueError: one line: an unknown id; a module that is not found, fails to import, or
        (untrusted) is not installed (how to trust it); a missing attribute (module and
        attribute); an object that is not an `Env` class, instance or game factory; a game
        that fails `envs.check_env` (the check and what it says).
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
        obj, found = _import_attribute(target, search_dirs,
                                       trusted=trusted or game_code_trusted())
        _check_game_object(obj, key)
        env = _checked(_build(obj, kwargs, key), key)
        _DIRS[key] = found
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


def _holds(directory: str, module: str) -> bool:
    """Whether `directory` holds `module`'s top-level package or module file."""
    top = module.split(".")[0]
    return (Path(directory) / top).is_dir() or (Path(directory) / f"{top}.py").is_file()


def _import_from(module: str, directory: str) -> Any:
    """`module` imported with `directory` appended to `sys.path` (kept there when it is found:
    the module may import its neighbours later); None when it is not there."""
    if not _holds(directory, module):
        return None
    added = directory not in sys.path
    if added:
        sys.path.append(directory)
    importlib.invalidate_caches()
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if not _is_missing(error, module):
            raise
        if added:
            sys.path.remove(directory)
        return None
    if added:
        _ADDED_DIRS.add(directory)
    return found


def _installed(module: str) -> bool:
    """Whether importing `module` needs no trust: its top-level package is imported already,
    is an installed distribution's, or Python's import system finds it (without importing
    it) somewhere other than the working directory and the directories `make` put on
    `sys.path` for other games."""
    top = module.split(".")[0]
    if top in sys.modules:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
        where = Path(locations[0]).resolve().parent if locations else None
    elif spec.has_location and spec.origin:
        where = Path(spec.origin).resolve().parent
    else:  # built in or frozen
        return True
    untrusted = {str(Path.cwd().resolve()), *(str(Path(d).resolve()) for d in _ADDED_DIRS)}
    if where is not None and str(where) not in untrusted:
        return True
    from importlib.metadata import packages_distributions

    return top in packages_distributions()  # e.g. an editable install run from its checkout


class _NotTrusted(Exception):
    """A module that only a directory the user did not choose to trust holds."""


def _import_module(module: str, search_dirs: Sequence[str | Path], *, trusted: bool) -> Any:
    """The module from the installed packages, else (`trusted`) the first of `search_dirs`
    and the working directory that holds it.

    Raises:
      ModuleNotFoundError: found nowhere (the message lists where it was looked for).
      _NotTrusted: not trusted, not installed, and found in one of those directories.
    """
    missing = module.split(".")[0]
    installed = _installed(module)
    if trusted or installed:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as error:
            if not _is_missing(error, module):
                raise
            missing = error.name
    dirs = list(dict.fromkeys(str(Path(d).resolve()) for d in (*search_dirs, os.getcwd()) if d))
    for directory in dirs:
        if trusted:
            found = _import_from(module, directory)
            if found is not None:
                return found
        elif not installed and _holds(directory, module):
            raise _NotTrusted(
                f"module {module!r} is not installed but found in {directory}, and importing "
                "it runs its code: if you trust that code, load with trust_game=True "
                "(command line: --trust-game)")
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


def _import_attribute(target: str, search_dirs: Sequence[str | Path], *, trusted: bool
                      ) -> tuple[Any, str]:
    """(the object `module:Attr` names, the directory its module was found in); `trusted` as
    in `_import_module`."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"game {target!r}: an import path is module:Attr, e.g. "
                         "mygames.othello4:Othello4")
    try:
        module = _import_module(module_name, search_dirs, trusted=trusted)
    except ModuleNotFoundError as error:
        if error.name is not None and _is_missing(error, module_name):
            raise ValueError(f"cannot import module {module_name!r} (game {target!r}): "
                             f"{error}") from None
        raise ValueError(f"importing module {module_name!r} (game {target!r}) failed: "
                         f"{_first_line(error)}") from None
    except _NotTrusted as error:
        raise ValueError(f"game {target!r}: {error}") from None
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


def _check_game_object(obj: Any, label: str) -> None:
    """Refuses, before calling anything, what an import path may not name: anything but an
    `Env` subclass, an `Env` instance or a marked game factory (`game_factory`)."""
    if isinstance(obj, Env) or _FACTORIES.get(id(obj)) is obj:
        return
    if isinstance(obj, type):
        if issubclass(obj, Env):
            return
        raise ValueError(f"game {label!r}: {obj.__module__}.{obj.__qualname__} is a class but "
                         "not a subclass of envs.Env")
    raise ValueError(f"game {label!r} names {_short(obj)}, not a subclass of envs.Env or a game "
                     "factory (mark a function returning an Env with @envs.game_factory)")


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
