"""Replay ring buffer: masked adds in order, wrap-around, window sampling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from azjax.config import ReplayConfig
from azjax.core import replay
from azjax.core.types import Positions


def _positions(ids):
    ids = jnp.asarray(ids, jnp.float32)
    return Positions(observation=ids[:, None], policy=jnp.stack([ids, -ids], -1), value=ids,
                     value_mask=jnp.ones_like(ids, bool))


def _example():
    return jax.tree.map(lambda x: x[0], _positions([0]))


def test_add_keeps_masked_positions_in_order_and_wraps():
    buffer = replay.init(_example(), capacity=5)
    buffer = replay.add(buffer, _positions([1, 2, 3, 4]), jnp.array([1, 0, 1, 1], bool))
    assert int(buffer.size) == 3 and int(buffer.next_index) == 3
    np.testing.assert_array_equal(buffer.positions.value[:3], [1, 3, 4])
    buffer = replay.add(buffer, _positions([5, 6, 7]), jnp.array([1, 1, 1], bool))
    assert int(buffer.size) == 5 and int(buffer.next_index) == 1
    np.testing.assert_array_equal(buffer.positions.value, [7, 3, 4, 5, 6])
    np.testing.assert_array_equal(buffer.positions.policy[:, 1], -buffer.positions.value)
    assert int(buffer.total_added) == 6


def test_add_more_than_capacity_keeps_the_newest():
    buffer = replay.init(_example(), capacity=3)
    buffer = replay.add(buffer, _positions(np.arange(1, 8)), jnp.ones(7, bool))
    assert sorted(np.asarray(buffer.positions.value).tolist()) == [5, 6, 7]
    # The next add continues after the newest.
    buffer = replay.add(buffer, _positions([8]), jnp.ones(1, bool))
    assert sorted(np.asarray(buffer.positions.value).tolist()) == [6, 7, 8]


def test_sample_draws_only_from_the_newest_window():
    buffer = replay.init(_example(), capacity=100)
    buffer = replay.add(buffer, _positions(np.arange(100, 160)), jnp.ones(60, bool))
    batch = replay.sample(buffer, jax.random.PRNGKey(0), 512, window=10)
    values = np.asarray(batch.value)
    assert values.min() >= 150 and values.max() == 159
    batch = replay.sample(buffer, jax.random.PRNGKey(0), 512, window=1000)  # all 60 stored
    assert np.asarray(batch.value).min() < 110


def test_window_schedule_grows_to_capacity():
    config = ReplayConfig(capacity=1000, window_start=100, window_growth=50)
    assert int(replay.window_size(config, 0)) == 100
    assert int(replay.window_size(config, 4)) == 300
    assert int(replay.window_size(config, 1000)) == 1000
    assert int(replay.window_size(ReplayConfig(capacity=1000), 0)) == 1000
