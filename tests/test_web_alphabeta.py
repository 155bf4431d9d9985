"""The browser's alpha-beta (azjax/apps/static/alphabeta.js), run by Node.js, against plain
minimax written here from azjax's rules (azjax/core/alphabeta.py, as tests/test_alphabeta.py's
`minimax` is).

The game is synthetic (tests/web/alphabeta_driver.mjs writes it again): a position is a uint32,
a move XORs in its action's code (so the same moves in another order transpose, and the
search's table is used), and whether a position ends the game (its result -1, 0 or +1 for the
player to move), is forcing, lets the mover move again, its legal moves, the network's value
(k / 64 x 1.25: some beyond [-1, 1], to be clipped) and logits are pure functions of it. Every
value is exact in float32, so the search's values must equal minimax's exactly.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess

import pytest
from conftest import HANG_S, REPO_ROOT, run_node

from azjax.core.alphabeta import AlphaBetaConfig
from azjax.core.search_alphabeta import LEAF_SCALE

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js (`node`) to run alphabeta.js")

DRIVER = REPO_ROOT / "tests" / "web" / "alphabeta_driver.mjs"
NUM_ACTIONS = 6
MASK = 2**32 - 1


# ---- the synthetic game (the same as alphabeta_driver.mjs's) ----

def _mix(x: int) -> int:
    """lowbias32: a uint32 -> uint32 hash."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def _rand(h: int, salt: int) -> int:
    return _mix((h + salt * 0x85EBCA6B) & MASK)


def _legal(h: int) -> list[int]:
    threshold, always = _rand(h, 99) % 6, _rand(h, 98) % NUM_ACTIONS
    return [a for a in range(NUM_ACTIONS) if _rand(h, 100 + a) % 8 >= threshold or a == always]


def _child(h: int, action: int) -> tuple[int, bool]:
    """The position after `action`, and whether its mover moves again."""
    after = h ^ _mix(action + 1)
    return after, _rand(after, 302) % 6 == 0


def _done(h: int) -> bool:
    return _rand(h, 300) % 10 == 0


def _static(h: int) -> float:
    """A finished game's result, else the leaf's score: LEAF_SCALE x the clipped value."""
    if _done(h):
        return float(_rand(h, 301) % 3 - 1)
    value = ((_rand(h, 200) >> 25) - 64) / 64 * 1.25
    return LEAF_SCALE * min(1.0, max(-1.0, value))


# ---- plain minimax over azjax's rules ----

@functools.cache
def _minimax(h: int, depth: int, quiescence: int, levels: int, ply: int = 0) -> tuple[float, int]:
    """(the value of `h` for its player to move, the positions a plain search steps into):
    a move that keeps the mover costs no depth; past the depth the search goes on while the
    position is forcing, at most `quiescence` moves; no path longer than `levels` actions
    (azjax's stack, `AlphaBetaConfig.stack`)."""
    best, positions = -2.0, 0
    for action in _legal(h):
        value, below = _move_value(h, action, depth, quiescence, levels, ply)
        best, positions = max(best, value), positions + 1 + below
    return best, positions


def _move_value(h, action, depth, quiescence, levels, ply) -> tuple[float, int]:
    after, same = _child(h, action)
    child_depth = depth - (0 if same else 1)
    forcing = _rand(after, 305) % 3 == 0
    if _done(after) or (child_depth <= 0 and not forcing) or child_depth <= -quiescence \
            or ply + 1 >= levels:
        value, positions = _static(after), 0
    else:
        value, positions = _minimax(after, child_depth, quiescence, levels, ply + 1)
    return (value if same else -value), positions


def _levels(depth: int, quiescence: int) -> int:
    return AlphaBetaConfig(depth=depth, quiescence=quiescence).stack


def _run_node(cases: list[dict]) -> list[dict]:
    return run_node(DRIVER, {"numActions": NUM_ACTIONS, "cases": cases})


ROOTS = [r for r in (_mix(seed * 7919 + 1) for seed in range(200)) if not _done(r)][:48]
GRID = [(1, 0), (2, 1), (3, 2), (3, 0), (4, 8)]  # (depth, quiescence)


def test_the_value_is_plain_minimax_and_the_move_achieves_it():
    """To every depth and quiescence of the grid, with no budget: the value equals plain
    minimax's, the move played scores that value, the search finished its depth, and the
    pruning and the table stepped into fewer positions than plain searches to each depth.
    (Some lines here meet the stack's limit, where a value kept by position and depth could
    part from minimax's along another path, in azjax's search too; on these roots none does.)"""
    cases = [{"root": root, "player": 0, "options": {"depth": d, "quiescence": q}}
             for d, q in GRID for root in ROOTS]
    results = _run_node(cases)
    fewer, batched, mismatches = 0, 0, []
    for case, got in zip(cases, results, strict=True):
        root, (d, q) = case["root"], (case["options"]["depth"], case["options"]["quiescence"])
        levels = _levels(d, q)
        want, positions = _minimax(root, d, q, levels)
        played, _ = _move_value(root, got["action"], d, q, levels, 0)
        if (got["value"], played, got["depth"], got["complete"]) != (want, want, d, True):
            mismatches.append(f"{case}: got {got['value']} by {got['action']} ({played}) at "
                              f"depth {got['depth']}, minimax {want}")
        # Iterative deepening searched every depth up to d; plain searches would too.
        plain = sum(_minimax(root, k, q, levels)[1] for k in range(1, d + 1))
        # The model is asked each move of each position once (what a deepening step walks
        # again is the answer kept): a position's first move alone, then the moves after it
        # together, so it is called less often than positions are stepped into.
        calls = got["asked"]
        asked = [edge for call in calls for edge in call]
        assert len(asked) == len(set(asked)) and (len(calls) < got["nodes"] or d == 1)
        first_asked = set()
        for call in calls:
            (position,) = {edge.rsplit(":", 1)[0] for edge in call}  # one position a call
            assert position in first_asked or len(call) == 1, f"first move not alone: {call}"
            first_asked.add(position)
            batched += len(call) > 1
        fewer += got["nodes"] < plain
    assert not mismatches, "\n".join(mismatches[:10])
    assert fewer >= 0.8 * len(cases), f"pruned in only {fewer} of {len(cases)} searches"
    assert batched, "no call asked about several moves at once"


@pytest.mark.parametrize("limit", [{"nodes": 40}, {"nodes": 300}, {"movetime": 0.06,
                                                                  "clockStepMs": 1}])
def test_a_budget_or_a_clock_plays_the_deepest_step_finished(limit):
    """Stopped by positions or a clock (one that advances 1 ms each time it is read), the
    search plays its deepest finished step: its value is minimax's to that depth, and it
    stepped into no more positions than allowed."""
    depth, quiescence = 5, 2
    levels = _levels(depth, quiescence)
    cases = [{"root": root, "player": 1,
              "options": {"depth": depth, "quiescence": quiescence, **limit}} for root in ROOTS]
    results = _run_node(cases)
    cut = 0
    for case, got in zip(cases, results, strict=True):
        if "nodes" in limit:
            assert got["nodes"] <= limit["nodes"]
        else:  # the clock is read once at the start and once before each position
            assert got["nodes"] <= 1000 * limit["movetime"] / limit["clockStepMs"]
        assert got["complete"] == (got["depth"] == depth)
        cut += not got["complete"]
        if got["depth"] == 0:  # not even one whole move: the first legal move
            assert got["action"] == _legal(case["root"])[0]
            continue
        want, _ = _minimax(case["root"], got["depth"], quiescence, levels)
        assert got["value"] == want, case
        assert _move_value(case["root"], got["action"], got["depth"], quiescence, levels,
                           0)[0] == want
    assert cut >= len(cases) // 2  # the limits do cut most searches short


def test_a_step_that_spends_the_whole_budget_is_not_finished():
    """As azjax's walk, which climbs back to the root only while positions remain: a step
    whose last position is the budget's last is cut; one position more finishes it."""
    depth, quiescence = 3, 1
    roots = ROOTS[:16]
    full = _run_node([{"root": r, "player": 0, "options": {"depth": depth,
                                                           "quiescence": quiescence}}
                      for r in roots])
    cases = [{"root": r, "player": 0, "options": {"depth": depth, "quiescence": quiescence,
                                                  "nodes": f["nodes"] + extra}}
             for r, f in zip(roots, full, strict=True) for extra in (0, 1)]
    results = _run_node(cases)
    for f, exact, spare in zip(full, results[::2], results[1::2], strict=True):
        assert (exact["depth"], exact["complete"]) == (depth - 1, False)
        assert (spare["depth"], spare["complete"], spare["value"]) == (depth, True, f["value"])


def test_a_finished_game_and_bad_options():
    """A finished root gets move 0 at once; bad options are one clear error."""
    finished = next(r for r in (_mix(s) for s in range(1000)) if _done(r))
    got = _run_node([{"root": finished, "player": 0, "options": {"depth": 3}}])[0]
    assert (got["action"], got["nodes"], got["complete"]) == (0, 0, True)
    payload = json.dumps({"numActions": NUM_ACTIONS, "cases": [
        {"root": ROOTS[0], "player": 0, "options": {"depth": 0}}]})
    done = subprocess.run([NODE, str(DRIVER)], input=payload, capture_output=True, text=True,
                          timeout=HANG_S)
    assert done.returncode != 0 and "depth must be an integer >= 1, not 0" in done.stderr
