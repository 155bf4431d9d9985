"""A small typed registry of games: `make(id)` and `available()`."""

from __future__ import annotations

from collections.abc import Callable

from envs.connect_four import ConnectFour
from envs.core import Env
from envs.tic_tac_toe import TicTacToe

__all__ = ["available", "make", "register"]

_REGISTRY: dict[str, Callable[[], Env]] = {
    "tic_tac_toe": TicTacToe,
    "connect_four": ConnectFour,
}
_INSTANCES: dict[str, Env] = {}


def register(game_id: str, factory: Callable[[], Env]) -> None:
    """Adds a game under `game_id`; raises ValueError if the id is taken."""
    if game_id in _REGISTRY:
        raise ValueError(f"a game is already registered as {game_id!r}")
    _REGISTRY[game_id] = factory


def available() -> tuple[str, ...]:
    """The registered game ids, sorted."""
    return tuple(sorted(_REGISTRY))


def make(game_id: str) -> Env:
    """The game registered as `game_id` (one shared instance per id, so jit caches are shared).

    Raises:
      ValueError: for an unknown id, listing the available games.
    """
    if game_id not in _REGISTRY:
        raise ValueError(f"unknown game {game_id!r}; available games: {', '.join(available())}")
    if game_id not in _INSTANCES:
        _INSTANCES[game_id] = _REGISTRY[game_id]()
    return _INSTANCES[game_id]
