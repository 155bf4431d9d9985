"""The solved draughts endgame table (`azjax.envs.draughts_endings`) and the search that reads
it (`search.endgame_table`): every sampled position's result against its moves as the
plain-Python reference rules make them, the index against a plain-Python one, both colours
alike, perfect play to the table's end, the config's checks and the cache.

The tests solve the table of up to 3 pieces (a few seconds); 4 and 5 are the same code, and
their indices are checked without solving them.
"""

from __future__ import annotations

import copy
import itertools
import math
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference_draughts import SQUARE_OF, RefDraughts

from azjax import envs
from azjax.config import SearchConfig, SelfPlayConfig
from azjax.core.endgames import endgame_adjudicator
from azjax.core.search import make_search, make_search_engine
from azjax.core.selfplay import init_selfplay, make_selfplay
from azjax.envs import draughts_endings
from azjax.envs.core import jitted_step, winner_of
from azjax.envs.draughts_endings import build_table, load_table

PIECES = 3


@pytest.fixture(scope="module")
def table():
    return build_table(PIECES)


def _offset(n: int) -> int:
    """Where the block of n pieces starts, by the module's docstring."""
    return sum(math.comb(32, m) * 4 ** m for m in range(2, n))


def _decode(index: int) -> dict[int, str]:
    """{PDN square: letter} of a table index, the mover as Black (`b`/`B`) - written from the
    module's docstring, not its code."""
    n = max(m for m in range(2, 6) if _offset(m) <= index)
    rank, code = divmod(index - _offset(n), 4 ** n)
    squares = []
    for slot in reversed(range(n)):  # colexicographic rank: the highest square first
        square = max(s for s in range(32) if math.comb(s, slot + 1) <= rank)
        rank -= math.comb(square, slot + 1)
        squares.insert(0, square)
    pieces = {}
    for slot, square in enumerate(squares):
        kind = (code >> (2 * slot)) & 3
        pieces[square + 1] = ("wW" if kind >> 1 else "bB")[kind & 1]
    return pieces


def _key(pieces: dict[int, str], to_move: int) -> int:
    """The table index of a position (PDN square: letter) with `to_move` to move, by the
    docstring."""
    view = {(33 - s if to_move else s): letter for s, letter in pieces.items()}
    n, rank, code = len(view), 0, 0
    for slot, square in enumerate(sorted(view)):
        letter = view[square]
        theirs = (letter.lower() == "w") != (to_move == 1)
        rank += math.comb(square - 1, slot + 1)
        code += (2 * theirs + letter.isupper()) << (2 * slot)
    return _offset(n) + rank * 4 ** n + code


def _entries(table) -> dict[int, int]:
    """{index: result} of the table's positions."""
    at = table.positions()
    return dict(zip(at.tolist(), table.results[at].tolist(), strict=True))


def _fen(pieces: dict[int, str], to_move: int) -> str:
    """The FEN of a mover's-view position (`_decode`) with Black to move (`to_move` 0), or
    turned round by 180 degrees, colours swapped, with White to move (1)."""

    def side(letters):
        return ",".join(("K" if p.isupper() else "") + str(33 - s if to_move else s)
                        for s, p in pieces.items() if p in letters)

    mover, other = side("bB"), side("wW")
    return f"B:W{other}:B{mover}" if to_move == 0 else f"W:W{mover}:B{other}"


def _children(pieces: dict[int, str]) -> list[tuple[dict[int, str], int, bool]]:
    """Each whole move of Black to move, by the reference: (pieces after, side to move, the
    game over with Black the winner)."""
    game = RefDraughts.from_position(pieces, to_move=0, draw_rule="openspiel")
    out = []
    for path in game.moves:
        child = copy.deepcopy(game)
        for a, b in zip(path, path[1:], strict=False):
            sep = "x" if abs(a[0] - b[0]) == 2 else "-"
            child.play(f"{SQUARE_OF[a]}{sep}{SQUARE_OF[b]}")
        after = {SQUARE_OF[rc]: child.grid[rc[0]][rc[1]] for rc in SQUARE_OF
                 if child.grid[rc[0]][rc[1]]}
        out.append((after, child.to_move, child.over and child.winner == 0))
    return out


def test_every_sampled_result_is_its_best_move_by_the_reference_rules(table):
    results = _entries(table)
    rng = random.Random(0)
    by_kind = {k: [key for key, r in results.items() if np.sign(r) == k] for k in (-1, 0, 1)}
    sample = [key for k in (-1, 0, 1) for key in rng.sample(by_kind[k], 150)]
    for key in sample:
        pieces, result = _decode(key), results[key]
        replies = []
        for after, to_move, won in _children(pieces):
            replies.append(-1 if won else results[_key(after, to_move)])
        if result > 0:  # won in d: some move leaves the other side lost in d - 1
            assert min(-r for r in replies if r < 0) == result, pieces
        elif result < -1:  # lost in m = -result - 1: every move leaves the other side won,
            # the slowest in m - 1
            assert all(r > 0 for r in replies) and max(replies) == -result - 2, pieces
        elif result == -1:  # lost now: no move at all
            assert not replies, pieces
        else:  # drawn: no move wins, and some move keeps the draw
            assert not any(r < 0 for r in replies) and 0 in replies, pieces


def test_the_table_counts_what_checkers_players_know(table):
    results = _entries(table)
    # A king against a king: a draw wherever neither can take the other at once.
    assert results[_key({1: "B", 32: "W"}, 0)] == 0
    # Two kings against one win, even from across the board; the lone king to move loses.
    assert results[_key({1: "B", 2: "B", 32: "W"}, 0)] > 0
    assert results[_key({1: "B", 2: "B", 32: "W"}, 1)] < 0
    # A king and a man against a king win too, with either side to move.
    assert results[_key({5: "B", 6: "b", 32: "W"}, 0)] > 0
    assert results[_key({5: "B", 6: "b", 32: "W"}, 1)] < 0
    assert table.max_pieces == PIECES


def test_the_index_numbers_every_position_once(table):
    """Every position of 2-3 pieces, listed by plain Python (a side without pieces, or a
    man on its crowning row, is none), has its own index by the docstring, and those are
    exactly the table's positions; `_decode` reads each back."""
    indices = []
    for n in range(2, PIECES + 1):
        for squares in itertools.combinations(range(1, 33), n):
            for letters in itertools.product("bBwW", repeat=n):
                pieces = dict(zip(squares, letters, strict=True))
                if ("b" not in letters and "B" not in letters) or (
                        "w" not in letters and "W" not in letters) or any(
                        (p == "b" and s >= 29) or (p == "w" and s <= 4)
                        for s, p in pieces.items()):
                    continue
                indices.append(_key(pieces, 0))
    assert len(set(indices)) == len(indices)
    np.testing.assert_array_equal(np.sort(indices), table.positions())
    for index in random.Random(3).sample(indices, 200):
        assert _key(_decode(index), 0) == index


def test_the_jitted_index_of_four_and_five_pieces_is_the_docstrings():
    """Positions of 4 and 5 pieces, either side to move, up to the last entry of the
    5-piece table: the jitted index is the plain-Python one (no table solved)."""
    env = envs.make("draughts")
    rng = random.Random(4)
    fens, expected = [], []
    for _ in range(200):
        n = rng.choice([4, 5])
        squares = rng.sample(range(5, 29), n)  # off both crowning rows: men may stand there
        letters = ["b", "w"] + [rng.choice("bBwW") for _ in range(n - 2)]
        pieces = dict(zip(squares, letters, strict=True))
        to_move = rng.randrange(2)
        fens.append(_fen_of_board(pieces, to_move))
        expected.append(_key(pieces, to_move))
    last = {28: "B", 29: "W", 30: "W", 31: "W", 32: "W"}  # the highest squares, all kings
    fens.append(_fen_of_board(last, 0))
    expected.append(_key(last, 0))
    assert _key({29: "W", 30: "W", 31: "W", 32: "W", 28: "W"}, 0) == (
        draughts_endings.table_size(5) - 1)
    states = [env.from_fen(f) for f in fens]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)

    @jax.jit
    @jax.vmap
    def index(pieces, kings, player):
        return draughts_endings.position_index(
            *draughts_endings.mover_view(pieces, kings, player))

    np.testing.assert_array_equal(
        np.asarray(index(batch.pieces, batch.kings, batch.current_player)), expected)


def _fen_of_board(pieces: dict[int, str], to_move: int) -> str:
    """The FEN of a position given by the board's own colours (not the mover's view)."""

    def side(letters):
        return ",".join(("K" if p.isupper() else "") + str(s)
                        for s, p in sorted(pieces.items()) if p in letters)

    return f"{'BW'[to_move]}:W{side('wW')}:B{side('bB')}"


def test_jitted_lookup_agrees_with_the_table_for_both_colours(table):
    env = envs.make("draughts")
    lookup = jax.jit(jax.vmap(table.lookup_fn()))
    results = _entries(table)
    rng = random.Random(1)
    fens, expected = [], []
    for key in rng.sample(sorted(results), 64):
        pieces = _decode(key)
        # The same position with Black to move, and turned round with White to move.
        fens += [_fen(pieces, 0), _fen(pieces, 1)]
        expected += [results[key]] * 2
    states = [env.from_fen(f) for f in fens]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    found, got = lookup(batch.pieces, batch.kings, batch.current_player)
    assert np.all(np.asarray(found))
    np.testing.assert_array_equal(np.asarray(got), expected)
    # Four pieces are beyond a 3-piece table.
    big = env.from_fen("B:W31,32:B1,2")
    found, _ = jax.jit(table.lookup_fn())(big.pieces, big.kings, big.current_player)
    assert not bool(found)


@pytest.mark.parametrize("longest", [100, 161])
def test_the_lookup_reads_results_as_long_as_the_tables(longest):
    """A table whose results all fit a byte is read from an int8 constant (the 4-piece one,
    whose longest win takes 109 moves: half the bytes in memory and in the browser page), one
    with longer wins (5 pieces: 161) from int16; both read back every result."""
    env = envs.make("draughts")
    positions = [{1: "b", 32: "w"}, {5: "B", 20: "W"}, {9: "b", 10: "W"}]
    wanted = [longest, -longest - 1, 0]
    results = np.full(draughts_endings.table_size(2), draughts_endings.NOT_A_POSITION,
                      np.int16)
    for pieces, result in zip(positions, wanted, strict=True):
        results[_key(pieces, 0)] = result
    table = draughts_endings.EndgameTable(results=results, max_pieces=2)
    lookup = jax.jit(table.lookup_fn())
    for pieces, result in zip(positions, wanted, strict=True):
        for to_move in (0, 1):
            state = env.from_fen(_fen(pieces, to_move))
            found, got = lookup(state.pieces, state.kings, state.current_player)
            assert bool(found) and int(got) == result, (pieces, to_move, int(got), result)
    constant = draughts_endings._narrowest(results)
    assert constant.dtype == (np.int8 if longest < 128 else np.int16)


def _stubborn_network(variables, obs):
    """A network that knows nothing of the game: value 0 everywhere, and a prior that
    strongly prefers lower action ids, far above the table's small differences between a
    quick win and a slow one, which only the table's own move at the root respects."""
    del variables
    num_actions = envs.make("draughts").num_actions
    logits = -3.0 * jnp.arange(num_actions, dtype=jnp.float32)
    return jnp.broadcast_to(logits, (obs.shape[0], num_actions)), jnp.zeros(obs.shape[0])


@pytest.fixture(scope="module")
def table_search(table, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("AZJAX_CACHE", str(tmp_path_factory.mktemp("cache")))
    np.save(draughts_endings.table_path(PIECES), table.results)
    load_table.cache_clear()
    config = SearchConfig(num_simulations=8, endgame_table=PIECES, play_forced_moves=True)
    env = envs.make("draughts")
    yield env, jax.jit(make_search(env, _stubborn_network, config), static_argnames="noise")
    load_table.cache_clear()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("noise", [False, True], ids=["play", "self-play"])
def test_a_network_that_knows_nothing_plays_table_endings_perfectly(table, table_search,
                                                                     noise):
    """Both sides search with a network that knows nothing, greedy as in play or with
    self-play's noise: the table's moves alone win each won ending in exactly its count of
    moves, under the laws' draw rules."""
    env, search = table_search
    step = jitted_step(env)
    results = _entries(table)
    rng = random.Random(2 + noise)
    won = sorted(key for key, r in results.items() if 9 <= r <= 41)
    for key in rng.sample(won, 3):
        pieces = _decode(key)
        state = env.from_fen(_fen(pieces, 0))
        moves = 0
        while not bool(state.terminated):
            mover = int(state.current_player)
            out = search(None, jax.random.PRNGKey(moves), jax.tree.map(lambda x: x[None], state),
                         noise=noise)
            state = step(state, out.action[0])
            moves += int(state.current_player) != mover or bool(state.terminated)
        assert winner_of(state) == 0 and moves == results[key], (pieces, moves)


def test_the_search_engine_plays_the_tables_move_too(table, table_search):
    env, _ = table_search
    config = SearchConfig(num_simulations=8, endgame_table=PIECES)
    engine = make_search_engine(env, _stubborn_network, config)
    # Black's two kings against a lone king: every move keeps the win, 9-14 alone wins in 19
    # moves (the others in 23), and the network prefers 9-5.
    pieces = {9: "B", 31: "B", 28: "W"}
    state = jax.tree.map(lambda x: x[None], env.from_fen("B:WK28:BK9,K31"))

    @jax.jit
    def search(state):
        run = engine.start(None, jax.random.PRNGKey(0), state, capacity=9,
                           planned_simulations=8)
        return engine.finish(engine.simulate(None, run, 8)).action[0]

    action = int(search(state))
    results = _entries(table)
    moves = RefDraughts.from_position(pieces, to_move=0).whole_moves()
    wins = {env.str_to_action(move): -results[_key(after, to_move)]
            for move, (after, to_move, _) in zip(moves, _children(pieces), strict=True)}
    assert sorted(wins.values()) == [19, 23, 23, 23, 23, 23]
    assert env.action_to_str(action) == "9-14"


def test_alphabeta_over_the_network_ends_its_lines_in_the_table_too(table_search):
    """`search.algorithm: alphabeta` with the table: every line of the lone-king ending ends
    in the table as a win (the table's value, whatever the network says), and the root plays the
    table's quickest win, 9-14, not the network's favourite 9-5."""
    env, _ = table_search
    config = SearchConfig(algorithm="alphabeta", alphabeta_depth=2, endgame_table=PIECES)
    search = jax.jit(make_search(env, _stubborn_network, config))
    state = jax.tree.map(lambda x: x[None], env.from_fen("B:WK28:BK9,K31"))
    out = search(None, jax.random.PRNGKey(0), state)
    assert env.action_to_str(int(out.action[0])) == "9-14"
    # The table's value of the position after 9-14: White to move, lost in 18 moves.
    assert float(out.value[0]) == pytest.approx(1 - 18 * draughts_endings.MOVE_DISCOUNT)


@pytest.mark.parametrize("with_table", [True, False], ids=["table", "no-table"])
def test_self_play_games_end_where_the_table_knows_them(table, table_search, with_table):
    """Self-play from won and lost positions of the table: with the search's table each game
    ends on its first move, valued at the root's exact result (the table's move keeps it);
    without it, the same games play on."""
    env, search = table_search
    results = _entries(table)
    roots = random.Random(5).sample(sorted(k for k, r in results.items() if abs(r) >= 9), 8)
    config = SelfPlayConfig(batch_size=len(roots), chunk_length=4, max_game_length=4,
                            temperature_moves=4, symmetries=False)
    adjudicate = endgame_adjudicator(env, SearchConfig(endgame_table=PIECES))
    play = jax.jit(make_selfplay(env, search, config,
                                 adjudicate=adjudicate if with_table else None))
    state = init_selfplay(env, config, jax.random.PRNGKey(0))
    starts = [env.from_fen(_fen(_decode(key), 0)) for key in roots]
    state = state.replace(games=jax.tree.map(lambda *x: jnp.stack(x), *starts))
    _, positions, emit, _ = play(None, jax.random.PRNGKey(1), state)
    valued = np.asarray(emit & positions.value_mask)
    if not with_table:
        assert not valued.any()
        return
    # The game's value is its root's exact result, one move nearer the end.
    root = np.asarray(draughts_endings.result_value(jnp.asarray([results[k] for k in roots])))
    expected = np.sign(root) * (np.abs(root) + draughts_endings.MOVE_DISCOUNT)
    np.testing.assert_allclose(np.asarray(positions.value)[valued], expected, rtol=1e-6)


def test_the_search_and_self_play_share_one_table(table_search):
    """One adjudicator per game and size, whatever else the configs say: a training step that
    compiles the search and self-play together holds one copy of the table's arrays."""
    env, _ = table_search
    search = endgame_adjudicator(env, SearchConfig(num_simulations=8, endgame_table=PIECES))
    assert endgame_adjudicator(env, SearchConfig(endgame_table=PIECES)) is search
    assert endgame_adjudicator(env, SearchConfig()) is None


def test_the_cache_is_read_back_and_a_broken_one_solved_again(tmp_path, monkeypatch):
    monkeypatch.setenv("AZJAX_CACHE", str(tmp_path))
    solve = load_table.__wrapped__  # past the in-process cache
    first = solve(2)
    path = draughts_endings.table_path(2)
    assert path.exists()
    again = solve(2)
    np.testing.assert_array_equal(again.results, first.results)
    path.write_bytes(b"not a table")
    repaired = solve(2)
    np.testing.assert_array_equal(repaired.results, first.results)
    np.testing.assert_array_equal(np.load(path), first.results)  # written again, whole
