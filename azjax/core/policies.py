"""The two search policies azjax plays with, over its own loop (`azjax.core.tree_search`) and
mctx's public action selections: Gumbel MuZero (sequential halving at the root) and MuZero's
PUCT with Dirichlet noise at the root.

Each reproduces the algorithm of mctx 0.0.71's `gumbel_muzero_policy` / `muzero_policy`, with
the same keys drawn in the same order, so on the same inputs the action, the action weights
and the root's statistics are those of mctx's policies (`tests/test_search.py` compares them).
Each is written as three steps, which a search run in parts (`azjax.core.search_engine`)
calls too: the root's prior and noise (`gumbel_root`, `puct_root`), the action selections
(`gumbel_selections`, `puct_selections`) and the action and policy read off the final tree
(`gumbel_result`, `puct_result`).

A gumbel search can start from a root that keeps an earlier search's visits (tree reuse): its
tree's `extra_data.kept_visits` [B, A] holds them, and with `kept_root=True` sequential halving
counts only this search's visits at the root (its schedule is for this search's simulations),
while its completed Q-values read all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import mctx

from azjax.core.tree_search import node_view, run_search

__all__ = [
    "considered_score",
    "gumbel_muzero_search",
    "gumbel_result",
    "gumbel_root",
    "gumbel_selections",
    "masked_argmax",
    "muzero_search",
    "puct_result",
    "puct_root",
    "puct_selections",
    "this_search_visits",
    "with_kept_visits",
    "without_invalid_mass",
]


def without_invalid_mass(logits: jax.Array, invalid_actions: jax.Array) -> jax.Array:
    """Logits [B, A] shifted to a maximum of 0, the `invalid_actions` [B, A] set to the lowest
    finite float (finite: a softmax over a row with every action invalid stays NaN-free)."""
    chex.assert_equal_shape([logits, invalid_actions])
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def masked_argmax(scores: jax.Array, invalid_actions: jax.Array) -> jax.Array:
    """int32 [B]: the valid action with the highest score [B, A] (action 0 if none is valid)."""
    chex.assert_equal_shape([scores, invalid_actions])
    return jnp.argmax(jnp.where(invalid_actions, -jnp.inf, scores), axis=-1).astype(jnp.int32)


def considered_score(considered_visit: jax.Array, gumbel: jax.Array, logits: jax.Array,
                     qvalues: jax.Array, visit_counts: jax.Array) -> jax.Array:
    """Sequential halving's score [B, A]: gumbel + logits + completed Q for the actions visited
    `considered_visit` [B, 1] times (the survivors), -inf for the others.

    gumbel, logits, qvalues, visit_counts: [B, A]. Logits are shifted to a maximum of 0 and the
    sum floored at -1e9 so that a lone survivor with very low logits still scores finitely.
    """
    chex.assert_equal_shape([gumbel, logits, qvalues, visit_counts])
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    penalty = jnp.where(visit_counts == considered_visit, 0.0, -jnp.inf)
    return jnp.maximum(-1e9, gumbel + logits + qvalues) + penalty


def gumbel_root(key: chex.PRNGKey, root: mctx.RootFnOutput, invalid_actions: jax.Array,
                gumbel_scale: float) -> tuple[chex.PRNGKey, mctx.RootFnOutput, jax.Array]:
    """Gumbel MuZero's root: the prior logits [B, A] without the invalid actions' mass, and
    the Gumbel noise [B, A] (`gumbel_scale` x a draw; 0: none).

    Returns:
      `(key, root, gumbel)`: the key the simulations go on with, the root with its new prior
      logits, and the noise.
    """
    logits = without_invalid_mass(root.prior_logits, invalid_actions)
    key, gumbel_key = jax.random.split(key)
    gumbel = gumbel_scale * jax.random.gumbel(gumbel_key, logits.shape, logits.dtype)
    return key, root.replace(prior_logits=logits), gumbel


def with_kept_visits(qtransform: Callable) -> Callable:
    """`qtransform` on a view of a node whose visits are this search's alone: it reads the
    kept visits (`tree.extra_data.kept_visits` [A]) added back, so Q-values count them all."""

    def transform(tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
        visits = tree.children_visits.at[node_index].add(tree.extra_data.kept_visits)
        return qtransform(tree.replace(children_visits=visits), node_index)

    return transform


def this_search_visits(root_selection: Callable) -> Callable:
    """`root_selection(key, tree, node_index)` on a one-node view of the root whose visits are
    this search's: the kept visits (`tree.extra_data.kept_visits` [A]) taken off."""

    def select(key: chex.PRNGKey, tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
        view = node_view(tree, node_index)
        view = view.replace(children_visits=view.children_visits - tree.extra_data.kept_visits)
        return root_selection(key, view, jnp.zeros_like(node_index))

    return select


def gumbel_selections(num_simulations: int, max_num_considered_actions: int,
                      qtransform: Callable, kept_root: bool = False
                      ) -> tuple[Callable, Callable]:
    """mctx's Gumbel MuZero selections: sequential halving at the root (its schedule for
    `num_simulations`), the deterministic improved-policy rule below it.

    With `kept_root`, the root's halving counts only this search's visits (see the module
    docstring; the tree's `extra_data` then has `kept_visits`).

    Returns:
      `(root_selection, interior_selection)` on one tree (see `tree_search.walk`).
    """
    root_selection = functools.partial(
        mctx.gumbel_muzero_root_action_selection, num_simulations=num_simulations,
        max_num_considered_actions=max_num_considered_actions,
        qtransform=with_kept_visits(qtransform) if kept_root else qtransform)
    if kept_root:
        root_selection = this_search_visits(root_selection)
    interior_selection = functools.partial(mctx.gumbel_muzero_interior_action_selection,
                                           qtransform=qtransform)
    return root_selection, interior_selection


def gumbel_result(tree: mctx.Tree, gumbel: jax.Array, logits: jax.Array,
                  invalid_actions: jax.Array, qtransform: Callable,
                  visit_counts: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Gumbel MuZero's action and policy from its final tree.

    Args:
      tree: the batched tree [B, N, ...].
      gumbel: float [B, A], the root's Gumbel noise.
      logits: float [B, A], the root's prior logits (`gumbel_root`'s).
      invalid_actions: bool [B, A], the root's illegal actions.
      qtransform: the search's qtransform (completed Q over all the root's visits).
      visit_counts: float [B, A], the root's visits sequential halving counted (this search's).

    Returns:
      `(action, weights)`: int32 [B], the best of the most visited actions (sequential
      halving's survivors; fewer valid actions: fewer candidates), and float32 [B, A],
      softmax(logits + completed Q) over the valid actions, the policy target.
    """
    considered_visit = jnp.max(visit_counts, axis=-1, keepdims=True)
    # Completed Q-values: the unvisited actions' imputed.
    qvalues = jax.vmap(qtransform, in_axes=(0, None))(tree, mctx.Tree.ROOT_INDEX)
    action = masked_argmax(considered_score(considered_visit, gumbel, logits, qvalues,
                                            visit_counts), invalid_actions)
    weights = jax.nn.softmax(without_invalid_mass(logits + qvalues, invalid_actions))
    return action, weights


def gumbel_muzero_search(params: Any, key: chex.PRNGKey, root: mctx.RootFnOutput,
                         recurrent_fn: Callable, *, num_simulations: int,
                         invalid_actions: jax.Array, qtransform: Callable,
                         max_num_considered_actions: int,
                         gumbel_scale: float = 1.0) -> mctx.PolicyOutput:
    """Gumbel MuZero ("Policy improvement by planning with Gumbel", Danihelka et al. 2022).

    The root's actions are chosen by sequential halving over `max_num_considered_actions`
    Gumbel-perturbed candidates, interior ones deterministically towards softmax(logits + Q).

    Args:
      params: forwarded to `recurrent_fn`.
      key: a PRNG key (consumed).
      root: `RootFnOutput`, prior_logits [B, A], value [B], embedding [B, ...].
      recurrent_fn: mctx's recurrent function (see `azjax.core.tree_search.run_search`).
      num_simulations: the search's simulations.
      invalid_actions: bool [B, A], the root's illegal actions.
      qtransform: an mctx qtransform, `(tree, node_index) -> completed Q [A]` on one tree.
      max_num_considered_actions: the candidates sequential halving starts from.
      gumbel_scale: the Gumbel noise's scale (0: a deterministic search).

    Returns:
      `mctx.PolicyOutput`: action int32 [B] (the best survivor of sequential halving),
      action_weights float32 [B, A] (softmax of logits + completed Q, the policy target) and
      search_tree, the batched `mctx.Tree`.
    """
    key, root, gumbel = gumbel_root(key, root, invalid_actions, gumbel_scale)
    root_selection, interior_selection = gumbel_selections(
        num_simulations, max_num_considered_actions, qtransform)
    tree = run_search(params, key, root, recurrent_fn, root_selection, interior_selection,
                      num_simulations, invalid_actions,
                      extra_data=mctx.GumbelMuZeroExtraData(root_gumbel=gumbel))
    action, weights = gumbel_result(tree, gumbel, root.prior_logits, invalid_actions,
                                    qtransform, tree.summary().visit_counts)
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)


def _log_probs(probs: jax.Array) -> jax.Array:
    """log(probs) with zeros floored at the smallest normal float, so it stays finite."""
    return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def puct_root(key: chex.PRNGKey, root: mctx.RootFnOutput, invalid_actions: jax.Array,
              dirichlet_fraction: float, dirichlet_alpha: float
              ) -> tuple[chex.PRNGKey, chex.PRNGKey, mctx.RootFnOutput]:
    """PUCT's root: Dirichlet noise (`dirichlet_fraction` of it, concentration
    `dirichlet_alpha`) mixed into the prior [B, A], then the invalid actions' mass removed.

    Returns:
      `(key, search_key, root)`: the key for the final action, the key the simulations
      start from, and the root with its new prior logits.
    """
    key, noise_key, search_key = jax.random.split(key, 3)
    batch, num_actions = root.prior_logits.shape
    noise = jax.random.dirichlet(noise_key, jnp.full((num_actions,), dirichlet_alpha),
                                 shape=(batch,))
    probs = jax.nn.softmax(root.prior_logits)
    noisy = (1 - dirichlet_fraction) * probs + dirichlet_fraction * noise
    root = root.replace(prior_logits=without_invalid_mass(_log_probs(noisy), invalid_actions))
    return key, search_key, root


def puct_selections(pb_c_init: float, pb_c_base: float,
                    qtransform: Callable) -> tuple[Callable, Callable]:
    """mctx's PUCT selection (`muzero_action_selection`), the root's masking its invalid
    actions: `(root_selection, interior_selection)` on one tree."""
    interior_selection = functools.partial(mctx.muzero_action_selection, pb_c_base=pb_c_base,
                                           pb_c_init=pb_c_init, qtransform=qtransform)
    return functools.partial(interior_selection, depth=0), interior_selection


def puct_result(key: chex.PRNGKey, tree: mctx.Tree,
                temperature: float) -> tuple[jax.Array, jax.Array]:
    """PUCT's action and policy from its final tree [B, N, ...]: int32 [B] sampled from the
    root's visit counts ** (1 / `temperature`) with `key` (0: the most visited), and float32
    [B, A], the root's visit shares (the policy target)."""
    weights = tree.summary().visit_probs
    logits = _log_probs(weights)
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)  # no +inf at a low temperature
    logits = logits / jnp.maximum(jnp.finfo(logits.dtype).tiny, temperature)
    action = jax.random.categorical(key, logits).astype(jnp.int32)
    return action, weights


def muzero_search(params: Any, key: chex.PRNGKey, root: mctx.RootFnOutput,
                  recurrent_fn: Callable, *, num_simulations: int, invalid_actions: jax.Array,
                  qtransform: Callable, dirichlet_fraction: float = 0.25,
                  dirichlet_alpha: float = 0.3, pb_c_init: float = 1.25,
                  pb_c_base: float = 19652.0, temperature: float = 1.0) -> mctx.PolicyOutput:
    """MuZero's PUCT search (AlphaZero's selection) with Dirichlet noise mixed into the root's
    prior, acting by sampling the root's visit counts ** (1 / temperature).

    Args:
      params: forwarded to `recurrent_fn`.
      key: a PRNG key (consumed).
      root: `RootFnOutput`, prior_logits [B, A], value [B], embedding [B, ...].
      recurrent_fn: mctx's recurrent function (see `azjax.core.tree_search.run_search`).
      num_simulations: the search's simulations.
      invalid_actions: bool [B, A], the root's illegal actions.
      qtransform: an mctx qtransform, `(tree, node_index) -> Q [A]` on one tree.
      dirichlet_fraction: the noise's share of the root prior (0: the prior alone).
      dirichlet_alpha: the Dirichlet concentration.
      pb_c_init, pb_c_base: the PUCT exploration constants c1, c2.
      temperature: the visit-count temperature of the sampled action (0: the most visited).

    Returns:
      `mctx.PolicyOutput`: action int32 [B] (sampled), action_weights float32 [B, A] (the
      root's visit shares, the policy target) and search_tree, the batched `mctx.Tree`.
    """
    key, search_key, root = puct_root(key, root, invalid_actions, dirichlet_fraction,
                                      dirichlet_alpha)
    root_selection, interior_selection = puct_selections(pb_c_init, pb_c_base, qtransform)
    tree = run_search(params, search_key, root, recurrent_fn, root_selection,
                      interior_selection, num_simulations, invalid_actions)
    action, weights = puct_result(key, tree, temperature)
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)
