"""`azjax play` in the terminal, fed through a pipe: whole games, bad input, multi-jumps."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import REPO_ROOT
from play_server import HUMAN_JUMP_LINE
from typer.testing import CliRunner

import envs
from azjax.apps.cli import app
from azjax.apps.terminal import HINTS, hints_for, parse_start
from azjax.apps.turns import parse_human_move, top_moves, winner_of

# The CLI would switch this process's compilation cache to ~/.cache; keep the tests' one.
RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})


def test_a_whole_tic_tac_toe_game_through_a_pipe():
    """A real process reading a pipe: junk and a taken cell are refused with the reason, the
    human then tries cells 1-9 in order until the game ends, the result is printed, and the
    'again?' prompt takes the next line."""
    env = dict(os.environ, AZJAX_COMPILATION_CACHE=str(REPO_ROOT / ".jax_cache"))
    typed = "abc\n5\n5\n1\n2\n3\n4\n6\n7\n8\n9\n"
    out = subprocess.run([sys.executable, "-m", "azjax", "play", "tic_tac_toe",
                          "--simulations", "8"], input=typed, capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "playing against the shipped model" in text and "You play X" in text
    assert "Illegal move: a tic-tac-toe move is a cell number 1-9, got 'abc'" in text
    assert "Illegal move: cell 5 is already taken; legal moves: " in text
    assert "AI plays " in text and "expected score " in text and "top moves " in text
    assert text.count("Result: ") == 1 and "Again? [y/N]" in text
    # The shipped model never loses at tic-tac-toe.
    assert "Result: you win!" not in text


def test_draughts_multi_jump_in_pdn_and_end_of_input_quits_cleanly():
    """From an opening where Black's only move is a double capture: a simple move is refused
    with the legal moves, `8x15x24` is played whole, the AI replies, then the input ends."""
    out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8",
                              "--moves", HUMAN_JUMP_LINE], input="8-12\n?\n8x15x24\n")
    assert out.exit_code == 0, out.output
    assert "'8-12' is not legal here; legal moves: 8x15x24" in out.output
    assert "Legal moves: 8x15x24" in out.output
    assert "You play 8x15x24" in out.output
    after = out.output.split("You play 8x15x24")[1]
    assert "AI plays " in after and "Your move: " in after  # its reply, then a clean EOF
    board = envs.make("draughts").board(parse_start(envs.make("draughts"),
                                                    HUMAN_JUMP_LINE + " 8x15x24"))
    assert board[23] == 1 and board[7] == 0 and board[14] == 0  # the man went 8 -> 24


def test_play_again_and_quit_and_bad_options():
    # After the opening the AI (X) wins at once: twice, as the human asks for another game.
    out = RUNNER.invoke(app, ["play", "tic_tac_toe", "--simulations", "8", "--first", "ai",
                              "--moves", "1 4 2 5"], input="y\nno\n")
    assert out.exit_code == 0, out.output
    assert out.output.count("AI plays 3 ") == 2 and out.output.count("Result: the AI wins.") == 2
    assert out.output.count("Again? [y/N]") == 2 and out.output.endswith("Bye.\n")
    out = RUNNER.invoke(app, ["play", "tic_tac_toe", "--first", "nobody"])
    assert out.exit_code == 2 and "--first must be 'human' or 'ai'" in out.output
    out = RUNNER.invoke(app, ["play", "connect_four", "--moves", "4 4 4 4 4 4 4"])
    assert out.exit_code == 2 and "turn 7 ('4'): column 4 is full" in out.output
    out = RUNNER.invoke(app, ["play", "chess"])
    assert out.exit_code == 2 and "neither a game id" in out.output


def test_human_notation_errors_name_the_problem():
    c4 = envs.make("connect_four")
    full = parse_start(c4, "1 1 1 1 1 1")
    with pytest.raises(ValueError, match="column 1 is full; legal moves: 2, 3, 4, 5, 6, 7"):
        parse_human_move(c4, full, "1")
    with pytest.raises(ValueError, match="column number 1-7, got '8'.*; legal moves: 2, 3, 4"):
        parse_human_move(c4, full, "8")
    ttt = envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match="; legal moves: 2, 3, 5, 6, 7, 8, 9$"):
        parse_human_move(ttt, parse_start(ttt, "1 4"), "x")
    draughts = envs.make("draughts")
    start = draughts.init(jax.random.PRNGKey(0))
    assert parse_human_move(draughts, start, "9-13") == [23]
    with pytest.raises(ValueError, match="looks like '9-13'"):
        parse_human_move(draughts, start, "9 to 13")


def test_winner_and_top_moves():
    ttt = envs.make("tic_tac_toe")
    assert winner_of(parse_start(ttt, "1 4 2 5 3")) == 0
    assert winner_of(parse_start(ttt, "1 4 2")) is None
    visits = np.array([0, 6, 0, 0, 2, 0, 0, 0, 0])
    assert top_moves(ttt, visits) == [("2", 0.75), ("5", 0.25)]


def test_ai_turn_reports_the_first_search_and_its_visits():
    from azjax import Agent
    from azjax.apps.turns import ai_turn

    agent = Agent.load("tic_tac_toe")
    state = parse_start(agent.env, "1 4 2 5")  # X to move wins at 3
    turn = ai_turn(agent, state, jax.random.PRNGKey(0), num_simulations=8)
    assert turn.actions == [2] and winner_of(turn.state) == 0
    assert turn.visits.sum() == 8 and turn.visits.shape == (9,) and -1 <= turn.value <= 1
    assert int(np.argmax(turn.policy)) == 2
    with pytest.raises(ValueError, match="the game is over"):
        ai_turn(agent, turn.state, jax.random.PRNGKey(0), num_simulations=8)


def test_variant_ids_take_their_base_games_hints():
    """`draughts_tactics` is draughts with more planes: the terminal names its sides and PDN."""
    assert hints_for(envs.make("draughts_tactics")) == HINTS["draughts"]
    assert hints_for(envs.make("connect_four")) == HINTS["connect_four"]
    assert hints_for(envs.make("tic_tac_toe")) == HINTS["tic_tac_toe"]
