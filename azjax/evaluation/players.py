"""Players built from names and networks, shared by the training evaluator, `azjax eval` and
the ladder.

A player is ``act(key, states[B]) -> int32[B]`` (`azjax.evaluation.baselines.Player`).
Shape legend: B batch, A actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.config import parse_baseline
from azjax.core.search import masked_logits
from azjax.evaluation import alphabeta, baselines
from azjax.evaluation.arena import PAIRED_OPENING_PLIES
from azjax.evaluation.baselines import Player
from azjax.envs.core import Env, GameState

__all__ = ["SEARCHING_BASELINES", "arena_opening_plies", "is_baseline", "make_opponent",
           "network_player", "search_player"]

SEARCHING_BASELINES = ("mcts:", "alphabeta:")
"""Name prefixes of the baselines that search (mcts:N, alphabeta:D): costly per move."""


def is_baseline(name: str) -> bool:
    """Whether `make_opponent` plays `name` (random, greedy, mcts:N, alphabeta:D); else it is
    an agent's spec (a game id, run dir or model dir)."""
    return name in ("random", "greedy") or name.startswith(SEARCHING_BASELINES)


def arena_opening_plies(name: str) -> int:
    """The paired random opening plies of an arena of greedy search against opponent `name`.

    `PAIRED_OPENING_PLIES` against agents (a spec) and alpha-beta (alphabeta:D): their moves
    are fixed by the position (alpha-beta's seeded tie-break only picks among moves of exactly
    equal value), so from the start position two such players replay a handful of games
    however many are asked for, and a score over them counts far fewer independent games than
    it seems to. 0 against random, greedy and mcts:N, which sample their moves.
    """
    if is_baseline(name) and not name.startswith("alphabeta:"):
        return 0
    return PAIRED_OPENING_PLIES


def make_opponent(env: Env, name: str) -> Player:
    """A baseline player from its name.

    Args:
      env: the game.
      name: ``random``, ``greedy``, ``mcts:N`` (N >= 1 simulations) or ``alphabeta:D``
        (alpha-beta to D >= 1 whole moves over the game's `heuristic_value`).

    Returns:
      The memoised baseline player (the same object for the same arguments).

    Raises:
      ValueError: an unknown name or a bad simulation count.
    """
    if not is_baseline(name):
        raise ValueError(f"unknown opponent {name!r}: use random, greedy, mcts:N, alphabeta:D "
                         f"or a model spec")
    kind, count = parse_baseline(name)
    if kind == "random":
        return baselines.random_player(env)
    if kind == "greedy":
        return baselines.greedy_player(env)
    if kind == "mcts":
        return baselines.mcts_player(env, count)
    return alphabeta.alphabeta_player(env, count)


def network_player(env: Env, apply_fn: Callable, params: Any) -> Player:
    """The raw network: argmax of the masked prior (ties -> lowest index).

    Args:
      env: the game (its `observe` feeds the network).
      apply_fn: ``apply_fn({"params": params}, obs [B, ...]) -> (logits [B, A], value [B])``.
      params: the network's params (may be traced).

    Returns:
      ``act(key, states[B]) -> int32 [B]``; the key is unused.
    """

    def act(key: jax.Array, states: GameState) -> jax.Array:
        del key
        logits, _ = apply_fn({"params": params}, jax.vmap(env.observe)(states))
        return jnp.argmax(masked_logits(logits, states.legal_action_mask), -1).astype(jnp.int32)

    return act


def search_player(search_fn: Callable, params: Any, num_simulations: int) -> Player:
    """Greedy search: the search's move without noise (`SearchConfig.greedy_action`).

    Args:
      search_fn: ``search_fn(variables, key, states[B], *, num_simulations, noise) ->
        SearchOutput`` (`azjax.core.search.make_network_search`; `Agent.search_fn`).
      params: the network's params (may be traced).
      num_simulations: simulations per move (static).

    Returns:
      ``act(key, states[B]) -> int32 [B]``.
    """

    def act(key: jax.Array, states: GameState) -> jax.Array:
        return search_fn({"params": params}, key, states, num_simulations=num_simulations,
                         noise=False).action

    return act
