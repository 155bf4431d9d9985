"""MCTS-Solver (Winands, Björnsson & Saito 2008) over azjax's search trees: the results of
finished games found at terminal nodes go up the tree as exact values.

Encoding. The tree's `extra_data` holds `proven` (bool [B, N]) and `score` (int32 [B, N]). A
proven node's score is, for the player to move there, +(M - p) for a win in p plies, -(M - p)
for a loss in p plies and 0 for a draw (M = `PLY_SCALE`): a higher score is a better result,
and among wins the shorter one, among losses the longer one. A terminal node (below a
discount-0 edge) holds its result for the player who moved into it times M (0 plies to go).
Through an edge a child's score moves one ply away from the end, and changes sign when the
player to move changes (discount -1; +1 when the same player moves again, as in draughts'
multi-jumps): the sign rule of `azjax.core.search`. A finished game's result is the game's
own (`SearchEngine.outcome_fn`), not the edge's reward, which contempt or material utility
shift.

Proofs, made at each node a backup passes (`proof_step`):
- all legal children proven: the node is proven, with the best of their scores (a draw
  when some draw and none wins; the longest loss when all lose);
- a child proven a win in p plies, and no unproven legal child able to win sooner: an
  unexpanded child might win in 1 ply, an expanded unfinished one in 3 at the least (2 where
  the same player moves again, as in draughts' multi-jumps; `fewest_plies_to_win`). So a win
  in 1 proves the node at once, a win in 3 once every legal child is expanded, a longer one
  once every unproven child could only win later. Proven plies are thus exact: the shortest
  win, the longest resistance. The 3 assumes that no move loses at once for the player who
  makes it (true of every game here); in a game where one can, a proven win is still a win,
  and only its count of plies may be too long.
A proven node's value (`node_values`) is its best edge's Q (reward + discount x the child's
value, exact all the way down): +1, -1 or 0 in the game as trained, the search's utility with
contempt or material utility. Ties between equal scores go to the higher Q, then to the lower
action. An unproven node's value is at least its proven children's best Q: a backup that
passes it keeps its mean, and the value it passes up, at or above that bound.

Search. A walk enters only unproven children: a proven one has nothing more to tell, and a
node stays unproven only while it has unproven children, which its proof waits for. So walks
skip moves proven to lose, and, when a proven win is known that an unproven child could still
beat, they go only to those children. mctx's rule chooses among the candidates (the others'
prior at -inf, in a one-node view; `solver_selection`); if it still picks another (sequential
halving's schedule may), the candidate of highest prior is walked. Should a walk reach a
proven node anyway, it stops there and backs its exact value up again (`tree_search.walk`'s
`stop_at`). The policy target (visit shares for puct) is the search's: moves proven early get
fewer visits than they would without the solver.

The action (`solved_action`): a proven root plays its best proven move (the shortest win, the
longest resistance, a draw), and so does a root with a child proven a win; otherwise a proven
draw (or better) replaces a chosen move whose Q is below it, and a move proven to lose gives
way to the policy's best move that is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import mctx

from azjax.core.tree_search import node_view

__all__ = [
    "PLY_SCALE",
    "fewest_plies_to_win",
    "PROVEN_DRAW",
    "PROVEN_LOSS",
    "PROVEN_WIN",
    "UNPROVEN",
    "edge_scores",
    "mark_terminal",
    "node_proof",
    "proof_step",
    "root_status",
    "solved_action",
    "solver_selection",
]

PLY_SCALE = 1 << 20  # M: above any number of plies a tree holds
# `root_status` codes: the proven result for the player to move at the root, or UNPROVEN.
PROVEN_WIN, PROVEN_DRAW, PROVEN_LOSS, UNPROVEN = 1, 0, -1, 2
_LOWEST = jnp.iinfo(jnp.int32).min


def _plies(score: jax.Array) -> jax.Array:
    """The plies to the end of a proven win or loss `score` (0 for others)."""
    return jnp.where(score != 0, PLY_SCALE - jnp.abs(jnp.maximum(score, -PLY_SCALE)), 0)


def edge_scores(children: jax.Array, discounts: jax.Array, proven: jax.Array,
                score: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The proofs of a node's edges, for the player to move at the node.

    Args:
      children: int32 [..., A], the node's children_index (-1: unexpanded).
      discounts: float [..., A], its children_discounts.
      proven, score: bool and int32 [..., N], the tree's proofs (leading axes as `children`'s).

    Returns:
      `(proven, score)`, bool and int32 [..., A]: whether each edge's child is proven, and
      the edge's score (meaningful where proven).
    """
    safe = jnp.maximum(children, 0)
    child_proven = (children >= 0) & jnp.take_along_axis(proven, safe, axis=-1)
    child_score = jnp.take_along_axis(score, safe, axis=-1)
    further = child_score - jnp.sign(child_score)  # one ply more to the end
    return child_proven, jnp.where(discounts < 0, -further, further)


def fewest_plies_to_win(children: jax.Array, discounts: jax.Array) -> jax.Array:
    """int32 [..., A]: the fewest plies a win through each unproven edge could take: 1 through
    an unexpanded one (its move may end the game), 2 through an expanded one where the same
    player moves again (draughts' multi-jumps: discount +1), 3 where the other player moves."""
    return jnp.where(children < 0, 1, jnp.where(discounts > 0, 2, 3)).astype(jnp.int32)


def node_proof(legal: jax.Array, children: jax.Array, child_proven: jax.Array,
               edges: jax.Array, qvalues: jax.Array, discounts: jax.Array
               ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Whether a node is proven by its edges (see the module docstring), and how.

    Args:
      legal: bool [..., A], the node's legal actions.
      children: int32 [..., A], its children_index.
      child_proven, edges: `edge_scores`'s [..., A].
      qvalues: float [..., A], the edges' Q-values (the tie-break).
      discounts: float [..., A], the edges' discounts (`fewest_plies_to_win`).

    Returns:
      `(proven, score, action)`: bool, int32 and int32 [...]: the best proven edge's score
      and action (meaningful where proven).
    """
    proven_legal = legal & child_proven
    scores = jnp.where(proven_legal, edges, _LOWEST)
    best = jnp.max(scores, axis=-1)
    action = jnp.argmax(jnp.where(scores == best[..., None], qvalues, -jnp.inf), axis=-1)
    open_edges = legal & ~child_proven
    # The fewest plies an unproven edge could still win in.
    bound = jnp.min(jnp.where(open_edges, fewest_plies_to_win(children, discounts), PLY_SCALE),
                    axis=-1)
    won = (best > 0) & (_plies(best) <= bound)
    solved = ~jnp.any(open_edges, axis=-1) & jnp.any(legal, axis=-1)
    return won | solved, best, action.astype(jnp.int32)


def mark_terminal(tree: mctx.Tree, parent: jax.Array, action: jax.Array, node: jax.Array,
                  written: jax.Array, outcome: jax.Array) -> mctx.Tree:
    """Proves the nodes just expanded below a discount-0 edge with their result.

    Args:
      tree: the batched tree [B, N, ...], with `extra_data.proven` and `.score`.
      parent, action, node: int32 [B], the edge each game expanded and its node.
      written: bool [B], the games that expanded one.
      outcome: int32 [B], the finished game's result for the player who moved into it (+1
        win, 0 draw, -1 loss), read where the edge has discount 0.

    Returns:
      The tree with those nodes proven.
    """
    batch = jnp.arange(node.shape[0])
    chex.assert_shape([parent, action, node, written, outcome], (batch.shape[0],))
    terminal = written & (tree.children_discounts[batch, parent, action] == 0)
    index = jnp.where(terminal, node, tree.node_visits.shape[1])  # past the end: no write
    data = tree.extra_data
    return tree.replace(extra_data=data.replace(
        proven=data.proven.at[batch, index].set(True, mode="drop"),
        score=data.score.at[batch, index].set(outcome.astype(jnp.int32) * PLY_SCALE,
                                               mode="drop")))


def proof_step(legal_fn: Callable[[Any], jax.Array]) -> Callable:
    """`tree_search.backup`'s `on_step` that proves the nodes a backup passes.

    Args:
      legal_fn: the tree's embeddings [B, N, ...] -> their legal actions, bool [B, N, A].

    Returns:
      `on_step(tree, value [B], node [B], live [B]) -> (tree, value)`: a node proven on this
      step gets its exact value, which is also what it passes up.
    """

    def on_step(tree: mctx.Tree, value: jax.Array, node: jax.Array, live: jax.Array):
        batch = jnp.arange(node.shape[0])
        data = tree.extra_data
        children = tree.children_index[batch, node]
        child_proven, edges = edge_scores(children, tree.children_discounts[batch, node],
                                          data.proven, data.score)
        qvalues = tree.qvalues(node)
        legal = legal_fn(tree.embeddings)[batch, node]
        proven, score, action = node_proof(legal, children, child_proven, edges, qvalues,
                                           tree.children_discounts[batch, node])
        was = data.proven[batch, node]
        new = live & proven & ~was
        exact = qvalues[batch, action]
        # Unproven: the node is worth at least its best proven child.
        floor = jnp.max(jnp.where(legal & child_proven, qvalues, -jnp.inf), axis=-1)
        floored = live & ~proven & ~was
        value = jnp.where(floored, jnp.maximum(value, floor), value)
        node_value = tree.node_values[batch, node]
        node_value = jnp.where(floored, jnp.maximum(node_value, floor), node_value)
        tree = tree.replace(
            node_values=tree.node_values.at[batch, node].set(
                jnp.where(new, exact, node_value)),
            extra_data=data.replace(
                proven=data.proven.at[batch, node].set(was | new),
                score=data.score.at[batch, node].set(
                    jnp.where(new, score, data.score[batch, node]))))
        return tree, jnp.where(new, exact, value)

    return on_step


def _candidates(legal: jax.Array, children: jax.Array, child_proven: jax.Array,
                edges: jax.Array, discounts: jax.Array) -> jax.Array:
    """bool [A]: the children a walk may enter at an unproven node (module docstring)."""
    open_edges = legal & ~child_proven
    best = jnp.max(jnp.where(legal & child_proven, edges, _LOWEST))
    could_win_in = fewest_plies_to_win(children, discounts)
    return jnp.where(best > 0, open_edges & (could_win_in < _plies(best)), open_edges)


def solver_selection(selection: Callable, legal_fn: Callable[[Any], jax.Array]) -> Callable:
    """`selection(key, tree, node_index[, depth])` on one tree, choosing among the solver's
    candidates only (module docstring).

    Args:
      selection: an mctx-style selection that reads only the node's row of the tree.
      legal_fn: the tree's embeddings [N, ...] -> legal actions, bool [N, A].

    Returns:
      The selection, same signature; int32 [] action.
    """

    def select(key: chex.PRNGKey, tree: mctx.Tree, node_index: jax.Array, *depth):
        data = tree.extra_data
        children = tree.children_index[node_index]
        child_proven, edges = edge_scores(children, tree.children_discounts[node_index],
                                          data.proven, data.score)
        candidates = _candidates(legal_fn(tree.embeddings)[node_index], children,
                                 child_proven, edges, tree.children_discounts[node_index])
        candidates = candidates | ~jnp.any(candidates)  # none: leave the choice alone
        view = node_view(tree, node_index)
        prior = view.children_prior_logits
        view = view.replace(children_prior_logits=jnp.where(candidates, prior, -jnp.inf))
        action = selection(key, view, jnp.zeros_like(node_index), *depth)
        fallback = jnp.argmax(jnp.where(candidates, prior[0], -jnp.inf))
        return jnp.where(candidates[action], action, fallback).astype(jnp.int32)

    return select


def solved_action(tree: mctx.Tree, legal: jax.Array, action: jax.Array,
                  policy: jax.Array) -> jax.Array:
    """The search's action, corrected by the root's proofs (module docstring).

    Args:
      tree: the batched tree [B, N, ...], with `extra_data.proven` and `.score`.
      legal: bool [B, A], the root's legal actions.
      action: int32 [B], the action the search chose.
      policy: float [B, A], the search's policy.

    Returns:
      int32 [B], the action to play.
    """
    data = tree.extra_data
    rows = jnp.arange(action.shape[0])
    children = tree.children_index[:, mctx.Tree.ROOT_INDEX]
    child_proven, edges = edge_scores(children, tree.children_discounts[:, mctx.Tree.ROOT_INDEX],
                                      data.proven, data.score)
    qvalues = tree.qvalues(jnp.zeros_like(action))
    _, best, best_action = node_proof(legal, children, child_proven, edges, qvalues,
                                      tree.children_discounts[:, mctx.Tree.ROOT_INDEX])
    decided = data.proven[:, mctx.Tree.ROOT_INDEX] | (best > 0)
    # The best proven move that does not lose, if its exact Q is at least the chosen one's.
    safe = legal & child_proven & (edges >= 0)
    safe_action = jnp.argmax(jnp.where(safe, qvalues, -jnp.inf), axis=-1).astype(jnp.int32)
    secure = jnp.any(safe, -1) & (qvalues[rows, safe_action] >= qvalues[rows, action])
    losing = legal & child_proven & (edges < 0)
    others = legal & ~losing
    loses = losing[rows, action] & jnp.any(others, -1)
    fallback = jnp.argmax(jnp.where(others, policy, -jnp.inf), axis=-1).astype(jnp.int32)
    return jnp.where(decided, best_action,
                     jnp.where(secure, safe_action, jnp.where(loses, fallback, action)))


def root_status(tree: mctx.Tree) -> jax.Array:
    """int32 [B]: the root's proven result for its player to move, `PROVEN_WIN` (1),
    `PROVEN_DRAW` (0) or `PROVEN_LOSS` (-1), or `UNPROVEN` (2)."""
    data = tree.extra_data
    root = mctx.Tree.ROOT_INDEX
    return jnp.where(data.proven[:, root], jnp.sign(data.score[:, root]),
                     UNPROVEN).astype(jnp.int32)
