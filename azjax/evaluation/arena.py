"""Arenas: two players over a batch of games in lockstep, inside one jitted `lax.while_loop`.

A player is ``act(key, states[B]) -> int32[B]`` (see `azjax.evaluation.baselines`). With
several local devices (GPUs, or `XLA_FLAGS=--xla_force_host_platform_device_count=N` on a
CPU), `play_arena` splits the games over them (`jax.shard_map`, no communication while the
games run). `run_arena` is the one arena loop; `arena_metrics` and `wdl_summary` are the one
way its results become metrics and lines.
Shape legend: B batch (here: games), A actions, D devices.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec
from numpy.typing import ArrayLike

from azjax.core.hashing import derive_key, hash_choice, hash_seeds
from azjax.core.layout import AXIS, make_mesh
from azjax.envs.core import Env, GameState
from azjax.evaluation.baselines import Player

__all__ = ["PAIRED_OPENING_PLIES", "ArenaResult", "arena_devices", "arena_metrics",
           "arena_split_note", "arena_start", "default_max_steps", "elo_difference",
           "play_arena", "ply_keys", "run_arena", "settle_ply", "turns", "wdl_summary"]


@dataclasses.dataclass(frozen=True)
class ArenaResult:
    """The games' outcomes from player A's point of view.

    Games still running after ``max_steps`` plies count as draws. ``illegal_moves_*`` count the
    illegal actions each player returned for a live game it had to move in (each one lost that
    game for the player: the env's rule).
    """

    wins: int
    draws: int
    losses: int
    illegal_moves_a: int = 0
    illegal_moves_b: int = 0

    @classmethod
    def from_outcomes(
        cls, a_returns: ArrayLike, illegal_moves_a: ArrayLike = 0, illegal_moves_b: ArrayLike = 0
    ) -> ArenaResult:
        """Counts from `run_arena`'s outputs: A's total reward per game [B], illegal moves
        (a count, or one count per device of a split arena)."""
        a_returns = np.asarray(a_returns)
        chex.assert_rank(a_returns, 1)
        return cls(
            wins=int(np.sum(a_returns > 0)),
            draws=int(np.sum(a_returns == 0)),
            losses=int(np.sum(a_returns < 0)),
            illegal_moves_a=int(np.sum(illegal_moves_a)),
            illegal_moves_b=int(np.sum(illegal_moves_b)),
        )

    @property
    def num_games(self) -> int:
        """wins + draws + losses."""
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games, in [0, 1]."""
        return (self.wins + 0.5 * self.draws) / max(self.num_games, 1)

    def counts(self) -> dict[str, int | float]:
        """{"wins", "draws", "losses": ints, "score": float in [0, 1]}: the record every
        report of an arena keeps (`arena_metrics`, the ladder's matches)."""
        return {"wins": self.wins, "draws": self.draws, "losses": self.losses,
                "score": self.score}

    def __str__(self) -> str:
        return (
            f"+{self.wins} ={self.draws} -{self.losses} "
            f"(score {self.score:.3f} over {self.num_games} games)"
        )


def elo_difference(score: float) -> float:
    """The Elo gap a score in [0, 1] implies: ``-400 log10(1/score - 1)`` (+-inf at 1 / 0)."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"a score lies in [0, 1], got {score}")
    if score == 0.0:
        return -math.inf
    if score == 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def default_max_steps(env: Env) -> int:
    """An arena's ply limit when its caller names none: the game's longest game, else 10,000."""
    return getattr(env, "max_game_length", 0) or 10_000


def run_arena(
    key: jax.Array,
    *,
    env: Env,
    player_a: Player,
    player_b: Player,
    num_games: int,
    max_steps: int | jax.Array | None = None,
    first_game: int | jax.Array = 0,
    total_games: int | None = None,
    player_key: jax.Array | None = None,
    opening_plies: int = 0,
    opening_seed: jax.Array | None = None,
    progress: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plays B = num_games games of A against B in lockstep: a pure, traceable function.

    The one arena every caller plays: call it inside your own jit (players may close over
    traced params, as the training evaluator and the ladder do) or use `play_arena`.
    A is player 0 (moves first) in the first ``ceil(total_games / 2)`` games and player 1 in
    the rest. Each ply calls each player on the whole batch, when any live game has it to move,
    and keeps the action of the player to move in each game; finished games stay finished.

    max_steps: the ply limit (default `default_max_steps`); games still running count as draws.

    first_game, total_games: this batch is games ``[first_game, first_game + B)`` of an arena of
    `total_games` (default B); a game's index fixes its colours and its start, so the blocks of
    a split arena together hold the whole arena's games. player_key: the root of the players'
    keys (default `key`).

    opening_plies (static): the first plies of every game are uniformly random legal moves, the
    same in the two games of a pair (i and i + ceil(total / 2), colours swapped), drawn from
    uint32 `opening_seed` [] (default: derived from `key`). Without them two deterministic
    players (greedy search) replay one game per colour however many are asked for.

    progress (static): after each ply, tell the host how many of this batch's games are still
    live (`jax.debug.callback`), for `play_arena`'s `progress` report. Off, the program has no
    host callback (and stays in the persistent compilation cache).

    Returns:
      (A's total reward per game float32 [B], illegal moves by A int32 [], by B int32 []);
      `ArenaResult.from_outcomes` turns them into counts.
    """
    total = num_games if total_games is None else total_games
    max_steps = default_max_steps(env) if max_steps is None else max_steps
    player_key = key if player_key is None else player_key
    states, a_id, opening = arena_start(key, env, num_games, first_game, total, opening_plies,
                                        opening_seed)

    def cond(carry):
        t, states, *_ = carry
        return (t < max_steps) & jnp.any(_live(states))

    body = functools.partial(_arena_ply, env, player_a, player_b, player_key, total, a_id,
                             opening, first_game if progress else None)
    totals = jnp.zeros((num_games, 2), jnp.float32)
    carry = (jnp.int32(0), states, totals, jnp.int32(0), jnp.int32(0))
    _, _, totals, bad_a, bad_b = jax.lax.while_loop(cond, body, carry)
    a_returns = jnp.take_along_axis(totals, a_id[:, None], axis=1)[:, 0]
    return a_returns, bad_a, bad_b


def arena_start(key: jax.Array, env: Env, num_games: int, first_game: int | jax.Array,
                total: int, opening_plies: int, opening_seed: jax.Array | None
                ) -> tuple[GameState, jax.Array, tuple | None]:
    """An arena's starting positions [B], A's player id per game int32 [B] and its opening
    (plies, uint32 seed [], pair ids uint32 [B]) or None (see `run_arena`'s arguments)."""
    game_ids = first_game + jnp.arange(num_games)
    # Keys derived by hashing, not threefry: ~0.5 s less XLA compile time per arena here.
    states = jax.vmap(env.init)(jax.vmap(derive_key, (None, 0))(key, game_ids))
    chex.assert_shape(states.legal_action_mask, (num_games, env.num_actions))
    a_id = jnp.where(game_ids < (total + 1) // 2, 0, 1).astype(jnp.int32)
    opening = None
    if opening_plies:
        # Paired openings: game i and game i + ceil(total / 2), where the colours are swapped,
        # draw the same random moves: (seed, pair, ply) picks each one.
        if opening_seed is None:
            opening_seed = hash_seeds(derive_key(key, jnp.uint32(0xFFFFFFFE)), 1)[0]
        chex.assert_shape(opening_seed, ())
        pairs = (game_ids % max((total + 1) // 2, 1)).astype(jnp.uint32) * jnp.uint32(4099)
        opening = (opening_plies, opening_seed, pairs)
    return states, a_id, opening


def ply_keys(player_key: jax.Array, total: int, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Player A's and player B's keys for ply `t` of an arena of `total` games."""
    return derive_key(player_key, total + 2 * t), derive_key(player_key, total + 2 * t + 1)


def turns(states: GameState, a_id: jax.Array) -> tuple[jax.Array, jax.Array]:
    """bool [B] each: the live games where A is to move, and those where B is."""
    live = _live(states)
    return live & (states.current_player == a_id), live & (states.current_player != a_id)


def settle_ply(env: Env, states: GameState, t: jax.Array, a_id: jax.Array, act_a: jax.Array,
               act_b: jax.Array, opening: tuple | None, bad_a: jax.Array, bad_b: jax.Array
               ) -> tuple[GameState, jax.Array, jax.Array, jax.Array]:
    """Plays ply `t`: each game's mover's action (A's `act_a` [B] or B's `act_b` [B]; the
    opening's random move in the opening's plies), counting illegal ones.

    Returns:
      (the states after the ply [B], the actions played int32 [B], illegal moves by A so far,
      by B so far).
    """
    a_turn, b_turn = turns(states, a_id)
    action = jnp.where(a_turn, act_a, act_b)
    if opening:
        plies, seed, pairs = opening
        random_move = jax.vmap(hash_choice, in_axes=(None, 0, 0))(
            seed, pairs + t.astype(jnp.uint32), states.legal_action_mask)
        action = jnp.where(t < plies, random_move, action)
    safe = jnp.clip(action, 0, env.num_actions - 1)
    legal = (action == safe) & jnp.take_along_axis(
        states.legal_action_mask, safe[:, None], axis=1
    )[:, 0]
    bad_a = bad_a + jnp.sum(a_turn & ~legal, dtype=jnp.int32)
    bad_b = bad_b + jnp.sum(b_turn & ~legal, dtype=jnp.int32)
    states = jax.vmap(env.step)(states, action)  # a finished game stays finished
    return states, action, bad_a, bad_b


def _live(states: GameState) -> jax.Array:
    """bool [B]: the games still running."""
    return ~(states.terminated | states.truncated)


def _arena_ply(env: Env, player_a: Player, player_b: Player, player_key: jax.Array, total: int,
               a_id: jax.Array, opening: tuple | None, progress_block: Any, carry: tuple):
    """One ply of every game of `run_arena`: carry (ply, states, totals [B, 2], illegal moves
    by A, by B) -> the same after it. `opening` is (plies, seed, pair ids) or None; a
    `progress_block` (the batch's first game) reports to the host after the ply."""
    t, states, totals, bad_a, bad_b = carry
    no_moves = jnp.zeros_like(a_id)
    key_a, key_b = ply_keys(player_key, total, t)
    a_turn, b_turn = turns(states, a_id)
    in_opening = t < (opening[0] if opening else 0)  # the games run in lockstep: the same for all
    # Call a player only when some game needs it (e.g. not at all once its games end).
    act_a = jax.lax.cond(
        jnp.any(a_turn) & ~in_opening,
        lambda: player_a(key_a, states).astype(jnp.int32),
        lambda: no_moves,
    )
    act_b = jax.lax.cond(
        jnp.any(b_turn) & ~in_opening,
        lambda: player_b(key_b, states).astype(jnp.int32),
        lambda: no_moves,
    )
    chex.assert_shape([act_a, act_b], a_id.shape)  # a player returns one move per game
    states, _, bad_a, bad_b = settle_ply(env, states, t, a_id, act_a, act_b, opening, bad_a,
                                         bad_b)
    if progress_block is not None:
        jax.debug.callback(_arena_tick, jnp.asarray(progress_block, jnp.int32),
                           jnp.sum(_live(states), dtype=jnp.int32), t + 1)
    return t + 1, states, totals + states.rewards, bad_a, bad_b


def arena_metrics(name: str, result: ArenaResult) -> dict[str, int | float]:
    """An arena's result against opponent `name` as the run's metrics: ``eval/vs_<name>/``
    wins, draws, losses (ints) and score (float in [0, 1])."""
    return {f"eval/vs_{name}/{field}": value for field, value in result.counts().items()}


def wdl_summary(name: str, metrics: dict[str, Any]) -> str | None:
    """``vs <name> W/D/L w/d/l`` from `arena_metrics`' keys in `metrics`; None when that arena
    was not played."""
    if f"eval/vs_{name}/wins" not in metrics:
        return None
    return (f"vs {name} W/D/L {metrics[f'eval/vs_{name}/wins']}/"
            f"{metrics[f'eval/vs_{name}/draws']}/{metrics[f'eval/vs_{name}/losses']}")


# Random plies opening the paired games of an arena between two deterministic players (greedy
# search against greedy search): enough for many distinct games, too few to decide them.
PAIRED_OPENING_PLIES = 2

_run_arena_jit = jax.jit(run_arena, static_argnames=("env", "player_a", "player_b", "num_games",
                                                     "opening_plies", "progress"))

# The report of the arena `play_arena` is playing, if it was given one: the compiled loop calls
# the fixed `_arena_tick`, so a new report does not recompile the arena.
_ARENA_WATCHERS: list[Callable[[int, int, int], None]] = []


def _arena_tick(first_game: np.ndarray, live: np.ndarray, ply: np.ndarray) -> None:
    """Host side of `run_arena(progress=True)`: block `first_game` has `live` games after `ply`."""
    if _ARENA_WATCHERS:
        _ARENA_WATCHERS[-1](int(first_game), int(live), int(ply))


@functools.cache
def _split_arena_jit(env: Env, player_a: Player, player_b: Player, num_games: int,
                     devices: tuple, opening_plies: int = 0, progress: bool = False) -> Callable:
    """`run_arena` with its games split into D contiguous blocks, one per device.

    Device d plays games ``[d B/D, (d+1) B/D)``: the same starts and colours as on one device,
    but its players draw from their own key stream (the players number the games of their
    batch from 0, so one shared key would give every device's game i the same noise).
    Returns ``jit(key, max_steps) -> (returns [B], illegal moves by A [D], by B [D])``.
    """
    per_device = num_games // len(devices)

    def block(key, max_steps):
        device = jax.lax.axis_index(AXIS)
        returns, bad_a, bad_b = run_arena(
            key, env=env, player_a=player_a, player_b=player_b, num_games=per_device,
            max_steps=max_steps, first_game=device * per_device, total_games=num_games,
            # A counter range of its own: below it the games' starts, above it the openings' seed.
            player_key=derive_key(key, jnp.uint32(0x80000000) + device.astype(jnp.uint32)),
            opening_plies=opening_plies, progress=progress)
        return returns, bad_a[None], bad_b[None]

    split = jax.shard_map(block, mesh=make_mesh(list(devices)),
                          in_specs=(PartitionSpec(), PartitionSpec()),
                          out_specs=(PartitionSpec(AXIS),) * 3, check_vma=False)

    # The illegal-move counts stay per device [D] (summed by the caller): a sum in here would
    # be an all-reduce, where the devices that finished their games wait for the slowest.
    return jax.jit(split)


def arena_devices(num_games: int, devices: list | None = None) -> tuple:
    """The devices `play_arena` plays `num_games` on: all of `devices` (default: this process's)
    when there are several and they divide the games evenly, else only the first. Results
    repeat only on the same count (each device draws its own random numbers)."""
    devices = tuple(jax.local_devices() if devices is None else devices)
    return devices if len(devices) > 1 and num_games % len(devices) == 0 else devices[:1]


def arena_split_note(num_games: int, devices: list | None = None) -> str | None:
    """A line telling the user that `num_games` will not split over this process's devices
    (or `devices`) and run on one of them, D times slower; None when they split or there is
    only one device."""
    devices = tuple(jax.local_devices() if devices is None else devices)
    if len(devices) == 1 or len(arena_devices(num_games, list(devices))) > 1:
        return None
    return (f"note: {num_games} games do not divide over {len(devices)} devices, so one device "
            f"plays them all; a multiple of {len(devices)} splits them")


def play_arena(
    env: Env,
    player_a: Player,
    player_b: Player,
    *,
    key: jax.Array,
    num_games: int,
    max_steps: int | None = None,
    devices: list | None = None,
    opening_plies: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> ArenaResult:
    """Plays `num_games` games of A against B in lockstep and counts A's results.

    A moves first in the first ``ceil(num_games / 2)`` games and second in the rest. Each ply
    calls each player on the whole batch (when any live game has it to move) and keeps the
    action of the player to move in each game; finished games stay finished.

    opening_plies: random paired opening plies (`run_arena`); use them when both players are
    deterministic.

    devices: where to play (default: this process's devices). With D > 1 devices and
    `num_games` a multiple of D, each device plays a block of B / D games (`_split_arena_jit`):
    the same starts and colours, other random draws than on one device, so the count of
    devices is part of what makes a result repeatable. Otherwise one device plays them all.

    progress: called as `progress(finished_games, plies)` from the host after every ply while
    the games run (a 100-game draughts arena against MCTS-1000 runs for half an hour); it
    compiles the arena with a host callback, once, apart from the arena without it.

    Compiles once per (env, player_a, player_b, num_games, devices): reuse player objects
    (the `azjax.evaluation.baselines` factories are memoised) to reuse the compiled arena.

    Returns:
      A's `ArenaResult` (illegal moves summed over the devices).
    """
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if max_steps is None:
        max_steps = default_max_steps(env)
    devices = arena_devices(num_games, devices)
    if progress is not None:
        _ARENA_WATCHERS.append(_count_finished(progress, num_games, len(devices)))
    try:
        if len(devices) > 1:
            outcomes = _split_arena_jit(env, player_a, player_b, num_games, devices,
                                        opening_plies, progress is not None)(
                key, jnp.int32(max_steps))
        else:
            outcomes = _run_arena_jit(
                key,
                env=env,
                player_a=player_a,
                player_b=player_b,
                num_games=num_games,
                max_steps=jnp.int32(max_steps),
                opening_plies=opening_plies,
                progress=progress is not None,
            )
        return ArenaResult.from_outcomes(*outcomes)  # waits for the games (and their ticks)
    finally:
        if progress is not None:
            _ARENA_WATCHERS.pop()


def _count_finished(progress: Callable[[int, int], None], num_games: int,
                    num_blocks: int) -> Callable[[int, int, int], None]:
    """Adds up the blocks' live games (one block per device, ticking from their own threads)
    into `progress(finished_games, plies)`; a block not heard from yet has all its games live."""
    live_by_block: dict[int, int] = {}
    lock = threading.Lock()

    def tick(first_game: int, live: int, ply: int) -> None:
        with lock:
            live_by_block[first_game] = live
            unheard = num_blocks - len(live_by_block)
            finished = num_games - sum(live_by_block.values()) - unheard * num_games // num_blocks
            progress(finished, ply)

    return tick
