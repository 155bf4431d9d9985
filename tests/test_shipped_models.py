"""Every shipped model loads by game id and still scores what its model card says, and so
does the worked example's model (examples/hexapawn_model, a game defined outside azjax).

Games with an oracle are re-scored on it (every position of tic-tac-toe and hexapawn, the
hexapawn search on a subset, a subset of the larger sets); games without one (draughts)
replay a few of the card's games against random.
"""

from __future__ import annotations

import functools
import json

import jax
import pytest
from conftest import REPO_ROOT, run_optimised

from azjax import Agent
from azjax.agent import MODELS_DIR
from azjax.evaluation.arena import ArenaResult, default_max_steps, run_arena
from azjax.evaluation.baselines import random_player
from azjax.evaluation.oracle import has_oracle, load_oracle
from azjax.evaluation.oracle_score import count_oracle_errors, stack_oracle_sets
from azjax.evaluation.players import network_player, search_player

SHIPPED = sorted(p.name for p in MODELS_DIR.iterdir() if (p / "model.json").is_file()) \
    if MODELS_DIR.is_dir() else []
EXAMPLE_MODEL = REPO_ROOT / "examples" / "hexapawn_model"
EXAMPLE_ORACLE = REPO_ROOT / "examples" / "hexapawn_oracle"


def test_tic_tac_toe_model_is_shipped():
    assert "tic_tac_toe" in SHIPPED


@pytest.mark.parametrize("game", SHIPPED)
def test_shipped_model_matches_its_card(game):
    agent = Agent.load(game)
    meta = json.loads((MODELS_DIR / game / "model.json").read_text())
    assert meta["game"].split("(")[0] == game == agent.env.name  # the spec may name rules
    assert meta.get("rules", "") == agent.env.rules
    card = meta["eval"]
    if not has_oracle(agent.env):
        _check_arena_against_random(agent, card)
        return
    # Tic-tac-toe: every position; larger oracles: the first 100 positions of each set.
    _check_oracle_scores(agent, card, load_oracle(agent.env),
                         limit=None if game == "tic_tac_toe" else 100)


@pytest.mark.parametrize("game", SHIPPED)
def test_shipped_model_carries_checksums_that_hold(game):
    """Every shipped model has its checksums.json, and every file it lists is unchanged."""
    from azjax.model_files import CHECKSUMS_FILE, verify_checksums

    listed = json.loads((MODELS_DIR / game / CHECKSUMS_FILE).read_text())["files"]
    assert {"model.json", "params.msgpack"} <= set(listed)
    assert verify_checksums(MODELS_DIR / game)


def test_the_example_model_matches_its_card():
    """The hexapawn model loads from its folder (importing examples/hexapawn.py by the import
    path its model.json records, which a model of a game that is not installed needs the
    user's trust for) and scores the card's raw figure on all 11,420 positions, its search's
    within noise on the first 2,000 (the search is most of the cost)."""
    agent = Agent.load(str(EXAMPLE_MODEL), trust_game=True)
    assert agent.env.name == "hexapawn"
    card = json.loads((EXAMPLE_MODEL / "model.json").read_text())["eval"]
    _check_oracle_scores(agent, card, load_oracle(agent.env, EXAMPLE_ORACLE), limit=None,
                         search_limit=2000)


def _check_oracle_scores(agent, card, sets, limit, search_limit=None):
    """The agent's raw and search error rates on `sets` (each cut to `limit` positions, None
    = all; the search's to `search_limit` when given) against its card's: equal on whole
    sets, within noise on subsets. Each player scores all sets at once, in one batch, as
    training's evaluator does (a search's steps cost the same at batch 100 and 600)."""
    players = {
        "raw": lambda p: network_player(agent.env, agent.apply_fn, p),
        "search": lambda p: search_player(agent.search_fn, p, agent.num_simulations)}
    cuts = {"raw": limit, "search": search_limit or limit}
    stacked = {cut: stack_oracle_sets(sets, cut) for cut in set(cuts.values())}
    for kind, cut in cuts.items():
        states, preserving, set_index, sizes = stacked[cut]
        counts = run_optimised(lambda p, k, s, m, i, kind=kind: count_oracle_errors(
            players[kind](p), k, s, m, i, len(sets)),
            agent.params, jax.random.PRNGKey(0), states, preserving, set_index)
        for (name, count), errors in zip(sizes.items(), counts.tolist(), strict=True):
            key = "eval/oracle" if len(sets) == 1 else f"eval/oracle/set/{name}"
            card_pct = card[f"{key}/{kind}_error" if len(sets) == 1 else f"{key}/{kind}"]
            pct = 100 * errors / count
            if cut is None:  # the whole set: the same deterministic number as the card
                assert pct == pytest.approx(card_pct, abs=1e-9), (name, kind)
            else:  # a subset: within sampling noise of the card's figure
                assert abs(pct - card_pct) <= _noise_pct(card_pct, count), (name, kind, pct)


def _noise_pct(card_pct: float, count: int) -> float:
    """Three binomial standard deviations of an error rate re-measured on `count` positions
    (in points), and at least 2 points: the card's rate is measured on the whole set, and
    float16 params or another backend may flip a near-tie or two."""
    p = card_pct / 100
    return max(2.0, 300 * (p * (1 - p) / count) ** 0.5)


def _check_arena_against_random(agent, card, num_games: int = 10,
                                max_simulations: int = 64, max_positions: int = 64):
    """A game without an oracle: its card's score against random, re-measured on a few games
    (both colours) with the model's default search, capped at `max_simulations` (or, for
    alpha-beta, `max_positions` a move and no endgame table): random tests the network more
    than the search, and draughts' 256 simulations took 100 s of the suite."""
    assert "eval/vs_random/score" in card, "a model card without an oracle must score vs random"
    search = agent.config.search
    if search.algorithm == "alphabeta":
        agent = agent.with_search([
            f"search.alphabeta_nodes={min(search.alphabeta_nodes or max_positions, max_positions)}",
            "search.endgame_table=0"])
    me = search_player(agent.search_fn, agent.params,
                       min(agent.num_simulations, max_simulations))
    arena = functools.partial(run_arena, env=agent.env, player_a=me,
                              player_b=random_player(agent.env), num_games=num_games,
                              max_steps=default_max_steps(agent.env))
    result = ArenaResult.from_outcomes(*run_optimised(arena, jax.random.PRNGKey(1)))
    # 10 games: a card at 1.0 that lost even a quarter of its games would show here.
    assert result.score >= card["eval/vs_random/score"] - 0.25, (result, card)
