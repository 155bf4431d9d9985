"""Counter-based random numbers by hashing, for arenas, baselines, oracle players and the
alpha-beta search.

Each threefry call site (`jax.random`) adds XLA compile time, and threefry inside the search's
loops runs slower than one integer hash: the players and arenas of `azjax.evaluation` and
`azjax.core.alphabeta` draw their randomness from `hash32` of a seed and a counter instead.
`position_hash` keys the alpha-beta search's transposition table.
Shape legend: A actions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["derive_key", "hash32", "hash_choice", "hash_seeds", "position_hash"]

_DERIVED_FIELDS = ("legal_action_mask", "rewards", "step_count")  # not part of a position


def hash32(seed: jax.Array, counter: jax.Array) -> jax.Array:
    """A counter-based hash (murmur3's finaliser) of (seed, counter).

    Args:
      seed: uint32, any shape broadcasting with `counter`.
      counter: an integer array (cast to uint32).

    Returns:
      uint32 of the broadcast shape.
    """
    x = seed ^ (counter.astype(jnp.uint32) * jnp.uint32(0x9E3779B9))
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def hash_seeds(key: jax.Array, num: int) -> jax.Array:
    """Independent 32-bit seeds derived from `key` by `hash32`.

    The key's raw words (already well mixed by `jax.random.split` / `fold_in`) are hashed.

    Args:
      key: a PRNG key (typed or raw uint32 words).
      num: how many seeds (static).

    Returns:
      uint32 [num].
    """
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    words = jnp.asarray(key).astype(jnp.uint32).reshape(-1)
    seed = jnp.uint32(0x243F6A88)
    for i in range(words.shape[0]):
        seed = hash32(seed ^ words[i], jnp.uint32(i + 1))
    return hash32(seed, jnp.arange(num, dtype=jnp.uint32))


def derive_key(key: jax.Array, counter: jax.Array) -> jax.Array:
    """A new key for `counter`, by `hash32` (no threefry compile).

    Args:
      key: a PRNG key (typed or raw uint32 words).
      counter: an integer scalar array; distinct counters give independent keys.

    Returns:
      A key of `key`'s kind and shape.
    """
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else jnp.asarray(key)
    num = math.prod(data.shape)
    ids = counter.astype(jnp.uint32) * jnp.uint32(num) + jnp.arange(num, dtype=jnp.uint32)
    words = hash32(hash_seeds(key, 1)[0], ids).reshape(data.shape)
    if typed:
        return jax.random.wrap_key_data(words, impl=jax.random.key_impl(key))
    return words.astype(data.dtype)


def hash_choice(seed: jax.Array, counter: jax.Array, mask: jax.Array) -> jax.Array:
    """A uniformly random index where `mask` is True: each index gets an independent 32-bit
    hash and the largest masked one wins.

    Args:
      seed: uint32 [].
      counter: an integer scalar array; distinct counters give independent choices.
      mask: bool [A], at least one True (else index 0).

    Returns:
      int32 [].
    """
    num = mask.shape[-1]
    ids = counter.astype(jnp.uint32) * jnp.uint32(num) + jnp.arange(num, dtype=jnp.uint32)
    noise = (hash32(seed, ids) >> 1).astype(jnp.int32)  # in [0, 2**31)
    return jnp.argmax(jnp.where(mask, noise, -1)).astype(jnp.int32)


def position_hash(state: Any) -> jax.Array:
    """uint32 [2]: two independent 32-bit hashes of one position: every field of the state but
    the ones derived from the others (the legal mask, the last step's rewards, the step count).
    """
    if dataclasses.is_dataclass(state):
        fields = [getattr(state, f.name) for f in dataclasses.fields(state)
                  if f.name not in _DERIVED_FIELDS]
    else:
        fields = jax.tree.leaves(state)
    words = jnp.concatenate([_as_words(leaf) for leaf in jax.tree.leaves(fields)])
    index = jnp.arange(words.shape[0], dtype=jnp.uint32)
    hashes = []
    for seed in (0x9E3779B9, 0x7F4A7C15):
        mixed = hash32(hash32(jnp.uint32(seed), index), words)
        hashes.append(jax.lax.reduce(mixed, np.uint32(0), jax.lax.bitwise_xor, (0,)))
    return jnp.stack(hashes)


def _as_words(leaf: jax.Array) -> jax.Array:
    """uint32 [n]: a leaf's values as 32-bit words (floats by their bits)."""
    flat = jnp.ravel(leaf)
    if jnp.issubdtype(flat.dtype, jnp.floating):
        return jax.lax.bitcast_convert_type(flat.astype(jnp.float32), jnp.uint32)
    return flat.astype(jnp.uint32)
