"""Every oracle position replays into a legal, live state with the right player to move.

Tic-tac-toe's `moves` are 0-based cell digits, connect four's 1-based column digits. All 10,520
positions replay at once (one jitted, vmapped scan per game); a few also through
`envs.play_moves`, which must agree with the batched replay."""

from __future__ import annotations

import dataclasses
import functools
import json

import jax
import numpy as np
import pytest
from conftest import ORACLES
from env_batch import longest_game, pad_moves, replay

from azjax import envs

SOURCES = {
    "tic_tac_toe": (sorted((ORACLES / "tictactoe").glob("*.jsonl")), 0),
    "connect_four": (sorted((ORACLES / "connect4").glob("*.jsonl")), 1),
}
EXPECTED_COUNTS = {"tic_tac_toe": 4520, "connect_four": 6000}


@functools.cache
def oracle_positions(game_id: str):
    files, base = SOURCES[game_id]
    records = []
    for path in files:
        with open(path) as f:
            records.extend(json.loads(line) for line in f)
    moves = [[int(ch) - base for ch in record["moves"]] for record in records]
    return records, moves


@functools.cache
def replayed(game_id: str):
    env = envs.make(game_id)
    _, moves = oracle_positions(game_id)
    states, bad = replay(env, pad_moves(moves, longest_game(env)))
    return jax.tree.map(np.asarray, states), np.asarray(bad)


@pytest.mark.parametrize("game_id", sorted(SOURCES))
def test_oracle_positions_replay_into_live_legal_states(game_id):
    records, moves = oracle_positions(game_id)
    assert len(records) == EXPECTED_COUNTS[game_id]
    states, bad = replayed(game_id)
    lengths = np.array([len(m) for m in moves])
    failed = np.flatnonzero(bad >= 0)
    if failed.size:
        first = failed[0]
        raise AssertionError(f"{failed.size} positions have an illegal move, e.g. "
                             f"{records[first]['moves']!r} at move {bad[first]}")
    assert not states.terminated.any() and not states.truncated.any()
    np.testing.assert_array_equal(states.current_player, lengths % 2)
    np.testing.assert_array_equal(states.step_count, lengths)
    # The legal moves are exactly the columns / cells the oracle scores.
    scored = np.array([[s is not None for s in r["child_scores"]] for r in records])
    np.testing.assert_array_equal(states.legal_action_mask, scored)


def test_tic_tac_toe_oracle_boards_match_our_boards():
    records, _ = oracle_positions("tic_tac_toe")
    states, _ = replayed("tic_tac_toe")
    ours = ["".join(".XO"[v + 1] for v in row) for row in states.board.tolist()]
    assert ours == [r["board"] for r in records]


@pytest.mark.parametrize("game_id", sorted(SOURCES))
def test_play_moves_agrees_with_the_batched_replay(game_id):
    env = envs.make(game_id)
    _, moves = oracle_positions(game_id)
    states, _ = replayed(game_id)
    for index in np.random.default_rng(0).choice(len(moves), 5, replace=False):
        state = envs.play_moves(env, moves[index])
        for field in dataclasses.fields(state):
            np.testing.assert_array_equal(np.asarray(getattr(state, field.name)),
                                          getattr(states, field.name)[index], err_msg=field.name)
