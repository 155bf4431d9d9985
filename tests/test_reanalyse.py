"""Reanalysis: stored positions searched again with the current network, targets refreshed."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from azjax import envs
from azjax.config import (
    BudgetConfig,
    CheckpointConfig,
    ConfigError,
    ReanalyseConfig,
    SelfPlayConfig,
    TrainConfig,
)
from azjax.core.learner import Learner
from azjax.core.reanalyse import reanalyse
from azjax.core.search import make_network_search

TRAIN = TrainConfig(batch_size=16, updates_per_iteration=4, updates_per_call=2)
PLAY = SelfPlayConfig(batch_size=8, temperature_moves=9, random_opening_prob=0.5,
                      random_opening_max_moves=2, search_value_weight=0.25)


def _config(**reanalyse):
    return tiny_config(train=TRAIN, selfplay=PLAY, reanalyse=ReanalyseConfig(**reanalyse))


@pytest.fixture(scope="module")
def filled():
    """(config, learner, run state) after two iterations with reanalysis on."""
    config = _config(fraction=0.25, num_simulations=6, value_weight=0.5)
    learner = Learner(envs.make(config.game), config)
    run = learner.init_state(jax.random.PRNGKey(0))
    for i in range(2):
        run, _ = learner.iteration(run, jax.random.PRNGKey(10 + i))
    return config, learner, run


def _copy(tree):
    return jax.tree.map(lambda x: jnp.array(np.asarray(x)), tree)


def test_the_buffer_stores_each_positions_state_and_outcome(filled):
    config, learner, run = filled
    stored = jax.device_get(run.replay.positions)
    size = int(run.replay.size)
    assert size > 0
    observed = jax.vmap(learner.selfplay_env.observe)(
        jax.tree.map(lambda x: jnp.asarray(x[:size]), stored.state))
    np.testing.assert_array_equal(observed, stored.observation[:size])
    outcome = stored.outcome[:size]
    assert set(np.unique(outcome)) <= {-1.0, 0.0, 1.0}


def test_reanalysed_targets_equal_a_fresh_search_and_only_drawn_slots_change(filled):
    config, learner, run = filled
    before = jax.device_get(run.replay)
    key, window, count, sims, weight = jax.random.PRNGKey(7), 256, 24, 6, 0.5
    variables = {"params": run.train.params}
    buffer, positions, slots, metrics = jax.jit(
        lambda v, b, k: reanalyse(learner.search_fn, v, b, k, window, count=count,
                                  num_simulations=sims, value_weight=weight))(
        variables, _copy(run.replay), key)
    after = jax.device_get(buffer)

    # The draw: uniform offsets back from the newest position, as training samples.
    k_draw, k_search = jax.random.split(key)
    span = min(int(before.size), window)
    offset = np.asarray(jax.random.randint(k_draw, (count,), 0, span))
    capacity = before.positions.value.shape[0]
    expected_slots = (int(before.next_index) - 1 - offset) % capacity
    np.testing.assert_array_equal(slots, expected_slots)

    # An independently built search of the stored states, same network and key.
    search = make_network_search(envs.make(config.game), config.network, config.search)
    states = jax.tree.map(lambda x: jnp.asarray(x[expected_slots]), before.positions.state)
    out = search(variables, k_search, states, noise=False, num_simulations=sims)
    old = jax.tree.map(lambda x: x[expected_slots], before.positions)
    want_value = np.where(old.value_mask, (1 - weight) * old.outcome + weight * out.value,
                          old.value)
    np.testing.assert_allclose(after.positions.policy[expected_slots], out.policy, atol=1e-6)
    np.testing.assert_allclose(after.positions.value[expected_slots], want_value, atol=1e-6)
    np.testing.assert_allclose(positions.policy, out.policy, atol=1e-6)
    np.testing.assert_array_equal(after.positions.value_mask, before.positions.value_mask)
    assert not np.allclose(old.policy, out.policy)  # the targets moved

    untouched = np.ones(capacity, bool)
    untouched[expected_slots] = False
    pairs = zip(jax.tree.leaves(after.positions), jax.tree.leaves(before.positions), strict=True)
    for new, old_leaf in pairs:
        np.testing.assert_array_equal(new[untouched], old_leaf[untouched])
    np.testing.assert_array_equal(after.positions.observation, before.positions.observation)
    assert int(metrics["positions"]) == count
    assert int(metrics["network_evaluations"]) == count * (1 + sims)


def _params_after(config, iterations=3):
    learner = Learner(envs.make(config.game), config)
    run = learner.init_state(jax.random.PRNGKey(0))
    for i in range(iterations):
        run, metrics = learner.iteration(run, jax.random.PRNGKey(i))
    return run, metrics


def test_fraction_zero_changes_nothing():
    plain, _ = _params_after(tiny_config(train=TRAIN, selfplay=PLAY))
    inert, metrics = _params_after(_config(fraction=0.0, num_simulations=9, value_weight=1.0))
    assert inert.replay.positions.state is None and inert.replay.positions.outcome is None
    assert not any(k.startswith("reanalyse/") for k in metrics)
    assert jax.tree.structure(plain) == jax.tree.structure(inert)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(inert), strict=True):
        np.testing.assert_array_equal(a, b)


def test_updates_per_call_only_groups_the_reanalysed_updates():
    grouped, _ = _params_after(_config(fraction=0.25), iterations=2)
    one_by_one, _ = _params_after(dataclasses.replace(
        _config(fraction=0.25), train=dataclasses.replace(TRAIN, updates_per_call=1)),
        iterations=2)
    for a, b in zip(jax.tree.leaves(grouped.train.params),
                    jax.tree.leaves(one_by_one.train.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_tiny_run_reanalyses_and_resumes(tmp_path):
    from azjax.training.loop import train

    config = dataclasses.replace(
        _config(fraction=0.25),
        checkpoint=CheckpointConfig(every_iterations=2, keep=2),
        budget=BudgetConfig(max_iterations=2))
    config = dataclasses.replace(config, eval=dataclasses.replace(config.eval,
                                                                  every_iterations=100))
    first = train(config, tmp_path, show_progress=False)
    per_update = round(0.25 * TRAIN.batch_size)
    metrics = first.final_metrics
    assert metrics["reanalyse/positions"] == TRAIN.updates_per_iteration * per_update
    assert metrics["reanalyse/network_evaluations"] == metrics["reanalyse/positions"] * (
        1 + config.search.num_simulations)
    assert np.isfinite(metrics["loss"]) and metrics["reanalyse/policy_change"] > 0
    resumed = train(dataclasses.replace(config, budget=BudgetConfig(max_iterations=3)),
                    tmp_path, show_progress=False)
    assert resumed.iterations == 3 and "reanalyse/positions" in resumed.final_metrics


def test_a_fraction_that_rounds_to_no_position_is_refused():
    with pytest.raises(ConfigError, match="reanalyse.fraction"):
        _config(fraction=0.01)
