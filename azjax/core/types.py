"""Pytrees shared across modules, and the shape legend used in every docstring.

Shape legend: B batch (games or samples), T time (steps in a chunk), A actions,
N simulations, C replay capacity, S symmetries; `*obs` is the game's observation shape.
"""

from __future__ import annotations

import jax
from flax import struct

__all__ = ["Positions"]


@struct.dataclass
class Positions:
    """Training positions, any leading shape (e.g. [T, B] from self-play, [C] in the buffer)."""

    observation: jax.Array  # float32 [..., *obs], from the view of the player to move
    policy: jax.Array  # float32 [..., A], search policy target
    value: jax.Array  # float32 [...], final result for the player to move, in [-1, 1]
    value_mask: jax.Array  # bool [...], False where the value target is unknown or excluded
    # float32 [...], the game's final material difference for the player to move
    # (`Env.material`), under `value_mask`; None when the run has no material head
    material: jax.Array | None = None
    # float32 [..., A], the search policy of the next position of the same game (the
    # reply-policy head's target); all zeros where there is none (the game ended here, or a
    # fast search of playout-cap randomisation left none); None without that head
    reply_policy: jax.Array | None = None
    # float32 [...], the short-horizon value for the player to move (`short_value_targets`),
    # under `value_mask`; None without the short-value head
    short_value: jax.Array | None = None
