"""The `alphabeta:D` baseline: `azjax.core.alphabeta`'s search over the game's hand-made
evaluation (`Env.heuristic_value`), the fixed opponent that ratings are anchored to (e.g.
`azjax eval draughts --against alphabeta:6`).
"""

from __future__ import annotations

import functools

import jax

from azjax.core.alphabeta import ENGINE_VERSION, AlphaBetaConfig, alphabeta_search
from azjax.envs.core import Env, GameState
from azjax.evaluation.baselines import Player

__all__ = ["alphabeta_player", "anchor_name"]


def anchor_name(env: Env, depth: int) -> str:
    """The versioned name of an alpha-beta anchor, e.g. `alphabeta:6 (engine 1, draughts-1)`:
    `ENGINE_VERSION` names the search and its defaults, `Env.evaluation_version` the game's
    evaluation, so `alphabeta:6` means the same from release to release."""
    return f"alphabeta:{depth} (engine {ENGINE_VERSION}, {env.evaluation_version})"


@functools.cache
def alphabeta_player(env: Env, depth: int) -> Player:
    """The `alphabeta:D` baseline: `alphabeta_search` to `depth` whole moves with the default
    quiescence and table, its leaves scored by `env.heuristic_value`.

    Args:
      env: the game (its `heuristic_value`; the default scores only results).
      depth: D >= 1.

    Returns:
      ``act(key, states[B]) -> int32 [B]``, memoised per (env, depth).
    """
    config = AlphaBetaConfig(depth=depth)

    def act(key: jax.Array, states: GameState) -> jax.Array:
        """key, states[B] -> int32 [B]."""
        return alphabeta_search(env, key, states, config).action

    return act
