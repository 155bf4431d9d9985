"""Pure-functional two-player board games for azjax (jit- and vmap-able).

`make(spec)` gives a game: a registered id, `pgx:<id>`, an import path `module:Class` or an
entry point of the `azjax.games` group (`azjax.envs.registry`); `register(id, factory)` adds an id,
`from_pgx` wraps a pgx game, `check_env` tests a game against the contract of `Env`
(`azjax/envs/core.py`).
"""

from azjax.envs.conformance import check_env
from azjax.envs.core import (
    BoardView,
    Cell,
    Env,
    GameState,
    jitted_step,
    play_moves,
    random_positions,
    winner_of,
)
from azjax.envs.pgx_adapter import from_pgx
from azjax.envs.registry import ENTRY_POINT_GROUP, available, game_dir, game_spec, make, register

__all__ = [
    "ENTRY_POINT_GROUP",
    "BoardView",
    "Cell",
    "Env",
    "GameState",
    "available",
    "check_env",
    "from_pgx",
    "game_dir",
    "game_spec",
    "jitted_step",
    "make",
    "play_moves",
    "random_positions",
    "register",
    "winner_of",
]
