"""Any pgx game through `envs.from_pgx`: the contract, player relabelling, a training step."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pgx
from conftest import tiny_config

from azjax import envs
from azjax.config import NetworkConfig, SearchConfig, SelfPlayConfig
from azjax.training.trainer import Trainer


def test_player_zero_always_moves_first_and_rewards_follow_the_relabelling():
    env = envs.from_pgx(pgx.make("tic_tac_toe"))
    keys = jax.random.split(jax.random.PRNGKey(0), 32)
    states = jax.vmap(env.init)(keys)
    assert np.all(np.asarray(states.current_player) == 0)
    assert len(set(np.asarray(states.first_mover).tolist())) == 2  # pgx drew both ids
    # The first mover wins with 0, 1, 3, 4, 6 (left column) whatever pgx's id for it was.
    step = jax.jit(jax.vmap(env.step))
    for action in (0, 1, 3, 4, 6):
        states = step(states, np.full(32, action, np.int32))
    assert np.all(np.asarray(states.terminated))
    np.testing.assert_array_equal(np.asarray(states.rewards), np.tile([1.0, -1.0], (32, 1)))


def test_games_with_chance_or_more_players_are_refused_by_name():
    import pytest

    with pytest.raises(ValueError, match="'backgammon' has chance or hidden information"):
        envs.from_pgx(pgx.make("backgammon"))
    with pytest.raises(ValueError, match="two-player games; pgx '2048' has 1 players"):
        envs.from_pgx(pgx.make("2048"))


def test_pgx_othello_meets_the_contract():
    envs.check_env(envs.make("pgx:othello"), num_games=4)


def test_one_training_iteration_on_pgx_othello():
    config = tiny_config(
        game="pgx:othello",
        network=NetworkConfig(kind="resnet", channels=4, blocks=1, value_hidden=8),
        search=SearchConfig(num_simulations=2, max_num_considered_actions=2),
        selfplay=SelfPlayConfig(batch_size=2, symmetries=False),
    )
    env = envs.make(config.game)
    trainer = Trainer(env, config)
    run = trainer.init_state(jax.random.PRNGKey(0))
    before = jax.tree.leaves(run.train.params)[0].copy()
    run, metrics = trainer.iteration(run, jax.random.PRNGKey(1))
    assert int(run.iteration) == 1
    assert metrics["selfplay/positions_added"] > 0 and np.isfinite(metrics["loss"])
    assert not np.array_equal(before, jax.tree.leaves(run.train.params)[0])
    assert dataclasses.asdict(config.selfplay)["batch_size"] == 2
