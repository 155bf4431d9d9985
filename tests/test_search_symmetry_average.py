"""`search.symmetry_average`: each evaluation averaged over the game's symmetric copies."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import envs
from azjax.config import NetworkConfig, SearchConfig
from azjax.core.network import init_network, make_network
from azjax.core.search import make_search, symmetry_averaged_apply, symmetry_permutations
from azjax.envs.core import random_positions

NET = NetworkConfig(kind="mlp", hidden=(16,), material_head=False)
GAMES = ["tic_tac_toe", "connect_four", "draughts"]


@functools.cache
def _network(game_id: str, material_head: bool = False):
    """A random (not zero) small network for `game_id`: (env, variables, apply_fn)."""
    env = envs.make(game_id)
    net = dataclasses.replace(NET, material_head=material_head)
    variables = init_network(net, env.num_actions, env.observation_shape, jax.random.PRNGKey(3))
    _, apply_fn = make_network(net, env.num_actions)
    return env, variables, apply_fn


PLIES = {"tic_tac_toe": 5, "connect_four": 12, "draughts": 30}


@functools.cache
def _positions(game_id: str):
    """12 states [12] after a few random plies (a game may have ended), as a batch."""
    return random_positions(envs.make(game_id), jax.random.PRNGKey(7), 12, PLIES[game_id])


def _reference_average(env, apply_fn, variables, obs, **kwargs):
    """The average computed one copy and one action at a time, in NumPy."""
    permutations = symmetry_permutations(env)
    copies = np.stack([np.asarray(env.symmetries(o, jnp.zeros(env.num_actions))[0]) for o in obs])
    probs, rest = [], []
    for k in range(copies.shape[1]):
        logits, *others = apply_fn(variables, jnp.asarray(copies[:, k]), **kwargs)
        p = np.asarray(jax.nn.softmax(logits, axis=-1))
        in_input_frame = np.zeros_like(p)
        for j in range(env.num_actions):  # copy k's action j is the input's permutations[k, j]
            in_input_frame[:, permutations[k, j]] = p[:, j]
        probs.append(in_input_frame)
        rest.append([np.asarray(x) for x in others])
    return np.mean(probs, axis=0), [np.mean(column, axis=0) for column in zip(*rest, strict=True)]


@pytest.mark.parametrize("game_id", GAMES)
def test_symmetry_permutations_are_the_games_policy_maps(game_id):
    env = envs.make(game_id)
    permutations = symmetry_permutations(env)
    assert permutations.shape == (env.num_symmetries, env.num_actions)
    np.testing.assert_array_equal(permutations[0], np.arange(env.num_actions))
    policy = np.random.default_rng(0).random(env.num_actions).astype(np.float32)
    copies = np.asarray(env.symmetries(jnp.zeros(env.observation_shape), jnp.asarray(policy))[1])
    np.testing.assert_array_equal(copies, policy[permutations])


@pytest.mark.parametrize("game_id", GAMES)
def test_averaged_evaluation_equals_the_copy_by_copy_mean(game_id):
    env, variables, apply_fn = _network(game_id)
    obs = jax.vmap(env.observe)(_positions(game_id))
    logits, value = symmetry_averaged_apply(env, apply_fn)(variables, obs)
    expected_policy, (expected_value,) = _reference_average(env, apply_fn, variables, obs)
    np.testing.assert_allclose(np.exp(np.asarray(logits)), expected_policy, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(value), expected_value, rtol=1e-5, atol=1e-6)
    # Averaging changes something: the raw network is not already symmetric.
    raw_logits, raw_value = apply_fn(variables, obs)
    assert not np.allclose(np.asarray(raw_value), np.asarray(value), atol=1e-4)


@pytest.mark.parametrize("game_id", GAMES)
def test_averaged_evaluation_is_the_same_for_every_symmetric_copy(game_id):
    """The whole point: a position and its turned (mirrored, rotated) copy get the same value
    and the same policy, moved with the board."""
    env, variables, apply_fn = _network(game_id)
    averaged = symmetry_averaged_apply(env, apply_fn)
    obs = jax.vmap(env.observe)(_positions(game_id))
    copies = jax.vmap(lambda o: env.symmetries(o, jnp.zeros(env.num_actions))[0])(obs)
    logits, value = averaged(variables, obs)
    permutations = symmetry_permutations(env)
    for k in range(1, permutations.shape[0]):
        copy_logits, copy_value = averaged(variables, copies[:, k])
        np.testing.assert_allclose(np.asarray(copy_value), np.asarray(value), atol=1e-5)
        np.testing.assert_allclose(np.asarray(copy_logits),
                                   np.asarray(logits)[:, permutations[k]], atol=1e-4)


def test_averaged_material_head_and_extra_outputs_pass_through():
    env, variables, apply_fn = _network("draughts", material_head=True)
    obs = jax.vmap(env.observe)(_positions("draughts"))
    logits, value, material = symmetry_averaged_apply(env, apply_fn)(variables, obs,
                                                                     material=True)
    _, (expected_value, expected_material) = _reference_average(env, apply_fn, variables, obs,
                                                                material=True)
    assert logits.shape == (obs.shape[0], env.num_actions)
    np.testing.assert_allclose(np.asarray(value), expected_value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(material), expected_material, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_search_with_symmetry_average_searches_the_averaged_network(algorithm):
    """The flag gives exactly the search over the averaged network, at the root and in the
    tree, and differs from the plain search."""
    env, variables, apply_fn = _network("connect_four")
    config = SearchConfig(algorithm=algorithm, num_simulations=24, max_num_considered_actions=7)
    averaged = dataclasses.replace(config, symmetry_average=True)
    states = _positions("connect_four")
    key = jax.random.PRNGKey(0)

    def run(search_config, apply):
        search = make_search(env, apply, search_config)
        return jax.jit(functools.partial(search, noise=False))(variables, key, states)

    flagged = run(averaged, apply_fn)
    by_hand = run(config, symmetry_averaged_apply(env, apply_fn))
    plain = run(config, apply_fn)
    np.testing.assert_array_equal(flagged.visit_counts, by_hand.visit_counts)
    np.testing.assert_allclose(flagged.value, by_hand.value, atol=1e-6)
    assert not np.allclose(flagged.value, plain.value, atol=1e-4)
