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
