"""A ring buffer of training positions, kept on device as a pytree of arrays.

`init` allocates `capacity` slots once; `add` writes the masked positions after the newest;
`sample` draws uniformly from the newest `window` positions, where the window grows on a
schedule (a small window early keeps training on the freshest, least-wrong games).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct

from azjax.config import ReplayConfig
from azjax.core.types import Positions

__all__ = ["ReplayBuffer", "add", "init", "sample", "window_size"]


@struct.dataclass
class ReplayBuffer:
    positions: Positions  # [C, ...]
    next_index: jax.Array  # int32 []: the slot the next position goes to
    size: jax.Array  # int32 []: positions stored (<= C)
    total_added: jax.Array  # int32 []: positions ever added (wraps past 2**31; for metrics)


def init(example: Positions, capacity: int) -> ReplayBuffer:
    """An empty buffer shaped like `example` (one position, no leading axis) x capacity."""
    positions = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), example)
    # Separate arrays, not one shared zero: the buffer is donated to jitted calls.
    zero = lambda: jnp.zeros((), jnp.int32)
    return ReplayBuffer(positions=positions, next_index=zero(), size=zero(), total_added=zero())


def add(buffer: ReplayBuffer, positions: Positions, mask: jax.Array) -> ReplayBuffer:
    """Appends `positions[mask]` in order ([N, ...] with mask bool [N]); oldest overwritten.

    If more than C positions are masked in, only the newest C are kept.
    """
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
    """int32 []: how many of the newest positions `sample` draws from at this iteration."""
    if config.window_start <= 0:
        return jnp.int32(config.capacity)
    grown = config.window_start + config.window_growth * jnp.asarray(iteration, jnp.int32)
    return jnp.minimum(grown, config.capacity).astype(jnp.int32)


def sample(buffer: ReplayBuffer, key: chex.PRNGKey, batch_size: int,
           window: jax.Array | int) -> Positions:
    """[batch_size] positions drawn uniformly (with replacement) from the newest `window`."""
    capacity = jax.tree.leaves(buffer.positions)[0].shape[0]
    span = jnp.maximum(jnp.minimum(buffer.size, window), 1)
    offset = jax.random.randint(key, (batch_size,), 0, span)
    index = (buffer.next_index - 1 - offset) % capacity
    return jax.tree.map(lambda x: x[index], buffer.positions)
