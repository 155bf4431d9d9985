"""azjax's batched tree-search loop over mctx's public `Tree`: expand the root, then per
simulation walk to a leaf, expand it and back its value up.

mctx writes its walk and backup for one tree and `jax.vmap`s them. Under vmap a
`lax.while_loop` with a per-game condition runs until the batch's longest path has ended and,
on every step, `select`s between the old and the new value of everything it carries: the
backup carries the whole tree, so a simulation costs O(B x nodes x depth) instead of
O(B x depth) (`benchmarks/bench_search_loop.py` times both, docs/benchmarks.md), and the walk
evaluates both the root's and the interior's rule on each step.
Here both loops are written over the batch: the root rule runs once per walk, outside the
loop; the backup reads one path node per game and writes it back with a scatter, which XLA
does in place.

The walk also stops at a terminal node: when the edge just chosen has discount 0, the node
below it is expanded again (as mctx does at `max_depth`) instead of being walked through, so
no chain grows under it. The backup `reward + discount * value` lets nothing below such an
edge reach a value above it; with a recurrent function whose value is 0 at a discount-0 node
and whose rewards below one are 0 (azjax's, `azjax.core.search`), every statistic above the
terminal node, the root's visits and values among them, is the one mctx's own search builds,
bit for bit (`tests/test_search.py`).

The per-tree action selections are mctx's public ones (or any with their signatures):
`root_selection(key, tree, node_index)` and `interior_selection(key, tree, node_index, depth)`
on one unbatched tree, returning an int32 action; `node_view` gives one of them a modified
view of a single node without copying the tree.

For a search run in steps (`azjax.core.search_engine`) the steps also take per-game masks:
only `active` games walk, only `write` games store what they expanded (the others' scatters
point past the last node and are dropped), and a game backing up from the root backs nothing
up; `stop_at` ends walks at given nodes and `on_step` runs after each step of a backup (the
solver's proofs, `azjax.core.solver`). Left at their defaults they add nothing to the compiled
program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx

__all__ = ["backup", "expand", "init_tree", "node_view", "run_search", "walk"]

Tree = mctx.Tree


def _set_nodes(tree: Tree, node_index: jax.Array, prior_logits: jax.Array, value: jax.Array,
               embedding: Any) -> Tree:
    """Writes one node per game: its prior, its raw and search value, its embedding, and one
    more visit (a node re-expanded at a terminal edge or at `max_depth` keeps counting). A
    game whose `node_index` is past the last node writes nothing (the scatters drop it)."""
    batch = jnp.arange(node_index.shape[0])
    return tree.replace(
        children_prior_logits=tree.children_prior_logits.at[batch, node_index].set(
            prior_logits, mode="drop"),
        raw_values=tree.raw_values.at[batch, node_index].set(value, mode="drop"),
        node_values=tree.node_values.at[batch, node_index].set(value, mode="drop"),
        node_visits=tree.node_visits.at[batch, node_index].set(
            tree.node_visits[batch, node_index] + 1, mode="drop"),
        embeddings=jax.tree.map(lambda x, y: x.at[batch, node_index].set(y, mode="drop"),
                                tree.embeddings, embedding),
    )


def init_tree(root: mctx.RootFnOutput, num_simulations: int, invalid_actions: jax.Array,
              extra_data: Any = None) -> Tree:
    """An empty batched tree of `num_simulations + 1` nodes with its root (node 0) filled in.

    Args:
      root: `RootFnOutput` with prior_logits [B, A], value [B] and embedding [B, ...].
      num_simulations: the simulations the tree will hold (one new node each).
      invalid_actions: bool or 0/1 [B, A], the root's illegal actions.
      extra_data: whatever the action selections read from `tree.extra_data` ([B, ...]).

    Returns:
      A `mctx.Tree` with N = num_simulations + 1 nodes: node arrays [B, N], edge arrays
      [B, N, A], embeddings [B, N, ...]; the root visited once.
    """
    chex.assert_rank(root.prior_logits, 2)
    batch, num_actions = root.prior_logits.shape
    chex.assert_shape(root.value, (batch,))
    chex.assert_shape(invalid_actions, (batch, num_actions))
    nodes, edges = (batch, num_simulations + 1), (batch, num_simulations + 1, num_actions)
    data = root.value.dtype
    tree = Tree(
        node_visits=jnp.zeros(nodes, jnp.int32),
        raw_values=jnp.zeros(nodes, data),
        node_values=jnp.zeros(nodes, data),
        parents=jnp.full(nodes, Tree.NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(nodes, Tree.NO_PARENT, jnp.int32),
        children_index=jnp.full(edges, Tree.UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(edges, root.prior_logits.dtype),
        children_values=jnp.zeros(edges, data),
        children_visits=jnp.zeros(edges, jnp.int32),
        children_rewards=jnp.zeros(edges, data),
        children_discounts=jnp.zeros(edges, data),
        embeddings=jax.tree.map(lambda x: jnp.zeros((*nodes, *x.shape[1:]), x.dtype),
                                root.embedding),
        root_invalid_actions=invalid_actions,
        extra_data=extra_data,
    )
    root_index = jnp.full((batch,), Tree.ROOT_INDEX, jnp.int32)
    return _set_nodes(tree, root_index, root.prior_logits, root.value, root.embedding)


class _Walk(NamedTuple):
    keys: jax.Array  # [B] PRNG keys, split once per step as mctx does per game
    node_index: jax.Array  # int32 [B]: the node the action was chosen at
    action: jax.Array  # int32 [B]
    next_node_index: jax.Array  # int32 [B]
    depth: jax.Array  # scalar, the dtype of the tree's logits (as mctx's depth)
    is_continuing: jax.Array  # bool [B]


def _split(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each game's key -> (its next key, this step's selection key), as mctx splits them."""
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]


def _step(tree: Tree, max_depth: int, walk: _Walk, node_index: jax.Array,
          action: jax.Array, keys: jax.Array, stop_at: jax.Array | None) -> _Walk:
    """One edge further for the games still walking; the others keep their edge."""
    batch = jnp.arange(node_index.shape[0])
    live = walk.is_continuing
    node_index = jnp.where(live, node_index, walk.node_index)
    action = jnp.where(live, action, walk.action).astype(jnp.int32)
    next_node_index = tree.children_index[batch, node_index, action]
    depth = walk.depth + 1
    is_visited = next_node_index != Tree.UNVISITED
    # Below a discount-0 edge nothing reaches the values above: stop and expand it again.
    is_terminal = tree.children_discounts[batch, node_index, action] == 0
    is_continuing = live & is_visited & ~is_terminal & (depth < max_depth)
    if stop_at is not None:  # e.g. a solved node: nothing below it can change its value
        is_continuing &= ~stop_at[batch, next_node_index]
    return _Walk(keys, node_index, action, next_node_index, depth, is_continuing)


def walk(keys: jax.Array, tree: Tree, root_selection: Callable, interior_selection: Callable,
         max_depth: int, active: jax.Array | None = None,
         stop_at: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Walks every tree of the batch from its root to an edge to expand.

    Args:
      keys: [B] PRNG keys, one per game (consumed).
      tree: a batched `mctx.Tree` [B, N, ...].
      root_selection: `(key, tree, node_index) -> action` on one tree, used at depth 0.
      interior_selection: `(key, tree, node_index, depth) -> action` on one tree, below it.
      max_depth: the most edges a walk takes.
      active: bool [B], the games that walk (default all); the others return `(0, 0)`.
      stop_at: bool [B, N], nodes a walk ends at, as below a terminal edge (default none).

    Returns:
      `(parent_index, action)`, int32 [B] each: the edge to expand, which leads to an existing
      node only at `max_depth`, below a terminal (discount-0) edge or at a `stop_at` node.
    """
    size = keys.shape[0]
    root_rule = jax.vmap(root_selection, in_axes=(0, 0, 0))
    interior_rule = jax.vmap(interior_selection, in_axes=(0, 0, 0, 0))

    def body(state: _Walk) -> _Walk:
        next_keys, selection_keys = _split(state.keys)
        node_index = state.next_node_index
        depths = jnp.broadcast_to(state.depth, node_index.shape)
        action = interior_rule(selection_keys, tree, jnp.maximum(node_index, 0), depths)
        return _step(tree, max_depth, state, node_index, action, next_keys, stop_at)

    root = jnp.full((size,), Tree.ROOT_INDEX, jnp.int32)
    start = _Walk(keys=keys, node_index=root, action=jnp.zeros((size,), jnp.int32),
                  next_node_index=root, depth=jnp.zeros((), tree.children_prior_logits.dtype),
                  is_continuing=jnp.ones((size,), bool) if active is None else active)
    next_keys, selection_keys = _split(keys)
    state = _step(tree, max_depth, start, root, root_rule(selection_keys, tree, root),
                  next_keys, stop_at)
    end = jax.lax.while_loop(lambda s: jnp.any(s.is_continuing), body, state)
    return end.node_index, end.action


def expand(params: Any, key: chex.PRNGKey, tree: Tree, recurrent_fn: Callable,
           parent_index: jax.Array, action: jax.Array, node_index: jax.Array,
           write: jax.Array | None = None) -> Tree:
    """Evaluates the edge `(parent_index, action)` of every game into `node_index`.

    Args:
      params: forwarded to `recurrent_fn`.
      key: a PRNG key for `recurrent_fn` (consumed).
      tree: a batched `mctx.Tree` [B, N, ...].
      recurrent_fn: mctx's `(params, key, action [B], embedding [B, ...]) ->
        (RecurrentFnOutput, next embedding [B, ...])`.
      parent_index, action, node_index: int32 [B] each; `node_index` is a new node, or the
        existing child at `max_depth` or below a terminal edge.
      write: bool [B], the games whose node is written (default all); the others' trees stay
        as they are, though the batch's `recurrent_fn` call evaluates their edges too.

    Returns:
      The tree with the node written and linked under its parent.
    """
    batch = jnp.arange(parent_index.shape[0])
    chex.assert_shape([parent_index, action, node_index], (batch.shape[0],))
    embedding = jax.tree.map(lambda x: x[batch, parent_index], tree.embeddings)
    out, embedding = recurrent_fn(params, key, action, embedding)
    chex.assert_shape(out.prior_logits, (batch.shape[0], tree.num_actions))
    chex.assert_shape([out.reward, out.discount, out.value], (batch.shape[0],))
    if write is not None:  # indices past the last node: the scatters below drop those writes
        past = tree.node_visits.shape[1]
        node_index = jnp.where(write, node_index, past)
        parent_index = jnp.where(write, parent_index, past)
    tree = _set_nodes(tree, node_index, out.prior_logits, out.value, embedding)
    edge = (batch, parent_index, action)
    return tree.replace(
        children_index=tree.children_index.at[edge].set(node_index, mode="drop"),
        children_rewards=tree.children_rewards.at[edge].set(out.reward, mode="drop"),
        children_discounts=tree.children_discounts.at[edge].set(out.discount, mode="drop"),
        parents=tree.parents.at[batch, node_index].set(parent_index, mode="drop"),
        action_from_parent=tree.action_from_parent.at[batch, node_index].set(action,
                                                                            mode="drop"),
    )


def _backup_step(batch: jax.Array, carry: tuple[Tree, jax.Array, jax.Array]):
    """Moves each game still below its root one node up its path, updating that parent."""
    tree, leaf_value, index = carry
    live = index != Tree.ROOT_INDEX
    # Games already at the root read and rewrite node 0 / action 0 unchanged.
    parent = jnp.where(live, tree.parents[batch, index], 0)
    action = jnp.where(live, tree.action_from_parent[batch, index], 0)
    count = tree.node_visits[batch, parent]
    reward = tree.children_rewards[batch, parent, action]
    discount = tree.children_discounts[batch, parent, action]
    new_leaf_value = reward + discount * leaf_value
    old_parent_value = tree.node_values[batch, parent]
    parent_value = (old_parent_value * count + new_leaf_value) / (count + 1.0)
    child_value = tree.node_values[batch, index]
    old_child_value = tree.children_values[batch, parent, action]
    child_visits = tree.children_visits[batch, parent, action]
    tree = tree.replace(
        node_values=tree.node_values.at[batch, parent].set(
            jnp.where(live, parent_value, old_parent_value)),
        node_visits=tree.node_visits.at[batch, parent].set(jnp.where(live, count + 1, count)),
        children_values=tree.children_values.at[batch, parent, action].set(
            jnp.where(live, child_value, old_child_value)),
        children_visits=tree.children_visits.at[batch, parent, action].set(
            jnp.where(live, child_visits + 1, child_visits)),
    )
    return tree, jnp.where(live, new_leaf_value, leaf_value), jnp.where(live, parent, index)


def backup(tree: Tree, leaf_index: jax.Array, on_step: Callable | None = None) -> Tree:
    """Backs each game's new leaf value up its path to the root (mctx's arithmetic and order).

    Args:
      tree: a batched `mctx.Tree` [B, N, ...].
      leaf_index: int [B], the node each game just expanded; a game at the root (0) backs
        nothing up.
      on_step: `(tree, value [B], node [B], live bool [B]) -> (tree, value)`, called after
        each step up with the node just updated and the value it passes to its parent, for
        the games still `live` on that step (e.g. a solver's proofs); default none.

    Returns:
      The tree with the values and visits of every node and edge on the paths updated.
    """
    leaf_index = jnp.asarray(leaf_index, jnp.int32)
    batch = jnp.arange(leaf_index.shape[0])

    def body(carry):
        if on_step is None:
            return _backup_step(batch, carry)
        tree, value, index = _backup_step(batch, carry)
        return (*on_step(tree, value, index, carry[2] != Tree.ROOT_INDEX), index)

    start = (tree, tree.node_values[batch, leaf_index], leaf_index)
    tree, _, _ = jax.lax.while_loop(lambda c: jnp.any(c[2] != Tree.ROOT_INDEX), body, start)
    return tree


def node_view(tree: Tree, node_index: jax.Array) -> Tree:
    """One node of an unbatched tree as a tree of its own, for an action selection that reads
    only that node's row (mctx's do): node arrays [1], edge arrays [1, A]; `children_index`,
    `root_invalid_actions` and `extra_data` as in `tree`. A selection's view of one node is
    then built without copying the whole tree."""
    def row(x):
        return x[node_index][None]

    return tree.replace(
        node_visits=row(tree.node_visits), raw_values=row(tree.raw_values),
        node_values=row(tree.node_values), parents=row(tree.parents),
        action_from_parent=row(tree.action_from_parent),
        children_index=row(tree.children_index),
        children_prior_logits=row(tree.children_prior_logits),
        children_values=row(tree.children_values), children_visits=row(tree.children_visits),
        children_rewards=row(tree.children_rewards),
        children_discounts=row(tree.children_discounts),
        embeddings=jax.tree.map(row, tree.embeddings),
    )


def run_search(params: Any, key: chex.PRNGKey, root: mctx.RootFnOutput, recurrent_fn: Callable,
               root_selection: Callable, interior_selection: Callable, num_simulations: int,
               invalid_actions: jax.Array, extra_data: Any = None,
               max_depth: int | None = None) -> Tree:
    """A whole search: the root, then `num_simulations` rounds of walk, expand and backup.

    Keys are drawn as mctx's `search` draws them (per simulation: one for the walk, split per
    game, and one for `recurrent_fn`), so a search is reproducible against mctx's.

    Args:
      params: forwarded to `recurrent_fn`.
      key: a PRNG key (consumed).
      root: `RootFnOutput` with prior_logits [B, A], value [B], embedding [B, ...].
      recurrent_fn: mctx's `(params, key, action [B], embedding) -> (RecurrentFnOutput,
        embedding)`.
      root_selection, interior_selection: per-tree action selections (see `walk`).
      num_simulations: simulations to run (the tree gets one node each).
      invalid_actions: bool or 0/1 [B, A], the root's illegal actions.
      extra_data: stored as `tree.extra_data` for the selections ([B, ...]).
      max_depth: the most edges a walk takes (default `num_simulations`).

    Returns:
      The batched `mctx.Tree` [B, num_simulations + 1, ...].
    """
    batch = root.value.shape[0]
    depth = num_simulations if max_depth is None else max_depth
    tree = init_tree(root, num_simulations, invalid_actions, extra_data)

    def simulation(sim, carry):
        key, tree = carry
        key, walk_key, expand_key = jax.random.split(key, 3)
        parent, action = walk(jax.random.split(walk_key, batch), tree, root_selection,
                              interior_selection, depth)
        # A node first expanded in simulation `sim` gets index `sim + 1`; node 0 is the root.
        node = tree.children_index[jnp.arange(batch), parent, action]
        node = jnp.where(node == Tree.UNVISITED, sim + 1, node)
        tree = expand(params, expand_key, tree, recurrent_fn, parent, action, node)
        return key, backup(tree, node)

    _, tree = jax.lax.fori_loop(0, num_simulations, simulation, (key, tree))
    return tree
