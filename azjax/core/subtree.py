"""Tree reuse: the subtree under one node of each game's batched `mctx.Tree`, moved to the
front of the tree (the node becomes the root, node 0) with every statistic it had.

Nodes keep their order, so a parent still comes before its children, and the K nodes of a
subtree take indices 0..K-1; the rest of the tree is empty, ready for new simulations.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import mctx

__all__ = ["in_subtree", "map_nodes", "move_nodes", "resize", "resize_nodes", "subtree"]

Tree = mctx.Tree


def in_subtree(parents: jax.Array, root: jax.Array) -> jax.Array:
    """bool [B, N]: the nodes at or below `root` [B] (none where it is -1), given each node's
    parent `parents` int32 [B, N] (-1: none). Pointer doubling: log2(N) gathers."""
    chex.assert_rank(parents, 2)
    num_nodes = parents.shape[1]
    inside = jnp.arange(num_nodes)[None] == root[:, None]
    jump = parents  # after k rounds: the ancestor 2**k levels up, `inside` covers < 2**k
    for _ in range(max(1, math.ceil(math.log2(num_nodes)))):
        valid = jump >= 0
        safe = jnp.maximum(jump, 0)
        inside = inside | (valid & jnp.take_along_axis(inside, safe, axis=1))
        jump = jnp.where(valid, jnp.take_along_axis(jump, safe, axis=1), -1)
    return inside


def move_nodes(x: jax.Array, new_index: jax.Array, fill) -> jax.Array:
    """`x` [B, N, ...] with node n moved to `new_index` [B, N] (N or more: dropped); the
    slots nothing moves to hold `fill`."""
    batch = jnp.arange(x.shape[0])[:, None]
    return jnp.full_like(x, fill).at[batch, new_index].set(x, mode="drop")


# The per-node arrays of `mctx.Tree` ([B, N, ...], embeddings aside) and what an empty node
# holds in each: no parent, no child, else 0.
_NODE_ARRAYS = ("node_visits", "raw_values", "node_values", "parents", "action_from_parent",
                "children_index", "children_prior_logits", "children_visits",
                "children_rewards", "children_discounts", "children_values")
_EMPTY = {"parents": Tree.NO_PARENT, "action_from_parent": Tree.NO_PARENT,
          "children_index": Tree.UNVISITED}


def map_nodes(tree: Tree, fn, **arrays: jax.Array) -> Tree:
    """`fn(x, fill)` applied to every per-node array `x` [B, N, ...] of `tree`, embeddings
    included, `fill` being what an empty node holds there; `arrays` name replacements for
    some of them, used in their place. `root_invalid_actions` and `extra_data` stay."""
    mapped = {name: fn(arrays.get(name, getattr(tree, name)), _EMPTY.get(name, 0))
              for name in _NODE_ARRAYS}
    return tree.replace(**mapped, embeddings=jax.tree.map(lambda x: fn(x, 0), tree.embeddings))


def _renumber(index: jax.Array, new_index: jax.Array) -> jax.Array:
    """Node indices [B, ...] (-1: none) mapped through `new_index` [B, N]; those that leave
    the tree become -1."""
    num_nodes = new_index.shape[1]
    flat = index.reshape(index.shape[0], -1)
    moved = jnp.take_along_axis(new_index, jnp.maximum(flat, 0), axis=1)
    moved = jnp.where((flat >= 0) & (moved < num_nodes), moved, -1)
    return moved.reshape(index.shape)


def subtree(tree: Tree, root: jax.Array) -> tuple[Tree, jax.Array, jax.Array]:
    """Each game's subtree under node `root`, compacted to the front of its tree.

    Args:
      tree: a batched `mctx.Tree` [B, N, ...].
      root: int32 [B], the node that becomes each game's root; -1 leaves the game's tree
        empty (no node visited).

    Returns:
      `(tree, count, new_index)`: the tree of the same shapes with the subtree at nodes
      0..K-1 (the root's parent and action reset, `root_invalid_actions` and `extra_data` as
      they were), K int32 [B], and where each old node went, int32 [B, N] (N: gone), for
      per-node data outside the tree (`move_nodes`).
    """
    chex.assert_shape(root, (tree.node_visits.shape[0],))
    num_nodes = tree.node_visits.shape[1]
    inside = in_subtree(tree.parents, root)
    new_index = jnp.where(inside, jnp.cumsum(inside, axis=1) - 1, num_nodes)
    is_root = jnp.arange(num_nodes)[None] == root[:, None]
    tree = map_nodes(
        tree, lambda x, fill: move_nodes(x, new_index, fill),
        parents=jnp.where(is_root, Tree.NO_PARENT, _renumber(tree.parents, new_index)),
        action_from_parent=jnp.where(is_root, Tree.NO_PARENT, tree.action_from_parent),
        children_index=_renumber(tree.children_index, new_index))
    return tree, jnp.sum(inside, axis=1).astype(jnp.int32), new_index


def resize_nodes(x: jax.Array, capacity: int, fill) -> jax.Array:
    """Per-node data `x` [B, N, ...] cut or padded with `fill` to [B, capacity, ...]."""
    if x.shape[1] >= capacity:
        return x[:, :capacity]
    pad = jnp.full((x.shape[0], capacity - x.shape[1], *x.shape[2:]), fill, x.dtype)
    return jnp.concatenate([x, pad], axis=1)


def resize(tree: Tree, capacity: int) -> Tree:
    """The tree with room for `capacity` nodes: empty nodes added, or the last ones cut off
    (only right for a tree whose nodes all lie below `capacity`). `extra_data` is left as it
    is."""
    if tree.node_visits.shape[1] == capacity:
        return tree
    return map_nodes(tree, lambda x, fill: resize_nodes(x, capacity, fill))
