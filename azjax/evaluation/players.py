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

from azjax.config import BASELINES, baseline_forms, baseline_kind, is_engine_name, parse_baseline
from azjax.core.search import masked_logits
from azjax.envs.core import Env, GameState
from azjax.evaluation import alphabeta, baselines
from azjax.evaluation.arena import PAIRED_OPENING_PLIES
from azjax.evaluation.baselines import Player
from azjax.evaluation.checkerboard import ENGINE_OPENING_PLIES

__all__ = ["OPPONENT_MAKERS", "arena_opening_plies", "is_baseline", "make_opponent",
           "network_player", "search_player", "searching_baseline"]

OPPONENT_MAKERS: dict[str, Callable[[Env, int], Player]] = {
    "random": lambda env, count: baselines.random_player(env),
    "greedy": lambda env, count: baselines.greedy_player(env),
    "mcts": baselines.mcts_player,
    "alphabeta": alphabeta.alphabeta_player,
}
"""Each baseline kind's player, `maker(env, count) -> Player` (the count is 0 for a kind
named alone), keyed by the names of `azjax.config.BASELINES`, which says how each is written
and how arenas treat it. Adding an opponent: its entry there, its maker here."""


def is_baseline(name: str) -> bool:
    """Whether `make_opponent` plays `name` (a kind of `BASELINES`: random, greedy, mcts:N,
    alphabeta:D, ...); else it is an agent's spec (a game id, run dir or model dir)."""
    return baseline_kind(name) is not None


def searching_baseline(name: str) -> bool:
    """Whether `name` is a baseline that searches at every move (mcts:N, alphabeta:D): costly,
    so each such opponent plays an arena of its own (`BaselineKind.searches`)."""
    kind = baseline_kind(name)
    return kind is not None and BASELINES[kind].searches


def arena_opening_plies(name: str) -> int:
    """The paired random opening plies of an arena of greedy search against opponent `name`.

    `PAIRED_OPENING_PLIES` against agents (a spec) and baselines whose moves the position fixes
    (`BaselineKind.fixed_moves`: alphabeta:D, whose seeded tie-break only picks among moves of
    exactly equal value): from the start position two such players replay a handful of games
    however many are asked for, and a score over them counts far fewer independent games than
    it seems to. 0 against random, greedy and mcts:N, which sample their moves.
    `ENGINE_OPENING_PLIES` (3, checkers' three-move ballot) against an external engine
    (``cb:PATH[@SECONDS]``), whose book would otherwise replay its games.
    """
    if is_engine_name(name):
        return ENGINE_OPENING_PLIES
    kind = baseline_kind(name)
    if kind is not None and not BASELINES[kind].fixed_moves:
        return 0
    return PAIRED_OPENING_PLIES


def make_opponent(env: Env, name: str) -> Player:
    """A baseline player from its name.

    Args:
      env: the game.
      name: a baseline of `BASELINES`: ``random``, ``greedy``, ``mcts:N`` (N >= 1
        simulations) or ``alphabeta:D`` (alpha-beta to D >= 1 whole moves over the game's
        `heuristic_value`).

    Returns:
      The memoised baseline player (the same object for the same arguments).

    Raises:
      ValueError: an unknown name or a bad count.
    """
    if not is_baseline(name):
        raise ValueError(f"unknown opponent {name!r}: use {', '.join(baseline_forms())} or a "
                         f"model spec")
    kind, count = parse_baseline(name)
    return OPPONENT_MAKERS[kind](env, count)


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
