"""`search.quiescence`: forcing positions valued after the exchange (`azjax.core.quiescence`).

The batched resolution is checked against a plain recursion written from the module's
docstring, one position at a time, on random draughts positions (many of them mid-capture)
with a small random network; then the search that uses it, and the config's checks.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_envs_forced import DRAUGHTS, FORCED

from azjax.config import ConfigError, NetworkConfig, SearchConfig, config_from_dict
from azjax.core.network import init_network, make_network
from azjax.core.quiescence import quiescent_value_fn
from azjax.core.search import make_search, masked_logits
from azjax.envs.core import random_positions

NET = NetworkConfig(kind="mlp", hidden=(16,))
_, APPLY = make_network(NET, DRAUGHTS.num_actions)
VARIABLES = init_network(NET, DRAUGHTS.num_actions, DRAUGHTS.observation_shape,
                         jax.random.PRNGKey(3))


def _evaluate(variables, states):
    logits, value = APPLY(variables, jax.vmap(FORCED.observe)(states))
    return masked_logits(logits, states.legal_action_mask), value


@functools.cache
def _positions():
    """Live positions after 6-40 random plies with forced moves played, most of them with a
    capture pending: [N] states."""
    states = random_positions(FORCED, jax.random.PRNGKey(0), 192, (6, 12, 20, 30, 40))
    live = ~np.asarray(states.terminated | states.truncated)
    forcing = np.asarray(jax.vmap(FORCED.forcing)(states)) & live
    quiet = np.flatnonzero(live & ~forcing)[:8]
    chosen = np.concatenate([np.flatnonzero(forcing)[:32], quiet])
    return jax.tree.map(lambda x: x[chosen], states), forcing[chosen]


_one_evaluation = jax.jit(lambda state: jax.tree.map(
    lambda x: x[0], _evaluate(VARIABLES, jax.tree.map(lambda x: x[None], state))))
_one_step = jax.jit(FORCED.step)
_one_forcing = jax.jit(FORCED.forcing)


def _reference_value(state, depth: int, moves: int) -> float:
    """The docstring's value, one position at a time: a live forcing position takes the best,
    for its mover, of its `moves` likeliest legal moves' children (finished: their reward;
    live: their value, negated when the other player moves next), each valued the same way."""
    logits, value = (np.asarray(x) for x in _one_evaluation(state))
    live = not bool(state.terminated | state.truncated)
    if depth == 0 or not (live and bool(_one_forcing(state))):
        return float(value)
    legal = np.asarray(state.legal_action_mask)
    order = sorted(range(len(logits)), key=lambda a: (-logits[a], a))[:moves]
    mover = int(state.current_player)
    worths = []
    for action in order:
        if not legal[action]:
            continue
        child = _one_step(state, jnp.int32(action))
        if bool(child.terminated | child.truncated):
            worths.append(float(child.rewards[mover]))
            continue
        child_value = _reference_value(child, depth - 1, moves)
        worths.append(child_value if int(child.current_player) == mover else -child_value)
    return max(worths)


DEPTH, MOVES = 2, 3
RESOLVE = jax.jit(quiescent_value_fn(FORCED, _evaluate, DEPTH, MOVES))


def test_forcing_positions_take_the_best_of_their_likeliest_captures():
    states, forcing = _positions()
    assert forcing.sum() == 32 and (~forcing).sum() == 8  # both kinds are checked
    logits, value = _evaluate(VARIABLES, states)
    resolved = np.asarray(RESOLVE(VARIABLES, states, logits, value))
    expected = [_reference_value(jax.tree.map(lambda x, i=i: x[i], states), DEPTH, MOVES)
                for i in range(len(forcing))]
    np.testing.assert_allclose(resolved, expected, rtol=1e-5, atol=1e-6)
    # Quiet positions keep the network's value; forcing ones are resolved (and differ).
    np.testing.assert_array_equal(resolved[~forcing], np.asarray(value)[~forcing])
    assert np.mean(resolved[forcing] != np.asarray(value)[forcing]) > 0.9


def test_a_batch_without_forcing_positions_keeps_the_network_values():
    states, forcing = _positions()
    quiet = np.flatnonzero(~forcing)
    quiet = jax.tree.map(lambda x: x[np.resize(quiet, len(forcing))], states)  # same shape
    logits, value = _evaluate(VARIABLES, quiet)
    np.testing.assert_array_equal(RESOLVE(VARIABLES, quiet, logits, value), value)


def test_the_search_with_quiescence_plays_legal_moves():
    """The plain search (the solver's engine builds its tree with the same functions)."""
    states, _ = _positions()
    states = jax.tree.map(lambda x: x[:8], states)
    config = SearchConfig(num_simulations=8, max_num_considered_actions=4,
                          play_forced_moves=True, quiescence=2, quiescence_moves=3)
    search = jax.jit(make_search(DRAUGHTS, APPLY, config), static_argnames=("noise",))
    out = search(VARIABLES, jax.random.PRNGKey(0), states, noise=False)
    legal = np.asarray(states.legal_action_mask)
    assert legal[np.arange(8), np.asarray(out.action)].all()
    np.testing.assert_allclose(np.asarray(out.policy).sum(axis=1), 1.0, rtol=1e-5)
    plain = jax.jit(make_search(DRAUGHTS, APPLY, SearchConfig(
        num_simulations=8, max_num_considered_actions=4, play_forced_moves=True)),
        static_argnames=("noise",))(
        VARIABLES, jax.random.PRNGKey(0), states, noise=False)
    # The network's root value is reported as it was; the search's own values differ.
    np.testing.assert_array_equal(out.prior_value, plain.prior_value)
    assert not np.allclose(out.value, plain.value)


def test_config_refuses_quiescence_where_it_cannot_work():
    base = {"game": "draughts", "search": {"quiescence": 2}}
    assert config_from_dict(base).search.quiescence == 2
    with pytest.raises(ConfigError, match=r"^search\.quiescence: must be 0: tic_tac_toe "):
        config_from_dict({"game": "tic_tac_toe", "search": {"quiescence": 1}})
    with pytest.raises(ConfigError, match=r"^search\.quiescence: must be in \[0, 4\]"):
        config_from_dict({"game": "draughts", "search": {"quiescence": 5}})
    with pytest.raises(ConfigError, match=r"^search\.quiescence_moves: must be in \[1, 16\]"):
        config_from_dict({"game": "draughts", "search": {"quiescence_moves": 0}})


def test_forced_moves_played_forwards_forcing():
    states, forcing = _positions()
    np.testing.assert_array_equal(jax.vmap(DRAUGHTS.forcing)(states), forcing)
    np.testing.assert_array_equal(jax.vmap(FORCED.forcing)(states), forcing)
