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

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.config import SearchConfig
from azjax.envs.core import Env

__all__ = ["endgame_adjudicator", "table_root_actions"]


def endgame_adjudicator(env: Env, config: SearchConfig) -> Callable | None:
    """`env`'s `Env.endgame_adjudicator` of `config.endgame_table` pieces, or None when the
    search reads no table; ValueError in one line for a game without one. One adjudicator per
    env and size, so the search, its engine and self-play compiled together hold one copy of
    the table's arrays."""
    if not config.endgame_table:
        return None
    return _adjudicator(env, config.endgame_table)


@functools.cache
def _adjudicator(env: Env, pieces: int) -> Callable:
    try:
        return env.endgame_adjudicator(pieces)
    except NotImplementedError as error:
        raise ValueError(f"search.endgame_table: {error}") from None


def table_root_actions(env: Env, adjudicate: Callable):
    """`table_actions(states [B]) -> (known bool [B], action int32 [B])`: where a root is in
    the endgame table and its every legal move leads to a finished game or a position the
    table knows, the move with the best exact result (the quickest win, the longest
    resistance); elsewhere known is False (a root beyond the table, or one whose capture goes
    on). A batch with no root in the table steps no child (one `lax.cond`)."""

    def one(state: Any) -> tuple[jax.Array, jax.Array]:
        children = jax.vmap(lambda a: adjudicate(env.step(state, a)))(
            jnp.arange(env.num_actions, dtype=jnp.int32))
        legal = state.legal_action_mask
        settled = children.terminated | children.truncated
        value = children.rewards[:, state.current_player]
        return jnp.all(settled | ~legal), jnp.argmax(
            jnp.where(legal, value, -jnp.inf)).astype(jnp.int32)

    def in_table(state: Any) -> jax.Array:
        live = ~(state.terminated | state.truncated)
        return live & adjudicate(state).terminated

    def table_actions(states: Any) -> tuple[jax.Array, jax.Array]:
        solved = jax.vmap(in_table)(states)
        batch = solved.shape[0]
        known, action = jax.lax.cond(
            jnp.any(solved), jax.vmap(one),
            lambda _: (jnp.zeros(batch, bool), jnp.zeros(batch, jnp.int32)), states)
        return solved & known, action

    return table_actions
