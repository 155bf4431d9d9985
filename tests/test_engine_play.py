"""Play like an engine: a clock per move, the tree kept between moves, ply-by-ply arenas, and
the commands and API that offer them. The search itself (chunks, kept trees, proven results)
is checked in tests/test_search_engine.py; here, what is built on it.

No test reads the wall clock: every player here reads a fake clock that moves a fixed step per
reading (`fake_clock`), so the chunks a timed move runs are the same on any machine.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO_ROOT, FakeClock
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from azjax.agent import Agent
from azjax.alphabeta_player import AlphaBetaPlayer
from azjax.apps.cli import app
from azjax.apps.serve import GameService
from azjax.engine_player import EnginePlayer, Move, SearchPlayer
from azjax.evaluation.arena import play_arena
from azjax.evaluation.baselines import greedy_player
from azjax.evaluation.engine_arena import _subset_size, play_engine_arena
from azjax.evaluation.players import search_player

RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})
SIMS = 8


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch):
    """Players' default clock, moving 1 s per reading: a move on a clock of under 1 s runs
    exactly one chunk, whatever the machine's speed."""
    from azjax import engine_player

    monkeypatch.setattr(engine_player, "now", FakeClock(1.0))


@pytest.fixture(scope="module")
def agent() -> Agent:
    return Agent.load("tic_tac_toe")


@pytest.fixture(scope="module")
def puct_agent(agent) -> Agent:
    return agent.with_search(["search.algorithm=puct"])


def _states(env, batch: int, plies: int = 0, seed: int = 0):
    """`batch` positions after `plies` random legal moves (games that end stay ended)."""
    key = jax.random.PRNGKey(seed)
    states = jax.vmap(env.init)(jax.random.split(key, batch))
    for ply in range(plies):
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf)
        actions = jax.random.categorical(jax.random.fold_in(key, ply), logits)
        done = states.terminated | states.truncated
        states = jax.vmap(env.step)(states, jnp.where(done, 0, actions).astype(jnp.int32))
    return states


def test_a_fixed_count_engine_arena_plays_the_compiled_arenas_games(agent):
    """Fixed simulations, no kept tree: the ply-by-ply arena and the one-call arena play the
    same games (the same search, starts, openings and keys), so their results agree."""
    env, key = agent.env, jax.random.PRNGKey(3)
    compiled = play_arena(env, search_player(agent.search_fn, agent.params, SIMS),
                          greedy_player(env), key=key, num_games=8, opening_plies=2)
    engine = agent.player(num_simulations=SIMS, keep_tree=False)
    result, mine, theirs = play_engine_arena(env, engine, greedy_player(env), key=key,
                                             num_games=8, opening_plies=2)
    assert result == compiled
    assert mine.simulations_per_move == SIMS and theirs.simulations_per_move is None
    assert mine.moves > 0 and theirs.moves > 0


@pytest.mark.parametrize("chunks", [1, 3])
def test_a_clock_bounds_the_simulations_of_a_move(agent, chunks):
    """A fake clock moving 1 s per reading against a movetime of `chunks` s: the move reads it
    once when it starts and once after each chunk, so it runs exactly `chunks` chunks."""
    states = _states(agent.env, 4)
    player = EnginePlayer(agent.search_engine, {"params": agent.params}, num_simulations=16,
                          movetime=float(chunks), chunk=4, clock=FakeClock(1.0))
    move = player.move(jax.random.PRNGKey(0), states)
    assert np.all(move.simulations == 4 * chunks)
    assert np.all(np.take_along_axis(np.asarray(states.legal_action_mask),
                                     move.action[:, None], 1))


def test_a_kept_tree_carries_its_visits_into_the_next_search(puct_agent):
    """PUCT, a batch of games: after a move and the reply, each next search starts from the
    subtree under the two moves, so its root holds more visits than the search ran."""
    env = puct_agent.env
    states = _states(env, 4)
    player = puct_agent.player(num_simulations=64, keep_tree=True)
    fresh = puct_agent.player(num_simulations=64, keep_tree=False)
    step = jax.jit(jax.vmap(env.step))
    for ply in range(2):
        move = player.move(jax.random.PRNGKey(ply), states)
        states = step(states, jnp.asarray(move.action))
        player.played(move.action)
    # The second move's root had the first search's subtree under its two moves.
    visits = np.asarray(move.output.visit_counts).sum(axis=1)
    assert np.all(visits >= move.simulations) and np.any(visits > move.simulations)
    assert np.all(move.simulations == 64)
    other = fresh.move(jax.random.PRNGKey(1), states)
    assert np.all(np.asarray(other.output.visit_counts).sum(axis=1) == 64)


def test_agent_act_with_a_movetime_plays_legal_moves(agent):
    states = _states(agent.env, 3, plies=2)
    actions = np.asarray(agent.act(jax.random.PRNGKey(0), states, movetime=0.01))
    assert actions.shape == (3,)
    assert np.all(np.take_along_axis(np.asarray(states.legal_action_mask), actions[:, None], 1))


def test_a_bad_movetime_is_refused(agent):
    for movetime in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="movetime must be a positive number of seconds"):
            agent.player(movetime=movetime)
    result = RUNNER.invoke(app, ["play", "tic_tac_toe", "--movetime", "-1"])
    assert result.exit_code == 2
    assert "--movetime: must be in (0, 3600] seconds, got -1.0" in result.output


def test_eval_with_a_movetime_reports_each_sides_pace():
    result = RUNNER.invoke(app, ["eval", "tic_tac_toe", "--against", "greedy", "--games", "2",
                                 "--movetime", "0.01"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith(" simulations, 0.01 s per move"), lines[0]
    (pace,) = [line for line in lines if line.startswith("    agent ")]
    assert " simulations per move; greedy " in pace and pace.endswith(" s per move")


@pytest.fixture(scope="module")
def alphabeta_agent(agent) -> Agent:
    return agent.with_search(["search.algorithm=alphabeta", "search.alphabeta_depth=9",
                              "search.alphabeta_nodes=48"])


def test_alphabeta_on_a_clock_plays_its_deepest_step_finished_in_time(alphabeta_agent):
    """Alpha-beta on a clock runs chunks of positions until the time is spent (a fake clock,
    1 s a reading, 2 s a move: two chunks of 16) and plays what the same search with a budget
    of 32 positions plays: each game's deepest finished step. The config's budget (48) bounds
    every move, on a clock or not, and the one-shot search (`Agent.search_output`) is the
    player's."""
    states = _states(alphabeta_agent.env, 4, plies=1)
    key, engine = jax.random.PRNGKey(5), alphabeta_agent.search_engine
    variables = {"params": alphabeta_agent.params}
    timed = AlphaBetaPlayer(engine, variables, movetime=2.0, chunk=16, clock=FakeClock(1.0))
    move = timed.move(key, states)
    want = AlphaBetaPlayer(engine, variables, nodes=32).move(key, states)
    np.testing.assert_array_equal(move.action, want.action)
    np.testing.assert_array_equal(move.depth, want.depth)
    assert np.all(move.simulations == 32) and np.all(move.depth < 9)
    slow = AlphaBetaPlayer(engine, variables, movetime=100.0, chunk=16, clock=FakeClock(1.0))
    budgeted = alphabeta_agent.player().move(key, states)
    assert np.all(slow.move(key, states).simulations == 48)
    assert np.all(budgeted.simulations == 48)
    one_shot = alphabeta_agent.search_output(key, states)
    np.testing.assert_array_equal(np.asarray(one_shot.action), budgeted.action)
    np.testing.assert_array_equal(np.asarray(one_shot.visit_counts).sum(-1), 48)
    solved = AlphaBetaPlayer(engine, variables, nodes=0).move(key, states)  # to the depth
    assert np.all(solved.depth == 9) and np.all(solved.simulations > 48)
    with pytest.raises(ValueError, match="alphabeta keeps no tree between moves"):
        alphabeta_agent.player(keep_tree=True)


def test_eval_plays_alphabeta_at_equal_time_and_reports_its_depth():
    # The clock test's depth and batch: the same compiled programs (the persistent cache).
    result = RUNNER.invoke(app, ["eval", "tic_tac_toe", "--against", "random", "--games", "4",
                                 "--equal-time", "--set", "search.algorithm=alphabeta",
                                 "--set", "search.alphabeta_depth=9"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.endswith("evaluated with alpha-beta to depth 9 (whole moves), at equal "
                             "time with each opponent") for line in lines), result.output
    (pace,) = [line for line in lines if line.startswith("    agent ")]
    assert " positions to depth " in pace, pace


def test_play_with_a_movetime_through_a_pipe():
    typed = "5\n1\n2\n3\n4\n6\n7\n8\n9\n"
    result = RUNNER.invoke(app, ["play", "tic_tac_toe", "--movetime", "0.01"], input=typed)
    assert result.exit_code == 0, result.output
    assert "the AI plays O thinking 0.01 s a move" in result.output
    assert "Result: " in result.output


def test_serve_offers_times_per_move(agent):
    service = GameService({"tic_tac_toe": agent}, simulations=(4,), movetimes=(0.01,))
    assert service.games()["movetimes"] == [0.01]
    reply = service.move(json.dumps({"game": "tic_tac_toe", "moves": [4],
                                     "movetime": 0.01}).encode())
    assert reply["simulations"] >= 1 and reply["move"] != 4
    from azjax.apps.serve import ApiError

    refused = {
        json.dumps({"game": "tic_tac_toe", "movetime": 0.5}): (422, "movetime must be one of"),
        json.dumps({"game": "tic_tac_toe", "movetime": "1"}): (400, "must be a number"),
        json.dumps({"game": "tic_tac_toe", "movetime": True}): (400, "must be a number"),
        json.dumps({"game": "tic_tac_toe", "movetime": 0.01, "simulations": 4}):
            (400, "not both"),
    }
    for body, (status, words) in refused.items():
        with pytest.raises(ApiError) as error:
            service.move(body.encode())
        assert error.value.status == status and words in str(error.value), body


def test_search_config_options_default_off():
    from azjax.config import SearchConfig

    fields = {f.name: f.default for f in dataclasses.fields(SearchConfig)}
    assert fields["tree_reuse"] is False and fields["solver"] is False


def test_engine_arena_keeps_trees_in_both_players(puct_agent):
    """Two kept-tree players in one arena: every game ends, nothing illegal is played."""
    env = puct_agent.env
    a = puct_agent.player(num_simulations=SIMS, keep_tree=True)
    b = puct_agent.player(num_simulations=SIMS, keep_tree=True)
    result, mine, theirs = play_engine_arena(env, a, b, key=jax.random.PRNGKey(0), num_games=4,
                                             opening_plies=1)
    assert result.num_games == 4 and result.illegal_moves_a == result.illegal_moves_b == 0
    assert mine.simulations_per_move == theirs.simulations_per_move == SIMS


class _LowestLegal(SearchPlayer):
    """Plays each game's lowest legal action, game by game, and notes each batch it is given:
    a player whose moves cannot depend on its batch, to check how an arena hands out games."""

    movetime = None

    def __init__(self, subsets: bool):
        self.searches_subsets, self.batches = subsets, []

    def move(self, key, states):
        mask = np.asarray(states.legal_action_mask)
        self.batches.append(len(mask))
        ones = np.ones(len(mask))
        return Move(mask.argmax(axis=-1).astype(np.int32), None, ones, 0.5, depth=2 * ones)

    def played(self, actions):
        pass

    def reset(self):
        pass


def test_a_player_that_searches_subsets_gets_only_its_games_and_plays_the_same_games(agent):
    """An arena hands a player that searches game by game only the games it is to move in, in
    a batch halved while they fit (8 games, 4 to move on each tic-tac-toe ply, fewer as games
    end), and the games played are those of the same player given the whole batch."""
    env, key = agent.env, jax.random.PRNGKey(4)
    whole, subsets = _LowestLegal(False), _LowestLegal(True)
    results = [play_engine_arena(env, player, greedy_player(env), key=key, num_games=8,
                                 opening_plies=1) for player in (whole, subsets)]
    assert results[0][:2] == results[1][:2]  # the games and A's tally (B's: its own time)
    assert results[1][0].illegal_moves_a == 0
    assert set(whole.batches) == {8} and max(subsets.batches) == 4
    assert set(subsets.batches) <= {4, 2, 1} and len(subsets.batches) == len(whole.batches)
    assert results[1][1].depth_per_move == 2.0 and results[1][1].simulations_per_move == 1.0


@given(st.integers(1, 300), st.integers(0, 300))
def test_a_subset_batch_holds_its_games_in_one_of_a_few_sizes(total, count):
    count = min(count, total)
    size = _subset_size(count, total)
    assert count <= size <= total
    assert size == 1 or -(-size // 2) < count  # halving once more would not hold them
    halvings = [total]
    while halvings[-1] > 1:
        halvings.append(-(-halvings[-1] // 2))
    assert size in halvings


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_connect_four_win_in_three_is_proven_and_played_and_the_search_stops_early(algorithm):
    """Red has two men in the middle of the bottom row (columns 3 and 4), Yellow two in column
    7: either column 2 or column 5 makes an open three, a win in 3 plies; nothing wins in 1.
    With the solver the shipped model's search proves the win, plays one of the two moves and
    stops before its count; without it, it runs them all."""
    from azjax.agent import states_from_moves

    agent = Agent.load("connect_four").with_search([f"search.algorithm={algorithm}",
                                                    "search.solver=true"])
    states = states_from_moves(agent.env, [[2, 6, 3, 6]])
    move = agent.player(num_simulations=2048).move(jax.random.PRNGKey(0), states)
    assert int(move.action[0]) in (1, 4)
    assert int(move.proven[0]) == 1  # PROVEN_WIN for the player to move
    assert int(move.simulations[0]) < 2048
