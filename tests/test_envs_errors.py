"""Bad input gets a clear error: unknown games, illegal move lists, garbage move notation."""

from __future__ import annotations

import re

import pytest

from azjax import envs


def test_unknown_game_lists_the_available_games():
    with pytest.raises(ValueError, match="chess") as info:
        envs.make("chess")
    for game_id in envs.available():
        assert game_id in str(info.value)


def test_available_games_include_ours_and_make_shares_instances():
    assert {"tic_tac_toe", "connect_four"} <= set(envs.available())
    assert envs.make("connect_four") is envs.make("connect_four")


@pytest.mark.parametrize(
    ("game_id", "moves", "index", "move", "legal"),
    [
        ("tic_tac_toe", [4, 0, 4], 2, 4, [1, 2, 3, 5, 6, 7, 8]),
        ("tic_tac_toe", [9], 0, 9, list(range(9))),
        ("tic_tac_toe", [-1], 0, -1, list(range(9))),
        ("connect_four", [3, 3, 3, 3, 3, 3, 3], 6, 3, [0, 1, 2, 4, 5, 6]),
        ("connect_four", [0, 7], 1, 7, list(range(7))),
    ],
)
def test_play_moves_names_the_illegal_move(game_id, moves, index, move, legal):
    with pytest.raises(ValueError) as info:
        envs.play_moves(envs.make(game_id), moves)
    message = str(info.value)
    assert re.search(rf"\bmove {index}\b", message), message
    assert re.search(rf"(?<![\d-]){move}\b", message), message
    assert str(legal) in message, message


def test_play_moves_rejects_a_move_after_the_end():
    # X takes the top row on move 4; move 5 comes after the game ended.
    with pytest.raises(ValueError, match=r"move 5\b.*ended"):
        envs.play_moves(envs.make("tic_tac_toe"), [0, 3, 1, 4, 2, 5])


@pytest.mark.parametrize("game_id", ["tic_tac_toe", "connect_four"])
@pytest.mark.parametrize(
    "text", ["", " ", "x", "0", "-1", "+1", "1.5", "1 2", "99", "\u00b2", "\u0663", "one"]
)
def test_str_to_action_rejects_garbage(game_id, text):
    env = envs.make(game_id)
    with pytest.raises(ValueError, match=r"(cell|column) number 1-\d, got ") as info:
        env.str_to_action(text)
    assert repr(text.strip()) in str(info.value)


@pytest.mark.parametrize("game_id", ["tic_tac_toe", "connect_four"])
def test_notation_is_one_based_and_round_trips(game_id):
    env = envs.make(game_id)
    for action in range(env.num_actions):
        assert env.action_to_str(action) == str(action + 1)
        assert env.str_to_action(f" {action + 1} ") == action
    for bad in (-1, env.num_actions):
        with pytest.raises(ValueError, match="action id"):
            env.action_to_str(bad)
