"""Endgame tables in the search: the lines that reach a position the game's table knows end
there with its exact result, and a root the table solves plays the table's move.

Engines do the same with their endgame databases. The table (`Env.endgame_adjudicator`;
draughts: `azjax.envs.draughts_endings`, solved from the rules) turns a live position into a
finished one, so the tree backs its exact value up, and the solver (`search.solver`) proves
it. At the root the search alone would not convert a won ending: every winning move is worth
about the same to it, and a game that wanders meets the forty-move rule or a repetition;
`table_root_actions` plays the quickest win and the longest resistance instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.config import SearchConfig
from azjax.envs.core import Env

__all__ = ["endgame_adjudicator", "table_root_actions"]


def endgame_adjudicator(env: Env, config: SearchConfig) -> Callable | None:
    """`env`'s `Env.endgame_adjudicator` of `config.endgame_table` pieces, or None when the
    search reads no table; ValueError in one line for a game without one."""
    if not config.endgame_table:
        return None
    try:
        return env.endgame_adjudicator(config.endgame_table)
    except NotImplementedError as error:
        raise ValueError(f"search.endgame_table: {error}") from None


def table_root_actions(env: Env, adjudicate: Callable):
    """`table_actions(states [B]) -> (known bool [B], action int32 [B])`: where a root's every
    legal move leads to a finished game or a position the endgame table knows, the move with
    the best exact result (the quickest win, the longest resistance); elsewhere known is
    False (a root beyond the table, or one with a capture that goes on)."""

    def one(state: Any) -> tuple[jax.Array, jax.Array]:
        children = jax.vmap(lambda a: adjudicate(env.step(state, a)))(
            jnp.arange(env.num_actions, dtype=jnp.int32))
        legal = state.legal_action_mask
        settled = children.terminated | children.truncated
        value = children.rewards[:, state.current_player]
        live = ~(state.terminated | state.truncated)
        known = live & jnp.all(settled | ~legal)
        return known, jnp.argmax(jnp.where(legal, value, -jnp.inf)).astype(jnp.int32)

    return jax.vmap(one)
