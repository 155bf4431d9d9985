"""Every shipped model loads by game id and still scores what its model card says."""

from __future__ import annotations

import json

import jax
import pytest

from azjax import Agent
from azjax.agent import MODELS_DIR
from azjax.evaluation import network_player, oracle_errors, search_player
from azjax.oracle import load_oracle

SHIPPED = sorted(p.name for p in MODELS_DIR.iterdir() if (p / "model.json").is_file()) \
    if MODELS_DIR.is_dir() else []


def test_tic_tac_toe_model_is_shipped():
    assert "tic_tac_toe" in SHIPPED


@pytest.mark.parametrize("game", SHIPPED)
def test_shipped_model_matches_its_card(game):
    agent = Agent.load(game)
    meta = json.loads((MODELS_DIR / game / "model.json").read_text())
    assert meta["game"] == game == agent.env.name
    card = meta["eval"]
    sets = load_oracle(agent.env)
    # Tic-tac-toe: every position; larger oracles: the first 200 positions of each set.
    limit = None if game == "tic_tac_toe" else 200
    raw = jax.jit(lambda p, k, s, m: oracle_errors(network_player(agent.env, agent.apply_fn, p),
                                                    k, s, m))
    search = jax.jit(lambda p, k, s, m: oracle_errors(
        search_player(agent._search_fn, p, agent.num_simulations), k, s, m))
    for name, oracle in sets.items():
        states = jax.tree.map(lambda x: x[:limit], oracle.states)
        preserving = oracle.preserving[:limit]
        count = preserving.shape[0]
        raw_pct = 100 * int(raw(agent.params, jax.random.PRNGKey(0), states, preserving)) / count
        search_pct = 100 * int(search(agent.params, jax.random.PRNGKey(0), states,
                                      preserving)) / count
        key = "eval/oracle" if len(sets) == 1 else f"eval/oracle/set/{name}"
        card_raw = card[f"{key}/raw_error" if len(sets) == 1 else f"{key}/raw"]
        card_search = card[f"{key}/search_error" if len(sets) == 1 else f"{key}/search"]
        if limit is None:  # the whole set: the same deterministic numbers as the card
            assert raw_pct == pytest.approx(card_raw, abs=1e-9)
            assert search_pct == pytest.approx(card_search, abs=1e-9)
        else:  # a subset: within sampling noise of the card's figure
            assert abs(raw_pct - card_raw) < 7 and abs(search_pct - card_search) < 7
