"""Symmetries tied to the rules: a game played with every move mapped by a board symmetry must
reach exactly the position `env.symmetries` claims, with the legal mask moved the same way.

The symmetry group is built here from coordinates (rotations and reflections of the 3x3 grid;
the left-right mirror of the 7 columns), independently of the envs' tables. Hypothesis draws
random games (some reaching the end)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from env_batch import longest_game, pad_moves, replay
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_games import make_reference

from azjax import envs

GAMES = ("tic_tac_toe", "connect_four")


def _tic_tac_toe_group() -> set[tuple[int, ...]]:
    """The 8 maps of the square, each as 'target cell -> source cell' over cells 0-8."""
    maps = [
        lambda r, c: (r, c), lambda r, c: (c, 2 - r), lambda r, c: (2 - r, 2 - c),
        lambda r, c: (2 - c, r), lambda r, c: (r, 2 - c), lambda r, c: (2 - r, c),
        lambda r, c: (c, r), lambda r, c: (2 - c, 2 - r),
    ]
    group = set()
    for move in maps:
        source = [0] * 9
        for r in range(3):
            for c in range(3):
                tr, tc = move(r, c)
                source[tr * 3 + tc] = r * 3 + c
        group.add(tuple(source))
    return group


EXPECTED_GROUPS = {
    "tic_tac_toe": _tic_tac_toe_group(),
    "connect_four": {tuple(range(7)), tuple(6 - c for c in range(7))},
}


@functools.cache
def _jitted(game_id: str):
    env = envs.make(game_id)
    return jax.jit(env.symmetries), jax.jit(jax.vmap(env.observe))


def _action_permutations(env) -> np.ndarray:
    """int [S, A]: the env's symmetries applied to the policy 0..A-1 (target -> source action)."""
    obs = jnp.zeros(env.observation_shape, jnp.float32)
    _, sym_policy = env.symmetries(obs, jnp.arange(env.num_actions, dtype=jnp.float32))
    return np.asarray(sym_policy).astype(int)


@pytest.mark.parametrize("game_id", GAMES)
def test_policy_permutations_are_exactly_the_board_symmetries(game_id):
    env = envs.make(game_id)
    perms = _action_permutations(env)
    assert perms.shape == (len(EXPECTED_GROUPS[game_id]), env.num_actions)
    assert env.num_symmetries == perms.shape[0]
    assert perms[0].tolist() == list(range(env.num_actions))  # copy 0 is the input
    assert {tuple(p) for p in perms.tolist()} == EXPECTED_GROUPS[game_id]  # all distinct


@pytest.mark.parametrize("game_id", GAMES)
def test_symmetries_vmap_over_a_batch(game_id):
    env = envs.make(game_id)
    obs = jax.random.uniform(jax.random.PRNGKey(0), (5, *env.observation_shape))
    policy = jax.random.uniform(jax.random.PRNGKey(1), (5, env.num_actions))
    sym_obs, sym_policy = map(np.asarray, jax.jit(jax.vmap(env.symmetries))(obs, policy))
    s = env.num_symmetries
    assert sym_obs.shape == (5, s, *env.observation_shape)
    assert sym_policy.shape == (5, s, env.num_actions)
    # Each copy is a rearrangement of its input (nothing lost, nothing made up).
    flat = np.asarray(obs).reshape(5, 1, -1)
    np.testing.assert_array_equal(np.sort(sym_obs.reshape(5, s, -1), -1),
                                  np.sort(flat, -1).repeat(s, 1))
    np.testing.assert_array_equal(np.sort(sym_policy, -1),
                                  np.sort(np.asarray(policy), -1)[:, None].repeat(s, 1))


def _random_game(game_id: str, choices: list[int]) -> list[int]:
    """A legal move list picked by `choices` (index into the legal moves), stopping at the end."""
    game = make_reference(game_id)
    moves = []
    for choice in choices:
        if game.over:
            break
        legal = game.legal_actions()
        moves.append(legal[choice % len(legal)])
        game.play(moves[-1])
    return moves


@pytest.mark.parametrize("game_id", GAMES)
@settings(max_examples=60, deadline=None)
@given(choices=st.lists(st.integers(0, 1000), max_size=42))
def test_mirrored_games_reach_the_transformed_position(game_id, choices):
    env = envs.make(game_id)
    symmetries, observe = _jitted(game_id)
    perms = _action_permutations(env)
    moves = np.array(_random_game(game_id, choices), dtype=int)
    # Under symmetry k, the stone on cell a lands on the target t with perms[k, t] == a.
    transformed = [np.argsort(perm)[moves] for perm in perms]
    states, bad = replay(env, pad_moves(transformed, longest_game(env)))
    assert (np.asarray(bad) == -1).all(), "a mapped move list must stay legal"
    observations = np.asarray(observe(states))
    masks = np.asarray(states.legal_action_mask)
    sym_obs, sym_mask = symmetries(jnp.asarray(observations[0]),
                                   jnp.asarray(masks[0], jnp.float32))
    np.testing.assert_array_equal(observations, np.asarray(sym_obs))
    np.testing.assert_array_equal(masks, np.asarray(sym_mask) > 0.5)
    for field in ("terminated", "rewards", "current_player", "step_count"):
        values = np.asarray(getattr(states, field))
        assert (values == values[0]).all(), field
