"""The one arena of the ladder's matches and the anchor tables' round robins.

Every game starts from a paired random opening: the first `opening_plies` plies are uniformly
random legal moves, the same in game i and game i + B/2, where the colours are swapped. Greedy
search is deterministic, so without openings two snapshots would replay the same two games
over and over; with them each pair of games is one fair sample (both sides play the same
opening from both seats).

A ladder compiles once: the params are traced arguments and each side picks its player (a
snapshot's search or a baseline) with a `lax.switch`, so every pairing shares one compiled
arena (`ladder_arena`), whatever the number of snapshots and baselines. A match with an
external engine (``cb:PATH[@SECONDS]``) cannot live in a compiled program: it is played ply
by ply from the host (`engine_match`), from the same paired openings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.core.hashing import derive_key, hash_seeds
from azjax.evaluation.arena import ArenaResult, run_arena
from azjax.evaluation.baselines import Player
from azjax.evaluation.engine_arena import HostPlayer, play_engine_arena
from azjax.evaluation.players import search_player

__all__ = ["engine_match", "ladder_arena", "paired_arena"]


def paired_arena(env, player_a: Player, player_b: Player, num_games: int, opening_plies: int,
                 key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`run_arena`'s outcomes of A against B from paired openings, its keys derived from
    `key`: the one arena of the ladder's matches and the anchor tables' round robins."""
    return run_arena(derive_key(key, jnp.uint32(1)), env=env, player_a=player_a,
                     player_b=player_b, num_games=num_games, opening_plies=opening_plies,
                     opening_seed=hash_seeds(derive_key(key, jnp.uint32(0)), 1)[0])


def engine_match(env, player_a: Player | HostPlayer, player_b: Player | HostPlayer,
                 num_games: int, opening_plies: int, key: jax.Array) -> ArenaResult:
    """A's result against B, one of them an external engine (a `HostPlayer`), played ply by
    ply from the host (`play_engine_arena`) from paired openings, its keys derived from
    `key` as `paired_arena`'s. A game the engine forfeits is its loss."""
    result, _, _ = play_engine_arena(env, player_a, player_b, key=derive_key(key, jnp.uint32(1)),
                                     num_games=num_games, opening_plies=opening_plies)
    return result


def ladder_arena(env, search_fn: Callable, num_simulations: int, opponents: list[Player], *,
                 num_games: int, opening_plies: int) -> Callable[..., Any]:
    """The one compiled arena of a ladder: ``(params_a, which_a, params_b, which_b, key) ->
    (A's returns [B], illegal A, illegal B)``.

    Each side is a `_switch_player` (a baseline's params unused), so snapshot-vs-snapshot,
    snapshot-vs-baseline and baseline-vs-baseline games all share one program with two copies
    of the search, instead of one program per kind of pairing.
    """
    player = functools.partial(_switch_player, search_fn, num_simulations, opponents)

    def arena(params_a, which_a, params_b, which_b, key):
        return paired_arena(env, player(params_a, which_a), player(params_b, which_b),
                            num_games, opening_plies, key)

    return jax.jit(arena)


def _switch_player(search_fn: Callable, num_simulations: int, opponents: list[Player],
                   params: Any, which: jax.Array) -> Player:
    """Greedy search with `params` when `which` (int32 []) is 0, else baseline
    ``opponents[which - 1]``: a `lax.switch` runs only the chosen branch."""
    branches = [search_player(search_fn, params, num_simulations)] + opponents

    def act(key, states):
        return jax.lax.switch(which, [lambda k, s, f=f: f(k, s).astype(jnp.int32)
                                      for f in branches], key, states)

    return act
