"""The solver (`azjax.core.solver`): proven wins, losses and draws in tic-tac-toe, against an
exact solution of the game; the shortest win, the longest resistance, an early stop."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from azjax import envs
from azjax.config import SearchConfig
from azjax.core.search import make_search, make_search_engine
from azjax.core.solver import PLY_SCALE, PROVEN_DRAW, PROVEN_LOSS, PROVEN_WIN, UNPROVEN

TTT = envs.make("tic_tac_toe")
M = PLY_SCALE
CAPACITY, PLAN, GAMES = 201, 200, 4

# ---- tic-tac-toe solved exactly -----------------------------------------------------------

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _winner(board):
    for x, y, z in LINES:
        if board[x] != -1 and board[x] == board[y] == board[z]:
            return board[x]
    return None


def _mover(board):
    return sum(cell != -1 for cell in board) % 2


@functools.cache
def move_scores(board: tuple) -> dict[int, int]:
    """Each legal move's score for the player to move, in the solver's encoding: +(M - p) a
    win in p plies (the shortest), -(M - p) a loss in p (the longest), 0 a draw."""
    player, scores = _mover(board), {}
    for action in range(9):
        if board[action] != -1:
            continue
        child = board[:action] + (player,) + board[action + 1:]
        if _winner(child) == player:
            scores[action] = M - 1
        elif -1 not in child:
            scores[action] = 0
        else:
            best = max(move_scores(child).values())
            scores[action] = -(best - int(np.sign(best)))
    return scores


def solve(board) -> int:
    """The score of an unfinished position for its player to move."""
    return max(move_scores(tuple(int(c) for c in board)).values())


# Positions found by brute force over `move_scores` (X moves first; cells 0-8 row-major).
WIN_IN_1_OR_3 = [0, 1, 3, 2]  # X: 6 wins now; 4 wins in 3 too
WIN_IN_3 = [0, 1, 2, 3]  # X wins in 3 at best
LOST_IN_4 = [0, 1, 3, 2, 7]  # O loses: in 2 after most moves, in 4 after the best
DRAWN = [0, 1, 2, 4, 7]  # every move draws


def _batch(move_lists):
    states = [envs.play_moves(TTT, moves) for moves in move_lists]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def _best_moves(moves):
    board = tuple(int(c) for c in envs.play_moves(TTT, moves).board)
    scores = move_scores(board)
    best = max(scores.values())
    return {a for a, s in scores.items() if s == best}, best, scores


def test_the_positions_are_what_their_names_say():
    assert _best_moves(WIN_IN_1_OR_3)[1] == M - 1
    assert M - 3 in _best_moves(WIN_IN_1_OR_3)[2].values()
    assert _best_moves(WIN_IN_3)[1] == M - 3
    scores = _best_moves(LOST_IN_4)[2]
    assert max(scores.values()) == -(M - 4) and -(M - 2) in scores.values()
    assert set(_best_moves(DRAWN)[2].values()) == {0}


# ---- the search -----------------------------------------------------------------------------


def _apply(variables, obs):
    """A linear network: logits = bias + obs @ policy, value = tanh(obs @ value)."""
    flat = obs.reshape(obs.shape[0], -1)
    return variables["bias"] + flat @ variables["policy"], jnp.tanh(flat @ variables["value"])


def _variables(seed=None, bias=None):
    """Random weights (`seed`), or zeros with a prior `bias` [9] (uniform by default)."""
    features = int(np.prod(TTT.observation_shape))
    if seed is None:
        return {"bias": jnp.zeros(9) if bias is None else jnp.asarray(bias, jnp.float32),
                "policy": jnp.zeros((features, 9)), "value": jnp.zeros(features)}
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    return {"bias": jax.random.normal(keys[0], (9,)),
            "policy": jax.random.normal(keys[1], (features, 9)),
            "value": 0.5 * jax.random.normal(keys[2], (features,))}


@functools.cache
def _steps(algorithm):
    config = SearchConfig(algorithm=algorithm, solver=True, max_num_considered_actions=9,
                          qtransform="completed_by_mix_value" if algorithm == "gumbel"
                          else "by_parent_and_siblings")
    engine = make_search_engine(TTT, _apply, config)

    @jax.jit
    def search(variables, states):
        state = engine.start(variables, jax.random.PRNGKey(0), states, capacity=CAPACITY,
                             planned_simulations=PLAN)
        state = engine.simulate(variables, state, PLAN)
        return engine.finish(state), state, engine.root_proven(state)

    return engine, search


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_the_solver_proves_wins_losses_and_draws_and_plays_their_best_moves(algorithm):
    """A win in 1, a win in 3, a loss whose best defence lasts 4 plies, a draw: each root is
    proven with its exact value and plies, its best move played, and the search stops."""
    positions = [WIN_IN_1_OR_3, WIN_IN_3, LOST_IN_4, DRAWN]
    engine, search = _steps(algorithm)
    out, state, proven = search(_variables(), _batch(positions))
    np.testing.assert_array_equal(proven, [PROVEN_WIN, PROVEN_WIN, PROVEN_LOSS, PROVEN_DRAW])
    np.testing.assert_array_equal(out.value, [1.0, 1.0, -1.0, 0.0])
    np.testing.assert_array_equal(state.tree.extra_data.score[:, 0], [M - 1, M - 3, -(M - 4), 0])
    for game, moves in enumerate(positions):
        assert int(out.action[game]) in _best_moves(moves)[0], (game, out.action)
    assert (np.asarray(engine.simulations_done(state)) < PLAN).all()
    assert _assert_proofs_are_exact(state) > 20


def test_a_kept_tree_keeps_its_proofs():
    """After the winning move of a proven win in 3, the kept root is the opponent's proven
    loss: the next search runs no simulation and plays the longest resistance."""
    engine, search = _steps("puct")
    states = _batch([WIN_IN_3] * GAMES)
    out, state, _ = search(_variables(), states)
    kept = jax.jit(engine.advance)(state, out.action)
    after = jax.vmap(TTT.step)(states, out.action)
    start = jax.jit(functools.partial(engine.start, capacity=CAPACITY,
                                      planned_simulations=PLAN // 2))  # room for the kept tree
    resumed = jax.jit(engine.simulate, static_argnums=2)(
        _variables(), start(_variables(), jax.random.PRNGKey(1), after, kept=kept), PLAN // 2)
    np.testing.assert_array_equal(engine.root_proven(resumed), PROVEN_LOSS)
    np.testing.assert_array_equal(engine.simulations_done(resumed), 0)
    np.testing.assert_array_equal(resumed.tree.extra_data.score[:, 0], -(M - 2))
    reply = jax.jit(engine.finish)(resumed).action
    for game in range(GAMES):
        moves = WIN_IN_3 + [int(out.action[game])]
        assert int(reply[game]) in _best_moves(moves)[0]


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_the_solver_plays_the_shortest_win_when_the_prior_prefers_a_slower_one(algorithm):
    """The prior all but certain of cell 4, a win in 3; cell 6 wins at once: it is played."""
    slow, fast = 4, 6
    _, _, scores = _best_moves(WIN_IN_1_OR_3)
    assert scores[slow] == M - 3 and scores[fast] == M - 1
    bias = np.zeros(9)
    bias[slow] = 8.0
    _, search = _steps(algorithm)
    out, state, proven = search(_variables(bias=bias), _batch([WIN_IN_1_OR_3] * GAMES))
    np.testing.assert_array_equal(out.action, fast)
    np.testing.assert_array_equal(proven, PROVEN_WIN)
    np.testing.assert_array_equal(state.tree.extra_data.score[:, 0], M - 1)


def _assert_proofs_are_exact(state):
    """Every node the tree calls proven has the exact score (`move_scores`)."""
    tree = jax.tree.map(np.asarray, state.tree)
    proven, score = tree.extra_data.proven, tree.extra_data.score
    boards = tree.embeddings.board
    checked = 0
    for game, node in zip(*np.nonzero(proven), strict=True):
        board = tuple(int(c) for c in boards[game, node])
        if _winner(board) is not None or -1 not in board:  # terminal: the mover's result
            parent = tree.parents[game, node]
            mover = _mover(tuple(int(c) for c in boards[game, parent]))
            result = 0 if _winner(board) is None else (1 if _winner(board) == mover else -1)
            assert score[game, node] == result * M, (game, node)
            continue
        assert score[game, node] == solve(board), (game, node, board)
        assert tree.node_values[game, node] == np.sign(score[game, node])
        checked += 1
    return checked


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
@given(openings=st.lists(st.tuples(st.permutations(range(9)), st.integers(0, 7)),
                         min_size=GAMES, max_size=GAMES),
       seed=st.integers(0, 2**16))
def test_every_node_the_solver_proves_is_proven_by_minimax(algorithm, openings, seed):
    move_lists = []
    for order, length in openings:
        moves, board = [], [-1] * 9
        for action in order[:length]:
            board[action] = _mover(board)
            moves.append(action)
            if _winner(board) is not None or -1 not in board:
                moves.pop()
                break
        move_lists.append(moves)
    engine, search = _steps(algorithm)
    out, state, proven = search(_variables(seed), _batch(move_lists))
    _assert_proofs_are_exact(state)
    for game, moves in enumerate(move_lists):
        best, score, _ = _best_moves(moves)
        if proven[game] != UNPROVEN:
            assert proven[game] == np.sign(score)
            assert int(out.action[game]) in best


@pytest.mark.parametrize("contempt", [0.0, 0.25])
def test_make_search_with_the_solver_proves_wins_and_draws_at_their_exact_values(contempt):
    """`make_search` runs the solver; with contempt a proven draw is worth exactly -contempt
    to the player to move at the root, a win still 1."""
    config = SearchConfig(num_simulations=64, solver=True, max_num_considered_actions=9,
                          contempt=contempt)
    search = jax.jit(functools.partial(make_search(TTT, _apply, config), noise=False))
    out = search(_variables(), jax.random.PRNGKey(0),
                 _batch([WIN_IN_1_OR_3, [0, 3, 1, 4], DRAWN, DRAWN]))
    np.testing.assert_array_equal(out.action[:2], [6, 2])
    np.testing.assert_array_equal(out.value, [1.0, 1.0, -contempt, -contempt])


# ---- a draughts ending under the laws' forty-move rule -------------------------------------

DRAUGHTS = envs.make("draughts")  # the laws' rules
# Black's kings on 3 and 15 against White's king on 16, Black to move (found by brute force
# over the plain-Python reference, tests/reference_draughts.py): 15-11 wins in 3 plies (White's
# only replies walk into a capture of its last piece); 3-7 wins too, but in 5, and with the
# forty-move counter at 77 the king moves of that line reach 80 first: a draw.
ENDING_FEN, QUICK, SLOW = "B:WK16:BK3,K15", "15-11", "3-7"


def _prior_apply(variables, obs):
    """A network with a fixed prior (`variables["bias"]` [170]) and value 0 everywhere."""
    logits = jnp.broadcast_to(variables["bias"], (obs.shape[0], DRAUGHTS.num_actions))
    return logits, jnp.zeros(obs.shape[0])


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_a_draughts_ending_is_won_by_the_shortest_win_before_the_forty_move_rule(algorithm):
    """The prior all but certain of the slow win: with the counter at 0 the search proves the
    win in 3 and plays it; with the counter at 77 the slow line is a draw and the proof and
    the move are the same."""
    config = SearchConfig(algorithm=algorithm, solver=True, max_num_considered_actions=8,
                          qtransform="completed_by_mix_value" if algorithm == "gumbel"
                          else "by_parent_and_siblings")
    engine = make_search_engine(DRAUGHTS, _prior_apply, config)
    bias = jnp.zeros(DRAUGHTS.num_actions).at[DRAUGHTS.str_to_action(SLOW)].set(8.0)

    @jax.jit
    def search(states):
        state = engine.start({"bias": bias}, jax.random.PRNGKey(0), states, capacity=CAPACITY,
                             planned_simulations=PLAN)
        state = engine.simulate({"bias": bias}, state, PLAN)
        return engine.finish(state), state, engine.root_proven(state)

    states = [DRAUGHTS.from_fen(ENDING_FEN, counter=counter) for counter in (0, 77)]
    out, state, proven = search(jax.tree.map(lambda *xs: jnp.stack(xs), *states))
    np.testing.assert_array_equal(proven, PROVEN_WIN)
    np.testing.assert_array_equal(state.tree.extra_data.score[:, 0], M - 3)
    assert [DRAUGHTS.action_to_str(int(a)) for a in out.action] == [QUICK, QUICK]
    assert (np.asarray(engine.simulations_done(state)) < PLAN).all()  # proven: stopped early
