"""Value targets from self-play step records, across chunk boundaries.

The window is the previous chunk's records followed by this chunk's ([2T, B]). A backward scan
carries, per game slot, the result of the game that a position belongs to; `done` separates
consecutive games in a slot (finished games reset in place). z for a position is that result
for the player who was to move there — never assuming alternation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from azjax.types import Positions

__all__ = ["StepRecord", "emit_positions", "value_targets"]


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


def value_targets(records: StepRecord) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Backward scan over [T, B] records.

    Returns:
      z: float32 [T, B], the game's final reward for the player to move at each position;
      finished: bool [T, B], whether that game ended within the records;
      known: bool [T, B], whether it ended with a result (not truncated).
    """
    batch = records.player.shape[1]

    def back(carry, record):
        outcome, finished, known = carry
        outcome = jnp.where(record.done[:, None], record.rewards, outcome)
        finished = finished | record.done
        known = jnp.where(record.done, ~record.truncated, known)
        z = jnp.take_along_axis(outcome, record.player[:, None], axis=1)[:, 0]
        return (outcome, finished, known), (z, finished, known)

    init = (jnp.zeros((batch, 2), jnp.float32), jnp.zeros((batch,), jnp.bool_),
            jnp.zeros((batch,), jnp.bool_))
    _, (z, finished, known) = jax.lax.scan(back, init, records, reverse=True)
    return z, finished, known


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
    window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), previous, current)
    z, finished, known = value_targets(window)
    length = previous.player.shape[0]
    already = jnp.concatenate([previous_emitted, jnp.zeros_like(previous_emitted)])
    emit = window.valid & finished & ~already
    positions = Positions(
        observation=window.observation,
        policy=window.policy,
        value=(1.0 - search_value_weight) * z + search_value_weight * window.search_value,
        value_mask=known & ~window.in_opening,
    )
    # Game by game ([B, 2T] flattened): a device holding some of the games then holds a
    # contiguous block of the positions, in the order one device would emit them.
    flat = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape(-1, *x.shape[2:]), positions)
    return flat, jnp.swapaxes(emit, 0, 1).reshape(-1), emit[length:]
