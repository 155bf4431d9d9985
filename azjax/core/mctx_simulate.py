"""A batched replacement for mctx's `simulate` (the walk from the root to a leaf).

mctx 0.0.x writes the walk for one tree and `jax.vmap`s it, so in a batch every step of the
`lax.while_loop` runs until the LONGEST path of the batch has ended, and each step evaluates
both the root's and the interior's action selection (the `lax.cond` on the per-game depth
becomes a `select` under vmap). Here the walk is written over the batch: all games leave the
root together, so the root's rule runs once, outside the loop, and each step of the loop runs
the interior rule alone. (Keeping the `cond` with one depth for the batch was slower than
mctx's own walk: a conditional takes the whole tree as its operand, and XLA:CPU copied it on
every step.)

It also stops a walk at a terminal node: when the edge just chosen has discount 0, the node
below it is re-expanded (as mctx does at `max_depth`) instead of being walked through. The
backup `reward + discount * value` makes nothing below such an edge reach any value above
it, so every statistic of the nodes above (the root's visits, values and policy included) is
the same as mctx's, bit for bit (`tests/test_search.py`). What it saves is the chain mctx
grows under a terminal node, one node deeper on each visit, which in draughts positions after
40-80 random moves held a fifth to two thirds of the tree and set the batch's walk length.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from mctx._src import action_selection as _mctx_action_selection
from mctx._src import search as _mctx_search
from mctx._src.tree import Tree

__all__ = ["SwitchingSelection", "batched_simulate", "install", "mctx_simulate"]

# mctx's own functions, kept for the equality test and for `install(False)`.
mctx_simulate = _mctx_search.simulate
_mctx_switching_wrapper = _mctx_action_selection.switching_action_selection_wrapper


class SwitchingSelection:
    """mctx's root/interior action-selection switch, with its two rules kept apart.

    Called as mctx's wrapper is, `(key, tree, node, depth)` on one tree; `batched_simulate`
    uses `root` and `interior` directly.
    """

    def __init__(self, root_action_selection_fn, interior_action_selection_fn):
        self.root = root_action_selection_fn
        self.interior = interior_action_selection_fn
        self._switch = _mctx_switching_wrapper(root_action_selection_fn,
                                               interior_action_selection_fn)

    def __call__(self, rng_key, tree, node_index, depth):
        return self._switch(rng_key, tree, node_index, depth)


class _Walk(NamedTuple):
    keys: jax.Array  # [B] PRNG keys, split once per step as mctx does per game
    node_index: jax.Array  # int32 [B]: the node the action was chosen at
    action: jax.Array  # int32 [B]
    next_node_index: jax.Array  # int32 [B]
    depth: jax.Array  # scalar, the dtype of the tree's logits (as mctx's depth)
    is_continuing: jax.Array  # bool [B]


def batched_simulate(rng_key: jax.Array, tree: Tree, action_selection_fn,
                     max_depth: int) -> tuple[jax.Array, jax.Array]:
    """Walks every tree of the batch from its root to an unexpanded edge.

    rng_key: [B] keys; tree: a batched mctx `Tree`; `action_selection_fn(key, tree, node,
    depth)` works on one tree: a `SwitchingSelection` (what mctx's search builds once
    `install()` has run), or any other rule, walked with mctx's own vmapped `simulate`.
    Returns `(parent_index, action)`, int32 [B] each: the edge to expand, which leads to an
    existing node only at `max_depth` or at a terminal node.
    """
    if not isinstance(action_selection_fn, SwitchingSelection):
        return mctx_simulate(rng_key, tree, action_selection_fn, max_depth)
    batch = jnp.arange(tree.node_visits.shape[0])
    root_rule = jax.vmap(action_selection_fn.root, in_axes=(0, 0, 0))
    interior_rule = jax.vmap(action_selection_fn.interior, in_axes=(0, 0, 0, 0))

    def step(walk: _Walk, node_index: jax.Array, action: jax.Array, keys: jax.Array) -> _Walk:
        live = walk.is_continuing
        node_index = jnp.where(live, node_index, walk.node_index)
        action = jnp.where(live, action, walk.action).astype(jnp.int32)
        next_node_index = tree.children_index[batch, node_index, action]
        depth = walk.depth + 1
        is_visited = next_node_index != Tree.UNVISITED
        # Below a discount-0 edge nothing reaches the values above: stop and re-expand.
        is_terminal = tree.children_discounts[batch, node_index, action] == 0
        is_continuing = live & is_visited & ~is_terminal & (depth < max_depth)
        return _Walk(keys, node_index, action, next_node_index, depth, is_continuing)

    def split(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Each game's key -> (its next key, this step's selection key), as mctx does."""
        pairs = jax.vmap(jax.random.split)(keys)
        return pairs[:, 0], pairs[:, 1]

    def cond(walk: _Walk):
        return jnp.any(walk.is_continuing)

    def body(walk: _Walk) -> _Walk:
        keys, selection_keys = split(walk.keys)
        node_index = walk.next_node_index
        depths = jnp.broadcast_to(walk.depth, node_index.shape)
        action = interior_rule(selection_keys, tree, jnp.maximum(node_index, 0), depths)
        return step(walk, node_index, action, keys)

    size = batch.shape[0]
    root = jnp.full((size,), Tree.ROOT_INDEX, jnp.int32)
    start = _Walk(
        keys=rng_key,
        node_index=root,
        action=jnp.zeros((size,), jnp.int32),
        next_node_index=root,
        depth=jnp.zeros((), tree.children_prior_logits.dtype),
        is_continuing=jnp.ones((size,), bool),
    )
    keys, selection_keys = split(rng_key)
    walk = step(start, root, root_rule(selection_keys, tree, root), keys)
    end = jax.lax.while_loop(cond, body, walk)
    return end.node_index, end.action


def install(enabled: bool = True) -> None:
    """Makes mctx's search loop use `batched_simulate` (or its own `simulate` again)."""
    _mctx_search.simulate = batched_simulate if enabled else mctx_simulate
    _mctx_action_selection.switching_action_selection_wrapper = (
        SwitchingSelection if enabled else _mctx_switching_wrapper)
