"""PDN game records (`azjax.envs.pdn`): read back move by move in PDN, a written game replays
to the same actions, position and result; a game from a FEN says so; `azjax play --pdn`
saves what was played."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import GUMBEL_NO_TABLE, REPO_ROOT
from typer.testing import CliRunner

from azjax import envs
from azjax.apps.cli import app
from azjax.envs.core import jitted_step
from azjax.envs.pdn import pdn_game, pdn_result

RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})
DRAUGHTS = envs.make("draughts")


def _random_game(seed: int, plies: int, start=None):
    """A random game's actions from `start` (default: the initial position) and its end."""
    state = DRAUGHTS.init(jax.random.PRNGKey(0)) if start is None else start
    step, rng, actions = jitted_step(DRAUGHTS), np.random.default_rng(seed), []
    while len(actions) < plies and not bool(state.terminated | state.truncated):
        action = int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))
        actions.append(action)
        state = step(state, jnp.int32(action))
    return actions, state


def _read(text: str):
    """A PDN game read back without azjax's writer: (tags, whole moves, result token)."""
    tags = dict(re.findall(r'^\[(\w+) "((?:[^"\\]|\\.)*)"\]$', text, re.M))
    body = text.split("\n\n", 1)[1].split()
    *moves, result = [t for t in body if not re.fullmatch(r"\d+\.(\.\.)?", t)]
    return tags, moves, result


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_written_game_replays_to_the_same_actions_position_and_result(seed):
    actions, end = _random_game(seed, plies=400)
    text = pdn_game(DRAUGHTS, actions, black="azjax", white='Cake "1.22"', event="test")
    tags, moves, result = _read(text)
    assert tags["GameType"] == "21" and "FEN" not in tags
    assert tags["Black"] == "azjax" and tags["White"] == 'Cake \\"1.22\\"'
    assert result == tags["Result"] == pdn_result(end) != "*"  # a random game ends in 400
    assert text.split("\n\n", 1)[1].startswith("1. ")
    state, replayed = DRAUGHTS.init(jax.random.PRNGKey(0)), []
    for move in moves:  # each a whole legal move in PDN, multi-jumps whole
        hops = DRAUGHTS.parse_move(state, move)
        assert DRAUGHTS.format_move(hops) == move
        replayed += hops
        for hop in hops:
            state = jitted_step(DRAUGHTS)(state, jnp.int32(hop))
    assert replayed == actions and DRAUGHTS.to_fen(state) == DRAUGHTS.to_fen(end)
    assert all(len(line) < 80 for line in text.splitlines())


def test_a_game_from_a_position_carries_its_fen_and_white_moves_first():
    start = DRAUGHTS.from_fen("W:W18,24,K27:B12,16,K2")
    actions, end = _random_game(3, plies=6, start=start)
    text = pdn_game(DRAUGHTS, actions, start=start)
    tags, moves, result = _read(text)
    assert tags["SetUp"] == "1" and tags["FEN"] == "W:W18,24,K27:BK2,12,16"  # as to_fen writes
    assert text.split("\n\n", 1)[1].startswith(f"1... {moves[0]} 2. {moves[1]} ")
    assert result == "*" and len(moves) == 6  # no capture in these six: one action a move
    assert pdn_game(DRAUGHTS, [136], start=DRAUGHTS.from_fen("W:W18:B14")).endswith(
        "\n\n1... 18x9 0-1\n\n")
    with pytest.raises(ValueError, match=r"action 1 \(18x9\) is not legal in B:W9:B"):
        pdn_game(DRAUGHTS, [136, 136], start=DRAUGHTS.from_fen("W:W18:B14,1"))


def test_play_saves_each_finished_game_in_pdn(tmp_path):
    saved = tmp_path / "games.pdn"
    for _ in range(2):  # a second game is appended
        out = RUNNER.invoke(app, ["play", "draughts", "--simulations", "8", *GUMBEL_NO_TABLE,
                                  "--position", "W:W18:B14", "--pdn", str(saved)],
                            input="18x9\n")
        assert out.exit_code == 0, out.output
        assert f"The game is saved in {saved} (PDN)." in out.output
    games = saved.read_text().split('[Event "azjax play"]')[1:]
    assert len(games) == 2
    tags, moves, result = _read('[Event "azjax play"]' + games[0])
    assert (tags["White"], tags["Result"], tags["FEN"]) == ("human", "0-1", "W:W18:B14")
    assert tags["Black"] == "azjax draughts" and moves == ["18x9"]
    out = RUNNER.invoke(app, ["play", "tic_tac_toe", "--pdn", str(saved)])
    assert out.exit_code == 2
    assert "--pdn: PDN records draughts games; tic_tac_toe is not draughts" in out.output


def test_eval_saves_every_arena_game_with_the_results_it_counts(tmp_path):
    """`azjax eval --pdn`: each game of the arena, in game order, the agent Black in the first
    half; the results in the file are the W/D/L the arena reports, and every game replays."""
    saved = tmp_path / "arena.pdn"
    out = RUNNER.invoke(app, ["eval", "draughts", "--against", "random", "--games", "4",
                              "--simulations", "2", *GUMBEL_NO_TABLE, "--pdn", str(saved)])
    assert out.exit_code == 0, out.output
    counts = re.search(r"vs +random: \+(\d+) =(\d+) -(\d+)", out.output)
    games = ["[Event" + g for g in saved.read_text().split("[Event")[1:]]
    assert len(games) == 4
    mine = {"1-0": [], "0-1": [], "1/2-1/2": []}
    for index, text in enumerate(games):
        tags, moves, result = _read(text)
        assert tags["Round"] == str(index + 1)
        agent_black = tags["Black"].startswith("azjax")
        assert agent_black == (index < 2) and tags[("Black", "White")[agent_black]] == "random"
        state = DRAUGHTS.init(jax.random.PRNGKey(0))
        for move in moves:
            for hop in DRAUGHTS.parse_move(state, move):
                state = jitted_step(DRAUGHTS)(state, jnp.int32(hop))
        assert pdn_result(state) == result  # no forfeits here: the board has the result
        mine[result].append(agent_black)
    wins = mine["1-0"].count(True) + mine["0-1"].count(False)
    losses = mine["1-0"].count(False) + mine["0-1"].count(True)
    assert (wins, len(mine["1/2-1/2"]), losses) == tuple(int(c) for c in counts.groups())
    out = RUNNER.invoke(app, ["eval", "tic_tac_toe", "--against", "random", "--pdn",
                              str(saved)])
    assert out.exit_code == 2
    assert "--pdn: PDN records draughts games; tic_tac_toe is not draughts" in out.output
