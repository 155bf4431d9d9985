"""Pure-functional two-player board games for azjax (jit- and vmap-able).

`make(id)` gives a registered game, `register(id, factory)` adds one, `from_pgx` wraps a pgx
game, `check_env` tests a game against the contract of `Env` (`envs/core.py`).
"""

from envs.conformance import check_env
from envs.core import (
    BoardView,
    Cell,
    Env,
    GameState,
    jitted_step,
    play_moves,
    random_positions,
    winner_of,
)
from envs.pgx_adapter import from_pgx
from envs.registry import available, make, register

__all__ = [
    "BoardView",
    "Cell",
    "Env",
    "GameState",
    "available",
    "check_env",
    "from_pgx",
    "jitted_step",
    "make",
    "play_moves",
    "random_positions",
    "register",
    "winner_of",
]
