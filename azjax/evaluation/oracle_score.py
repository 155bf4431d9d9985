"""Scoring players against perfect-play oracles: the one error count and the one metrics
summary that training's evaluator and `azjax eval` both report.

An error is a move outside the position's value-preserving set (`oracle.wrong_moves`).
Shape legend: P positions, A actions, S oracle sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from azjax.envs.core import GameState
from azjax.evaluation.baselines import Player
from azjax.evaluation.oracle import OracleSet, wrong_moves

__all__ = ["count_oracle_errors", "error_percent", "oracle_error_metrics", "oracle_errors",
           "stack_oracle_sets"]


def count_oracle_errors(player: Player, key: jax.Array, states: GameState,
                        preserving: jax.Array, set_index: jax.Array | None = None,
                        num_sets: int = 1) -> jax.Array:
    """How many positions of each set get a move from `player` that is an error. Traceable.

    Args:
      player: ``act(key, states[P]) -> int32 [P]``, called once on all P positions.
      key: the player's key.
      states: the positions, a batched State [P].
      preserving: bool [P, A], the value-preserving moves of each position.
      set_index: int32 [P], the set each position belongs to (default: all in set 0).
      num_sets: S (static).

    Returns:
      int32 [S]: error counts (counts, not float means: 0 must be exactly 0).
    """
    chex.assert_rank(preserving, 2)
    num_positions = preserving.shape[0]
    chex.assert_shape(states.legal_action_mask, preserving.shape)
    if set_index is None:
        set_index = jnp.zeros(num_positions, jnp.int32)
    chex.assert_shape(set_index, (num_positions,))
    wrong = wrong_moves(preserving, player(key, states))
    return jax.ops.segment_sum(wrong.astype(jnp.int32), set_index, num_segments=num_sets)


def oracle_errors(player: Player, key: jax.Array, states: GameState,
                  preserving: jax.Array) -> jax.Array:
    """int32 []: `count_oracle_errors` over one set (states [P], preserving bool [P, A])."""
    return count_oracle_errors(player, key, states, preserving)[0]


def stack_oracle_sets(sets: Mapping[str, OracleSet], limit: int | None = None
                      ) -> tuple[GameState, jax.Array, jax.Array, dict[str, int]]:
    """All sets (each cut to its first `limit` positions) as one batch, to score them in one
    call of each player instead of one per set.

    Returns:
      (states [P], preserving bool [P, A], set_index int32 [P] in set order,
      {set name: its count of positions}).
    """
    named = list(sets.items())
    states = jax.tree.map(lambda *xs: jnp.concatenate([x[:limit] for x in xs]),
                          *[oracle.states for _, oracle in named])
    preserving = jnp.concatenate([oracle.preserving[:limit] for _, oracle in named])
    sizes = [oracle.preserving[:limit].shape[0] for _, oracle in named]
    set_index = jnp.repeat(jnp.arange(len(named)), jnp.array(sizes),
                           total_repeat_length=sum(sizes))
    return states, preserving, set_index, {name: n for (name, _), n in zip(named, sizes,
                                                                             strict=True)}


def error_percent(count: Any, num_positions: int) -> float:
    """An error count over `num_positions` positions, in percent."""
    return 100 * int(count) / num_positions


def oracle_error_metrics(raw_errors: Mapping[str, float],
                         search_errors: Mapping[str, float]) -> dict[str, float]:
    """The run's oracle metrics from per-set error percentages (`error_percent`) of the raw
    network and of search: ``eval/oracle/raw_error`` and ``search_error`` (means over the
    sets), plus ``eval/oracle/set/<name>/raw`` and ``.../search`` when there are several."""
    metrics: dict[str, float] = {}
    if len(raw_errors) > 1:
        for name in raw_errors:
            metrics[f"eval/oracle/set/{name}/raw"] = raw_errors[name]
            metrics[f"eval/oracle/set/{name}/search"] = search_errors[name]
    metrics["eval/oracle/raw_error"] = float(np.mean(list(raw_errors.values())))
    metrics["eval/oracle/search_error"] = float(np.mean(list(search_errors.values())))
    return metrics
