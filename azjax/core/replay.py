"""A ring buffer of training positions, kept on device as a pytree of arrays.

`init` allocates `capacity` slots once; `add` writes the masked positions after the newest;
`sample` draws uniformly from the newest `window` positions, where the window grows on a
schedule (a small window early keeps training on the freshest, least-wrong games).
`sample_slots` and `gather` are `sample`'s draw and read.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct

from azjax.config import ReplayConfig
from azjax.core.types import Positions

__all__ = ["ReplayBuffer", "add", "gather", "init", "sample", "sample_slots", "window_size"]


@struct.dataclass
class ReplayBuffer:
    """C slots of training positions in ring order, the newest just before `next_index`."""

    positions: Positions  # [C, ...]
    next_index: jax.Array  # int32 []: the slot the next position goes to
    size: jax.Array  # int32 []: positions stored (<= C)
    total_added: jax.Array  # int32 []: positions ever added (wraps past 2**31; for metrics)


def init(example: Positions, capacity: int) -> ReplayBuffer:
    """An empty buffer.

    Args:
      example: one position (`Positions` with no leading axis), for the leaves' shapes and
        dtypes.
      capacity: C, the number of slots.

    Returns:
      A `ReplayBuffer` of C zero positions ([C, ...] per leaf), size 0.
    """
    positions = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), example)
    # Separate arrays, not one shared zero: the buffer is donated to jitted calls.
    zero = lambda: jnp.zeros((), jnp.int32)
    return ReplayBuffer(positions=positions, next_index=zero(), size=zero(), total_added=zero())


def add(buffer: ReplayBuffer, positions: Positions, mask: jax.Array) -> ReplayBuffer:
    """Appends `positions[mask]` in order; the oldest are overwritten.

    Args:
      buffer: the buffer, C slots.
      positions: `Positions` [N], shaped as the buffer's slots past their leading axis.
      mask: bool [N], the positions to keep.

    Returns:
      The buffer with the masked positions after its newest. If more than C positions are
      masked in, only the newest C are kept.
    """
    chex.assert_rank(mask, 1)
    jax.tree.map(lambda new, store: chex.assert_shape(new, (*mask.shape, *store.shape[1:])),
                 positions, buffer.positions)
    capacity = buffer.next_index.dtype.type(jax.tree.leaves(buffer.positions)[0].shape[0])
    count = jnp.sum(mask, dtype=jnp.int32)
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1  # order among the kept positions
    keep = mask & (rank >= count - capacity)
    slot = jnp.where(keep, (buffer.next_index + rank) % capacity, capacity)  # C = dropped

    def write(store, new):
        return store.at[slot].set(new, mode="drop")

    return ReplayBuffer(
        positions=jax.tree.map(write, buffer.positions, positions),
        next_index=(buffer.next_index + count) % capacity,
        size=jnp.minimum(buffer.size + count, capacity),
        total_added=buffer.total_added + count,
    )


def window_size(config: ReplayConfig, iteration: jax.Array | int) -> jax.Array:
    """How many of the newest positions `sample` draws from at this iteration.

    Args:
      config: the replay settings (`window_start`, `window_growth`, `capacity`).
      iteration: int32 [], iterations completed.

    Returns:
      int32 []: `window_start + window_growth x iteration`, at most the capacity; the capacity
      itself when `window_start` is 0.
    """
    if config.window_start <= 0:
        return jnp.int32(config.capacity)
    grown = config.window_start + config.window_growth * jnp.asarray(iteration, jnp.int32)
    return jnp.minimum(grown, config.capacity).astype(jnp.int32)


def sample(buffer: ReplayBuffer, key: chex.PRNGKey, batch_size: int,
           window: jax.Array | int) -> Positions:
    """Positions drawn uniformly (with replacement) from the newest `window` of the buffer.

    Args:
      buffer: the buffer, C slots.
      key: PRNG key for the draw.
      batch_size: B, positions to draw.
      window: int32 [], how many of the newest positions to draw from (`window_size`); the
        whole buffer if it holds fewer.

    Returns:
      `Positions` [B].
    """
    return gather(buffer, sample_slots(buffer, key, batch_size, window))


def sample_slots(buffer: ReplayBuffer, key: chex.PRNGKey, batch_size: int,
                 window: jax.Array | int) -> jax.Array:
    """The slots `sample` reads: int32 [B], drawn as `sample` draws them (same key, same
    slots)."""
    capacity = jax.tree.leaves(buffer.positions)[0].shape[0]
    span = jnp.maximum(jnp.minimum(buffer.size, window), 1)
    offset = jax.random.randint(key, (batch_size,), 0, span)
    return (buffer.next_index - 1 - offset) % capacity


def gather(buffer: ReplayBuffer, slots: jax.Array) -> Positions:
    """The positions in `slots` (int32 [B]): `Positions` [B]."""
    chex.assert_rank(slots, 1)
    batch = jax.tree.map(lambda x: x[slots], buffer.positions)
    chex.assert_tree_shape_prefix(batch, slots.shape)
    return batch
