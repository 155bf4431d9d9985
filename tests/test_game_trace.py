"""`tools/draughts_game_trace.py --pdn`: the traced games written as PDN replay move for move
to their ends, with each game's colours and result."""

from __future__ import annotations

import importlib.util
import re
import sys

import jax
import jax.numpy as jnp
from conftest import REPO_ROOT

from azjax.agent import Agent
from azjax.envs.core import jitted_step
from azjax.envs.pdn import pdn_result

_SPEC = importlib.util.spec_from_file_location(
    "draughts_game_trace", REPO_ROOT / "tools" / "draughts_game_trace.py")
trace_tool = sys.modules.setdefault("draughts_game_trace", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(trace_tool)


def test_traced_games_are_written_as_pdn_that_replays_to_their_results(tmp_path):
    agent = Agent.load("draughts").with_search(["search.algorithm=gumbel",
                                                "search.endgame_table=0"])
    trace = trace_tool.play(agent, "random", games=2, simulations=2, seed=0, opening_plies=2,
                            both_colours=True)
    saved = tmp_path / "trace.pdn"
    trace_tool.write_pdn(agent, "random", trace, str(saved))
    games = ["[Event" + text for text in saved.read_text().split("[Event")[1:]]
    assert len(games) == 2
    for game, text in enumerate(games):
        tags = dict(re.findall(r'^\[(\w+) "([^"]*)"\]$', text, re.M))
        mine = ("Black", "White")[int(trace["me"][game])]
        assert tags[mine] == "azjax draughts" and tags["Round"] == str(game + 1)
        state = agent.env.init(jax.random.PRNGKey(0))
        tokens = [t for t in text.split("\n\n", 1)[1].split() if not re.fullmatch(r"\d+\.+", t)]
        for move in tokens[:-1]:
            for hop in agent.env.parse_move(state, move):
                state = jitted_step(agent.env)(state, jnp.int32(hop))
        assert tokens[-1] == tags["Result"] == pdn_result(state) != "*"
        reward = float(trace["rewards_me"][game])
        won = {"1-0": 0, "0-1": 1}.get(tags["Result"])
        assert (won is None) == (reward == 0) and (won is None or (won == trace["me"][game])
                                                    == (reward > 0))
