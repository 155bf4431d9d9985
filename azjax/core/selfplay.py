"""Lockstep self-play: B games advance together inside one `lax.scan`; finished games reset.

Each scan step runs one batched search, picks moves (random opening moves, then the search's
sampled move for the first `temperature_moves` plies, then the greedy one), records the
position, steps every game and resets the finished ones in place.

A game still running when a chunk ends carries over: the chunk's step records are kept in the
carry, and a position is emitted (with its value target) in the chunk in which its game ends —
never dropped, never twice. That needs `chunk_length >= max_game_length`, which the
config resolution enforces (games reaching `max_game_length` are truncated: no value target).

With `selfplay.tree_reuse` the searches run on a `SearchEngine` and each game's tree is kept
from one step to the next inside the chunk's scan: after the moves are played the subtree under
each game's move becomes its next root (`SearchEngine.advance` / `start(kept=...)`). A chunk
starts every game's search afresh, so the state between chunks holds no tree.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct

from azjax.config import SelfPlayConfig
from azjax.core.search_engine import SearchEngine
from azjax.core.selfplay_search import (
    no_kept_trees,
    search_games,
    search_kept,
    search_with_playout_cap,
)
from azjax.core.targets import StepRecord, emit_positions
from azjax.core.types import Positions
from azjax.envs.core import Env

__all__ = ["SelfPlayFn", "SelfPlayState", "SelfPlayStats", "init_selfplay", "make_selfplay",
           "resolve_lengths", "sum_device_stats"]


@struct.dataclass
class SelfPlayState:
    """The carry between chunks: B running games and the last chunk's T step records."""

    games: Any  # env State [B]
    opening_moves: jax.Array  # int32 [B]: random moves the current game opens with
    previous: StepRecord  # [T, B]: the last chunk's records
    previous_emitted: jax.Array  # bool [T, B]: which of them were already emitted


def _stat(combine: str) -> Any:
    """A `SelfPlayStats` field and how the devices' values of it make the batch's (`combine`:
    "sum", "mean", or "per_game": a mean weighted by each device's finished games)."""
    return struct.field(metadata={"combine": combine})


@struct.dataclass
class SelfPlayStats:
    """One chunk's counts over its B games (scalars; per device [D] inside a mesh).

    Each field is logged as `selfplay/<name>`; its metadata says how devices combine it
    (`sum_device_stats`). A new self-play metric is a field here and its value in
    `_chunk_stats`.
    """

    games_finished: jax.Array = _stat("sum")  # int32 []
    first_player_wins: jax.Array = _stat("sum")  # int32 []
    second_player_wins: jax.Array = _stat("sum")  # int32 []
    draws: jax.Array = _stat("sum")  # int32 [] (truncated games count as draws here)
    # float32 []: steps played / games finished (steady state)
    mean_game_length: jax.Array = _stat("per_game")
    mean_root_value: jax.Array = _stat("mean")  # float32 [], search value at the root
    # int32 []: network evaluations of the chunk's searches, each 1 at the root + 1 per
    # simulation (the root's visits), fast searches (`fast_simulations`) included
    network_evaluations: jax.Array = _stat("sum")
    # float32 []: root visits a kept tree brought to a search, per search (`tree_reuse`; 0
    # without it)
    mean_kept_visits: jax.Array = _stat("mean")


def sum_device_stats(stats: SelfPlayStats) -> SelfPlayStats:
    """The whole batch's stats from the devices' ([D] per field), each field combined as its
    metadata says: counts summed, per-game means re-weighted by each device's finished games,
    other means averaged."""
    chex.assert_rank(stats.games_finished, 1)
    finished = jnp.maximum(jnp.sum(stats.games_finished), 1).astype(jnp.float32)
    combine = {
        "sum": jnp.sum,
        "mean": jnp.mean,
        "per_game": lambda x: jnp.sum(x * jnp.maximum(stats.games_finished, 1)) / finished,
    }
    return stats.replace(**{f.name: combine[f.metadata["combine"]](getattr(stats, f.name))
                            for f in dataclasses.fields(stats)})


# selfplay(variables, key, state, first_game=0) -> (state, positions [B * 2T], emit bool
# [B * 2T], stats): `make_selfplay`'s function
SelfPlayFn = Callable[..., tuple[SelfPlayState, Positions, jax.Array, SelfPlayStats]]


def resolve_lengths(env: Env, config: SelfPlayConfig) -> tuple[int, int]:
    """(chunk_length, max_game_length) with the config's zeros replaced by the game's bound.

    Args:
      env: the game (its `max_game_length`, 0 when unknown); config: self-play settings.

    Returns:
      (T, L): steps per chunk and plies after which a game is truncated, T >= L.

    Raises:
      ValueError: if no bound is known or the chunk is shorter than the longest game.
    """
    max_length = config.max_game_length or env.max_game_length
    if max_length <= 0:
        raise ValueError(f"{env.name} has no known game-length bound: set "
                         "selfplay.max_game_length")
    chunk = config.chunk_length or max_length
    if chunk < max_length:
        raise ValueError(f"selfplay.chunk_length ({chunk}) must be >= max_game_length "
                         f"({max_length}) so that unfinished games carry over exactly")
    return chunk, max_length


def _select_games(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-game select for batched pytrees: pred bool [B]."""

    def pick(t, f):
        return jnp.where(pred.reshape(pred.shape + (1,) * (t.ndim - 1)), t, f)

    return jax.tree.map(pick, on_true, on_false)


def _sample_opening(key: chex.PRNGKey, config: SelfPlayConfig) -> jax.Array:
    """int32 []: 0 random moves, or (with random_opening_prob) 1..random_opening_max_moves."""
    k_use, k_len = jax.random.split(key)
    use = jax.random.uniform(k_use) < config.random_opening_prob
    length = jax.random.randint(k_len, (), 1, max(config.random_opening_max_moves, 1) + 1)
    return jnp.where(use, length, 0).astype(jnp.int32)


def _fresh_games(env: Env, config: SelfPlayConfig, k_init: jax.Array,
                 k_open: jax.Array) -> tuple[Any, jax.Array]:
    """New games (env states [B]) and their random opening moves (int32 [B]), from per-game
    keys [B]: the initial position, or with `random_start_prob` the game's own random start
    (`env.random_start`), which opens with no random moves."""
    games = jax.vmap(env.init)(k_init)
    opening = jax.vmap(_sample_opening, in_axes=(0, None))(k_open, config)
    if config.random_start_prob > 0:
        k_use, k_start = (jax.vmap(jax.random.fold_in, in_axes=(0, None))(k_init, i)
                          for i in (1, 2))
        use = jax.vmap(jax.random.uniform)(k_use) < config.random_start_prob
        games = _select_games(use, jax.vmap(env.random_start)(k_start), games)
        opening = jnp.where(use, 0, opening)
    return games, opening


def _check_random_start(env: Env, config: SelfPlayConfig) -> None:
    """Raises ValueError when `random_start_prob` is set for a game with no random starts."""
    if config.random_start_prob > 0 and not env.supports("random_start"):
        raise ValueError(f"selfplay.random_start_prob is {config.random_start_prob}, but "
                         f"{env.name} has no random start positions (Env.random_start)")


def _empty_records(env: Env, length: int, batch: int, material: bool) -> StepRecord:
    return StepRecord(
        observation=jnp.zeros((length, batch, *env.observation_shape), jnp.float32),
        policy=jnp.zeros((length, batch, env.num_actions), jnp.float32),
        search_value=jnp.zeros((length, batch), jnp.float32),
        player=jnp.zeros((length, batch), jnp.int32),
        in_opening=jnp.zeros((length, batch), jnp.bool_),
        rewards=jnp.zeros((length, batch, 2), jnp.float32),
        done=jnp.zeros((length, batch), jnp.bool_),
        truncated=jnp.zeros((length, batch), jnp.bool_),
        valid=jnp.zeros((length, batch), jnp.bool_),
        material=jnp.zeros((length, batch, 2), jnp.float32) if material else None,
    )


def init_selfplay(env: Env, config: SelfPlayConfig, key: chex.PRNGKey, *,
                  material: bool = False) -> SelfPlayState:
    """Fresh games and an empty record of the previous chunk.

    Args:
      env: the game; config: self-play settings (B = `batch_size`, T the resolved chunk).
      key: PRNG key for the games' starts and random openings.
      material: whether the records carry both players' material (a run with a material head).

    Returns:
      A `SelfPlayState`: games env states [B], opening_moves int32 [B], previous a
      `StepRecord` [T, B] of invalid records, previous_emitted bool [T, B] all False.
    """
    chunk, _ = resolve_lengths(env, config)
    _check_random_start(env, config)
    k_init, k_open = jax.random.split(key)
    games, opening = _fresh_games(env, config, jax.random.split(k_init, config.batch_size),
                                  jax.random.split(k_open, config.batch_size))
    return SelfPlayState(
        games=games,
        opening_moves=opening,
        previous=_empty_records(env, chunk, config.batch_size, material),
        previous_emitted=jnp.zeros((chunk, config.batch_size), jnp.bool_),
    )


def make_selfplay(env: Env, search_fn: Callable[..., Any], config: SelfPlayConfig, *,
                  engine: SearchEngine | None = None,
                  adjudicate: Callable[[Any], Any] | None = None) -> SelfPlayFn:
    """Self-play of `config.batch_size` lockstep games, one chunk of T steps per call.

    With `config.per_game_randomness`, every random draw of game b at step t comes from
    `fold_in(key_t, first_game + b)`: a device that plays games [first_game, first_game + B) of
    a larger batch plays them exactly as the whole batch on one device would, and its positions
    are that batch's, in the same order. Otherwise one key per step serves the whole batch
    (`first_game` is ignored).

    A state from `init_selfplay(..., material=True)` also records both players' material after
    every step (`Env.material`), and the positions carry their game's final material difference
    (`Positions.material`); the state's pytree structure decides, so it is fixed at trace time.
    Args:
      env: the game (its states batched [B]).
      search_fn: `azjax.core.search.make_search(...)`'s function.
      config: self-play settings; B = `batch_size`, T = the resolved `chunk_length`.
      engine: the same search in steps (`azjax.core.search.make_search_engine`), which
        `config.tree_reuse` searches with instead of `search_fn`; needed only then.
      adjudicate: the search's endgame table (`azjax.core.endgames.endgame_adjudicator`):
        a game that reaches a position it knows ends there with the table's exact result, the
        game perfect play would finish, so no self-play is spent playing the table's endings.

    Returns:
      `selfplay(variables, key, state, first_game=0) -> (state, positions, emit, stats)`,
      pure
      (jit it): `state` a `SelfPlayState` from `init_selfplay`; positions `Positions`
      [B * 2T], game by game (each game's window of the previous and this chunk); emit bool
      [B * 2T], the positions whose game ended in this chunk and that were not emitted before;
      stats the chunk's `SelfPlayStats`.

    Raises:
      ValueError: as `resolve_lengths`, for a random start the game does not have, or for
        `tree_reuse` without an engine or with `per_game_randomness`.
    """
    chunk, max_length = resolve_lengths(env, config)
    _check_random_start(env, config)
    if config.tree_reuse and (engine is None or config.per_game_randomness):
        raise ValueError("selfplay.tree_reuse needs a SearchEngine (make_selfplay(..., "
                         "engine=...)) and per_game_randomness off")
    return functools.partial(_play_chunk, _ChunkSetup(env, search_fn, config, chunk, max_length,
                                                      engine if config.tree_reuse else None,
                                                      adjudicate))


@dataclasses.dataclass(frozen=True)
class _ChunkSetup:
    """What a self-play chunk is played with, fixed when `make_selfplay` is called."""

    env: Env
    search_fn: Callable[..., Any]
    config: SelfPlayConfig
    chunk: int  # T: steps per chunk
    max_length: int  # plies after which a game is truncated
    engine: SearchEngine | None = None  # searches with kept trees (`tree_reuse`) when set
    adjudicate: Callable[[Any], Any] | None = None  # ends the games the endgame table knows


def _play_chunk(setup: _ChunkSetup, variables: Any, key: chex.PRNGKey, state: SelfPlayState,
                first_game: jax.Array | int = 0):
    """`make_selfplay`'s function: T lockstep steps in a `lax.scan`, then the positions whose
    games ended, each once, and the chunk's stats."""
    keys = jax.random.split(key, setup.chunk)
    first_game = jnp.asarray(first_game, jnp.uint32)
    material = state.previous.material is not None
    kept = (None if setup.engine is None
            else no_kept_trees(setup.engine, variables, key, state.games))
    (games, opening, _), (records, root_values, evaluations, kept_visits) = jax.lax.scan(
        lambda carry, k: _play_step(setup, variables, carry, k, first_game, material),
        (state.games, state.opening_moves, kept), keys)
    positions, emit, emitted_now = emit_positions(
        state.previous, state.previous_emitted, records, setup.config.search_value_weight)
    window = 2 * setup.chunk * setup.config.batch_size
    chex.assert_shape(emit, (window,))
    chex.assert_shape(positions.value, (window,))
    chex.assert_shape(positions.observation, (window, *setup.env.observation_shape))
    chex.assert_shape(positions.policy, (window, setup.env.num_actions))
    new_state = SelfPlayState(games=games, opening_moves=opening, previous=records,
                              previous_emitted=emitted_now)
    return new_state, positions, emit, _chunk_stats(records, root_values, evaluations,
                                                    kept_visits)


def _chunk_stats(records: StepRecord, root_values: jax.Array, evaluations: jax.Array,
                 kept_visits: jax.Array) -> SelfPlayStats:
    """The chunk's counts from its records [T, B], root values float32 [T, B], network
    evaluations int32 [T] and the root visits kept trees brought, int32 [T, B]."""
    chex.assert_equal_shape([records.done, root_values])
    chunk, batch = records.done.shape
    finished = records.done
    rewards0 = records.rewards[..., 0]
    num_finished = jnp.sum(finished)
    return SelfPlayStats(
        games_finished=num_finished.astype(jnp.int32),
        first_player_wins=jnp.sum(finished & (rewards0 > 0)).astype(jnp.int32),
        second_player_wins=jnp.sum(finished & (rewards0 < 0)).astype(jnp.int32),
        draws=jnp.sum(finished & (rewards0 == 0)).astype(jnp.int32),
        mean_game_length=(chunk * batch) / jnp.maximum(num_finished, 1).astype(jnp.float32),
        mean_root_value=jnp.mean(root_values),
        network_evaluations=jnp.sum(evaluations, dtype=jnp.int32),
        mean_kept_visits=jnp.mean(kept_visits.astype(jnp.float32)),
    )


def _play_step(setup: _ChunkSetup, variables: Any, carry: tuple[Any, jax.Array, Any],
               key: chex.PRNGKey, first_game: jax.Array, material: bool):
    """One lockstep step of the B games: search, pick the moves, play them, record, reset the
    finished games. carry: (env states [B], opening moves int32 [B], the kept trees: a
    `SearchState` [B] with `tree_reuse`, else None); material: whether the records carry both
    players' material; returns the new carry and (the step's `StepRecord` [B], the search's
    root values float32 [B], its network evaluations int32 [], the root visits kept trees
    brought int32 [B])."""
    env, config = setup.env, setup.config
    games, opening, kept = carry
    per_game = config.per_game_randomness
    k_search, k_random, k_init, k_open = _step_keys(key, first_game, config.batch_size,
                                                    per_game)
    if setup.engine is None:
        search = functools.partial(search_games, setup.search_fn, variables, k_search, games,
                                   per_game)
    else:
        search = functools.partial(search_kept, setup.engine, variables, k_search, games, kept)
    out, searched, policy_target = search_with_playout_cap(search, key, config)
    random_action = _random_moves(k_random, games.legal_action_mask, per_game)
    greedy = jnp.argmax(out.policy, axis=-1).astype(jnp.int32)
    action = jnp.where(games.step_count < config.temperature_moves, out.action, greedy)
    in_opening = games.step_count < opening
    action = jnp.where(in_opening, random_action, action)

    stepped = jax.vmap(env.step)(games, action)
    if setup.adjudicate is not None:
        stepped = jax.vmap(setup.adjudicate)(stepped)
    truncated = (stepped.step_count >= setup.max_length) & ~stepped.terminated
    done = stepped.terminated | stepped.truncated | truncated
    record = StepRecord(
        observation=jax.vmap(env.observe)(games),
        policy=policy_target,
        search_value=out.value,
        player=games.current_player,
        in_opening=in_opening,
        rewards=stepped.rewards,
        done=done,
        truncated=truncated | stepped.truncated,
        valid=jnp.ones((config.batch_size,), jnp.bool_),
        material=jax.vmap(env.material)(stepped) if material else None,
    )
    fresh, new_opening = _fresh_games(env, config, k_init, k_open)
    games = _select_games(done, fresh, stepped)
    opening = jnp.where(done, new_opening, opening)
    # Each search evaluates its root once and once per simulation; every simulation visits
    # one of the root's children, so the visits count the simulations (full or fast), but
    # a kept root's visits include earlier searches': the engine counts its own.
    if setup.engine is None:
        simulations = jnp.sum(out.visit_counts, dtype=jnp.int32)
        kept_visits = jnp.zeros((config.batch_size,), jnp.int32)
    else:
        simulations = jnp.sum(setup.engine.simulations_done(searched), dtype=jnp.int32)
        kept_visits = setup.engine.kept_visits(searched)
        # A finished game's kept tree is for a position no game stands at: `start` sees
        # that its root is not the new game's and searches afresh.
        kept = setup.engine.advance(searched, action)
    evaluations = config.batch_size + simulations
    return (games, opening, kept), (record, out.value, evaluations, kept_visits)


def _step_keys(key: chex.PRNGKey, first_game: jax.Array, batch: int, per_game: bool):
    """A step's keys (search, random moves, new games' init, new games' openings): with
    `per_game`, each [B, 2] from game b's `fold_in(key, first_game + b)`; else the search's and
    the random moves' one key [2] for the batch, the new games' [B, 2]."""
    if per_game:  # game b's keys: fold_in(key, first_game + b)
        game_ids = first_game + jnp.arange(batch, dtype=jnp.uint32)
        game_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, game_ids)
        k_search, k_random, k_init, k_open = jnp.moveaxis(
            jax.vmap(lambda k: jax.random.split(k, 4))(game_keys), 1, 0)
        return k_search, k_random, k_init, k_open
    # One key per step for the whole batch (faster: one batched search).
    k_search, k_random, k_init, k_open = jax.random.split(key, 4)
    return k_search, k_random, jax.random.split(k_init, batch), jax.random.split(k_open, batch)


def _random_moves(k_random: jax.Array, legal_action_mask: jax.Array,
                  per_game: bool) -> jax.Array:
    """int32 [B]: a uniformly random legal move per game, from keys [B, 2] (`per_game`) or
    one key [2]; legal_action_mask bool [B, A]."""
    logits = jnp.where(legal_action_mask, 0.0, -jnp.inf)
    if per_game:
        return jax.vmap(jax.random.categorical)(k_random, logits).astype(jnp.int32)
    return jax.random.categorical(k_random, logits).astype(jnp.int32)
