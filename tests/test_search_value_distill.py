"""tools/search_value_distill.py: its value targets, and a tiny run end to end (tic-tac-toe)."""

from __future__ import annotations

import importlib.util
import json
import sys

import jax
import numpy as np
from conftest import REPO_ROOT

from azjax import Agent

_SPEC = importlib.util.spec_from_file_location("search_value_distill",
                                               REPO_ROOT / "tools" / "search_value_distill.py")
distill = importlib.util.module_from_spec(_SPEC)
sys.modules["search_value_distill"] = distill
_SPEC.loader.exec_module(distill)


def test_results_become_plus_minus_one_and_leaf_values_return_to_the_network_scale():
    scale = distill.LEAF_SCALE
    root = np.array([0.25 * scale, -scale, 1.0, -1.0, 1.0 - 7 / 1000, 0.0], np.float32)
    np.testing.assert_allclose(distill.value_targets(root), [0.25, -1.0, 1.0, -1.0, 1.0, 0.0])


def test_sampled_positions_are_live_and_a_tiny_run_writes_a_model(tmp_path, capsys):
    agent = Agent.load("tic_tac_toe")
    states = distill.sample_positions(agent, jax.random.PRNGKey(0), games=8, count=20)
    assert states.current_player.shape == (20,)
    assert not np.any(np.asarray(states.terminated | states.truncated))

    distill.main(["tic_tac_toe", "--to", str(tmp_path / "model"), "--positions", "40",
                  "--games", "16", "--label-nodes", "100", "--label-batch", "16",
                  "--steps", "4", "--batch", "16", "--learning-rate", "1e-2"])
    assert "held-out before" in capsys.readouterr().out
    fitted = Agent.load(str(tmp_path / "model"))
    assert fitted.config == agent.config
    meta = json.loads((tmp_path / "model" / "model.json").read_text())
    assert meta["distilled"]["positions"] == 40 and meta["distilled"]["label_nodes"] == 100
    changed = jax.tree.map(lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))),
                           fitted.params, agent.params)
    assert any(jax.tree.leaves(changed))
