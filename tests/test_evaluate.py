"""Arenas: bookkeeping checked with deterministic players, then strength with baselines."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import envs
from azjax.evaluation.arena import (
    ArenaResult,
    arena_devices,
    arena_split_note,
    elo_difference,
    play_arena,
    run_arena,
)
from azjax.evaluation.baselines import greedy_player, random_player

TTT = envs.make("tic_tac_toe")
C4 = envs.make("connect_four")


def _preference_player(order):
    """Plays the first legal action in `order` (deterministic)."""
    rank = np.empty(len(order), np.int32)
    rank[list(order)] = np.arange(len(order))
    rank = jnp.asarray(rank)

    def act(key, states):
        del key
        return jnp.argmin(jnp.where(states.legal_action_mask, rank, 99), axis=1).astype(jnp.int32)

    return act


LOWEST = _preference_player(range(9))  # tic-tac-toe: the first player wins on 2-4-6
DRAWER = _preference_player((4, 0, 2, 6, 8, 1, 3, 5, 7))  # vs itself: a full-board draw
LOWEST_C4 = _preference_player(range(7))  # connect four: the first player fills row 0 first


def _illegal_player(key, states):
    """Always plays cell 4 (illegal once taken) or -1 (never legal)."""
    del key
    return jnp.where(states.legal_action_mask[:, 4], -1, 4).astype(jnp.int32)


def test_progress_reports_finished_games_after_every_ply_and_changes_no_game():
    from azjax.evaluation import arena as evaluate

    rand = random_player(TTT)
    plain = play_arena(TTT, rand, LOWEST, key=jax.random.PRNGKey(3), num_games=6)
    ticks = []
    watched = play_arena(TTT, rand, LOWEST, key=jax.random.PRNGKey(3), num_games=6,
                         progress=lambda finished, plies: ticks.append((plies, finished)))
    assert watched == plain
    ticks.sort()
    plies, finished = zip(*ticks, strict=True)
    assert plies == tuple(range(1, len(ticks) + 1)) and 5 <= len(ticks) <= 9
    assert list(finished) == sorted(finished) and finished[0] == 0 and finished[-1] == 6
    assert not evaluate._ARENA_WATCHERS  # the report is gone with its arena


def test_first_player_wins_lowest_vs_lowest():
    # X: 0, 2, 4, 6 vs O: 1, 3, 5 -> X wins; A is X in the first ceil(5 / 2) = 3 games.
    result = play_arena(TTT, LOWEST, LOWEST, key=jax.random.PRNGKey(0), num_games=5)
    assert (result.wins, result.draws, result.losses) == (3, 0, 2)
    assert result.num_games == 5
    assert result.score == pytest.approx(3 / 5)
    assert (result.illegal_moves_a, result.illegal_moves_b) == (0, 0)
    # Cut after 6 plies, before X's winning move: every game counts as a draw.
    cut = play_arena(TTT, LOWEST, LOWEST, key=jax.random.PRNGKey(0), num_games=5, max_steps=6)
    assert (cut.wins, cut.draws, cut.losses) == (0, 5, 0)


def test_connect_four_lowest_vs_lowest_and_game_length():
    # Columns 0-2 fill up alternately, then X completes row 0 (the bottom) in column 3.
    result = play_arena(C4, LOWEST_C4, LOWEST_C4, key=jax.random.PRNGKey(0), num_games=6)
    assert (result.wins, result.draws, result.losses) == (3, 0, 3)
    # Cut after 18 plies: nobody has won yet, so every game counts as a draw.
    cut = play_arena(C4, LOWEST_C4, LOWEST_C4, key=jax.random.PRNGKey(0), num_games=6, max_steps=18)
    assert (cut.wins, cut.draws, cut.losses) == (0, 6, 0)


def test_draws_are_counted():
    result = play_arena(TTT, DRAWER, DRAWER, key=jax.random.PRNGKey(0), num_games=4)
    assert (result.wins, result.draws, result.losses) == (0, 4, 0)
    assert result.score == 0.5


def test_illegal_moves_lose_and_are_counted():
    # B's first move is illegal in every game: as O it answers A's 4 with 4, as X it plays -1.
    result = play_arena(TTT, DRAWER, _illegal_player, key=jax.random.PRNGKey(0), num_games=6)
    assert (result.wins, result.draws, result.losses) == (6, 0, 0)
    assert (result.illegal_moves_a, result.illegal_moves_b) == (0, 6)


def test_finished_games_stay_finished():
    # A forfeits at once where it is X (-1) and at its first move where it is O (4 is taken):
    # games end at ply 1 or 2, and the ones over early get no more rewards after.
    arena = jax.jit(
        run_arena, static_argnames=("env", "player_a", "player_b", "num_games", "max_steps")
    )
    a_returns, bad_a, bad_b = arena(
        jax.random.PRNGKey(1),
        env=TTT,
        player_a=_illegal_player,
        player_b=DRAWER,
        num_games=8,
        max_steps=9,
    )
    np.testing.assert_array_equal(np.asarray(a_returns), -np.ones(8))
    assert (int(bad_a), int(bad_b)) == (8, 0)
    result = ArenaResult.from_outcomes(a_returns, bad_a, bad_b)
    assert (result.wins, result.draws, result.losses, result.illegal_moves_a) == (0, 0, 8, 8)


def test_paired_random_openings_vary_deterministic_games_and_swap_colours_per_pair():
    """LOWEST against itself replays one game per colour; with 2 random opening plies the
    games vary, and game i and i + B/2 are the same moves with the seats swapped, so A's
    results are opposite."""
    arena = jax.jit(run_arena, static_argnames=("env", "player_a", "player_b", "num_games",
                                                "max_steps", "opening_plies"))
    games = 64

    def returns(plies):
        out, bad_a, bad_b = arena(jax.random.PRNGKey(4), env=TTT, player_a=LOWEST,
                                  player_b=LOWEST, num_games=games, max_steps=9,
                                  opening_plies=plies)
        assert int(bad_a) == int(bad_b) == 0
        return np.asarray(out)

    plain, opened = returns(0), returns(2)
    assert len(set(plain[: games // 2])) == 1 and len(set(plain[games // 2:])) == 1
    np.testing.assert_array_equal(opened[: games // 2], -opened[games // 2:])
    assert len(set(opened)) == 3  # A wins, draws and loses from some openings


def test_run_arena_inside_jit_with_traced_state():
    """The pure arena runs inside a caller's jit, players closing over traced values."""

    @jax.jit
    def arena(order_shift, key):
        def shifted(key, states):  # lowest legal cell at or after `order_shift` (cyclic)
            del key
            rank = (jnp.arange(9) - order_shift) % 9
            mask = states.legal_action_mask
            return jnp.argmin(jnp.where(mask, rank, 99), axis=1).astype(jnp.int32)

        return run_arena(key, env=TTT, player_a=shifted, player_b=LOWEST, num_games=4, max_steps=9)

    a_returns, bad_a, bad_b = arena(jnp.int32(0), jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(a_returns), [1, 1, -1, -1])
    result = ArenaResult.from_outcomes(a_returns, bad_a, bad_b)
    assert (result.wins, result.losses) == (2, 2)


def test_random_vs_random_is_even():
    # X wins ~58% of random tic-tac-toe games, O ~29%: colours balanced, the score is ~0.5.
    player = random_player(TTT)
    result = play_arena(TTT, player, player, key=jax.random.PRNGKey(3), num_games=400)
    assert 0.43 <= result.score <= 0.57, str(result)  # sd ~0.023
    assert (result.illegal_moves_a, result.illegal_moves_b) == (0, 0)


def test_greedy_beats_random_on_connect_four():
    result = play_arena(
        C4, greedy_player(C4), random_player(C4), key=jax.random.PRNGKey(4), num_games=100
    )
    print("greedy vs random, connect four:", result)
    assert result.score > 0.8, str(result)
    assert (result.illegal_moves_a, result.illegal_moves_b) == (0, 0)


def test_elo_difference():
    assert elo_difference(0.5) == 0.0
    assert elo_difference(0.75) == pytest.approx(400 * math.log10(3))
    assert elo_difference(0.25) == pytest.approx(-elo_difference(0.75))
    assert elo_difference(1.0) == math.inf and elo_difference(0.0) == -math.inf
    with pytest.raises(ValueError, match="score"):
        elo_difference(1.5)


def test_games_that_do_not_divide_over_the_devices_play_on_one_and_say_so():
    three = ["cpu:0", "cpu:1", "cpu:2"]  # stand-ins: only counted, never used
    assert arena_devices(9, three) == tuple(three) and arena_split_note(9, three) is None
    assert arena_devices(10, three) == ("cpu:0",)
    assert arena_split_note(10, three) == ("note: 10 games do not divide over 3 devices, so one "
                                           "device plays them all; a multiple of 3 splits them")
    assert arena_split_note(10, ["cpu:0"]) is None  # one device: nothing to split


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_games"):
        play_arena(TTT, LOWEST, LOWEST, key=jax.random.PRNGKey(0), num_games=0)
    assert str(ArenaResult(wins=3, draws=1, losses=0)).startswith("+3 =1 -0 (score 0.875")


def test_training_evaluator_plays_each_opponent_its_games():
    """Cheap opponents share one arena, mcts:N and alphabeta:D play their own (alpha-beta's
    from paired openings): every opponent meets the agent in exactly `arena_games` games, and
    the rollouts beat the untrained network more often than uniform random moves do."""
    import dataclasses

    from conftest import tiny_config

    from azjax.config import EvalConfig
    from azjax.evaluation.evaluator import Evaluator
    from azjax.training.trainer import Trainer

    config = tiny_config()
    config = dataclasses.replace(config, eval=EvalConfig(
        arena_games=40, opponents=("random", "greedy", "mcts:32", "alphabeta:1"),
        num_simulations=2))
    trainer = Trainer(TTT, config)
    params = trainer.init_state(jax.random.PRNGKey(0)).train.params
    evaluator = Evaluator(TTT, config, trainer.apply_fn, trainer.search_fn)
    metrics = evaluator.evaluate(params, jax.random.PRNGKey(1))
    for name in ("random", "greedy", "mcts:32", "alphabeta:1"):
        counts = [metrics[f"eval/vs_{name}/{k}"] for k in ("wins", "draws", "losses")]
        assert sum(counts) == 40, (name, counts)
    assert metrics["eval/vs_mcts:32/score"] < metrics["eval/vs_random/score"]


def test_arenas_follow_the_iteration_not_the_count_of_evaluations_since_a_resume():

    from conftest import tiny_config

    from azjax.config import EvalConfig
    from azjax.evaluation.evaluator import arenas_due

    config = tiny_config(eval=EvalConfig(every_iterations=10, arena_every=5))
    due = [i for i in range(0, 160, 10) if arenas_due(config, i, last=False)]
    assert due == [0, 50, 100, 150]
    assert arenas_due(config, 37, last=True)  # the run's last evaluation always plays them


def test_an_oracle_dir_without_the_games_files_is_refused_before_training(tmp_path):
    from conftest import tiny_config

    from azjax.config import ConfigError, EvalConfig
    from azjax.evaluation.evaluator import Evaluator
    from azjax.training.trainer import Trainer

    (tmp_path / "notes.txt").write_text("not an oracle")
    config = tiny_config(eval=EvalConfig(oracle=True, oracle_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match=r"eval.oracle_dir: no \*.jsonl files in"):
        trainer = Trainer(TTT, config)
        Evaluator(TTT, config, trainer.apply_fn, trainer.search_fn, params_example={})


def test_arena_metrics_and_the_wdl_line_come_from_one_result():
    from azjax.evaluation.arena import arena_metrics, wdl_summary

    result = ArenaResult.from_outcomes(np.array([1.0, 0.0, -1.0, 1.0, 1.0]))
    metrics = arena_metrics("greedy", result)
    assert metrics == {"eval/vs_greedy/wins": 3, "eval/vs_greedy/draws": 1,
                       "eval/vs_greedy/losses": 1, "eval/vs_greedy/score": 0.7}
    assert wdl_summary("greedy", metrics) == "vs greedy W/D/L 3/1/1"
    assert wdl_summary("random", metrics) is None
