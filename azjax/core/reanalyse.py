"""Reanalysis (MuZero Reanalyse, EfficientZero): stored positions searched again with the
current network, their policy and value targets refreshed in the replay buffer.

A buffer whose positions carry their env state and outcome (`Positions.state`,
`Positions.outcome`; `init_selfplay(..., states=True)`) can be reanalysed: `reanalyse` draws
positions from the replay window as training does, runs one batched search over them without
root noise (the targets are the search's best estimate; noise is for exploring the moves played,
and Dirichlet noise would bias puct's visit counts), and writes the search's policy and the
value (1 - w) z + w q back into their slots, so the refreshed targets persist. Positions without
a known outcome keep their value mask (and their old value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp

from azjax.core import replay as replay_lib

__all__ = ["reanalyse"]


def reanalyse(search_fn: Callable[..., Any], variables: Any, buffer: replay_lib.ReplayBuffer,
              key: chex.PRNGKey, window: jax.Array | int, *, count: int, num_simulations: int,
              value_weight: float):
    """Searches `count` positions of the replay window again and refreshes their targets.

    Args:
      search_fn: `azjax.core.search.make_search(...)`'s function, over the stored states' game.
      variables: the network's variables, `{"params": ...}`.
      buffer: a buffer whose positions carry `state` and `outcome`, C slots.
      key: PRNG key: `split(key)` gives the draw's key (`replay.sample_slots`) and the search's.
      window: int32 [], the newest positions to draw from (`replay.window_size`).
      count: N, positions to reanalyse (drawn uniformly, with replacement).
      num_simulations: the search's simulations per position.
      value_weight: w, the refreshed value target is (1 - w) z + w q_fresh.

    Returns:
      (buffer, positions, slots, metrics): the buffer with the refreshed targets written into
      `slots` (int32 [N], the slots drawn); `positions` the refreshed `Positions` [N] (their
      `state` and `outcome` dropped, as a training batch has them); metrics: positions,
      network_evaluations (N x (1 + simulations)), policy_change (mean total-variation distance
      between the old and new policy targets, over positions that had one) and value_change
      (mean |new - old value| over positions with a value target).

    Raises:
      ValueError: if the buffer's positions carry no env states.
    """
    if buffer.positions.state is None or buffer.positions.outcome is None:
        raise ValueError("reanalysis needs a buffer that stores env states and outcomes "
                         "(init_selfplay(..., states=True))")
    k_draw, k_search = jax.random.split(key)
    slots = replay_lib.sample_slots(buffer, k_draw, count, window)
    old = replay_lib.gather(buffer, slots)
    out = search_fn(variables, k_search, old.state, noise=False,
                    num_simulations=num_simulations)
    chex.assert_equal_shape([out.policy, old.policy])
    fresh_value = (1.0 - value_weight) * old.outcome + value_weight * out.value
    new = old.replace(policy=out.policy,
                      value=jnp.where(old.value_mask, fresh_value, old.value))
    buffer = replay_lib.write(buffer, slots, new)
    had_policy = (jnp.sum(old.policy, axis=-1) > 0.5).astype(jnp.float32)
    change = 0.5 * jnp.sum(jnp.abs(new.policy - old.policy), axis=-1)
    masked = old.value_mask.astype(jnp.float32)
    metrics = {
        "positions": jnp.int32(count),
        "network_evaluations": jnp.int32(count * (1 + num_simulations)),
        "policy_change": jnp.sum(had_policy * change) / jnp.maximum(jnp.sum(had_policy), 1.0),
        "value_change": (jnp.sum(masked * jnp.abs(new.value - old.value))
                         / jnp.maximum(jnp.sum(masked), 1.0)),
    }
    return buffer, new.training_view(), slots, metrics
