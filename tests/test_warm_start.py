"""`train.init_params`: a fresh run starts from a model's params; a model of fewer observation
planes (a draughts model of OpenSpiel's rules for a run under the laws) computes the same."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY_RUN_CONFIG

from azjax.config import BudgetConfig, ConfigError, NetworkConfig
from azjax.core.network import init_network, make_network
from azjax.envs.core import random_positions
from azjax.envs.draughts import Draughts
from azjax.model_files import load_model, snapshot_dirs
from azjax.training.loop import train
from azjax.training.warm_start import widen_input


@pytest.mark.parametrize("network", [NetworkConfig(kind="mlp", hidden=(16,)),
                                     NetworkConfig(kind="resnet", channels=4, blocks=1)])
def test_added_planes_start_at_zero_and_the_network_computes_the_same(network):
    openspiel, laws = Draughts(draw_rule="openspiel"), Draughts()
    old = init_network(network, 170, openspiel.observation_shape, jax.random.PRNGKey(1))
    new = init_network(network, 170, laws.observation_shape, jax.random.PRNGKey(2))
    fitted = {**new, "params": widen_input(old["params"], new["params"],
                                           openspiel.observation_shape, laws.observation_shape)}
    _, apply = make_network(network, 170)
    # The same positions under both rules (none has stood before: the added plane is 0).
    states = random_positions(laws, jax.random.PRNGKey(3), 16, 20)
    obs_laws = jax.vmap(laws.observe)(states)
    obs_openspiel = jnp.concatenate([obs_laws[..., :6], obs_laws[..., 6:7] * 2], -1)
    assert (obs_laws[..., 7] == 0).all()
    mine, theirs = apply(fitted, obs_laws), apply(old, obs_openspiel)
    np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="only planes added at the end"):
        widen_input(new["params"], old["params"], laws.observation_shape,
                    openspiel.observation_shape)


def test_a_run_starts_from_a_models_params(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    model = snapshot_dirs(run_dir)[-1]
    config = dataclasses.replace(
        TINY_RUN_CONFIG, budget=BudgetConfig(max_iterations=2),
        train=dataclasses.replace(TINY_RUN_CONFIG.train, updates_per_iteration=0,
                                  init_params=str(model)))
    train(config, tmp_path / "warm", show_progress=False)
    started, _, _ = load_model(snapshot_dirs(tmp_path / "warm")[-1])  # no update step taken
    source, _, _ = load_model(model)
    jax.tree.map(np.testing.assert_array_equal, started, source)
    other = dataclasses.replace(config, network=NetworkConfig(kind="mlp", hidden=(8,)))
    with pytest.raises(ConfigError, match="another network config"):
        train(other, tmp_path / "other", show_progress=False)
