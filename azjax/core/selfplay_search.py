"""The searches of a self-play step: one batched search, a search per game, or a search from
each game's kept tree (`selfplay.tree_reuse`), with playout-cap randomisation over any of them.

Every search here returns `(SearchOutput [B], state)`, the state being what the step keeps for
the next one: None, or with kept trees the searched `SearchState` (`search_kept`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp

from azjax.config import SearchConfig, SelfPlayConfig, resolve_simulations
from azjax.core.search_engine import SearchEngine, SearchOutput, SearchState

__all__ = ["kept_tree_capacity", "no_kept_trees", "search_games", "search_kept",
           "search_with_playout_cap"]

_PLAYOUT_CAP_STREAM = 2**31 - 1  # fold_in data for the full/fast draw: no game id reaches it


def kept_tree_capacity(search: SearchConfig) -> int:
    """Nodes per game's tree when trees are kept: room for a kept tree as big as a full search's
    beside the new search's simulations, and the root (as `Agent.player` sizes it)."""
    return 2 * resolve_simulations(None, search) + 1


def _search_each_game(search_fn: Callable[..., Any], variables: Any, keys: jax.Array,
                      games: Any, num_simulations: int | None = None) -> SearchOutput:
    """The search run game by game (vmap over batch-1 searches), each with its own key.

    mctx draws its noise for the whole batch from one key, so a game's moves would depend on
    which games share its batch; searched one by one they depend on the game's key alone, and
    B games split over D devices play exactly as on one device. A whole self-play chunk runs
    slower this way (docs/scaling.md), hence `SelfPlayConfig.per_game_randomness` is off by
    default.
    """

    def one(key, game):
        out = search_fn(variables, key, jax.tree.map(lambda x: x[None], game), noise=True,
                        num_simulations=num_simulations)
        return jax.tree.map(lambda x: x[0], out)

    return jax.vmap(one)(keys, games)


def search_games(search_fn: Callable[..., Any], variables: Any, k_search: jax.Array, games: Any,
                 per_game: bool, num_simulations: int | None = None
                 ) -> tuple[SearchOutput, None]:
    """The search of every game, and None (no state to keep): game by game with its own key
    [B, 2] (`per_game`), or one batched search from one key [2]."""
    if per_game:
        return _search_each_game(search_fn, variables, k_search, games, num_simulations), None
    return search_fn(variables, k_search, games, noise=True,
                     num_simulations=num_simulations), None


def search_kept(engine: SearchEngine, variables: Any, key: chex.PRNGKey, games: Any,
                kept: SearchState, num_simulations: int | None = None
                ) -> tuple[SearchOutput, SearchState]:
    """One batched search of `games` [B] with self-play's noise, from each game's kept tree
    where it is the game's position (`SearchEngine.start`), else afresh.

    Returns:
      The `SearchOutput` and the searched state, with the static fields of `kept` (a full and
      a fast search then give one pytree structure), for `SearchEngine.advance`.
    """
    simulations = resolve_simulations(num_simulations, engine.config)
    state = engine.start(variables, key, games, capacity=kept_tree_capacity(engine.config),
                         planned_simulations=simulations, noise=True, kept=kept)
    state = engine.simulate(variables, state, simulations)
    output = engine.finish(state)
    return output, state.replace(halving_simulations=kept.halving_simulations, kept_root=False)


def no_kept_trees(engine: SearchEngine, variables: Any, key: chex.PRNGKey,
                  games: Any) -> SearchState:
    """Kept trees for `games` [B] that hold no node (every game's next search starts afresh),
    shaped as `SearchEngine.advance` leaves them after `search_kept`; nothing is computed."""

    def advanced():
        state = engine.start(variables, key, games, capacity=kept_tree_capacity(engine.config),
                             planned_simulations=resolve_simulations(None, engine.config),
                             noise=True)
        return engine.advance(state, jnp.zeros(games.current_player.shape, jnp.int32))

    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(advanced))


def search_with_playout_cap(search: Callable[..., Any], key: chex.PRNGKey,
                            config: SelfPlayConfig) -> tuple[SearchOutput, Any, jax.Array]:
    """The step's search output, the state `search` returns beside it and its policy target
    float32 [B, A]. `search(num_simulations=None)` is one of this module's searches with its
    other arguments bound. With `full_search_prob` < 1 one draw for the whole lockstep batch
    picks a full or a fast search (`fast_simulations`); a fast one leaves no policy target (all
    zeros)."""
    if config.full_search_prob < 1.0:
        # Its own stream: split(key, n)[0] and fold_in(key, 0) are the same key here (jax's
        # partitionable threefry), i.e. the search's or game 0's.
        cap_key = jax.random.fold_in(key, _PLAYOUT_CAP_STREAM)
        full = jax.random.uniform(cap_key) < config.full_search_prob
        out, state = jax.lax.cond(full, search, lambda: search(config.fast_simulations))
        return out, state, jnp.where(full, out.policy, 0.0)
    out, state = search()
    return out, state, out.policy
