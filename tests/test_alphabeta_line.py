"""The line an alpha-beta search expects (`azjax.core.alphabeta_line`): its move first, legal
throughout, and, where the search saw to the end of the game, a game that ends in the result
the search's value names."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.core.alphabeta import AlphaBetaConfig, alphabeta_result, alphabeta_run, alphabeta_start
from azjax.core.alphabeta_line import alphabeta_line
from azjax.envs.core import jitted_step
from azjax.evaluation.baselines import random_player

TTT = envs.make("tic_tac_toe")
C4 = envs.make("connect_four")


def _positions(env, num: int, plies: int, seed: int):
    """`num` positions after `plies` random plies each (a finished game stays finished)."""
    states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(seed), num))
    rand, key = random_player(env), jax.random.PRNGKey(seed + 1)
    for _ in range(plies):
        key, k = jax.random.split(key)
        states = jax.vmap(env.step)(states, rand(k, states))
    return states


def _search_and_line(env, states, depth: int, length: int):
    config = AlphaBetaConfig(depth=depth)

    @jax.jit
    def run(states):
        carry = alphabeta_run(env, config, alphabeta_start(env, jax.random.PRNGKey(0), states,
                                                           config))
        result = alphabeta_result(carry)
        return result, alphabeta_line(env, carry, result.action, length)

    return jax.device_get(run(states))


def _replay(env, state, line):
    """The states along `line` (its -1 padding dropped) from one state."""
    step, seen = jitted_step(env), [state]
    for action in line[line >= 0]:
        assert bool(seen[-1].legal_action_mask[action]), "an illegal action in the line"
        seen.append(step(seen[-1], jnp.int32(action)))
    return seen


def test_a_whole_game_search_expects_a_line_that_ends_in_its_value():
    """Tic-tac-toe searched to its end: every live root's line starts with the search's move,
    is legal, and plays the game out to a result worth the search's value to the root's
    player (a drawn root: a drawn line; a won one: a win)."""
    states = _positions(TTT, 24, 4, seed=3)
    result, lines = _search_and_line(TTT, states, depth=9, length=9)
    live = ~np.asarray(states.terminated | states.truncated)
    assert live.sum() >= 12
    for game in range(24):
        state = jax.tree.map(lambda x, g=game: x[g], states)
        if not live[game]:
            assert np.all(lines[game] == -1)
            continue
        assert lines[game][0] == result.action[game]
        seen = _replay(TTT, state, lines[game])
        end = seen[-1]
        assert bool(end.terminated), f"game {game}: the line stops before the game ends"
        mover = int(state.current_player)
        assert float(end.rewards[mover]) == float(result.value[game])


def test_a_line_is_legal_and_at_most_its_length_where_the_search_stops_early():
    """Connect four at depth 4: the lines stop where the table holds no exact value, each
    starts with the move played, and none is longer than asked."""
    states = _positions(C4, 16, 6, seed=5)
    result, lines = _search_and_line(C4, states, depth=4, length=6)
    assert lines.shape == (16, 6)
    for game in range(16):
        state = jax.tree.map(lambda x, g=game: x[g], states)
        if bool(state.terminated):
            continue
        assert lines[game][0] == result.action[game]
        real = lines[game][lines[game] >= 0]
        assert np.all(lines[game][len(real):] == -1)  # -1 only after the line
        _replay(C4, state, lines[game])
