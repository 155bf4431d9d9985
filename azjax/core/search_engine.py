"""A batched search in steps, for play: started, simulated in compiled chunks (to stop when a
time budget is spent), finished, and its tree kept for the next move.

`SearchEngine` holds the steps over a root and a recurrent function (`azjax.core.search`'s
`make_search_engine` builds one over a game and a network). The state between them,
`SearchState`, is a pytree: it goes through `jax.jit`, can be donated, carried in a loop.

Exactness. A search started fresh and run as `simulate(n1)` then `simulate(n2)` builds the
same tree and output, bit for bit, as `simulate(n1 + n2)`: the PRNG key travels in the state
and a node first expanded in this search's simulation s is node s + 1 (a simulation that
expands no new node leaves its slot empty, as mctx's does). With `planned_simulations` n1 + n2
it is `make_search`'s one-shot search of n1 + n2 simulations: the same keys, the same
arithmetic in the same order, the same tree; only XLA may fuse the float work of two
differently compiled programs differently, a last bit apart.

Capacity. The tree has `capacity` nodes (static). A game simulates while its next node is
below capacity and it has run fewer than `planned_simulations`; then its simulations do
nothing. A kept tree of K nodes is used only where K + `planned_simulations` <= capacity (its
nodes are already compacted); a game whose kept tree is bigger starts afresh, so every game
can run its planned simulations.

Tree reuse. `advance` keeps the subtree under each game's played action; `start(kept=...)`
takes its root as the new root with its visits, values and subtree, where `same_root_fn` says
it is the new position (`make_search_engine`: the very same state; with contempt, values
draw-averse for the same player); elsewhere afresh. The root's prior gets this search's
noise. PUCT keeps every visit.
Gumbel: the kept visits stay in the tree (completed Q-values and the walks below the root
read them, and so does the policy target, softmax(logits + completed Q)), but sequential
halving counts only this search's root visits, from its schedule for `planned_simulations`,
and its survivor (the action) is the best of the actions this search visited most.

Solver (`SearchConfig.solver`, `azjax.core.solver`): the tree proves wins, losses and draws;
a game whose root is proven simulates no more (`root_proven`), and `finish` plays the proven
best move: the shortest win, the longest resistance (the policy is the search's as ever).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import mctx
from flax import struct

from azjax.config import SearchConfig
from azjax.core import solver
from azjax.core.policies import (
    gumbel_result,
    gumbel_root,
    gumbel_selections,
    puct_result,
    puct_root,
    puct_selections,
)
from azjax.core.subtree import move_nodes, resize, resize_nodes, subtree
from azjax.core.tree_search import backup, expand, init_tree, walk

__all__ = ["SearchEngine", "SearchOutput", "SearchState", "TreeData", "check_output"]

Tree = mctx.Tree


@struct.dataclass
class SearchOutput:
    """What one batched search returns, for B positions and A actions (see the fields)."""

    action: jax.Array  # int32 [B]: the search's chosen action (sampled when noise is on)
    policy: jax.Array  # float32 [B, A]: the search's action weights (the policy target)
    value: jax.Array  # float32 [B]: root value after search, for the player to move (with
    # `contempt` or `material_utility`, the utility the search maximised)
    prior_value: jax.Array  # float32 [B]: the network's value at the root (with
    # `material_utility`, plus its weighted material prediction)
    visit_counts: jax.Array  # int32 [B, A]: the root's visits per action


def check_output(output: SearchOutput, num_actions: int) -> SearchOutput:
    """`output`, after checking its shapes: [B] and [B, A] (A = `num_actions`)."""
    batch = output.action.shape[0]
    chex.assert_shape([output.action, output.value, output.prior_value], (batch,))
    chex.assert_shape([output.policy, output.visit_counts], (batch, num_actions))
    chex.assert_type([output.action, output.visit_counts], jnp.int32)
    return output


@struct.dataclass
class TreeData:
    """The engine tree's `extra_data`, per game."""

    root_gumbel: jax.Array  # float32 [B, A]: the root's Gumbel noise (zeros for puct)
    kept_visits: jax.Array  # int32 [B, A]: the root's visits a kept tree brought
    proven: jax.Array | None = None  # bool [B, N]: solver only, `azjax.core.solver`
    score: jax.Array | None = None  # int32 [B, N]: solver only


@struct.dataclass
class SearchState:
    """One batched search between its steps (B games, N = capacity nodes, A actions)."""

    tree: mctx.Tree  # [B, N, ...], extra_data a `TreeData`
    key: jax.Array  # the simulations' PRNG key
    action_key: jax.Array  # the key puct samples its action with
    next_node: jax.Array  # int32 [B]: the node the next simulation expands into
    simulations: jax.Array  # int32 [B]: simulations run by this search (kept ones not counted)
    prior_value: jax.Array  # float32 [B]: the network's value at the root
    planned: jax.Array  # int32 []: the most simulations this search runs
    # Gumbel: the simulations sequential halving's schedule is for (0 for puct, whose
    # compiled steps then serve any plan).
    halving_simulations: int = struct.field(pytree_node=False, default=0)
    noise: bool = struct.field(pytree_node=False, default=False)
    # Gumbel started from kept trees: its root halves over this search's visits only.
    kept_root: bool = struct.field(pytree_node=False, default=False)


def _where(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per game (`pred` [B]) the leaves [B, ...] of `on_true` or `on_false`."""
    def pick(t, f):
        return jnp.where(pred.reshape(pred.shape + (1,) * (t.ndim - 1)), t, f)

    return jax.tree.map(pick, on_true, on_false)


def _kept(fresh: Tree, kept: SearchState, planned: int, same_root: jax.Array
          ) -> tuple[Tree, jax.Array]:
    """The new search's tree: the kept tree where it is usable (module docstring), its root
    given the fresh root's prior, invalid actions and noise; `fresh` elsewhere. Returns the
    tree and each game's next node, int32 [B]."""
    capacity = fresh.node_visits.shape[1]
    old = resize(kept.tree, capacity)
    use = ((old.node_visits[:, Tree.ROOT_INDEX] > 0) & same_root
           & (kept.next_node + planned <= capacity))
    data = fresh.extra_data
    old_data = kept.tree.extra_data
    if data.proven is not None:
        data = data.replace(proven=resize_nodes(old_data.proven, capacity, False),
                            score=resize_nodes(old_data.score, capacity, 0))
    old = old.replace(
        children_prior_logits=old.children_prior_logits.at[:, Tree.ROOT_INDEX].set(
            fresh.children_prior_logits[:, Tree.ROOT_INDEX]),
        root_invalid_actions=fresh.root_invalid_actions,
        extra_data=data.replace(kept_visits=old.children_visits[:, Tree.ROOT_INDEX]))
    return _where(use, old, fresh), jnp.where(use, kept.next_node, 1).astype(jnp.int32)


def _selections(config: SearchConfig, state: SearchState, qtransform: Callable,
                legal_fn: Callable) -> tuple[Callable, Callable]:
    """The root and interior selections of `config`'s policy for `state`'s search."""
    if config.algorithm == "gumbel":
        root_selection, interior_selection = gumbel_selections(
            state.halving_simulations, config.max_num_considered_actions, qtransform,
            kept_root=state.kept_root)
    else:
        root_selection, interior_selection = puct_selections(config.pb_c_init,
                                                             config.pb_c_base, qtransform)
    if config.solver:
        root_selection = solver.solver_selection(root_selection, legal_fn)
        interior_selection = solver.solver_selection(interior_selection, legal_fn)
    return root_selection, interior_selection


@dataclasses.dataclass(frozen=True)
class SearchEngine:
    """The steps of one search configuration: `start`, `simulate` (in chunks), `finish`, and
    `advance` to keep the tree for the next move (module docstring).

    Attributes:
      root_fn: `(variables, states [B]) -> (mctx.RootFnOutput, prior value float32 [B])`: the
        tree's root (masked prior logits [B, A], value [B], embedding [B, ...]) and the
        network's value to report.
      recurrent_fn: mctx's `(variables, key, action [B], embedding) -> (RecurrentFnOutput,
        embedding)` (`azjax.core.search.make_recurrent_fn`).
      config: the search's settings; its `num_simulations` is unused (the caller plans).
      qtransform: the mctx qtransform of `config.qtransform`.
      num_actions: A.
      legal_fn: embeddings [..., N, ...] -> their legal actions, bool [..., N, A] (solver).
      outcome_fn: `(parent embedding [B], child embedding [B]) -> int32 [B]`: a finished
        game's result for the player who moved into it (+1, 0, -1); None: the sign of the
        edge's reward (solver).
      same_root_fn: `(kept root embedding [B], states [B]) -> bool [B]`: where a kept tree's
        root may stand for `states`; None: everywhere.
      root_action_fn: `(root embedding [B]) -> (known bool [B], action int32 [B])`: where
        known, `finish` plays that action (the endgame table's best move); None: never.
    """

    root_fn: Callable
    recurrent_fn: Callable
    config: SearchConfig
    qtransform: Callable
    num_actions: int
    legal_fn: Callable
    outcome_fn: Callable | None = None
    same_root_fn: Callable | None = None
    root_action_fn: Callable | None = None

    def start(self, variables: Any, key: chex.PRNGKey, states: Any, *, capacity: int,
              planned_simulations: int, noise: bool = False,
              kept: SearchState | None = None) -> SearchState:
        """A search of the positions `states` [B], its roots evaluated (or `kept`'s taken).

        Args:
          variables: the network's.
          key: a PRNG key (consumed; the state carries what the search goes on with).
          states: the root positions [B].
          capacity: N, the tree's nodes (static).
          planned_simulations: the most simulations the search runs, and gumbel's
            sequential-halving schedule (static for gumbel).
          noise: root noise as in self-play (Dirichlet for puct, Gumbel for gumbel), and a
            sampled puct action; without it, the greedy search of play (static).
          kept: `advance`'s state: each game's non-empty kept tree whose root matches its
            position and whose K nodes leave room (K + planned_simulations <= capacity) gives
            the root, with its visits, values and subtree; the other games start afresh.

        Returns:
          The `SearchState`, no simulation run yet.
        """
        config = self.config
        if capacity < 2 or planned_simulations < 1:
            raise ValueError(f"a search needs capacity >= 2 and planned_simulations >= 1, got "
                             f"{capacity} and {planned_simulations}")
        root, prior_value = self.root_fn(variables, states)
        invalid = ~states.legal_action_mask
        batch = invalid.shape[0]
        chex.assert_shape(invalid, (batch, self.num_actions))
        if config.algorithm == "gumbel":
            key, root, root_noise = gumbel_root(key, root, invalid,
                                                config.gumbel_scale if noise else 0.0)
            action_key = key  # unused: gumbel's action is read off the tree
        else:
            action_key, key, root = puct_root(key, root, invalid,
                                              config.dirichlet_fraction if noise else 0.0,
                                              config.dirichlet_alpha)
            root_noise = jnp.zeros(invalid.shape, root.prior_logits.dtype)
        data = TreeData(root_gumbel=root_noise, kept_visits=jnp.zeros(invalid.shape, jnp.int32))
        if config.solver:
            data = data.replace(proven=jnp.zeros((batch, capacity), bool),
                                score=jnp.zeros((batch, capacity), jnp.int32))
        tree = init_tree(root, capacity - 1, invalid, data)
        next_node = jnp.ones((batch,), jnp.int32)
        if kept is not None:
            kept_root = jax.tree.map(lambda x: x[:, Tree.ROOT_INDEX], kept.tree.embeddings)
            same = (jnp.ones((batch,), bool) if self.same_root_fn is None
                    else self.same_root_fn(kept_root, states))
            tree, next_node = _kept(tree, kept, planned_simulations, same)
        gumbel = config.algorithm == "gumbel"
        return SearchState(tree=tree, key=key, action_key=action_key, next_node=next_node,
                           simulations=jnp.zeros((batch,), jnp.int32), prior_value=prior_value,
                           planned=jnp.asarray(planned_simulations, jnp.int32),
                           halving_simulations=planned_simulations if gumbel else 0,
                           noise=noise, kept_root=kept is not None and gumbel)

    def simulate(self, variables: Any, state: SearchState, num_simulations: int) -> SearchState:
        """`num_simulations` (static) more simulations of every game still simulating: one
        whose tree is full, that has run its planned simulations or whose root is proven
        does nothing. Jit-able; `state` may be donated.

        Returns:
          The state after them.
        """
        config = self.config
        root_selection, interior_selection = _selections(config, state, self.qtransform,
                                                         self.legal_fn)
        on_step = solver.proof_step(self.legal_fn) if config.solver else None
        capacity = state.tree.node_visits.shape[1]
        batch = jnp.arange(state.next_node.shape[0])

        def simulation(_, carry):
            key, tree, next_node, done = carry
            key, walk_key, expand_key = jax.random.split(key, 3)
            active = (next_node < capacity) & (done < state.planned)
            proven = tree.extra_data.proven
            if config.solver:
                active &= ~proven[:, Tree.ROOT_INDEX]
            parent, action = walk(jax.random.split(walk_key, batch.shape[0]), tree,
                                  root_selection, interior_selection, capacity, active,
                                  stop_at=proven)
            node = tree.children_index[batch, parent, action]
            # A walk that ended at a proven node backs its exact value up again.
            again = (active & (node != Tree.UNVISITED) & proven[batch, node]
                     if config.solver else jnp.zeros_like(active))
            node = jnp.where(node == Tree.UNVISITED, next_node, node)
            tree = expand(variables, expand_key, tree, self.recurrent_fn, parent, action, node,
                          write=active & ~again)
            if config.solver:
                tree = self._prove(tree, parent, action, node, active & ~again, again)
            tree = backup(tree, jnp.where(active, node, Tree.ROOT_INDEX), on_step)
            step = active.astype(jnp.int32)
            return key, tree, next_node + step, done + step

        carry = (state.key, state.tree, state.next_node, state.simulations)
        key, tree, next_node, done = jax.lax.fori_loop(0, num_simulations, simulation, carry)
        return state.replace(key=key, tree=tree, next_node=next_node, simulations=done)

    def _prove(self, tree: Tree, parent: jax.Array, action: jax.Array, node: jax.Array,
               written: jax.Array, again: jax.Array) -> Tree:
        """Proves the terminal nodes just expanded (`written` [B]) and counts the visit of
        the proven ones walked to `again` [B]."""
        batch = jnp.arange(node.shape[0])
        if self.outcome_fn is None:
            outcome = jnp.sign(tree.children_rewards[batch, parent, action]).astype(jnp.int32)
        else:
            def at(index):
                return jax.tree.map(lambda x: x[batch, index], tree.embeddings)

            outcome = self.outcome_fn(at(parent), at(node))
        tree = solver.mark_terminal(tree, parent, action, node, written, outcome)
        return tree.replace(node_visits=tree.node_visits.at[batch, node].add(
            again.astype(jnp.int32)))

    def finish(self, state: SearchState) -> SearchOutput:
        """The search's `SearchOutput` (as `make_search`'s search returns), from the tree as it
        stands: the action is legal however few simulations ran. With the solver, a proven
        root or a root child proven a win plays its proven best move."""
        config = self.config
        tree = state.tree
        invalid = tree.root_invalid_actions
        summary = tree.summary()
        if config.algorithm == "gumbel":
            visits = tree.children_visits[:, Tree.ROOT_INDEX] - tree.extra_data.kept_visits
            action, policy = gumbel_result(
                tree, tree.extra_data.root_gumbel, tree.children_prior_logits[:, Tree.ROOT_INDEX],
                invalid, self.qtransform, visits.astype(summary.value.dtype))
            if not (state.noise or config.greedy_action == "halving"):
                action = jnp.argmax(policy, axis=-1)
        else:
            action, policy = puct_result(state.action_key, tree, 1.0)
            if not state.noise:
                action = jnp.argmax(policy, axis=-1)
        action = action.astype(jnp.int32)
        if config.solver:
            action = solver.solved_action(tree, ~invalid, action, policy)
        if self.root_action_fn is not None:
            known, best = self.root_action_fn(
                jax.tree.map(lambda x: x[:, Tree.ROOT_INDEX], tree.embeddings))
            action = jnp.where(known, best, action)
        return check_output(SearchOutput(
            action=action, policy=policy, value=summary.value, prior_value=state.prior_value,
            visit_counts=summary.visit_counts.astype(jnp.int32)), self.num_actions)

    def advance(self, state: SearchState, actions: jax.Array) -> SearchState:
        """The subtree under each game's played action `actions` int32 [B], compacted to nodes
        0..K-1, for `start(kept=...)`; a game whose action was never expanded keeps an empty
        tree (K = 0: it starts afresh). Works on an advanced state too (two plies)."""
        tree = state.tree
        batch = jnp.arange(tree.node_visits.shape[0])
        chex.assert_shape(actions, batch.shape)
        child = tree.children_index[batch, Tree.ROOT_INDEX, actions]
        tree, count, new_index = subtree(tree, child)
        data = tree.extra_data.replace(kept_visits=jnp.zeros_like(tree.extra_data.kept_visits))
        if self.config.solver:
            data = data.replace(proven=move_nodes(data.proven, new_index, False),
                                score=move_nodes(data.score, new_index, 0))
        # kept_root reset: every advanced state has one pytree structure (one compile).
        return state.replace(tree=tree.replace(extra_data=data), next_node=count,
                             simulations=jnp.zeros_like(count), kept_root=False)

    def simulations_done(self, state: SearchState) -> jax.Array:
        """int32 [B]: the simulations this search ran (a kept tree's earlier ones not)."""
        return state.simulations

    def kept_visits(self, state: SearchState) -> jax.Array:
        """int32 [B]: the root visits a kept tree brought to this search (0 where it started
        afresh)."""
        return jnp.sum(state.tree.extra_data.kept_visits, axis=-1)

    def root_proven(self, state: SearchState) -> jax.Array:
        """int32 [B]: `solver.PROVEN_WIN` (1), `PROVEN_DRAW` (0) or `PROVEN_LOSS` (-1) for the
        player to move at the root, or `solver.UNPROVEN` (2), always without the solver."""
        if self.config.solver:
            return solver.root_status(state.tree)
        return jnp.full(state.next_node.shape, solver.UNPROVEN, jnp.int32)
