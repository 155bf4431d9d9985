"""Pure-functional two-player board games for azjax (jit- and vmap-able)."""

from envs.conformance import check_env
from envs.core import Env, GameState, jitted_step, play_moves, random_positions
from envs.pgx_adapter import from_pgx
from envs.registry import available, make, register

__all__ = [
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
]
