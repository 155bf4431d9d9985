"""Forced moves played at once (`azjax.envs.forced`): same games, decisions only, right signs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_search import NET, _uniform_variables

from azjax import envs
from azjax.config import SearchConfig
from azjax.core.network import make_network
from azjax.core.search import make_recurrent_fn, make_search
from azjax.envs.core import jitted_step
from azjax.envs.forced import ForcedMovesPlayed, forced_moves_played, is_forced

DRAUGHTS = envs.make("draughts")
FORCED = forced_moves_played(DRAUGHTS)
# Black's only man on 11, White's on 18. 11-15 (id 31) lets 18x11 (White's only move) take it
# and win; 11-16 (id 32) leaves White two quiet moves.
SUICIDE_FEN, SUICIDE, SAFE = "B:W18:B11", 31, 32


def test_factory_shares_one_wrapper_and_refuses_to_wrap_twice():
    assert forced_moves_played(DRAUGHTS) is FORCED
    assert FORCED.name == "draughts" and FORCED.num_actions == DRAUGHTS.num_actions
    with pytest.raises(TypeError, match="already"):
        ForcedMovesPlayed(FORCED)


def test_a_capture_with_one_reply_is_answered_at_once():
    state = DRAUGHTS.from_fen(SUICIDE_FEN)
    after = FORCED.step(state, jnp.int32(SUICIDE))
    # White's 18x11 was played for it: Black has no piece left and lost.
    assert bool(after.terminated)
    np.testing.assert_array_equal(after.rewards, [-1.0, 1.0])
    assert int(after.step_count) == int(state.step_count) + 2
    quiet = FORCED.step(state, jnp.int32(SAFE))
    assert not bool(quiet.terminated) and int(quiet.current_player) == 1
    assert int(quiet.step_count) == int(state.step_count) + 1


@functools.cache
def _random_forced_games(num_games: int, steps: int):
    """Random decisions on the wrapper: (states [T+1, B], actions [T, B])."""

    def play(states, key):
        actions = jax.random.categorical(
            key, jnp.where(states.legal_action_mask, 0.0, -jnp.inf)).astype(jnp.int32)
        return jax.vmap(FORCED.step)(states, actions), (states, actions)

    @jax.jit
    def run(key):
        k_init, k_play = jax.random.split(key)
        states = jax.vmap(FORCED.init)(jax.random.split(k_init, num_games))
        last, (before, actions) = jax.lax.scan(play, states, jax.random.split(k_play, steps))
        return jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), before, last), actions

    return jax.tree.map(np.asarray, run(jax.random.PRNGKey(7)))


def test_wrapper_states_are_decisions_and_replay_as_base_games():
    states, actions = _random_forced_games(16, 48)
    # Every state is a decision (>= 2 legal actions) or a finished game.
    assert not np.any(np.asarray(jax.vmap(jax.vmap(is_forced))(states)))
    # Replayed one game at a time with the base rules, inserting the only legal move wherever
    # there is one, each game reaches the very same states.
    step = jitted_step(DRAUGHTS)
    forced_seen = 0
    for game in range(4):
        state = jax.tree.map(lambda x, g=game: x[0, g], states)
        for t in range(actions.shape[0]):
            if bool(state.terminated | state.truncated):
                break
            state = step(state, jnp.int32(actions[t, game]))
            while not bool(state.terminated) and int(np.sum(state.legal_action_mask)) == 1:
                state = step(state, jnp.int32(np.argmax(state.legal_action_mask)))
                forced_seen += 1
            expected = jax.tree.map(lambda x, t=t, g=game: x[t + 1, g], states)
            for name in ("pieces", "kings", "current_player", "counter", "step_count",
                         "terminated", "rewards"):
                np.testing.assert_array_equal(getattr(state, name), getattr(expected, name),
                                              err_msg=f"game {game}, step {t}: {name}")
    assert forced_seen > 0  # the games did pass through forced moves


def test_recurrent_fn_scores_a_forced_loss_for_the_mover():
    _, apply = make_network(NET, DRAUGHTS.num_actions)
    recurrent = make_recurrent_fn(FORCED, apply)
    state = jax.tree.map(lambda x: x[None], DRAUGHTS.from_fen(SUICIDE_FEN))
    out, after = recurrent(_uniform_variables(DRAUGHTS), None, jnp.array([SUICIDE]), state)
    assert bool(after.terminated[0])
    assert float(out.reward[0]) == -1.0 and float(out.discount[0]) == 0.0


def test_search_sees_the_forced_loss_one_edge_below_the_root():
    _, apply = make_network(NET, DRAUGHTS.num_actions)
    state = jax.tree.map(lambda x: x[None], DRAUGHTS.from_fen(SUICIDE_FEN))
    variables = _uniform_variables(DRAUGHTS)
    weights = {}
    for play_forced in (True, False):
        config = SearchConfig(algorithm="gumbel", num_simulations=2,
                              max_num_considered_actions=2, play_forced_moves=play_forced)
        search = jax.jit(functools.partial(make_search(DRAUGHTS, apply, config), noise=False))
        out = search(variables, jax.random.PRNGKey(0), state)
        weights[play_forced] = np.asarray(out.policy[0, [SUICIDE, SAFE]])
        if play_forced:
            assert int(out.action[0]) == SAFE
    # With one visit each, only the wrapper's tree has seen the loss behind 11-15.
    assert weights[True][0] < weights[True][1]
    np.testing.assert_allclose(weights[False][0], weights[False][1])


def test_random_starts_are_decisions():
    """The wrapper's random starts are live positions with a choice: forced moves played."""
    starts = jax.jit(jax.vmap(FORCED.random_start))(jax.random.split(jax.random.PRNGKey(5), 256))
    assert not np.any(np.asarray(starts.terminated))
    assert np.all(np.asarray(starts.legal_action_mask).sum(-1) >= 2)
    # The base game's own starts include forced positions, so the wrapper did play some.
    base = jax.jit(jax.vmap(DRAUGHTS.random_start))(jax.random.split(jax.random.PRNGKey(5), 256))
    assert np.any(np.asarray(base.legal_action_mask).sum(-1) == 1)
