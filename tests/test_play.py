"""`azjax play` in the terminal, fed through a pipe: whole games, bad input, multi-jumps."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import GUMBEL_NO_TABLE, HANG_S, REPO_ROOT
from play_server import HUMAN_JUMP_LINE, PlayServer
from typer.testing import CliRunner
from user_game_module import Pile

from azjax import envs
from azjax.apps.cli import app
from azjax.apps.serve import GameService
from azjax.apps.terminal import parse_start, play_terminal
from azjax.apps.turns import top_moves, untrained_agent
from azjax.envs.core import winner_of

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


def test_a_closed_standard_input_is_one_line_not_a_traceback():
    """`azjax play tic_tac_toe <&-`: no standard input at all, so no move can be read."""
    env = dict(os.environ, AZJAX_COMPILATION_CACHE=str(REPO_ROOT / ".jax_cache"))
    out = subprocess.run([sys.executable, "-m", "azjax", "play", "tic_tac_toe",
                          "--simulations", "8"], capture_output=True, text=True, cwd=REPO_ROOT,
                         env=env, timeout=HANG_S, preexec_fn=lambda: os.close(0))
    assert out.returncode == 2, out.stderr
    assert out.stderr == ("error: azjax play: standard input is closed; it reads the human's "
                          "moves from there (run it in a terminal or pipe the moves in)\n")
    assert "You play X" in out.stdout


def test_draughts_multi_jump_in_pdn_and_end_of_input_quits_cleanly():
    """From an opening where Black's only move is a double capture: a simple move is refused
    with the legal moves, `8x15x24` is played whole, the AI replies, then the input ends."""
    out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8", *GUMBEL_NO_TABLE,
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
        c4.parse_move(full, "1")
    with pytest.raises(ValueError, match="column number 1-7, got '8'.*; legal moves: 2, 3, 4"):
        c4.parse_move(full, "8")
    ttt = envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match="; legal moves: 2, 3, 5, 6, 7, 8, 9$"):
        ttt.parse_move(parse_start(ttt, "1 4"), "x")
    draughts = envs.make("draughts")
    start = draughts.init(jax.random.PRNGKey(0))
    assert draughts.parse_move(start, "9-13") == [23]
    with pytest.raises(ValueError, match="looks like '9-13'"):
        draughts.parse_move(start, "9 to 13")


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


def test_variant_ids_take_their_base_games_names_and_hints():
    """`draughts_tactics` is draughts with more planes: the terminal names its sides and PDN."""
    tactics, draughts = envs.make("draughts_tactics"), envs.make("draughts")
    assert tactics.player_names == draughts.player_names == ("Black (b)", "White (w)")
    assert tactics.move_hint == draughts.move_hint and "9x18x27" in draughts.move_hint
    assert envs.make("tic_tac_toe").player_names == ("X", "O")


@pytest.fixture(scope="module")
def take_away_agent():
    """An untrained agent for `TakeAway`, registered here (a config names its game by id)."""
    if "take_away" not in envs.available():
        envs.register("take_away", TakeAway)
    return untrained_agent("take_away", num_simulations=4)


def test_a_game_from_this_module_is_played_in_the_terminal_with_the_defaults(take_away_agent):
    """`TakeAway` (below, not in azjax/envs/) overrides none of the notation: the terminal types
    action ids, lists the legal ones, names players 0 and 1, renders the board view."""
    agent = take_away_agent
    first_lines = ["2", "?"]  # then "0" (take one stone: legal until the end)

    def read(prompt: str) -> str:
        return "n" if prompt.startswith("Again") else (first_lines.pop(0) if first_lines
                                                        else "0")

    lines: list[str] = []
    assert play_terminal(agent, read=read, write=lines.append) == 1
    text = "\n".join(lines)
    assert "You play player 0, the AI plays player 1" in text and "Type an action id 0-1" in text
    assert "Illegal move: a take_away move is an action id 0-1, got '2'; legal moves: 0, 1" \
        in text
    assert "Legal moves: 0, 1" in text and "o o o o" in text  # the default rendering
    assert text.count("Result: ") == 1 and text.endswith("Bye.")
    # Every turn played, human's and AI's, in action ids: the four stones taken exactly.
    taken = [int(line.split()[2]) + 1 for line in lines
             if line.startswith(("You play ", "AI plays ")) and "player" not in line]
    assert sum(taken) == 4 and len(taken) >= 2


def test_a_game_from_this_module_is_served_with_the_defaults(take_away_agent):
    """The same game behind the JSON API, passed to the service directly: its board view,
    no clicks (so the page shows a button per legal action), its turns in action ids."""
    server = PlayServer(GameService({"take_away": take_away_agent}, simulations=(4,)))
    try:
        games = server.service.games()["games"]["take_away"]
        assert games["players"] == ["player 0", "player 1"] and games["labels"] == ["0", "1"]
        status, position = server.post("/api/state", {"game": "take_away", "moves": [1]})
        assert status == 200 and position["legal"] == [0, 1] and position["clicks"] == [[], []]
        assert position["board"]["rows"] == 1 and len(position["board"]["cells"]) == 4
        assert [c["player"] for c in position["board"]["cells"]] == [0, 0, None, None]
        assert position["last_cells"] == [2, 3] and position["text"].startswith("o o . .")
        assert position["history"] == [{"player": 0, "actions": [1], "move": "1"}]
        status, answer = server.post("/api/move", {"game": "take_away", "moves": [1]})
        assert status == 200 and answer["moves"][:1] == [1] and answer["move"] in (0, 1)
        finished = envs.play_moves(take_away_agent.env, answer["moves"])
        assert answer["terminated"] == bool(finished.terminated)
        status, answer = server.post("/api/move", {"game": "take_away", "moves": [1, 1]})
        assert status == 422 and "already over" in answer["error"]
    finally:
        server.stop()


def test_a_game_from_this_module_renders_by_default_from_its_board_view():
    env = TakeAway()
    state = envs.play_moves(env, [1])
    assert env.render(state).splitlines() == ["o o . .", "player 1 to move."]
    assert env.parse_move(state, "1") == [1]
    with pytest.raises(ValueError, match="'1' is not legal here; legal moves: 0$"):
        env.parse_move(envs.play_moves(env, [1, 0]), "1")
    envs.check_env(env, num_games=4)


class TakeAway(Pile):
    """Four stones; a move takes 1 (action 0) or 2 (action 1); whoever takes the last wins.
    Only the rules and a board view: every people-facing member is the base class's."""

    name = "take_away"

    def __init__(self):
        super().__init__(stones=4, max_take=2)


def test_simulations_are_refused_for_a_model_that_searches_by_alphabeta():
    """The shipped draughts model plays alpha-beta, which counts positions: `--simulations`
    would be silently ignored, so it is refused in one line that names the two ways out."""
    out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8"], input="")
    assert out.exit_code == 2
    assert out.output.splitlines()[-1] == (
        "error: --simulations: this model searches by alpha-beta, which counts positions, not "
        "simulations: give --set search.alphabeta_nodes=N, or --set search.algorithm=gumbel to "
        "play its network's tree search")


def test_an_alphabeta_turn_shows_its_depth_its_positions_and_its_line():
    """The shipped draughts model (alpha-beta): its turn prints how deep it searched, how many
    positions, and the line it expects in PDN, its own multi-jump written whole; the line's
    moves, replayed, are legal."""
    from azjax.apps.turns import line_moves

    out = RUNNER.invoke(app, ["play", "draughts", "--first", "ai", "--position",
                              "B:W18,27,31:B14,1", "--set", "search.endgame_table=0",
                              "--set", "search.alphabeta_nodes=64"], input="")
    assert out.exit_code == 0, out.output
    said = re.search(r"AI plays 14x23x32   \(score ([+-]\d\.\d\d) at depth (\d+), (\d+) "
                     r"positions; line (.*)\)", out.output)
    assert said, out.output
    assert 1 <= int(said[2]) <= 12 and 1 <= int(said[3]) <= 64
    line = said[4].split()
    assert line[0] == "14x23x32"
    draughts = envs.make("draughts")
    state = draughts.from_fen("B:W18,27,31:B14,1")
    for move in line:  # each a legal whole move in turn
        for action in draughts.parse_move(state, move):
            state = draughts.step(state, action)
    hops = [127, 155, 95]  # 14x23, 23x32 (one move of two actions), then White's 31-27
    assert line_moves(draughts, draughts.from_fen("B:W18,27,31:B14,1"), hops) == [
        "14x23x32", "31-27"]
    assert line_moves(draughts, draughts.from_fen("B:W18,27,31:B14,1"), [127]) == ["14x23"]


def test_a_game_starts_from_a_position_in_the_games_notation():
    """`--position FEN`: the game starts there, `--first` names who is to move in it (the human
    plays White here, who is to move), and the game ends by the rules from there; a bad FEN
    or a game without a notation for positions is one line naming `--position`."""
    out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8", *GUMBEL_NO_TABLE,
                              "--position", "W:W18:B14"], input="?\n18x9\n")
    assert out.exit_code == 0, out.output
    assert "You play White" in out.output and "Legal moves: 18x9" in out.output
    assert "You play 18x9" in out.output and "Result: you win!" in out.output
    out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8", *GUMBEL_NO_TABLE,
                              "--position", "B:W18:B14", "--first", "ai"], input="")
    assert out.exit_code == 0, out.output
    assert "You play White" in out.output and "AI plays 14x23" in out.output
    assert "Result: the AI wins." in out.output
    out = RUNNER.invoke(app, ["play", "draughts", "--position", "W:18:B14"])
    assert out.exit_code == 2 and "--position: each FEN side starts with B or W" in out.output
    out = RUNNER.invoke(app, ["play", "tic_tac_toe", "--position", "x"])
    assert out.exit_code == 2
    assert "--position: tic_tac_toe has no notation for positions" in out.output


def test_moves_are_played_from_the_position_and_first_names_who_is_to_move():
    from azjax.apps.terminal import seat_of

    draughts = envs.make("draughts")
    state = parse_start(draughts, "18-14 2-6", "W:W18,24,K27:B12,16,K2")
    assert draughts.to_fen(state) == "W:W14,24,K27:BK6,12,16"
    assert seat_of(state, "human") == 1 and seat_of(state, "ai") == 0
    start = draughts.init(jax.random.PRNGKey(0))
    assert seat_of(start, "human") == 0  # from the game's start the human plays Black
    with pytest.raises(ValueError, match="--moves: turn 2 \\(.2-9.\\)"):
        parse_start(draughts, "18-14 2-9", "W:W18,24,K27:B12,16,K2")
    with pytest.raises(ValueError, match="--first must be 'human' or 'ai', got 'me'"):
        seat_of(start, "me")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_play_runs_on_the_cores_it_is_given_and_gives_them_back():
    """`azjax play --cores N` and `azjax eval --cores N` (`on_cores`): the body runs on N of
    the process's cores, all of them with 0, and afterwards the process has every core it had;
    a negative count is one line."""
    from azjax.apps.cores import on_cores

    allowed = os.sched_getaffinity(0)
    with on_cores(1) as used:
        assert used == 1 and os.sched_getaffinity(0) == {min(allowed)}
    assert os.sched_getaffinity(0) == allowed
    with on_cores(0) as used:
        assert used == len(allowed) and os.sched_getaffinity(0) == allowed
    for command in (["play", "tic_tac_toe"], ["eval", "tic_tac_toe", "--against", "random"],
                    ["eval", "runs/none", "--ladder"]):  # `azjax eval --cores` too
        out = RUNNER.invoke(app, [*command, "--cores", "-1"], input="")
        assert out.exit_code == 2, command
        assert out.output.splitlines()[-1] == \
            "error: --cores must be >= 0 (0: every core), got -1", command
        assert os.sched_getaffinity(0) == allowed
