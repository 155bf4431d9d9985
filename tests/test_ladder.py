"""The Elo ladder: the maximum-likelihood fit on synthetic results, and a tiny run end to end."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest

from azjax.evaluation.arena import ArenaResult
from azjax.training.ladder import (
    AnchorTable,
    LadderResult,
    fit_elo,
    format_ladder,
    load_anchors,
    rate_anchors,
    run_ladder,
    shipped_anchors,
)

TRUE = {"random": 0.0, "b": 200.0, "c": 400.0}
PAIRS = [("random", "b"), ("b", "c"), ("random", "c")]
DRAW_RATE = 0.1


def _expected(rating_a, rating_b):
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def _sampled(games, seed=0):
    """{(a, b): (wins, draws, losses)} drawn from the TRUE ratings, 10% draws."""
    rng = np.random.default_rng(seed)
    results = {}
    for a, b in PAIRS:
        p = _expected(TRUE[a], TRUE[b])  # expected score = P(win) + P(draw) / 2
        wins, draws, losses = rng.multinomial(
            games, [p - DRAW_RATE / 2, DRAW_RATE, 1 - p - DRAW_RATE / 2])
        results[(a, b)] = ArenaResult(int(wins), int(draws), int(losses))
    return results


def _half_width(rating):
    return (rating[2] - rating[1]) / 2


def test_fit_recovers_exact_expected_results():
    results = {}
    for a, b in PAIRS:
        p = _expected(TRUE[a], TRUE[b])
        results[(a, b)] = (10_000 * (p - DRAW_RATE / 2), 10_000 * DRAW_RATE,
                           10_000 * (1 - p - DRAW_RATE / 2))
    fit = fit_elo(TRUE, results)
    for name, rating in TRUE.items():
        assert fit[name][0] == pytest.approx(rating, abs=0.5)  # the prior's pull is tiny


def test_fit_recovers_sampled_ratings_within_intervals_and_anchor_is_exact():
    fit = fit_elo(list(TRUE), _sampled(2000))
    assert fit["random"] == (0.0, 0.0, 0.0)
    for name in ("b", "c"):
        rating, low, high = fit[name]
        assert low < TRUE[name] < high, (name, fit[name])
        assert 10 < high - low < 60  # ~1.96 * 2 * 7 Elo with 2000 games per pair


def test_anchor_rating_shifts_everything_and_results_may_come_as_triples():
    results = _sampled(500)
    base = fit_elo(TRUE, results)
    shifted = fit_elo(TRUE, [(a, b, r) for (a, b), r in results.items()], anchor="b",
                      anchor_rating=1000.0)
    assert shifted["b"] == (1000.0, 1000.0, 1000.0)
    for name in TRUE:  # the same differences (up to the prior, which follows the anchor)
        assert shifted[name][0] - 1000.0 == pytest.approx(base[name][0] - base["b"][0], abs=5)


def test_perfect_and_hopeless_players_get_finite_ratings():
    results = _sampled(400)
    results[("perfect", "c")] = (400, 0, 0)
    results[("random", "hopeless")] = (400, 0, 0)
    fit = fit_elo([*TRUE, "perfect", "hopeless"], results)
    assert all(np.isfinite(v).all() for v in fit.values())
    assert fit["perfect"][0] > fit["c"][0] + 200
    assert fit["hopeless"][0] < -400
    with pytest.raises(ValueError, match="prior_draws"):
        fit_elo([*TRUE, "perfect"], {**_sampled(400), ("perfect", "c"): (400, 0, 0)},
                prior_draws=0)


def test_intervals_shrink_with_more_games():
    small, large = fit_elo(TRUE, _sampled(200)), fit_elo(TRUE, _sampled(3200))
    for name in ("b", "c"):
        ratio = _half_width(small[name]) / _half_width(large[name])
        assert ratio == pytest.approx(4.0, rel=0.2)  # SE ~ 1/sqrt(games)


def test_unconnected_player_keeps_the_prior_and_bad_input_is_rejected():
    fit = fit_elo(["random", "b", "loner"], {("random", "b"): (5, 0, 5)})
    assert fit["loner"][0] == pytest.approx(0.0, abs=1e-6)
    assert fit["loner"][2] - fit["loner"][1] > 500  # one virtual draw says almost nothing
    with pytest.raises(ValueError, match="anchor"):
        fit_elo(["b", "c"], {})
    with pytest.raises(ValueError, match="unknown player"):
        fit_elo(["random"], {("random", "zz"): (1, 0, 0)})


def test_run_ladder_end_to_end(tiny_run, tmp_path):
    run_dir = tmp_path / "run"  # a copy: the shared run dir stays as the run left it
    shutil.copytree(tiny_run[0] / "snapshots", run_dir / "snapshots")
    shutil.copy(tiny_run[0] / "metrics.jsonl", run_dir)
    lines = []
    result = run_ladder(run_dir, key=jax.random.PRNGKey(0), games_per_pair=8,
                        baselines=("greedy",), progress=lines.append)
    assert isinstance(result, LadderResult)
    names = [p.name for p in result.players]
    assert names == ["random", "greedy", "iter_2", "iter_4"]
    # pairs: random-greedy, each snapshot vs both baselines, the two snapshots
    assert len(result.matches) == len(lines) == 1 + 2 * 2 + 1
    assert all(r.num_games == 8 for *_, r in result.matches)
    data = json.loads((run_dir / "ladder.json").read_text())
    players = {p["name"]: p for p in data["players"]}
    assert set(players) == set(names)
    assert players["random"]["elo"] == 0.0
    assert players["iter_4"]["iteration"] == 4 and players["iter_4"]["wall_s"] > 0
    assert all(p["low95"] <= p["elo"] <= p["high95"] for p in players.values())
    assert len(data["matches"]) == 6
    assert (run_dir / "ladder.png").stat().st_size > 1000
    text = format_ladder(result)
    assert any(line.startswith("iter_4") for line in text)


def test_fixed_ratings_hold_and_only_the_others_are_fitted():
    """Anchors held at a table's ratings: a player's fit uses its games against them, and
    games between two fixed players move nothing."""
    results = _sampled(2000)
    free_fit = fit_elo(list(TRUE), results)
    table = {name: TRUE[name] for name in TRUE if name != "c"}
    fit = fit_elo(list(TRUE), results, fixed=table)
    for name, rating in table.items():
        assert fit[name] == (rating, rating, rating)
    assert abs(fit["c"][0] - TRUE["c"]) < fit["c"][2] - fit["c"][0] + 1e-9
    # Between fixed players nothing is fitted: a lopsided result there changes no rating.
    fixed_pair = next((a, b) for a, b in results if a in table and b in table)
    skewed = {**results, fixed_pair: (500, 0, 0)}
    assert fit_elo(list(TRUE), skewed, fixed=table)["c"] == pytest.approx(fit["c"])
    assert free_fit["c"] != fit["c"]
    with pytest.raises(ValueError, match="fixed player 'zz'"):
        fit_elo(list(TRUE), results, fixed={"zz": 1.0})


def test_anchor_table_round_trip_and_an_anchored_ladder(tiny_run, tmp_path):
    table = rate_anchors("tic_tac_toe", ["greedy", "alphabeta:9"],
                         key=jax.random.PRNGKey(0), games_per_pair=8)
    assert table.ratings["random"] == 0.0 and len(table.matches) == 3
    # Perfect play never loses: alphabeta:9 scores at least half against both others.
    for a, b, wins, _, losses in table.matches:
        if "alphabeta:9" in (a, b):
            mine = (wins, losses) if a == "alphabeta:9" else (losses, wins)
            assert mine[1] == 0
    path = tmp_path / "anchors.json"
    path.write_text(json.dumps(table.to_dict()))
    assert load_anchors(path) == table

    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run[0] / "snapshots", run_dir / "snapshots")
    shutil.copy(tiny_run[0] / "metrics.jsonl", run_dir)
    result = run_ladder(run_dir, key=jax.random.PRNGKey(1), games_per_pair=8, baselines=(),
                        anchors=load_anchors(path))
    ratings = result.ratings()
    for name, rating in table.ratings.items():
        assert ratings[name] == (rating, rating, rating)
    played = {frozenset((a, b)) for a, b, _ in result.matches}
    assert not any(pair <= set(table.ratings) for pair in played)  # anchors play no anchor
    assert len(result.matches) == 2 * 3 + 1
    assert "held fixed: greedy, alphabeta:9 (engine 1, terminal-only)" in format_ladder(
        result)[0]
    assert json.loads(result.json_path.read_text())["fixed_anchors"]["engine"] == 1
    with pytest.raises(ValueError, match="measured from 2 opening plies"):
        run_ladder(run_dir, key=jax.random.PRNGKey(1), games_per_pair=8, baselines=(),
                   anchors=load_anchors(path), opening_plies=3)


def test_an_anchor_table_of_another_version_or_game_is_refused(tmp_path):
    from azjax import envs
    table = AnchorTable(game="tic_tac_toe", ratings={"random": 0.0}, intervals={},
                        engine=99, evaluation="terminal-only", games_per_pair=2,
                        opening_plies=2)
    with pytest.raises(ValueError, match="engine 99 .* measure it again"):
        table.check(envs.make("tic_tac_toe"))
    with pytest.raises(ValueError, match="not 'connect_four'"):
        table.check(envs.make("connect_four"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"game": "tic_tac_toe"}')
    with pytest.raises(ValueError, match="is not an anchor table"):
        load_anchors(bad)
    with pytest.raises(ValueError, match="no anchor table at"):
        load_anchors(tmp_path / "missing.json")


def test_cli_anchors_writes_a_table_and_refuses_bad_input(tiny_run, tmp_path):
    from typer.testing import CliRunner

    from azjax.apps.cli import app

    runner, out_file = CliRunner(), tmp_path / "table.json"
    out = runner.invoke(app, ["anchors", "tic_tac_toe", "--against", "greedy", "--games", "2",
                              "--out", str(out_file)])
    assert out.exit_code == 0, out.output
    assert load_anchors(out_file).ratings["random"] == 0.0 and "greedy" in out.output
    again = runner.invoke(app, ["anchors", "tic_tac_toe", "--against", "greedy",
                                "--out", str(out_file)])
    assert again.exit_code == 2 and "exists" in again.output
    run_dir = str(tiny_run[0])
    out = runner.invoke(app, ["eval", run_dir, "--anchors", str(out_file)])
    assert out.exit_code == 2 and "applies to a --ladder" in out.output
    out = runner.invoke(app, ["eval", run_dir, "--ladder", "--anchors", str(tmp_path / "no")])
    assert out.exit_code == 2 and "no anchor table at" in out.output
    out = runner.invoke(app, ["eval", run_dir, "--ladder", "--anchors", "shipped"])
    assert out.exit_code == 2, out.output
    assert ("error: azjax ships no anchor table for tic_tac_toe (alpha-beta engine 1, "
            "evaluation 'terminal-only')") in out.output


@pytest.mark.parametrize("name,rules,other", [
    ("draughts", "draughts", "draughts(draw_rule='openspiel')"),
    ("draughts_openspiel", "draughts(draw_rule='openspiel')", "draughts")])
def test_the_shipped_draughts_anchor_tables_fit_their_matches_and_this_engine(name, rules,
                                                                             other):
    """azjax/data/anchors/draughts.json (the laws' rules, the registered game's) and
    draughts_openspiel.json (OpenSpiel's 40-action counter): each measured with this azjax's
    alpha-beta engine and draughts evaluation under its rules (a change to either needs a new
    table; the other rules end games otherwise, so they are refused), and its ratings are the
    Elo fit of the matches it records."""
    from conftest import REPO_ROOT

    from azjax import envs
    table = load_anchors(REPO_ROOT / "azjax" / "data" / "anchors" / f"{name}.json")
    table.check(envs.make(rules))
    with pytest.raises(ValueError, match="measure it again"):
        table.check(envs.make(other))
    assert shipped_anchors(envs.make(rules)) == table  # what `--anchors shipped` finds
    names = list(table.ratings)
    assert {"random", "mcts:100", "alphabeta:2", "alphabeta:4", "alphabeta:6"} <= set(names)
    fit = fit_elo(names, [(a, b, counts) for a, b, *counts in table.matches])
    for name in names:
        np.testing.assert_allclose(fit[name][0], table.ratings[name], atol=1e-6)
        np.testing.assert_allclose(fit[name][1:], table.intervals[name], atol=1e-6)
    games = {frozenset((a, b)): sum(counts) for a, b, *counts in table.matches}
    assert len(games) == len(names) * (len(names) - 1) // 2  # a full round robin
    assert set(games.values()) == {table.games_per_pair}
