"""A small typed registry of games: `make(id)` and `available()`."""

from __future__ import annotations

from collections.abc import Callable

from envs.connect_four import ConnectFour
from envs.core import Env
from envs.draughts import Draughts
from envs.tic_tac_toe import TicTacToe

__all__ = ["available", "make", "register"]

_REGISTRY: dict[str, Callable[[], Env]] = {
    "tic_tac_toe": TicTacToe,
    "connect_four": ConnectFour,
    "draughts": Draughts,
    "draughts_tactics": lambda: Draughts(planes="tactics"),
}
_INSTANCES: dict[str, Env] = {}


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


# Longest games of some pgx environments, for self-play's chunking (steps, passes included).
_PGX_GAME_LENGTHS = {"tic_tac_toe": 9, "connect_four": 42, "othello": 130}


def _make_pgx(pgx_id: str) -> Env:
    from envs.pgx_adapter import from_pgx

    try:
        import pgx
    except ImportError:
        raise ValueError(f"'pgx:{pgx_id}' needs the pgx package (pip install pgx)") from None
    if pgx_id not in pgx.available_envs():
        raise ValueError(f"unknown pgx game {pgx_id!r}; pgx has: "
                         f"{', '.join(pgx.available_envs())}")
    return from_pgx(pgx.make(pgx_id), max_game_length=_PGX_GAME_LENGTHS.get(pgx_id, 0))


def make(game_id: str) -> Env:
    """The game registered as `game_id` (one shared instance per id, so jit caches are shared).

    Args:
      game_id: a registered id, or `pgx:<id>` for pgx's game `<id>` wrapped with
        `envs.from_pgx` (needs the pgx package).

    Returns:
      The shared `Env` instance.

    Raises:
      ValueError: for an unknown id, listing the available games.
    """
    if game_id.startswith("pgx:"):
        if game_id not in _INSTANCES:
            _INSTANCES[game_id] = _make_pgx(game_id[4:])
        return _INSTANCES[game_id]
    if game_id not in _REGISTRY:
        raise ValueError(f"unknown game {game_id!r}; available games: {', '.join(available())}"
                         " (and any pgx game as pgx:<id>)")
    if game_id not in _INSTANCES:
        _INSTANCES[game_id] = _REGISTRY[game_id]()
    return _INSTANCES[game_id]
