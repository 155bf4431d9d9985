"""Oracles: our tic-tac-toe minimax against the shipped labels, the connect-four sets, scoring."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from conftest import ORACLES

from azjax import envs
from azjax.evaluation.baselines import greedy_player, random_player
from azjax.evaluation.oracle import (
    OracleFormatError,
    load_oracle,
    oracle_player,
    read_oracle_file,
    score_player,
    solve_tic_tac_toe,
    wrong_moves,
)

C4 = envs.make("connect_four")
TTT = envs.make("tic_tac_toe")
C4_DIR = ORACLES / "connect4"
TTT_FILE = ORACLES / "tictactoe" / "positions.jsonl"

# Set, name, and the chance that a uniformly random legal move preserves the result.
C4_SETS = {
    "Test_L3_R1": ("End-Easy", 0.689),
    "Test_L2_R1": ("Middle-Easy", 0.714),
    "Test_L2_R2": ("Middle-Medium", 0.579),
    "Test_L1_R1": ("Beginning-Easy", 0.739),
    "Test_L1_R2": ("Beginning-Medium", 0.705),
    "Test_L1_R3": ("Beginning-Hard", 0.480),
}


@pytest.fixture(scope="module")
def c4_sets():
    return load_oracle("connect_four", C4_DIR)


def test_tic_tac_toe_minimax_equals_the_shipped_file():
    ours = {r.moves: r for r in solve_tic_tac_toe()}
    shipped = read_oracle_file(TTT_FILE, num_actions=9, first_digit=0)
    assert len(ours) == len(shipped) == 4520
    for record in shipped:
        mine = ours[record.moves]
        assert mine.preserving == record.preserving, record.source
        assert mine.optimal == record.optimal, record.source
        assert (mine.score, mine.child_scores) == (record.score, record.child_scores)
    # Same order too: depth-first, lexicographically smallest move list per position.
    assert [r.moves for r in solve_tic_tac_toe()] == [r.moves for r in shipped]


def test_tic_tac_toe_sets_from_minimax_and_from_file_agree():
    computed = load_oracle("tic_tac_toe")["positions"]
    from_file = load_oracle(TTT, ORACLES / "tictactoe")["positions"]
    assert computed.num_positions == from_file.num_positions == 4520
    assert computed.moves == from_file.moves
    np.testing.assert_array_equal(computed.preserving, from_file.preserving)
    np.testing.assert_array_equal(computed.optimal, from_file.optimal)
    np.testing.assert_array_equal(computed.states.board, from_file.states.board)
    # The empty board: every move draws; after X takes a corner, only the centre holds.
    assert computed.moves[0] == () and bool(np.all(computed.preserving[0]))
    assert np.flatnonzero(computed.preserving[computed.moves.index((0,))]).tolist() == [4]
    # The replayed states are live and their mover matches the move count.
    lengths = np.array([len(m) for m in computed.moves])
    np.testing.assert_array_equal(computed.states.current_player, lengths % 2)
    np.testing.assert_array_equal(computed.states.step_count, lengths)
    assert not np.any(computed.states.terminated)


def test_connect_four_sets(c4_sets):
    assert sorted(c4_sets) == sorted(C4_SETS)
    assert list(c4_sets) == sorted(c4_sets)
    for name, (title, hit_rate) in C4_SETS.items():
        oracle_set = c4_sets[name]
        assert (oracle_set.name, oracle_set.title) == (name, title)
        assert oracle_set.num_positions == 1000
        assert oracle_set.preserving.shape == (1000, 7)
        # The labels reproduce each set's random-move rate above (rounded to 3 digits).
        assert oracle_set.random_error_rate() == pytest.approx(1 - hit_rate, abs=6e-4), name
        # 1-based digits in the file: the first position's move count is its stone count.
        lengths = np.array([len(m) for m in oracle_set.moves])
        np.testing.assert_array_equal(oracle_set.states.step_count, lengths)
        assert not np.any(oracle_set.states.terminated)
    first = json.loads((C4_DIR / "Test_L3_R1.jsonl").read_text().splitlines()[0])
    moves = tuple(int(d) - 1 for d in first["moves"])
    assert c4_sets["Test_L3_R1"].moves[0] == moves
    stones = np.asarray(c4_sets["Test_L3_R1"].states.board[0]) >= 0
    assert int(stones.sum()) == len(moves)
    assert np.flatnonzero(c4_sets["Test_L3_R1"].preserving[0]).tolist() == first["preserving"]


def test_random_player_error_rates(c4_sets):
    player = random_player(C4)
    for i, (name, (_, hit_rate)) in enumerate(C4_SETS.items()):
        error = score_player(player, c4_sets[name], key=jax.random.PRNGKey(i), batch_size=250)
        assert error == pytest.approx(1 - hit_rate, abs=0.04), name  # 1000 draws: sd <= 0.016


def test_perfect_player_scores_zero_and_greedy_beats_random(c4_sets):
    perfect = oracle_player(*c4_sets.values())
    for name, oracle_set in c4_sets.items():
        error = score_player(perfect, oracle_set, key=jax.random.PRNGKey(0), batch_size=250)
        assert error == 0.0, name
    # End-Easy: immediate wins and blocks decide most positions.
    end = c4_sets["Test_L3_R1"]
    greedy = score_player(greedy_player(C4), end, key=jax.random.PRNGKey(1), batch_size=250)
    random = score_player(random_player(C4), end, key=jax.random.PRNGKey(1), batch_size=250)
    print(f"End-Easy error: greedy {greedy:.3f}, random {random:.3f}")
    assert greedy < random - 0.15


def test_wrong_moves_counts_illegal_and_out_of_range_ids_as_errors():
    preserving = np.array([[True, False, True], [False, False, True], [True, True, True]])
    actions = np.array([2, 1, -1])  # preserving, not preserving, no such action
    np.testing.assert_array_equal(wrong_moves(preserving, actions), [False, True, True])
    np.testing.assert_array_equal(wrong_moves(preserving, np.array([0, 2, 3])),
                                  [False, False, True])


def test_perfect_tic_tac_toe_player():
    positions = load_oracle("tic_tac_toe")["positions"]
    perfect = oracle_player(positions)
    assert score_player(perfect, positions, key=jax.random.PRNGKey(0), batch_size=565) == 0.0


def test_a_directory_holding_the_game_folder_works(tmp_path):
    (tmp_path / "connect4").mkdir()
    lines = (C4_DIR / "Test_L2_R2.jsonl").read_text().splitlines()[:5]
    (tmp_path / "connect4" / "Test_L2_R2.jsonl").write_text("\n".join(lines) + "\n\n")
    sets = load_oracle(C4, tmp_path)
    assert list(sets) == ["Test_L2_R2"] and sets["Test_L2_R2"].num_positions == 5
    assert sets["Test_L2_R2"].title == "Middle-Medium"


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_oracle("connect_four", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"no Test_L\*_R\*\.jsonl files"):
        load_oracle("connect_four", tmp_path)


class _NoOracleEnv:
    name = "draughts"


def test_unknown_game():
    with pytest.raises(ValueError, match="no oracle for 'draughts'"):
        load_oracle(_NoOracleEnv())


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"moves": "4x", "preserving": [0]}', "'moves' must be a string of digits"),
        ('{"moves": "48", "preserving": [0]}', "digit outside 1-7"),
        ('{"moves": "44", "preserving": []}', "'preserving' must be a non-empty list"),
        ('{"moves": "44", "preserving": [7]}', "'preserving' must be a non-empty list"),
        ('{"moves": "4444444", "preserving": [0]}', "illegal in connect_four"),
        ('{"moves": "1111112", "preserving": [0]}', "lists an illegal move"),
    ],
)
def test_corrupt_lines_name_file_and_line(tmp_path, bad_line, message):
    good = (C4_DIR / "Test_L3_R1.jsonl").read_text().splitlines()[:3]
    folder = tmp_path / "oracle"
    folder.mkdir()
    (folder / "Test_L1_R1.jsonl").write_text("\n".join(good) + "\n")  # a good file first
    (folder / "Test_L3_R1.jsonl").write_text("\n".join([*good, bad_line, good[0]]) + "\n")
    with pytest.raises(OracleFormatError, match=message) as error:
        load_oracle("connect_four", folder)
    assert f"{folder / 'Test_L3_R1.jsonl'}:4:" in str(error.value)


def _head(oracle_set, start, stop, name):
    """Positions [start, stop) of a set, as a set of their own."""
    import dataclasses

    return dataclasses.replace(
        oracle_set, name=name, moves=oracle_set.moves[start:stop],
        states=jax.tree.map(lambda x: x[start:stop], oracle_set.states),
        preserving=oracle_set.preserving[start:stop], optimal=None)


def test_sets_scored_as_one_batch_count_what_each_counts_alone():
    """The evaluator scores all sets in one call, `azjax eval` one set at a time: the same
    scorer, so a random player's counts per set agree with the per-set counts and with
    `wrong_moves` counted by hand."""
    from azjax.evaluation.oracle_score import (
        count_oracle_errors,
        error_percent,
        oracle_error_metrics,
        oracle_errors,
        stack_oracle_sets,
    )

    (whole,) = load_oracle(TTT).values()
    sets = {"a": _head(whole, 0, 300, "a"), "b": _head(whole, 1000, 1700, "b")}
    player = oracle_player(sets["a"])  # perfect on set a, random on set b
    key = jax.random.PRNGKey(3)
    states, preserving, set_index, sizes = stack_oracle_sets(sets)
    assert sizes == {"a": 300, "b": 700}
    batched = np.asarray(count_oracle_errors(player, key, states, preserving, set_index, 2))
    wrong = np.asarray(wrong_moves(preserving, player(key, states)))
    assert batched.tolist() == [int(wrong[:300].sum()), int(wrong[300:].sum())]
    assert batched[0] == 0 and batched[1] > 0
    alone = int(oracle_errors(player, key, sets["b"].states, sets["b"].preserving))
    assert 0 < alone < 700
    metrics = oracle_error_metrics({"a": error_percent(batched[0], 300), "b": 10.0},
                                   {"a": 0.0, "b": 30.0})
    assert metrics["eval/oracle/set/b/search"] == 30.0
    assert metrics["eval/oracle/raw_error"] == 5.0
    assert metrics["eval/oracle/search_error"] == 15.0
    assert "eval/oracle/set/a/raw" not in oracle_error_metrics({"a": 1.0}, {"a": 2.0})


# ---- the generic format: any game, moves and labels as action ids ----------------------------

# RaceToThree (tests/toy_games.py): action 1 keeps the move, 0 passes it; whoever brings the
# counter to 3 wins. Every live position, labelled by hand: keeping the move wins at counts 0
# and 1, and at count 2 every move wins.
RACE_LINES = [
    {"moves": [], "preserving": [1], "score": 1},
    {"moves": [0], "preserving": [1]},
    {"moves": [1], "preserving": [1], "optimal": [1]},
    {"moves": [0, 0], "preserving": [0, 1]},
    {"moves": [1, 1], "preserving": [0, 1], "board": "ignored"},
]


def _race():
    from toy_games import RaceToThree

    return RaceToThree()


def _write_lines(path, lines):
    """One line per item: a dict as JSON, a string as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


def test_any_game_reads_a_folder_of_generic_labels(tmp_path):
    from azjax.evaluation.oracle import has_oracle

    env = _race()
    _write_lines(tmp_path / "all.jsonl", RACE_LINES)
    _write_lines(tmp_path / "first.jsonl", RACE_LINES[:1])
    assert not has_oracle(env) and has_oracle(env, tmp_path)
    sets = load_oracle(env, tmp_path)
    assert list(sets) == ["all", "first"]  # one set per file, named by its stem
    whole = sets["all"]
    assert (whole.name, whole.title, whole.num_positions) == ("all", "all", 5)
    assert whole.moves == ((), (0,), (1,), (0, 0), (1, 1))
    np.testing.assert_array_equal(whole.preserving,
                                  [[False, True]] * 3 + [[True, True]] * 2)
    assert whole.optimal is None  # only some lines have it
    np.testing.assert_array_equal(whole.states.count, [0, 1, 1, 2, 2])
    np.testing.assert_array_equal(whole.states.current_player, [0, 1, 0, 0, 0])
    perfect = oracle_player(*sets.values())
    assert score_player(perfect, whole, key=jax.random.PRNGKey(0)) == 0.0
    assert whole.random_error_rate() == pytest.approx(0.3)  # 3 positions at 1/2
    # A sub-folder named for the game's id works too.
    _write_lines(tmp_path / "root" / "race_to_three" / "x.jsonl", RACE_LINES[3:])
    assert list(load_oracle(env, tmp_path / "root")) == ["x"]


def test_a_game_without_labels_of_azjax_needs_a_folder(tmp_path):
    with pytest.raises(ValueError, match="no oracle for 'race_to_three'.*give a directory"):
        load_oracle(_race())
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl files"):
        load_oracle(_race(), tmp_path)


def test_the_built_in_files_take_action_id_lists_too(tmp_path):
    first = json.loads((C4_DIR / "Test_L3_R1.jsonl").read_text().splitlines()[0])
    as_ids = dict(first, moves=[int(d) - 1 for d in first["moves"]])
    _write_lines(tmp_path / "Test_L3_R1.jsonl", [first, as_ids])
    (oracle_set,) = load_oracle(C4, tmp_path).values()
    assert oracle_set.moves[0] == oracle_set.moves[1]
    assert oracle_set.title == "End-Easy"


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"moves": "01", "preserving": [1]}', "'moves' must be a list of action ids"),
        ('{"moves": [0, 2], "preserving": [1]}', r"'moves' must list action ids 0-1"),
        ('{"moves": [true], "preserving": [1]}', r"'moves' must list action ids 0-1"),
        ('{"preserving": [1]}', "'moves' must be a list of action ids"),
        ('{"moves": [0]}', "'preserving' must be a non-empty list"),
        ('{"moves": [0], "preserving": [1], "optimal": [5]}', "'optimal' must be a non-empty"),
        ('{"moves": [0], "preserving": [1], "score": 1.5}', "'score' must be an integer"),
        ('{"moves": [0], "preserving": [1], "child_scores": [1]}', "'child_scores' must list 2"),
        ('{"moves": [1, 1, 1], "preserving": [1]}', "illegal in race_to_three or reach a"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_malformed_generic_line_names_file_and_line(tmp_path, bad_line, message):
    path = tmp_path / "set.jsonl"
    _write_lines(path, [*RACE_LINES[:2], "", bad_line])
    with pytest.raises(OracleFormatError, match=message) as error:
        load_oracle(_race(), tmp_path)
    assert str(error.value).startswith(f"{path}:4: ")  # the blank line counts


def test_training_evaluator_reads_eval_oracle_dir_for_any_game(tmp_path):
    from conftest import tiny_config

    from azjax.config import EvalConfig
    from azjax.evaluation.evaluator import Evaluator

    _write_lines(tmp_path / "labels.jsonl", RACE_LINES)
    config = tiny_config(eval=EvalConfig(oracle=True, oracle_dir=str(tmp_path), opponents=()))
    evaluator = Evaluator(_race(), config, apply_fn=None, search_fn=None)
    assert list(evaluator.oracle_sets) == ["labels"]
    assert evaluator.oracle_sets["labels"].num_positions == 5
    no_dir = tiny_config(eval=EvalConfig(oracle=True, opponents=()))
    assert Evaluator(_race(), no_dir, apply_fn=None, search_fn=None).oracle_sets == {}
