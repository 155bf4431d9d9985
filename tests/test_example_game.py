"""The worked example, hexapawn 4x4 (examples/hexapawn.py): the env contract, hand-built
positions, the brute-force solver against known results and a second implementation, and its
perfect-play labels replayed through the env."""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO_ROOT

from azjax import envs

EXAMPLES = REPO_ROOT / "examples"
ORACLE_FILE = EXAMPLES / "hexapawn_oracle" / "positions.jsonl"
sys.path.insert(0, str(EXAMPLES))  # the example is a user's module, not part of azjax

import hexapawn  # noqa: E402
import hexapawn_solve  # noqa: E402

ENV = hexapawn.Hexapawn()


def _sq(name: str) -> int:
    """A square's index from its name (`a1` bottom left)."""
    return (hexapawn.ROWS - int(name[1])) * hexapawn.COLS + "abcd".index(name[0])


def _position(white: str, black: str, to_move: int) -> hexapawn.State:
    """A hand-built live position: pawns on the named squares (`"a2 c3"`)."""
    board = np.full(hexapawn.ROWS * hexapawn.COLS, hexapawn.EMPTY, np.int8)
    for player, squares in ((0, white), (1, black)):
        for name in squares.split():
            board[_sq(name)] = player
    board = jnp.asarray(board)
    start = ENV.init(jax.random.PRNGKey(0))
    return start.replace(board=board, current_player=jnp.int32(to_move),
                         legal_action_mask=hexapawn.legal_mask(board, jnp.int32(to_move)))


def _step(state, move: str):
    return envs.jitted_step(ENV)(state, jnp.int32(ENV.str_to_action(move)))


def test_the_env_meets_the_contract():
    envs.check_env(ENV, num_games=32)
    assert ENV.num_actions == 60 and ENV.num_symmetries == 2


def test_notation_and_the_start():
    start = ENV.init(jax.random.PRNGKey(0))
    moves = ENV.legal_moves(start)
    assert list(moves) == ["a1-a2", "b1-b2", "c1-c2", "d1-d2"]
    assert ENV.str_to_action("a1xb2") == ENV.str_to_action("A1B2") != ENV.str_to_action("a1a2")
    with pytest.raises(ValueError, match="pawn step such as b1-b2"):
        ENV.str_to_action("a1-a3")
    with pytest.raises(ValueError, match="no pawn to capture on b2"):
        ENV.parse_move(start, "a1xb2")
    with pytest.raises(ValueError, match="is a Black move"):
        ENV.parse_move(start, "a4-a3")
    assert ENV.render(start).splitlines()[0] == "4  b b b b"


def test_reaching_the_far_rank_wins():
    state = envs.play_moves(ENV, [ENV.str_to_action(m) for m in
                                  ("a1-a2", "d4-d3", "a2-a3", "d3-d2")])
    assert not bool(state.terminated)
    assert "a3xb4" in ENV.legal_moves(state)
    won = _step(state, "a3xb4")
    assert bool(won.terminated) and np.asarray(won.rewards).tolist() == [1.0, -1.0]
    assert envs.winner_of(won) == 0


def test_leaving_the_opponent_without_a_move_wins():
    # Black closes the a-file: White's one pawn, on a2, can neither step nor capture.
    state = _position(white="a2", black="a4 d4", to_move=1)
    blocked = _step(state, "a4-a3")
    assert bool(blocked.terminated) and envs.winner_of(blocked) == 1
    assert np.asarray(blocked.rewards).tolist() == [-1.0, 1.0]
    # Capturing the last pawn leaves no move either.
    state = _position(white="b2", black="c3", to_move=0)
    assert bool(_step(state, "b2xc3").terminated)
    # A head-on block that leaves a move elsewhere does not end the game.
    state = _position(white="a2 d1", black="a4", to_move=1)
    after = _step(state, "a4-a3")
    assert not bool(after.terminated) and list(ENV.legal_moves(after)) == ["d1-d2"]


def test_the_mirror_symmetry_maps_moves_to_mirrored_moves():
    state = envs.play_moves(ENV, [ENV.str_to_action("a1-a2")])
    obs = ENV.observe(state)
    sym_obs, sym_policy = ENV.symmetries(obs, jnp.arange(ENV.num_actions, dtype=jnp.float32))
    mirrored = envs.play_moves(ENV, [ENV.str_to_action("d1-d2")])
    np.testing.assert_array_equal(sym_obs[1], ENV.observe(mirrored))
    # Policy copy 1 at the mirrored move's id holds the original move's id.
    assert int(sym_policy[1][ENV.str_to_action("d4xc3")]) == ENV.str_to_action("a4xb3")


# ---- the solver -----------------------------------------------------------------------------


def _wins(white: frozenset, black: frozenset, player: int, rows: int, cols: int) -> bool:
    """Whether the player to move wins: a second, deliberately plain implementation (sets of
    (row, col) squares, no memo, no action ids), stopping at the first winning move."""
    mine, theirs = (white, black) if player == 0 else (black, white)
    forward, far = (-1, 0) if player == 0 else (1, rows - 1)
    for row, col in mine:
        for side in (-1, 0, 1):
            to = (row + forward, col + side)
            if not (0 <= to[1] < cols) or (to in theirs) != (side != 0) or to in mine:
                continue
            if to[0] == far:
                return True
            new_mine, new_theirs = (mine - {(row, col)}) | {to}, theirs - {to}
            next_white, next_black = ((new_mine, new_theirs) if player == 0
                                      else (new_theirs, new_mine))
            if not _has_move(new_theirs, new_mine, 1 - player, cols) or not _wins(
                    next_white, next_black, 1 - player, rows, cols):
                return True
    return False


def _has_move(mine: frozenset, theirs: frozenset, player: int, cols: int) -> bool:
    forward = -1 if player == 0 else 1
    return any(((r + forward, c) not in mine | theirs) if side == 0 else
               ((r + forward, c + side) in theirs and 0 <= c + side < cols)
               for r, c in mine for side in (-1, 0, 1))


def _start_sets(rows: int, cols: int) -> tuple[frozenset, frozenset]:
    return (frozenset((rows - 1, c) for c in range(cols)), frozenset((0, c) for c in range(cols)))


@pytest.mark.parametrize(("rows", "cols", "white_wins"), [(3, 3, False), (3, 4, True),
                                                          (4, 4, True)])
def test_the_solver_agrees_with_a_plain_second_search(rows, cols, white_wins):
    """3x3 is Gardner's original game, a known win for Black (the second player)."""
    solver = hexapawn_solve.Solver(rows, cols)
    score, _ = solver.solve(solver.start(), 0)
    assert (score > 0) == white_wins == _wins(*_start_sets(rows, cols), 0, rows, cols)


def test_every_labelled_position_agrees_with_the_plain_search():
    lines = [json.loads(line) for line in ORACLE_FILE.read_text().splitlines()]
    for line in lines[::97]:  # 118 positions spread over the file
        rows = line["board"].split("/")
        white = frozenset((r, c) for r, row in enumerate(rows) for c, v in enumerate(row)
                          if v == "w")
        black = frozenset((r, c) for r, row in enumerate(rows) for c, v in enumerate(row)
                          if v == "b")
        player = len(line["moves"]) % 2
        assert (line["score"] > 0) == _wins(white, black, player, 4, 4), line["moves"]


def test_the_shipped_labels_are_what_the_solver_writes(tmp_path):
    out = tmp_path / "positions.jsonl"
    hexapawn_solve.main(out)
    assert out.read_text() == ORACLE_FILE.read_text()
    assert hexapawn_solve.move_table(4, 4) == [tuple(m) for m in hexapawn.MOVES.tolist()]


def test_the_labels_replay_into_the_positions_they_picture():
    from azjax.evaluation.oracle import load_oracle, oracle_player, score_player

    (labels,) = load_oracle(ENV, EXAMPLES / "hexapawn_oracle").values()  # replays every line
    lines = [json.loads(line) for line in ORACLE_FILE.read_text().splitlines()]
    assert labels.num_positions == len(lines) == 11420
    states = labels.states
    assert not np.any(states.terminated)
    np.testing.assert_array_equal(states.step_count, [len(m) for m in labels.moves])
    pictures = np.array([list(line["board"].replace("/", "")) for line in lines])
    glyphs = np.array([".", "w", "b"])[np.asarray(states.board) + 1]
    np.testing.assert_array_equal(glyphs, pictures)  # the env's rules reach the solver's boards
    # The env's legal moves are the solver's, in every position.
    solver = hexapawn_solve.Solver()
    legal = np.asarray(states.legal_action_mask)
    for i in range(0, len(lines), 7):
        board = tuple(int(v) for v in np.asarray(states.board[i]))
        assert solver.legal(board, int(states.current_player[i])) == np.flatnonzero(
            legal[i]).tolist()
    perfect = oracle_player(labels)
    assert score_player(perfect, labels, key=jax.random.PRNGKey(0), batch_size=1142) == 0.0
    assert labels.random_error_rate() == pytest.approx(0.217, abs=5e-4)
