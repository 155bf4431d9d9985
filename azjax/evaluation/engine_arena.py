"""An arena driven from the host, one ply at a time, for players that think like engines: a
clock per move, trees kept between moves (`azjax.engine_player.EnginePlayer`).

`run_arena` plays a whole arena inside one compiled call, which a player on a clock cannot
live in (it reads the time between compiled chunks) and which has nowhere to keep a tree from
one ply to the next. This arena plays the same games, with the same starts, colours, paired
openings and per-ply keys (`azjax.evaluation.arena`), stepping each ply from the host: each
player searches the whole batch when any live game has it to move (as in `run_arena`), the
mover's moves are played, and both players' kept trees move down them. A player that searches
each game on its own (`SearchPlayer.searches_subsets`, alpha-beta) gets only the games it is
to move in, in a batch halved as often as they fit (a few batch sizes, each compiled once),
which spares it the half of the batch the other side moves in and the finished games. Plain players
(`act(key, states) -> actions`, the baselines) are compiled once and timed too. A `HostPlayer`
(an external engine, `azjax.evaluation.checkerboard`) moves game by game on the host.

With fixed simulation counts and no kept trees, an engine player's moves are those of
`azjax.evaluation.players.search_player` (the same search), so the two arenas agree game for
game; with a clock they are not repeatable.

Shape legend: B games.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.engine_player import SearchPlayer
from azjax.envs.core import Env
from azjax.evaluation.arena import (
    ArenaResult,
    arena_start,
    default_max_steps,
    ply_keys,
    settle_ply,
    turns,
)
from azjax.evaluation.baselines import Player

__all__ = ["HostPlayer", "PlayerStats", "play_engine_arena"]


@dataclasses.dataclass(frozen=True)
class PlayerStats:
    """How one side of an engine arena played: per move, averaged over its moves.

    Attributes:
      moves: the batched moves it made (plies where some game had it to move).
      seconds_per_move: wall seconds per batched move (every game of the batch at once).
      simulations_per_move: simulations per move in the games it moved in (kept visits not
        counted; an alpha-beta player's: positions); None for a player that does not search
        with an engine.
      per_game_move: the moves and seconds count each game's move, not batched moves (a
        `HostPlayer`, which thinks game by game).
      forfeits: games it forfeited (a `HostPlayer`: an external engine that crashed, hung or
        answered an illegal move).
      depth_per_move: an alpha-beta player's deepest finished step, in whole moves, per move
        in the games it moved in; None for other players.
    """

    moves: int
    seconds_per_move: float
    simulations_per_move: float | None
    per_game_move: bool = False
    forfeits: int = 0
    depth_per_move: float | None = None


class HostPlayer(abc.ABC):
    """A player that moves on the host, one game at a time (an external engine): the engine
    arena hands it the batch of states and asks for the moves of the games it is to move in.
    """

    @abc.abstractmethod
    def start(self, num_games: int) -> None:
        """A new arena of B = `num_games` games begins: forget every earlier game."""

    @abc.abstractmethod
    def move(self, states: Any, turn: np.ndarray) -> tuple[np.ndarray, float | None]:
        """The moves of one ply.

        Args:
          states: the batch of states [B] (on any device).
          turn: bool [B], the live games where this player is to move.

        Returns:
          (int32 [B] actions: a legal one in each game of `turn`, or -1 to forfeit that game,
          anything elsewhere; the mean wall seconds of the moves it thought on this ply, or
          None when it did not think: only moves it already knew, as a multi-jump's later
          hops).
        """

    @abc.abstractmethod
    def stats(self) -> PlayerStats:
        """Its tally since `start`, per game move (`PlayerStats.per_game_move`)."""


class _Side:
    """One player of the arena: a `SearchPlayer` (an `EnginePlayer`, an `AlphaBetaPlayer`), a
    compiled plain `Player` or a `HostPlayer`, and its tally."""

    def __init__(self, player: SearchPlayer | Player | HostPlayer):
        self.player = player
        self.engine = isinstance(player, SearchPlayer)
        self.subsets = self.engine and player.searches_subsets
        self.host = isinstance(player, HostPlayer)
        self.act = None if self.engine or self.host else jax.jit(player)
        self.moves, self.seconds, self.simulations, self.counted = 0, 0.0, 0.0, 0
        self.depth: float | None = None  # an alpha-beta player's finished steps, summed
        self.last_seconds = 0.0  # the last move's (a HostPlayer's: the last one it thought)

    def move(self, key: jax.Array, states: Any, turn: np.ndarray) -> jax.Array:
        if self.host:
            action, seconds = self.player.move(states, turn)
            if seconds is not None:
                self.last_seconds = seconds
            return jnp.asarray(action, jnp.int32)
        if self.engine:
            action, simulations, depth = self._search(key, states, turn)
            self.simulations += float(np.sum(simulations[turn]))
            self.counted += int(np.sum(turn))
            if depth is not None:
                self.depth = (self.depth or 0.0) + float(np.sum(depth[turn]))
            action = jnp.asarray(action)
        else:
            if not self.moves:  # compiled outside the clock
                jax.block_until_ready(self.act(key, states))
            began = time.perf_counter()
            action = jax.block_until_ready(self.act(key, states))
            self.last_seconds = time.perf_counter() - began
            self.seconds += self.last_seconds
        self.moves += 1
        return action.astype(jnp.int32)

    def searched_games(self, turn: np.ndarray) -> int:
        """How many games a search on this ply covers that the player is to move in."""
        return int(np.sum(turn)) if self.subsets else int(turn.size)

    def _search(self, key: jax.Array, states: Any, turn: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """A `SearchPlayer`'s move: (actions, simulations, depth or None), each [B]; a player
        that searches subsets searches only the games of `turn`, the rest left 0."""
        games = np.flatnonzero(turn) if self.subsets else np.arange(turn.size)
        if self.subsets:  # padded with repeats to one of a few batch sizes
            index = np.resize(games, _subset_size(games.size, turn.size))
            states = jax.tree.map(lambda x: x[index], states)
        move = self.player.move(key, states)
        self.last_seconds = move.seconds
        self.seconds += move.seconds

        def spread(part: Any, dtype: Any = np.float64) -> np.ndarray:
            full = np.zeros(turn.size, dtype)
            full[games] = np.asarray(part)[:games.size]
            return full

        depth = None if move.depth is None else spread(move.depth)
        return spread(move.action, np.int32), spread(move.simulations), depth

    def played(self, actions: jax.Array) -> None:
        if self.engine:
            self.player.played(actions)

    def stats(self) -> PlayerStats:
        if self.host:
            return self.player.stats()
        moves = max(self.moves, 1)
        sims = self.simulations / self.counted if self.engine and self.counted else None
        depth = self.depth / self.counted if self.depth is not None and self.counted else None
        return PlayerStats(self.moves, self.seconds / moves, sims, depth_per_move=depth)


def play_engine_arena(env: Env, player_a: SearchPlayer | Player | HostPlayer,
                      player_b: SearchPlayer | Player | HostPlayer, *, key: jax.Array,
                      num_games: int, max_steps: int | None = None, opening_plies: int = 0,
                      progress: Callable[[int, int], None] | None = None,
                      equal_time: bool = False,
                      on_ply: Callable[[np.ndarray, np.ndarray, Any], None] | None = None
                      ) -> tuple[ArenaResult, PlayerStats, PlayerStats]:
    """Plays `num_games` games of A against B, one ply at a time from the host.

    The games, colours, openings and keys are `run_arena`'s on one device (A moves first in
    the first ``ceil(num_games / 2)`` games). Engine players start fresh (`reset`), host
    players too (`HostPlayer.start`). A game a host player forfeits (action -1) counts as
    its loss, and among its illegal moves (`ArenaResult.illegal_moves_*`).

    Args:
      env: the game.
      player_a, player_b: `SearchPlayer`s (a clock, kept trees), plain players or
        `HostPlayer`s (external engines, asked game by game).
      key: the arena's PRNG key.
      num_games: B.
      max_steps: the ply limit (default `default_max_steps`); games still running are draws.
      opening_plies: random paired opening plies (`run_arena`).
      progress: called as `progress(finished_games, plies)` after every ply.
      equal_time: A (a `SearchPlayer`) thinks, on each ply, as long as B took on that ply
        (B moves first in each ply; on a ply where B has no game to move, A keeps the last
        time): equal time against an opponent of fixed depth or count, whatever the machine.
        Against a `HostPlayer`, which thinks game by game, it is equal time per game move:
        A's one search on a ply gets B's mean time per move on that ply times the games it
        searches (the whole batch, or the games it is to move in for a player that searches
        subsets), as much for each game as B took for each of its moves; on a ply where B
        only played hops it already knew, A keeps the last time.
      on_ply: called after every ply as `on_ply(actions int32 [B], moved bool [B], states)`:
        the actions played, the games that were live before the ply (the others' actions mean
        nothing) and the states after it; a forfeit's action is -1
        (`azjax.evaluation.arena_pdn.ArenaGames` writes the games down).

    Returns:
      (A's `ArenaResult`, A's `PlayerStats`, B's `PlayerStats`).
    """
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if equal_time and not (isinstance(player_a, SearchPlayer) and player_a.movetime):
        raise ValueError("equal time needs player A to be a SearchPlayer on a clock")
    max_steps = default_max_steps(env) if max_steps is None else max_steps
    states, a_id, opening = _start(key, env, num_games, opening_plies)
    sides = _Side(player_a), _Side(player_b)
    for side in sides:
        if side.engine:
            side.player.reset()
        elif side.host:
            side.player.start(num_games)
    no_moves = jnp.zeros((num_games,), jnp.int32)
    totals = jnp.zeros((num_games, 2), jnp.float32)
    bad_a = bad_b = jnp.int32(0)
    settle = _settle(env)
    for t in range(max_steps):
        a_turn, b_turn = (np.asarray(x) for x in turns(states, a_id))
        if not (a_turn.any() or b_turn.any()):
            break
        key_a, key_b = ply_keys(key, num_games, jnp.int32(t))
        thinking = t >= opening_plies
        act_b = sides[1].move(key_b, states, b_turn) if b_turn.any() and thinking else no_moves
        if equal_time and a_turn.any() and b_turn.any() and thinking:  # B's time, this ply
            # A host player's time is per game: A gets it for each game it searches.
            per_batch = sides[0].searched_games(a_turn) if sides[1].host else 1
            player_a.movetime = max(sides[1].last_seconds * per_batch, 1e-3)
        act_a = sides[0].move(key_a, states, a_turn) if a_turn.any() and thinking else no_moves
        states, action, bad_a, bad_b = settle(states, jnp.int32(t), a_id, act_a, act_b,
                                              opening, bad_a, bad_b)
        totals = totals + states.rewards
        for side in sides:
            side.played(action)
        if on_ply is not None:
            on_ply(np.asarray(action), a_turn | b_turn, states)
        if progress is not None:
            progress(num_games - int(np.sum(np.asarray(turns(states, a_id)).any(axis=0))),
                     t + 1)
    a_returns = jnp.take_along_axis(totals, a_id[:, None], axis=1)[:, 0]
    result = ArenaResult.from_outcomes(a_returns, bad_a, bad_b)
    return result, sides[0].stats(), sides[1].stats()


def _subset_size(count: int, total: int) -> int:
    """The batch that holds `count` of `total` games: `total` halved (rounded up) as often as
    `count` still fits, so that a match needs only a few batch sizes."""
    size = total
    while size > 1 and -(-size // 2) >= count:
        size = -(-size // 2)
    return size


_arena_start_jit = jax.jit(arena_start, static_argnums=(1, 2, 4, 5))


def _start(key: jax.Array, env: Env, num_games: int, opening_plies: int):
    """The arena's starts, colours and opening (`arena_start`), compiled once per shape."""
    return _arena_start_jit(key, env, num_games, 0, num_games, opening_plies, None)


@functools.cache
def _settle(env: Env) -> Callable:
    """`settle_ply` for `env`, compiled once per game (its arenas share it)."""

    def settle(states, t, a_id, act_a, act_b, opening, bad_a, bad_b):
        return settle_ply(env, states, t, a_id, act_a, act_b, opening, bad_a, bad_b)

    return jax.jit(settle)
