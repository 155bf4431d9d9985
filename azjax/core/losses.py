"""AlphaZero's loss: value MSE + policy cross-entropy (L2 lives in the optimizer, via optax),
plus, with a material head, its MSE to the game's final material."""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from azjax.core.network import ApplyFn
from azjax.core.types import Positions

__all__ = ["alphazero_loss"]


def alphazero_loss(params: Any, apply_fn: ApplyFn, batch: Positions, *,
                   value_loss_weight: float = 1.0, material_loss_weight: float = 0.0
                   ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """AlphaZero's loss of the network on a batch of training positions.

    (z - v)^2 averaged over the positions with a value target (`value_mask`), plus
    -pi . log p averaged over those with a policy target (pi summing to 1; an all-zero pi, from
    a fast search of playout-cap randomisation, has none). A batch that carries material
    targets adds `material_loss_weight` x (m - m_hat)^2 of the material head
    (`apply_fn(..., auxiliary=True)`), averaged under `value_mask` as the value.

    Args:
      params: the network's parameters (differentiated).
      apply_fn: the network (`azjax.core.network.make_network`).
      batch: `Positions` [B]: observation float32 [B, *obs], policy float32 [B, A], value
        float32 [B], value_mask bool [B], material float32 [B] or None.
      value_loss_weight: the value term's weight; material_loss_weight: the material term's.

    Returns:
      (loss float32 [], metrics: a dict of float32 [] by name, with `loss/material` when the
      batch carries material targets).
    """
    chex.assert_rank(batch.policy, 2)
    size = batch.policy.shape[0]
    chex.assert_shape([batch.value, batch.value_mask], (size,))
    chex.assert_tree_shape_prefix(batch, (size,))
    variables = {"params": params}
    if batch.material is not None:
        logits, value, heads = apply_fn(variables, batch.observation, train=True, auxiliary=True)
    else:
        logits, value = apply_fn(variables, batch.observation, train=True)
    chex.assert_shape(logits, batch.policy.shape)
    chex.assert_shape(value, (size,))
    log_p = jax.nn.log_softmax(logits)
    policy_loss = _cross_entropy(batch.policy, log_p)
    mask = batch.value_mask.astype(jnp.float32)
    value_count = jnp.maximum(mask.sum(), 1.0)
    value_loss = jnp.sum(mask * (batch.value - value) ** 2) / value_count
    # The target policy's own entropy: policy_loss - target_entropy = KL(target || net).
    target_entropy = -jnp.sum(jnp.where(batch.policy > 0, batch.policy * jnp.log(batch.policy),
                                        0.0)) / _target_count(batch.policy)
    close = jnp.abs(batch.value - value) < 0.5
    metrics = {
        "loss/value": value_loss,
        "loss/policy": policy_loss,
        "loss/policy_kl": policy_loss - target_entropy,
        "policy/entropy": -jnp.sum(jnp.exp(log_p) * log_p, axis=-1).mean(),
        "value/within_half": jnp.sum(mask * close) / value_count,
        "value/mean_abs": jnp.abs(value).mean(),
    }
    loss = policy_loss + value_loss_weight * value_loss
    if batch.material is not None:
        chex.assert_equal_shape([batch.material, heads["material"]])
        material_loss = jnp.sum(mask * (batch.material - heads["material"]) ** 2) / value_count
        metrics["loss/material"] = material_loss
        loss = loss + material_loss_weight * material_loss
    return loss, metrics


def _target_count(policy: jax.Array) -> jax.Array:
    """float32 []: the positions of `policy` [B, A] with a target (summing to 1), at least 1."""
    return jnp.maximum(jnp.sum(jnp.sum(policy, axis=-1) > 0.5), 1.0)


def _cross_entropy(policy: jax.Array, log_p: jax.Array) -> jax.Array:
    """-pi . log p averaged over the positions with a target: policy, log_p float32 [B, A]."""
    return -jnp.sum(policy * log_p) / _target_count(policy)
