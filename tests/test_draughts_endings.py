"""The exact king-ending table of tools/draughts_ending_values.py: its moves and values
against the plain-Python reference rules, its backward solve against a direct minimax, known
values, and the env positions it hands the networks."""

from __future__ import annotations

import copy
import functools
import importlib.util
import itertools
import random

import jax
import numpy as np
from conftest import REPO_ROOT
from reference_draughts import SQUARE_OF, RefDraughts

from azjax import envs

_SPEC = importlib.util.spec_from_file_location(
    "draughts_ending_values", REPO_ROOT / "tools" / "draughts_ending_values.py")
endings = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(endings)
WIN, DRAW, LOSS = endings.WIN, endings.DRAW, endings.LOSS


def _reference_results(mover: frozenset, other: frozenset) -> set:
    """(mover's squares, other's squares) after each whole move the reference finds for
    Black's kings on `mover` against White's on `other` (0-based squares)."""
    pieces = {s + 1: "B" for s in mover} | {s + 1: "W" for s in other}
    game = RefDraughts.from_position(pieces, to_move=0)
    results = set()
    for path in game.moves:
        taken = {SQUARE_OF[((a[0] + b[0]) // 2, (a[1] + b[1]) // 2)] - 1
                 for a, b in itertools.pairwise(path) if abs(a[0] - b[0]) == 2}
        start, end = SQUARE_OF[path[0]] - 1, SQUARE_OF[path[-1]] - 1
        results.add(((mover - {start}) | {end}, other - taken))
    return results


def test_ending_moves_match_the_reference_rules():
    """Quiet moves and whole capture sequences (multi-jumps included) of 2-8 kings in all."""
    rng = random.Random(0)
    captures_seen = multi_jumps = 0
    for _ in range(1000):
        squares = rng.sample(range(32), rng.randint(2, 8))
        cut = rng.randint(1, len(squares) - 1)
        mover, other = frozenset(squares[:cut]), frozenset(squares[cut:])
        captures = endings._captures(mover, other)
        ours = set(captures) if captures else {(m, other)
                                               for m in endings._quiet_moves(mover, other)}
        assert ours == _reference_results(mover, other), (sorted(mover), sorted(other))
        captures_seen += bool(captures)
        multi_jumps += any(len(other) - len(o) > 1 for _, o in captures)
    assert captures_seen > 200 and multi_jumps > 20  # the positions exercised both


def _minimax(draw_limit: int):
    """The same values by plain memoized recursion over (mover, other, counter)."""

    @functools.cache
    def value(mover: frozenset, other: frozenset, counter: int) -> int:
        captures = endings._captures(mover, other)
        if captures:
            return max(WIN if not o else -value(o, m, 0) for m, o in captures)
        quiet = endings._quiet_moves(mover, other)
        if not quiet:
            return LOSS
        return max(DRAW if counter + 1 >= draw_limit else -value(other, m, counter + 1)
                   for m in quiet)

    return value


def test_backward_solve_matches_a_direct_minimax():
    """Two kings against one (and the king against king it captures down to) with a short
    draw limit, and king against king with the real one."""
    short = endings.solve(((2, 1),), draw_limit=4)
    value = _minimax(4)
    for ending in ((2, 1), (1, 2), (1, 1)):
        table = short[ending]
        assert all(value(m, o, 0) == v for (m, o), v in table.items()), ending
    assert {v for v in short[(2, 1)].values()} == {WIN, DRAW}  # 4 actions: not all won
    value = _minimax(endings.DRAW_LIMIT)
    table = endings.solve(((1, 1),))[(1, 1)]
    assert all(value(m, o, 0) == v for (m, o), v in table.items())


def test_known_king_endings():
    tables = endings.solve(((2, 1),))
    # A traced game's lost ending: White's king on 17 against Black's on 10, White to move.
    assert tables[(1, 1)][(frozenset({16}), frozenset({9}))] == LOSS
    # A king in the double corner (1/5) cannot be caught by one king: drawn.
    assert tables[(1, 1)][(frozenset({0}), frozenset({17}))] == DRAW
    # Two kings beat one from nearly every quiet placement inside the 40 actions.
    placements, exact = endings.quiet_placements(tables[(2, 1)])
    assert len(placements) == 12864 and (exact == WIN).mean() > 0.99
    assert not (exact == LOSS).any()


def _reference_minimax(draw_limit: int):
    """King against king solved by playing the reference rules themselves (their moves, their
    counter, their end of game), one whole move at a time."""

    @functools.cache
    def value(pieces: frozenset, to_move: int, count: int) -> int:
        game = RefDraughts.from_position(dict(pieces), to_move, count=count)
        game.limit = draw_limit
        if not game.moves:
            return LOSS
        best = LOSS
        for path in game.moves:
            after = copy.deepcopy(game)
            for a, b in itertools.pairwise(path):
                after.play(f"{SQUARE_OF[a]}{'x' if abs(a[0] - b[0]) == 2 else '-'}{SQUARE_OF[b]}")
            if after.over:
                outcome = DRAW if after.winner is None else (WIN if after.winner == to_move
                                                             else LOSS)
            else:
                left = frozenset((SQUARE_OF[(r, c)], letter)
                                 for r, row in enumerate(after.board_rows())
                                 for c, letter in enumerate(row) if letter)
                outcome = -value(left, after.to_move, after.count)
            best = max(best, outcome)
        return best

    return value


def test_king_against_king_matches_the_reference_rules_played_out():
    limit = 6
    table = endings.solve(((1, 1),), draw_limit=limit)[(1, 1)]
    value = _reference_minimax(limit)
    outcomes = set()
    for (mover, other), v in table.items():
        pieces = frozenset({(next(iter(mover)) + 1, "B"), (next(iter(other)) + 1, "W")})
        assert value(pieces, 0, 0) == v, (sorted(mover), sorted(other))
        outcomes.add(v)
    assert outcomes == {WIN, DRAW, LOSS}


def test_ending_states_are_the_positions_the_fen_names():
    env = envs.make("draughts")
    cases = [("W:WK17:BK10", 1, (frozenset({16}), frozenset({9}))),
             ("B:WK1,K30:BK5,K18", 0, (frozenset({4, 17}), frozenset({0, 29})))]
    for fen, mover, placement in cases:
        ours = endings.ending_states(env, [placement], mover)
        expected = env.from_fen(fen)
        for (path, leaf), want in zip(jax.tree_util.tree_flatten_with_path(ours)[0],
                                      jax.tree.leaves(expected), strict=True):
            np.testing.assert_array_equal(np.asarray(leaf)[0], np.asarray(want),
                                          err_msg=f"{fen}: {jax.tree_util.keystr(path)}")
