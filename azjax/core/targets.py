"""Value targets from self-play step records, across chunk boundaries.

The window is the previous chunk's records followed by this chunk's ([2T, B]). A backward scan
carries, per game slot, the result of the game that a position belongs to; `done` separates
consecutive games in a slot (finished games reset in place). z for a position is that result
for the player who was to move there — never assuming alternation. A run with a material head
carries the game's final material the same way (its target: mine minus theirs at the end).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct

from azjax.core.types import Positions
from azjax.envs.core import material_lead

__all__ = ["StepRecord", "emit_positions", "material_targets", "value_targets"]


@struct.dataclass
class StepRecord:
    """One self-play step of every game; leading shape [T, B] in a chunk."""

    observation: jax.Array  # float32 [..., *obs]: the position, mover's view
    policy: jax.Array  # float32 [..., A]: search policy at the position
    search_value: jax.Array  # float32 [...]: the search's value of the position, mover's view
    player: jax.Array  # int32 [...]: player to move at the position
    in_opening: jax.Array  # bool [...]: a random opening move was played here
    rewards: jax.Array  # float32 [..., 2]: rewards of the step taken from the position
    done: jax.Array  # bool [...]: that step ended the game (terminated or truncated)
    truncated: jax.Array  # bool [...]: it ended by truncation (result unknown)
    valid: jax.Array  # bool [...]: a real record (False for the empty initial window)
    # float32 [..., 2]: each player's material after the step (`Env.material`), recorded only
    # for a run with a material head (None otherwise)
    material: jax.Array | None = None


def value_targets(records: StepRecord) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Backward scan over [T, B] records.

    Args:
      records: `StepRecord` [T, B], consecutive steps of B game slots.

    Returns:
      z: float32 [T, B], the game's final reward for the player to move at each position;
      finished: bool [T, B], whether that game ended within the records;
      known: bool [T, B], whether it ended with a result (not truncated).
    """
    z, finished, known, _ = _final_results(records)
    return z, finished, known


def material_targets(records: StepRecord) -> jax.Array:
    """The material difference (`Env.material`) at the end of each position's game.

    Args:
      records: `StepRecord` [T, B] with `material` [T, B, 2].

    Returns:
      float32 [T, B], from the view of the player to move at each position; 0 where the game
      has not ended within the records.

    Raises:
      ValueError: if the records carry no material.
    """
    if records.material is None:
        raise ValueError("the step records carry no material (self-play without material=True)")
    return _final_results(records)[3]


def _final_results(records: StepRecord):
    """One backward scan carrying each slot's final rewards (and material, if recorded) from
    the step that ended its game back to the game's positions: (z, finished, known, material
    difference or None), each [T, B]."""
    chex.assert_rank(records.player, 2)
    chex.assert_equal_shape([records.player, records.done, records.truncated])
    batch = records.player.shape[1]
    with_material = records.material is not None

    def back(carry, record):
        outcome, final_material, finished, known = carry
        outcome = jnp.where(record.done[:, None], record.rewards, outcome)
        if with_material:
            final_material = jnp.where(record.done[:, None], record.material, final_material)
        finished = finished | record.done
        known = jnp.where(record.done, ~record.truncated, known)
        mover = record.player[:, None]
        z = jnp.take_along_axis(outcome, mover, axis=1)[:, 0]
        material = material_lead(final_material, record.player) if with_material else None
        return (outcome, final_material, finished, known), (z, finished, known, material)

    init = (jnp.zeros((batch, 2), jnp.float32),
            jnp.zeros((batch, 2), jnp.float32) if with_material else None,
            jnp.zeros((batch,), jnp.bool_), jnp.zeros((batch,), jnp.bool_))
    _, (z, finished, known, material) = jax.lax.scan(back, init, records, reverse=True)
    return z, finished, known, material


def emit_positions(previous: StepRecord, previous_emitted: jax.Array, current: StepRecord,
                   search_value_weight: float = 0.0):
    """Positions whose game ended by the end of `current`, each emitted exactly once.

    Args:
      previous: StepRecord [T, B], the last chunk; previous_emitted: bool [T, B].
      current: StepRecord [T, B], this chunk.
      search_value_weight: the value target is (1 - w) z + w q, q the search's root value.
        Averaging the two trades z's noise (one sampled game) for q's bias (the network's own
        estimate); w = 0 is AlphaZero's target.

    Returns:
      positions: Positions [B * 2T], game by game; emit: bool [B * 2T]; current_emitted:
      bool [T, B], the current records emitted now (the next call's `previous_emitted`).
    """
    chex.assert_rank(previous.player, 2)
    chex.assert_trees_all_equal_shapes(previous, current)
    chex.assert_shape(previous_emitted, previous.player.shape)
    window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), previous, current)
    z, finished, known, material = _final_results(window)
    length = previous.player.shape[0]
    already = jnp.concatenate([previous_emitted, jnp.zeros_like(previous_emitted)])
    emit = window.valid & finished & ~already
    positions = Positions(
        observation=window.observation,
        policy=window.policy,
        value=(1.0 - search_value_weight) * z + search_value_weight * window.search_value,
        value_mask=known & ~window.in_opening,
        material=material,
    )
    # Game by game ([B, 2T] flattened): a device holding some of the games then holds a
    # contiguous block of the positions, in the order one device would emit them.
    flat = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape(-1, *x.shape[2:]), positions)
    flat_emit = jnp.swapaxes(emit, 0, 1).reshape(-1)
    chex.assert_shape([flat.value, flat.value_mask, flat_emit], (emit.size,))
    chex.assert_shape(flat.policy, (emit.size, current.policy.shape[-1]))
    return flat, flat_emit, emit[length:]
