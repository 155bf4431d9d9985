"""Baseline players: legality, greedy's one-ply rule, and our UCT MCTS against OpenSpiel's."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest

from azjax import envs
from azjax.config import BASELINES
from azjax.envs.tic_tac_toe import TicTacToe
from azjax.evaluation.arena import play_arena
from azjax.evaluation.baselines import (
    greedy_player,
    mcts_player,
    random_legal_actions,
    random_player,
)
from azjax.evaluation.players import (
    OPPONENT_MAKERS,
    arena_opening_plies,
    is_baseline,
    make_opponent,
    searching_baseline,
)

C4 = envs.make("connect_four")
TTT = envs.make("tic_tac_toe")
ENVS = {"tic_tac_toe": TTT, "connect_four": C4}
SIMS = 200  # our MCTS's one compiled size here: hand-built positions and the OpenSpiel match
BATCH = 70  # its one batch size: 50 games at equal settings + 20 against a weak OpenSpiel
NUM_RANDOM_POSITIONS = 300  # the greedy player's one compiled batch size


@pytest.fixture(scope="module")
def mcts_c4():
    """Our MCTS for connect four, jitted once for batches of BATCH games."""
    return jax.jit(mcts_player(C4, SIMS))


def _batch(states, size=None):
    """Stacks single-game states, repeating them cyclically up to `size` games."""
    rows = np.arange(size or len(states)) % len(states)
    return jax.tree.map(
        lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs])[rows]), *states
    )


def _spiel_state(game, moves):
    state = game.new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def _random_positions(game_id, num, seed):
    """`num` random live positions as move lists (pyspiel and our env share action ids)."""
    game, rng, out = pyspiel.load_game(game_id), np.random.default_rng(seed), []
    max_len = 8 if game_id == "tic_tac_toe" else 38
    while len(out) < num:
        state, moves = game.new_initial_state(), []
        for _ in range(rng.integers(0, max_len + 1)):
            move = int(rng.choice(state.legal_actions()))
            state.apply_action(move)
            moves.append(move)
            if state.is_terminal():
                break
        if not state.is_terminal():
            out.append(tuple(moves))
    return out


def _one_ply_reference(game, moves):
    """(legal, immediate wins, safe moves) from OpenSpiel's rules, for the player to move."""
    state = _spiel_state(game, moves)
    me, legal, wins, safe = state.current_player(), state.legal_actions(), set(), set()
    for move in legal:
        child = state.child(move)
        if child.is_terminal():
            if child.returns()[me] > 0:
                wins.add(move)
            if child.returns()[me] >= 0:
                safe.add(move)
            continue
        reply_wins = any(
            child.child(reply).is_terminal() and child.child(reply).returns()[me] < 0
            for reply in child.legal_actions()
        )
        if not reply_wins:
            safe.add(move)
    return set(legal), wins, safe


# ---- random ---------------------------------------------------------------------------------


def test_random_player_is_uniform_over_legal_moves():
    # Columns 0 and 3 full: five legal columns.
    full = envs.play_moves(C4, [0] * 6 + [3] * 6)
    actions = np.asarray(jax.jit(random_player(C4))(jax.random.PRNGKey(0), _batch([full], 5000)))
    counts = np.bincount(actions, minlength=7)
    assert counts[0] == counts[3] == 0
    assert np.all(np.abs(counts[[1, 2, 4, 5, 6]] - 1000) < 120), counts  # sd ~28
    # Another key, other moves.
    again = np.asarray(jax.jit(random_player(C4))(jax.random.PRNGKey(1), _batch([full], 5000)))
    assert np.mean(again == actions) < 0.4


def test_random_legal_actions_is_uniform_over_a_wide_mask():
    legal = [0, 31, 32, 63, 100, 150, 169]  # draughts-wide rows, both ends included
    masks = np.zeros((7000, 170), bool)
    masks[:, legal] = True
    actions = np.asarray(jax.jit(random_legal_actions)(jax.random.PRNGKey(3), masks))
    counts = np.bincount(actions, minlength=170)
    assert counts.sum() == counts[legal].sum()  # never an illegal action
    assert np.all(np.abs(counts[legal] - 1000) < 120), counts[legal]  # sd ~30


@pytest.mark.parametrize("game_id", ["tic_tac_toe", "connect_four"])
def test_greedy_and_random_follow_the_one_ply_reference(game_id):
    """On random positions, judged with OpenSpiel's rules: greedy wins at once when it can,
    else plays a move after which the opponent cannot win at once, when there is one."""
    env, game = ENVS[game_id], pyspiel.load_game(game_id)
    positions = _random_positions(game_id, NUM_RANDOM_POSITIONS, seed=7)
    states = _batch([envs.play_moves(env, moves) for moves in positions])
    greedy = np.asarray(jax.jit(greedy_player(env))(jax.random.PRNGKey(0), states))
    random = np.asarray(jax.jit(random_player(env))(jax.random.PRNGKey(0), states))
    kinds = {"win": 0, "block or avoid": 0, "all lose": 0, "free": 0}
    for moves, g, r in zip(positions, greedy, random, strict=True):
        legal, wins, safe = _one_ply_reference(game, moves)
        assert r in legal, moves
        if wins:
            kinds["win"] += 1
            assert g in wins, (moves, g, wins)
        elif safe:
            kinds["block or avoid" if safe != legal else "free"] += 1
            assert g in safe, (moves, g, safe)
        else:
            kinds["all lose"] += 1
            assert g in legal, moves
    print(game_id, kinds)
    assert kinds["win"] > 10 and kinds["block or avoid"] > 10 and kinds["free"] > 10


# Hand-built positions (action ids) -> the one right move, for each player to move.
TTT_HAND = {
    (0, 3, 1, 4): 2,  # X wins on the top row (rather than block O's 3-4-5)
    (0, 3, 1, 4, 8): 5,  # O wins on the middle row (rather than block X's 0-1-2)
    (0, 4, 8, 2): 6,  # X blocks O's 2-4-6
    (0, 4, 1): 2,  # O blocks X's 0-1-2
}
C4_HAND = {
    (0, 1, 0, 1, 0, 1): 0,  # X wins in column 0 (rather than block column 1)
    (0, 1, 0, 1, 2, 1, 3): 1,  # O wins in column 1
    (0, 6, 1, 6, 0, 6): 6,  # X blocks column 6
    (0, 6, 0, 5, 0): 0,  # O blocks column 0
}


@pytest.mark.parametrize(("env", "hand"), [(TTT, TTT_HAND), (C4, C4_HAND)])
def test_greedy_wins_and_blocks_for_both_players(env, hand):
    # 300 games: the batch size compiled for the test above.
    states = _batch([envs.play_moves(env, moves) for moves in hand], NUM_RANDOM_POSITIONS)
    actions = np.asarray(jax.jit(greedy_player(env))(jax.random.PRNGKey(0), states))
    np.testing.assert_array_equal(actions, np.resize(list(hand.values()), NUM_RANDOM_POSITIONS))


# ---- MCTS -----------------------------------------------------------------------------------


def test_mcts_wins_and_blocks_for_both_players(mcts_c4):
    states = _batch([envs.play_moves(C4, moves) for moves in C4_HAND], BATCH)
    actions = np.asarray(mcts_c4(jax.random.PRNGKey(0), states))
    want = np.resize(list(C4_HAND.values()), BATCH)
    assert np.mean(actions == want) == 1.0, actions


class _TwiceTicTacToe(TicTacToe):
    """Tic-tac-toe where players do not alternate: X, O, O, X, X, O, O, ..."""

    def _apply_legal_action(self, state, action):
        played = super()._apply_legal_action(state, action)
        return played.replace(current_player=((state.step_count + 2) // 2) % 2)


def test_mcts_does_not_assume_players_alternate():
    # X on 0, O on 3 and 4 (threatening 5); X now moves twice: 1 then 2 (or 2 then 1) wins.
    # A search assuming alternation sees O answer and blocks 5 instead.
    env = _TwiceTicTacToe()
    state = envs.play_moves(env, (0, 3, 4))
    assert int(state.current_player) == 0 and int(env.step(state, 1).current_player) == 0
    actions = np.asarray(jax.jit(mcts_player(env, SIMS))(jax.random.PRNGKey(0), _batch([state], 8)))
    assert set(actions.tolist()) <= {1, 2}, actions


def _play_openspiel(our_act, bots, *, key):
    """Our player against one OpenSpiel bot per game, in lockstep, checking that both rule
    books agree at every ply; we are X in the even-numbered games. Returns our score per game
    (1 win, 0.5 draw, 0 loss)."""
    game = pyspiel.load_game("connect_four")
    num = len(bots)
    our_id = np.arange(num) % 2  # we move first in even games
    states = jax.vmap(C4.init)(jax.random.split(jax.random.PRNGKey(0), num))
    spiel = [game.new_initial_state() for _ in range(num)]
    step = jax.jit(jax.vmap(C4.step))
    our_returns = np.zeros(num)
    for ply in range(6 * 7):
        done = np.asarray(states.terminated)
        assert list(done) == [s.is_terminal() for s in spiel], ply
        if done.all():
            break
        ours = ~done & (np.asarray(states.current_player) == our_id)
        actions = np.zeros(num, np.int32)
        if ours.any():
            actions = np.array(our_act(jax.random.fold_in(key, ply), states))
        for g in np.flatnonzero(~done):
            if not ours[g]:
                actions[g] = bots[g].step(spiel[g])
            assert actions[g] in spiel[g].legal_actions(), (g, ply)
            spiel[g].apply_action(int(actions[g]))
        states = step(states, jnp.asarray(actions))
        our_returns += np.asarray(states.rewards)[np.arange(num), our_id]
    assert all(s.is_terminal() for s in spiel)
    spiel_returns = [s.returns()[i] for s, i in zip(spiel, our_id, strict=True)]
    np.testing.assert_array_equal(our_returns, spiel_returns)  # same rules, same result
    return (our_returns + 1) / 2


def _openspiel_mcts(num_simulations, seed):
    game = pyspiel.load_game("connect_four")
    evaluator = pyspiel.RandomRolloutEvaluator(1, seed)  # n_rollouts=1
    return pyspiel.MCTSBot(
        game, evaluator, math.sqrt(2), num_simulations, 1000, False, seed, False
    )  # uct_c, max_simulations, max_memory_mb, solve=False, seed, verbose


def test_mcts_scores_about_even_against_openspiel_mcts(mcts_c4):
    """Same settings (UCT c=sqrt(2), one random rollout, no noise, 200 simulations) on connect
    four, 50 games, each side X in half. The same match against OpenSpiel at 10 simulations
    (20 games, in the same batch) shows the comparison can tell strengths apart."""
    equal = _openspiel_mcts(SIMS, seed=1)
    weak = _openspiel_mcts(10, seed=2)
    bots = [equal] * 50 + [weak] * 20
    scores = _play_openspiel(mcts_c4, bots, key=jax.random.PRNGKey(5))
    even, strong = scores[:50].mean(), scores[50:].mean()
    print(f"our MCTS vs OpenSpiel MCTS, {SIMS} simulations each: {even:.3f} over 50 games")
    print(f"our MCTS ({SIMS}) vs OpenSpiel MCTS (10): {strong:.3f} over 20 games")
    assert 0.3 <= even <= 0.7
    assert strong >= 0.85


def test_more_simulations_win():
    result = play_arena(
        C4, mcts_player(C4, 200), mcts_player(C4, 10), key=jax.random.PRNGKey(6), num_games=20
    )
    print("MCTS 200 vs MCTS 10:", result)
    assert result.score >= 0.85, str(result)
    assert (result.illegal_moves_a, result.illegal_moves_b) == (0, 0)


def test_mcts_rejects_zero_simulations():
    with pytest.raises(ValueError, match="num_simulations"):
        mcts_player(C4, 0)


def test_every_baseline_name_has_one_maker_and_plays_legal_moves():
    """`azjax.config.BASELINES` names the opponents and `OPPONENT_MAKERS` builds them: the
    same kinds, each made (memoised) from its written name, its arena treatment read off the
    table."""
    assert list(OPPONENT_MAKERS) == list(BASELINES)
    states = jax.vmap(TTT.init)(jax.random.split(jax.random.PRNGKey(0), 4))
    for kind, entry in BASELINES.items():
        name = f"{kind}:1" if entry.count else kind
        act = make_opponent(TTT, name)
        assert act is make_opponent(TTT, name) and is_baseline(name)
        actions = np.asarray(act(jax.random.PRNGKey(1), states))
        assert np.asarray(states.legal_action_mask)[np.arange(4), actions].all(), name
        assert searching_baseline(name) == entry.searches
        assert (arena_opening_plies(name) > 0) == entry.fixed_moves
    assert not is_baseline("connect_four") and arena_opening_plies("connect_four") > 0
    with pytest.raises(ValueError, match="unknown opponent 'stockfish'"):
        make_opponent(TTT, "stockfish")
