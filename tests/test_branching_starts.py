"""Branching starts: new self-play games start from positions stored in the replay buffer."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from conftest import tiny_config

from azjax import envs
from azjax.config import BudgetConfig, EvalConfig, SelfPlayConfig
from azjax.core.learner import Learner

PLAY = dict(batch_size=8, temperature_moves=9, random_opening_prob=0.5,
            random_opening_max_moves=2)


def _config(prob, source):
    return tiny_config(selfplay=SelfPlayConfig(**PLAY, random_start_prob=prob,
                                               random_start_source=source))


def _flat_states(states, count):
    """Each of the first `count` states (leading axis) as one tuple of all its values."""
    leaves = [np.asarray(x[:count]).reshape(count, -1).astype(np.float64)
              for x in jax.tree.leaves(states)]
    return [tuple(row) for row in np.concatenate(leaves, axis=1)]


def _new_game_starts(last_done_before, records):
    """(t, b) of each record [T, B] that is a new game's first position."""
    done = np.asarray(records.done)
    started = np.concatenate([np.asarray(last_done_before)[None], done[:-1]])
    return np.argwhere(started)


def test_every_new_game_starts_from_a_stored_position():
    # Tic-tac-toe has no random starts of its own: the replay source needs none.
    config = _config(1.0, "replay")
    learner = Learner(envs.make(config.game), config)
    run = learner.init_state(jax.random.PRNGKey(0))
    last_done = np.asarray(run.selfplay.previous.done[-1])
    run, _ = learner.selfplay_step(run, jax.random.PRNGKey(1))
    records = jax.device_get(run.selfplay.previous)
    # An empty buffer: the first chunk's new games start from the initial position.
    first = _new_game_starts(last_done, records)
    assert len(first) > 0
    assert all(records.state.step_count[t, b] == 0 for t, b in first)

    buffer = jax.device_get(run.replay)
    size = int(buffer.size)
    stored = set(_flat_states(buffer.positions.state, size))
    last_done = records.done[-1]
    run, _ = learner.selfplay_step(run, jax.random.PRNGKey(2))
    records = jax.device_get(run.selfplay.previous)
    starts = _new_game_starts(last_done, records)
    assert len(starts) > 0
    flat = _flat_states(records.state, records.done.shape[0] * records.done.shape[1])
    width = records.done.shape[1]
    for t, b in starts:
        assert flat[t * width + b] in stored
        assert not records.in_opening[t, b]  # a branching start opens with no random moves
    assert any(records.state.step_count[t, b] > 0 for t, b in starts)


def test_probability_zero_changes_nothing():
    runs = []
    for source in ("env", "replay"):
        config = _config(0.0, source)
        learner = Learner(envs.make(config.game), config)
        run = learner.init_state(jax.random.PRNGKey(0))
        for i in range(2):
            run, _ = learner.iteration(run, jax.random.PRNGKey(i))
        runs.append(run)
    assert runs[1].replay.positions.state is None
    assert jax.tree.structure(runs[0]) == jax.tree.structure(runs[1])
    for a, b in zip(jax.tree.leaves(runs[0]), jax.tree.leaves(runs[1]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_tiny_run_with_branching_starts(tmp_path):
    from azjax.training.loop import train

    config = dataclasses.replace(
        _config(0.5, "replay"), budget=BudgetConfig(max_iterations=3),
        eval=EvalConfig(every_iterations=100, oracle=False, arena_games=2,
                        opponents=("random",)))
    result = train(config, tmp_path, show_progress=False)
    assert result.iterations == 3 and np.isfinite(result.final_metrics["loss"])
