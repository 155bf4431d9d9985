"""Pure-functional two-player board games for azjax (jit- and vmap-able).

`make(spec)` gives a game: a registered id, `pgx:<id>`, an import path `module:Class` or an
entry point of the `azjax.games` group (`azjax.envs.registry`); `register(id, factory)` adds an id,
`@game_factory` marks a function an import path may name, `trust_game_code()` lets a model or
run dir import its game's module from where it says, `from_pgx` wraps a pgx game, `check_env`
tests a game against the contract of `Env` (`azjax/envs/core.py`).
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
from azjax.envs.registry import (
    ENTRY_POINT_GROUP,
    available,
    game_code_trusted,
    game_dir,
    game_factory,
    game_spec,
    make,
    register,
    trust_game_code,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "BoardView",
    "Cell",
    "Env",
    "GameState",
    "available",
    "check_env",
    "from_pgx",
    "game_code_trusted",
    "game_dir",
    "game_factory",
    "game_spec",
    "jitted_step",
    "make",
    "play_moves",
    "random_positions",
    "register",
    "trust_game_code",
    "winner_of",
]
