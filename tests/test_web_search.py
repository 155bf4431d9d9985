"""The browser's search (azjax/apps/static/search.js) against azjax's own, run by Node.js.

Both search a synthetic game: a state is a uint32 hash of its move path, and the prior logits,
legal moves, value, reward and discount are pure functions of it in uint32 arithmetic, written
once here in JAX and once in tests/web/search_driver.mjs, every float k / 2^n (exact in
float32). Some root moves are illegal (sometimes fewer than sequential halving's candidates),
some edges end the game (discount 0, reward -1, 0 or +1), some keep the mover (discount +1),
a few carry a reward of +-0.25. Each config's Python search is one jitted call over all the
seeds (`azjax.core.search._policy` with noise=False, the action as `make_search` takes it);
one Node process runs every case of the JS port.

Gumbel searches have no noise: visits, action, policy and value must agree. PUCT's mctx adds
1e-7 x uniform noise to break ties where the JS port takes the lowest action: a case may differ
only if the port reports a near-tie that decided a selection, and such cases must be rare.
"""

from __future__ import annotations

import functools
import shutil

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from conftest import REPO_ROOT, run_node

from azjax.config import SearchConfig
from azjax.core.search import _policy

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js (`node`) to run search.js")

DRIVER = REPO_ROOT / "tests" / "web" / "search_driver.mjs"
NUM_ACTIONS = 9
ROOTS = [(seed * 2654435761 + 12345) % 2**32 for seed in range(64)]
# Each config costs a compile of several seconds on a CPU (more roots cost next to nothing), so
# the grid is sparse: each algorithm with each qtransform, and their usual qtransforms over
# budgets below, near and above the 4 or 16 candidates of sequential halving.
CONFIGS = (  # (algorithm, simulations, max_num_considered_actions, qtransform[, pb_c_init,
    #           pb_c_base])
    ("gumbel", 1, 4, "completed_by_mix_value"),
    ("gumbel", 2, 16, "completed_by_mix_value"),
    ("gumbel", 16, 16, "completed_by_mix_value"),
    ("gumbel", 64, 4, "completed_by_mix_value"),
    ("gumbel", 16, 4, "by_parent_and_siblings"),
    ("gumbel", 64, 16, "by_min_max"),
    ("puct", 16, 16, "by_parent_and_siblings", 0.75, 8.0),  # c grows visibly with visits;
    # puct ignores the candidates' count
    ("puct", 64, 16, "completed_by_mix_value"),
    ("puct", 7, 16, "by_min_max"),
)
# SearchConfig's qtransform name -> the JS option's.
QTRANSFORMS = {"completed_by_mix_value": "completed_by_mix_value",
               "by_parent_and_siblings": "by_parent_and_siblings", "by_min_max": "min_max"}
TOLERANCE = 1e-5
MAX_PUCT_TIE_CASES = 0.02  # the share of puct cases a near-tie may make differ


# ---- the synthetic game (the same as search_driver.mjs's model) ----

def _u32(x) -> jax.Array:
    return jnp.asarray(x, jnp.uint32)


def _mix(x: jax.Array) -> jax.Array:
    """lowbias32: a uint32 -> uint32 hash."""
    x = x ^ (x >> 16)
    x = x * _u32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * _u32(0x846CA68B)
    return x ^ (x >> 16)


def _rand(h: jax.Array, salt) -> jax.Array:
    return _mix(h + _u32(salt) * _u32(0x85EBCA6B))


def _evaluate(h: jax.Array):
    """uint32 [B] -> masked logits [B, A], legal [B, A], value [B]."""
    actions = jnp.arange(NUM_ACTIONS, dtype=jnp.uint32)
    threshold = _rand(h, 99) % 7  # 0 to 6 eighths of the actions illegal
    always_legal = _rand(h, 98) % NUM_ACTIONS
    legal = ((_rand(h[:, None], 100 + actions) % 8 >= threshold[:, None])
             | (actions == always_legal[:, None]))
    logits = ((_rand(h[:, None], 1 + actions) >> 20).astype(jnp.int32) - 2048) / 512
    value = ((_rand(h, 200) >> 25).astype(jnp.int32) - 64) / 64
    masked = jnp.where(legal, logits.astype(jnp.float32), -1e9)
    return masked, legal, value.astype(jnp.float32)


def _recurrent_fn(params, key, action, h):
    del params, key
    nxt = _mix(h ^ ((action.astype(jnp.uint32) + 1) * _u32(0x9E3779B9)))
    logits, _, value = _evaluate(nxt)
    ended = _rand(nxt, 300) % 8 == 0
    outcome = (_rand(nxt, 301) % 3).astype(jnp.int32) - 1
    bonus = jnp.where(_rand(nxt, 303) % 16 == 0,
                      jnp.where(_rand(nxt, 304) % 2 == 0, 0.25, -0.25), 0.0)
    again = _rand(nxt, 302) % 8 == 0  # the mover moves again
    out = mctx.RecurrentFnOutput(
        reward=jnp.where(ended, outcome, bonus).astype(jnp.float32),
        discount=jnp.where(ended, 0.0, jnp.where(again, 1.0, -1.0)).astype(jnp.float32),
        prior_logits=logits,
        value=jnp.where(ended, 0.0, value).astype(jnp.float32),
    )
    return out, nxt


# ---- azjax's search ----

@functools.cache
def _python_search(algorithm: str, simulations: int, considered: int, qtransform: str,
                   pb_c_init: float = 1.25, pb_c_base: float = 19652.0):
    """One jitted call: roots uint32 [B] -> the search's outputs for both greedy actions."""
    config = SearchConfig(algorithm=algorithm, num_simulations=simulations,
                          max_num_considered_actions=considered, qtransform=qtransform,
                          pb_c_init=pb_c_init, pb_c_base=pb_c_base)

    def search(roots):
        logits, legal, value = _evaluate(roots)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=roots)
        out = _policy(config, _recurrent_fn, None, jax.random.PRNGKey(simulations), root,
                      ~legal, simulations, noise=False)
        summary = out.search_tree.summary()
        tree = out.search_tree
        expanded = tree.children_index >= 0
        return dict(
            # make_search without noise: gumbel's "halving" takes the policy's action, the
            # rest the argmax of the policy.
            halving=out.action, policy_action=jnp.argmax(out.action_weights, axis=-1),
            policy=out.action_weights, value=summary.value,
            visits=summary.visit_counts.astype(jnp.int32),
            legal=jnp.sum(legal, axis=-1),
            ended=jnp.any(expanded & (tree.children_discounts == 0), axis=(1, 2)),
            again=jnp.any(expanded & (tree.children_discounts == 1), axis=(1, 2)),
        )

    return jax.jit(search)


def _run_node(cases: list[dict]) -> list[dict]:
    return run_node(DRIVER, {"numActions": NUM_ACTIONS, "cases": cases})


def test_js_search_matches_azjax_search():
    roots = jnp.asarray(ROOTS, jnp.uint32)
    cases, expected = [], []
    for config in CONFIGS:
        algorithm, simulations, considered, qtransform, *pb_c = config
        pb_c_init, pb_c_base = pb_c or (1.25, 19652.0)
        search = _python_search(algorithm, simulations, considered, qtransform, pb_c_init,
                                pb_c_base)
        out = jax.device_get(search(roots))
        greedy = ("policy", "halving") if algorithm == "gumbel" else ("policy",)
        for action_rule in greedy:
            for game, root in enumerate(ROOTS):
                cases.append({"root": root, "options": {
                    "algorithm": algorithm, "numSimulations": simulations,
                    "maxNumConsideredActions": considered, "qtransform": QTRANSFORMS[qtransform],
                    "pbCInit": pb_c_init, "pbCBase": pb_c_base, "greedyAction": action_rule}})
                action = out["halving" if action_rule == "halving" else "policy_action"][game]
                expected.append({key: value[game] for key, value in out.items()}
                                | {"action": int(action)})
    results = _run_node(cases)
    assert len(results) == len(cases)

    mismatches, tie_cases, puct_cases = [], 0, 0
    for case, want, got in zip(cases, expected, results, strict=True):
        problems = []
        if not np.array_equal(got["visitCounts"], want["visits"]):
            problems.append(f"visits {got['visitCounts']} != {want['visits'].tolist()}")
        if got["action"] != want["action"]:
            problems.append(f"action {got['action']} != {want['action']}")
        policy_error = np.max(np.abs(np.asarray(got["policy"]) - want["policy"]))
        if not policy_error <= TOLERANCE:
            problems.append(f"policy off by {policy_error:.2e}")
        if not abs(got["value"] - want["value"]) <= TOLERANCE:
            problems.append(f"value {got['value']} != {want['value']}")
        if case["options"]["algorithm"] == "puct":
            puct_cases += 1
            if problems and got["puctTies"] > 0:  # mctx's tie-break noise may have decided
                tie_cases += 1
                continue
        if problems:
            mismatches.append(f"{case}: {'; '.join(problems)}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} cases differ:\n" + "\n".join(
        mismatches[:10])
    assert tie_cases <= MAX_PUCT_TIE_CASES * puct_cases, f"{tie_cases} of {puct_cases}"

    # The cases reach what they are meant to test.
    assert any(want["legal"] < 4 for want in expected)
    deep = [want for case, want in zip(cases, expected, strict=True)
            if case["options"]["numSimulations"] == 64]
    assert np.mean([want["ended"] for want in deep]) > 0.5
    assert np.mean([want["again"] for want in deep]) > 0.5
