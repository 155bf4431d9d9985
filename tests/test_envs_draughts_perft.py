"""Perft of English draughts from the initial position, by a batched search over OUR env.

perft(d) counts the move sequences of d whole moves (a multi-jump is one move, however many
actions it takes): 7, 49, 302, 1469, 7361, 36768, 179740, 845931 for d = 1-8 (the published
figures for checkers, e.g. Aart Bik's perft). Positions are expanded with one jitted, vmapped
`env.step` over fixed-size chunks of (parent, legal action) pairs; a child still in the middle
of a capture is expanded again at the same depth. The last depth is counted in bulk: a position
without a capture has as many moves as legal actions.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs

PERFT = [7, 49, 302, 1469, 7361, 36768, 179740, 845931]
CHUNK = 8192
FIRST_JUMP = 98  # action ids 98-169 are jumps


@functools.cache
def _batched_step(env):
    return jax.jit(jax.vmap(env.step))


def _take(tree, index):
    return jax.tree.map(lambda x: x[index], tree)


def _children(env, parents, parent_index: np.ndarray, actions: np.ndarray):
    """Host State batch: `parents[parent_index[i]]` stepped with `actions[i]`."""
    step = _batched_step(env)
    out = []
    for first in range(0, len(actions), CHUNK):
        rows, acts = parent_index[first : first + CHUNK], actions[first : first + CHUNK]
        size = len(rows)
        rows, acts = np.resize(rows, CHUNK), np.resize(acts, CHUNK)  # pad with repeats
        kids = step(_take(parents, rows), jnp.asarray(acts, jnp.int32))
        out.append(jax.tree.map(lambda x, size=size: np.asarray(x)[:size], kids))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *out)


def _after_one_move(env, layer):
    """Every position one whole move after each live position of `layer` (with repeats)."""
    done = []
    pending = _take(layer, ~layer.terminated)
    while len(pending.terminated):
        parent_index, actions = np.nonzero(pending.legal_action_mask)
        kids = _children(env, pending, parent_index, actions)
        capturing = (kids.jumper >= 0) & ~kids.terminated
        done.append(_take(kids, ~capturing))
        pending = _take(kids, capturing)
    return jax.tree.map(lambda *xs: np.concatenate(xs), *done)


def _count_moves(env, layer) -> int:
    """The number of whole moves from the live positions of `layer`."""
    live = _take(layer, ~layer.terminated)
    capture = live.legal_action_mask[:, FIRST_JUMP:].any(axis=1)
    quiet = int(live.legal_action_mask[~capture].sum())
    if not capture.any():
        return quiet
    return quiet + len(_after_one_move(env, _take(live, capture)).terminated)


def perft(env, max_depth: int) -> tuple[list[int], list[float]]:
    """perft(1..max_depth) and the seconds each took."""
    layer = jax.tree.map(lambda x: np.asarray(x)[None], env.init(jax.random.PRNGKey(0)))
    counts, seconds = [], []
    for depth in range(1, max_depth + 1):
        start = time.perf_counter()
        counts.append(_count_moves(env, layer))
        if depth < max_depth:
            layer = _after_one_move(env, layer)
        seconds.append(time.perf_counter() - start)
    return counts, seconds


def test_perft_from_the_initial_position_to_depth_8():
    counts, seconds = perft(envs.make("draughts"), len(PERFT))
    print("perft seconds per depth:", [round(s, 2) for s in seconds])
    assert counts == PERFT
