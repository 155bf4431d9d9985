"""`search.material_utility`: the search maximises outcome + weight x final material difference.

Draughts positions by FEN (`azjax.envs.draughts`), a network whose every weight is zero except the
material head's output bias, so its value is 0 and its material prediction a chosen constant.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_envs_forced import DRAUGHTS, FORCED, SAFE, SUICIDE, SUICIDE_FEN

from azjax.config import NetworkConfig, SearchConfig
from azjax.core.network import init_network, make_network
from azjax.core.search import make_recurrent_fn, make_root_fn, make_search
from azjax.envs.draughts import Draughts

NET = NetworkConfig(kind="mlp", hidden=(8,), material_head=True)
WEIGHT = 0.3
PREDICTED = 0.2  # the material head's output everywhere
MAN = 1.0 / 12.0  # one man's material (a side starts with 12)
# Black to move at draw counter 39: every move is quiet, so every move draws at once, but
# 27-31 and 27-32 crown a man (a king is worth 1.5 men) and 5-9 does not.
LAST_MOVE_FEN, CROWNING, PLAIN = "B:W21:B5,27", (87, 88), 8
OPENSPIEL_DRAUGHTS = Draughts(draw_rule="openspiel")  # draws every move from counter 39


def _variables(predicted: float = PREDICTED, env=DRAUGHTS):
    variables = init_network(NET, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    variables = jax.tree.map(jnp.zeros_like, variables)
    variables["params"]["material_out"]["bias"] = jnp.full((1,), predicted)
    return variables


def _one(state):
    return jax.tree.map(lambda x: x[None], state)


def test_leaf_values_add_the_weighted_material_prediction():
    _, apply = make_network(NET, DRAUGHTS.num_actions)
    state = _one(DRAUGHTS.from_fen(SUICIDE_FEN))
    root = make_root_fn(DRAUGHTS, apply, WEIGHT)(_variables(), state)
    np.testing.assert_allclose(root.value, [WEIGHT * PREDICTED], rtol=1e-6)
    plain = make_root_fn(DRAUGHTS, apply)(_variables(), state)
    np.testing.assert_allclose(plain.value, [0.0], atol=1e-7)


def test_a_finished_game_scores_its_material_for_the_mover():
    """Black's only man on 11, White's on 18: 11-15 loses (White's forced 18x11 takes Black's
    last man), -1 for the outcome with nothing against White's one man; 11-16 is quiet."""
    _, apply = make_network(NET, DRAUGHTS.num_actions)
    recurrent = make_recurrent_fn(FORCED, apply, WEIGHT)
    state = _one(DRAUGHTS.from_fen(SUICIDE_FEN))
    out, after = recurrent(_variables(), None, jnp.array([SUICIDE]), state)
    assert bool(after.terminated[0])
    np.testing.assert_allclose(out.reward, [-1.0 - WEIGHT * MAN], rtol=1e-6)
    np.testing.assert_allclose(out.value, [0.0], atol=1e-7)  # nothing to evaluate past the end
    out, after = recurrent(_variables(), None, jnp.array([SAFE]), state)
    assert not bool(after.terminated[0]) and int(after.current_player[0]) == 1
    np.testing.assert_allclose(out.reward, [0.0], atol=1e-7)
    np.testing.assert_allclose(out.value, [WEIGHT * PREDICTED], rtol=1e-6)  # for White, to move


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_among_drawn_moves_the_search_keeps_more_material(algorithm):
    """Every move draws at once (OpenSpiel's counter reaches 40), so without the utility all
    score 0; with it, crowning a man ends the game with half a man more and is chosen."""
    env = OPENSPIEL_DRAUGHTS
    state = _one(env.from_fen(LAST_MOVE_FEN, counter=39))
    _, apply = make_network(NET, env.num_actions)
    policies = {}
    for weight in (0.0, WEIGHT):
        config = SearchConfig(algorithm=algorithm, num_simulations=12, material_utility=weight,
                              max_num_considered_actions=4,
                              qtransform="completed_by_mix_value" if algorithm == "gumbel"
                              else "by_parent_and_siblings")
        search = jax.jit(functools.partial(make_search(env, apply, config), noise=False))
        out = search(_variables(0.0, env), jax.random.PRNGKey(0), state)
        policies[weight] = np.asarray(out.policy[0])
        if weight:
            assert int(out.action[0]) in CROWNING
            # The root's value averages its children's: a crowning draw scores the material
            # of Black's 2.5 men against White's 1, 5-9's Black's 2 men.
            assert WEIGHT * MAN * 0.5 < float(out.value[0]) <= WEIGHT * 1.5 * MAN + 1e-6
        else:
            assert float(out.value[0]) == pytest.approx(0.0, abs=1e-6)
    assert policies[WEIGHT][CROWNING[0]] > policies[WEIGHT][PLAIN]
    np.testing.assert_allclose(policies[0.0][list(CROWNING)], policies[0.0][PLAIN], rtol=1e-5)
