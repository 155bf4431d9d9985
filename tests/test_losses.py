"""The AlphaZero loss against a value computed by hand."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from azjax.core.losses import alphazero_loss
from azjax.core.types import Positions


def test_loss_matches_a_hand_computation():
    # A "network" returning fixed logits and values, so the loss is plain arithmetic.
    logits = jnp.array([[0.0, jnp.log(3.0)], [0.0, 0.0]])  # p = [.25, .75], [.5, .5]
    values = jnp.array([0.5, -0.2])
    apply_fn = lambda variables, obs, train=False: (logits, values)
    batch = Positions(
        observation=jnp.zeros((2, 1)),
        policy=jnp.array([[1.0, 0.0], [0.5, 0.5]]),
        value=jnp.array([1.0, 1.0]),
        value_mask=jnp.array([True, False]),  # the second value target is excluded
    )
    loss, metrics = alphazero_loss({}, apply_fn, batch, value_loss_weight=1.0)
    policy_ce = (-np.log(0.25) + -np.log(0.5)) / 2
    value_mse = (1.0 - 0.5) ** 2 / 1  # only the first position counts
    assert float(metrics["loss/policy"]) == pytest.approx(policy_ce, rel=1e-5)
    assert float(metrics["loss/value"]) == pytest.approx(value_mse, rel=1e-5)
    assert float(loss) == pytest.approx(policy_ce + value_mse, rel=1e-5)
    # KL = CE - target entropy; the second target has entropy log 2.
    assert float(metrics["loss/policy_kl"]) == pytest.approx(policy_ce - np.log(2) / 2, rel=1e-5)


def test_positions_without_a_policy_target_are_left_out_of_the_policy_loss():
    # Playout-cap randomisation: a fast search leaves an all-zero policy target; the policy
    # loss averages over the other positions only, the value loss over all of them.
    logits = jnp.array([[0.0, jnp.log(3.0)], [0.0, 0.0], [5.0, -5.0]])
    values = jnp.array([0.5, -0.2, 0.0])
    apply_fn = lambda variables, obs, train=False: (logits, values)
    batch = Positions(
        observation=jnp.zeros((3, 1)),
        policy=jnp.array([[1.0, 0.0], [0.5, 0.5], [0.0, 0.0]]),
        value=jnp.array([1.0, 1.0, -1.0]),
        value_mask=jnp.array([True, True, True]),
    )
    _, metrics = alphazero_loss({}, apply_fn, batch)
    policy_ce = (-np.log(0.25) + -np.log(0.5)) / 2
    value_mse = ((1.0 - 0.5) ** 2 + (1.0 + 0.2) ** 2 + 1.0) / 3
    assert float(metrics["loss/policy"]) == pytest.approx(policy_ce, rel=1e-5)
    assert float(metrics["loss/policy_kl"]) == pytest.approx(policy_ce - np.log(2) / 2, rel=1e-5)
    assert float(metrics["loss/value"]) == pytest.approx(value_mse, rel=1e-5)


def test_the_material_head_adds_its_weighted_mse_under_the_value_mask():
    logits = jnp.zeros((3, 2))
    values = jnp.array([0.5, -0.2, 0.0])
    material_out = jnp.array([0.25, -1.0, 3.0])

    def apply_fn(variables, obs, train=False, auxiliary=False):
        return (logits, values, {"material": material_out}) if auxiliary else (logits, values)

    batch = Positions(
        observation=jnp.zeros((3, 1)),
        policy=jnp.full((3, 2), 0.5),
        value=jnp.array([1.0, 0.0, -1.0]),
        value_mask=jnp.array([True, True, False]),  # the third target is unknown
        material=jnp.array([0.75, -0.5, 0.0]),
    )
    plain, plain_metrics = alphazero_loss({}, apply_fn, batch.replace(material=None))
    assert "loss/material" not in plain_metrics
    loss, metrics = alphazero_loss({}, apply_fn, batch, material_loss_weight=0.4)
    material_mse = ((0.75 - 0.25) ** 2 + (-0.5 + 1.0) ** 2) / 2
    assert float(metrics["loss/material"]) == pytest.approx(material_mse, rel=1e-5)
    assert float(loss) == pytest.approx(float(plain) + 0.4 * material_mse, rel=1e-5)
    assert float(metrics["loss/value"]) == pytest.approx(float(plain_metrics["loss/value"]))

