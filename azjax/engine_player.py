"""A search that plays like an engine: a clock per move, the tree kept between moves, and a
search that ends once its root is proven.

`EnginePlayer` drives the step-by-step search of `azjax.core.search.make_search_engine` from
the host for a batch of games: `move` starts a search (from the kept tree, when there is one),
runs its simulations in compiled chunks until the count or the time per move is spent, and
returns the moves; `played` moves every game's kept tree down the actions played, the
player's own and its opponent's, so that the next search starts from what this one learned.

With a time per move the whole batch shares one clock: every chunk searches every game, and
the search stops after the first chunk that ends past the deadline. Compiling is not thinking:
every compiled piece is compiled before the clock starts. Timed play is not repeatable (the
simulations a move reaches depend on the machine and its load); a fixed count is, bit for bit.

Shape legend: B games, A actions, N tree nodes.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.core import solver

__all__ = ["EnginePlayer", "Move", "SearchPlayer", "check_movetime", "now", "timed_capacity",
           "timed_chunk"]

# A timed search's tree holds at most this many nodes per game, and the trees of a batch at
# most `_TREE_BYTES` together; `timed_capacity` takes the smaller.
MAX_TIMED_NODES = 16_384
_TREE_BYTES = 1 << 30
_CHUNKS_PER_MOVE = 16  # a timed move runs about this many chunks: the overshoot is ~1/16


def timed_chunk(per_move: float) -> int:
    """The work per compiled call of a timed move expected to reach `per_move` (simulations
    or positions): a power of two near a sixteenth of it (at least 1), so that a move stops
    within about a sixteenth past its time and few chunk sizes are compiled."""
    return int(2 ** max(0, math.floor(math.log2(max(per_move / _CHUNKS_PER_MOVE, 1.0)))))


def now() -> float:
    """The clock players read by default: `time.perf_counter`'s seconds."""
    return time.perf_counter()


def timed_capacity(batch: int, node_bytes: int, *, max_nodes: int = MAX_TIMED_NODES) -> int:
    """Nodes per tree for a timed search of `batch` games whose node costs `node_bytes`.

    Returns:
      min(max_nodes, what 1 GiB holds for the batch), at least 2 (a root and one child).
    """
    fits = _TREE_BYTES // max(batch * node_bytes, 1)
    return int(max(2, min(max_nodes, fits)))


@dataclasses.dataclass(frozen=True)
class Move:
    """What one `EnginePlayer.move` played and how far it searched.

    Attributes:
      action: int32 [B], the moves.
      output: the search's `azjax.core.search.SearchOutput` (policy, value, visits) [B, ...].
      simulations: int [B], the simulations this move's search ran (kept visits not counted;
        fewer than asked when the root was proven or the tree was full).
      seconds: the wall seconds the search took (compiling excluded).
      proven: int [B], the root's proven result for the player to move (the engine's
        encoding, `azjax.core.search`), or None without the solver.
      depth: int [B], an alpha-beta search's deepest finished step, in whole moves (its
        `simulations` are the positions it searched); None for a tree search.
      line: int32 [B, P], an alpha-beta search's expected line of actions from the root, its
        move first, -1 after it ends (`azjax.core.alphabeta_line`); None for a tree search.
    """

    action: np.ndarray
    output: Any
    simulations: np.ndarray
    seconds: float
    proven: np.ndarray | None = None
    depth: np.ndarray | None = None
    line: np.ndarray | None = None


class SearchPlayer(abc.ABC):
    """A search over a batch of games that the host drives move by move, on a clock or not:
    the tree searches' `EnginePlayer`, alpha-beta's `azjax.alphabeta_player.AlphaBetaPlayer`.

    Attributes:
      movetime: seconds per move for the whole batch, or None for a fixed effort; an arena
        at equal time sets it before each move.
      searches_subsets: True for a player that keeps nothing between moves and searches each
        game on its own (only a seeded tie-break follows the game's place in the batch): an
        arena may then hand it just the games it is to move in, in a smaller batch.
    """

    movetime: float | None
    searches_subsets: bool = False

    @abc.abstractmethod
    def move(self, key: jax.Array, states: Any) -> Move:
        """Searches every game of `states` [B] and returns the moves (see `Move`)."""

    @abc.abstractmethod
    def played(self, actions: Any) -> None:
        """The moves `actions` [B] were played in every game: what the player keeps between
        moves (a tree) moves on."""

    @abc.abstractmethod
    def reset(self) -> None:
        """A new game begins: forget what was kept."""


def check_movetime(movetime: float | None) -> None:
    """Raises ValueError unless `movetime` is None or a positive, finite number of seconds."""
    if movetime is not None and not (math.isfinite(movetime) and movetime > 0):
        raise ValueError(f"movetime must be a positive number of seconds, got {movetime}")


# Ahead-of-time compiled programs, shared by the players of an engine:
# (engine, piece, batch, capacity, static arguments...) -> executable.
_PROGRAMS: dict[tuple, Any] = {}


def _node_bytes(states: Any, num_actions: int) -> int:
    """About what one tree node takes: its position and its edges' six numbers per action."""
    batch = int(states.current_player.shape[0])
    position = sum(x.nbytes for x in jax.tree.leaves(states)) // max(batch, 1)
    return int(position + 24 * num_actions + 32)


@functools.lru_cache(maxsize=64)
def _compiled_pieces(engine: Any) -> tuple[Callable, ...]:
    """The engine's jitted start, simulate, finish and advance (one set per engine, so every
    player of a model shares their compiled programs)."""
    start = jax.jit(engine.start, static_argnames=("capacity", "planned_simulations", "noise"))

    def simulate(variables: Any, state: Any, num_simulations: int) -> tuple[Any, jax.Array]:
        """The chunk, and whether every game's search is over (its plan run, its tree full
        or, with the solver, its root proven)."""
        state = engine.simulate(variables, state, num_simulations)
        capacity = state.tree.node_visits.shape[1]
        over = (state.simulations >= state.planned) | (state.next_node >= capacity)
        if engine.config.solver:
            over |= engine.root_proven(state) != solver.UNPROVEN
        return state, jnp.all(over)

    simulate = jax.jit(simulate, static_argnums=(2,), donate_argnums=(1,))
    finish = jax.jit(lambda state: (engine.finish(state), engine.simulations_done(state),
                                    engine.root_proven(state)))
    advance = jax.jit(engine.advance)
    return start, simulate, finish, advance


class EnginePlayer(SearchPlayer):
    """A greedy (or noisy) search over a batch of games, with the engine's options.

    Args:
      engine: `azjax.core.search.make_search_engine(env, apply_fn, search_config)`.
      variables: the network's variables (`{"params": params}`).
      num_simulations: simulations per move; with `movetime`, the simulations the first
        move's plan assumes (gumbel plans its sequential halving for a count) until a move has
        measured the speed.
      movetime: seconds per move for the whole batch, or None for a fixed count.
      keep_tree: start each search from the subtree of the last one under the moves played
        since (`played`).
      noise: root noise and sampled moves, as in self-play (default: the greedy move).
      capacity: nodes per tree (default: the count plus room for a kept tree, or
        `timed_capacity` with a clock).
      chunk: simulations per compiled call with a clock (default: about a sixteenth of what a
        move reaches, from the measured speed).
      clock: seconds since some start (default `now`, read at each move).
    """

    def __init__(self, engine: Any, variables: Any, *, num_simulations: int,
                 movetime: float | None = None, keep_tree: bool = False, noise: bool = False,
                 capacity: int | None = None, chunk: int | None = None,
                 clock: Callable[[], float] | None = None):
        if num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
        check_movetime(movetime)
        self.engine, self.variables = engine, variables
        self.num_simulations, self.movetime = int(num_simulations), movetime
        self.keep_tree, self.noise = keep_tree, noise
        self._capacity, self._chunk, self._given_clock = capacity, chunk, clock
        self._start, self._simulate, self._finish, self._advance = _compiled_pieces(engine)
        self._kept: Any = None  # the trees the next search starts from
        self._last: Any = None  # the last search's state, until `played` moves it on
        self._rate: float | None = None  # simulations per second per batch, measured

    # ---- moves ---------------------------------------------------------------------------

    def move(self, key: jax.Array, states: Any) -> Move:
        """Searches every game of `states` [B] and returns the moves (see `Move`)."""
        capacity = self.capacity(states)
        planned = self._planned(capacity)
        kept = self._kept if self.keep_tree else None
        chunk = self._chunk_size(planned)
        start, run, finish = self._programs(key, states, kept, capacity, planned, chunk)
        clock = self._given_clock or now
        began = clock()  # every program is compiled: from here on, thinking
        state = start(self.variables, key, states, kept=kept)
        while True:
            state, over = run(self.variables, state)
            if bool(over):  # every plan run (a fixed count ends here), tree full or proven
                break
            if self.movetime is not None and clock() - began >= self.movetime:
                break
        output, simulations, proven = jax.device_get(finish(state))
        seconds = clock() - began
        ran = int(np.max(simulations))
        if ran and seconds > 0:
            self._rate = ran / seconds
        self._last = state if self.keep_tree else None  # the trees `played` moves on
        return Move(np.asarray(output.action), output, np.asarray(simulations), seconds,
                    np.asarray(proven) if self.engine.config.solver else None)

    def _programs(self, key: jax.Array, states: Any, kept: Any, capacity: int, planned: int,
                  chunk: int) -> tuple[Callable, Callable, Callable]:
        """The compiled start, chunk of `chunk` simulations and finish for this move, compiled
        now, before the clock starts, when no player of this engine has compiled them yet."""
        batch = int(states.current_player.shape[0])
        name = (batch, capacity, planned, self.noise, jax.tree.structure(kept))
        start = self._aot(("start", *name), lambda: self._start.lower(
            self.variables, key, states, capacity=capacity, planned_simulations=planned,
            noise=self.noise, kept=kept))
        shape_key = (self.engine, "shape", *name)
        if shape_key not in _PROGRAMS:  # the state's shapes, dtypes and static fields
            _PROGRAMS[shape_key] = jax.eval_shape(functools.partial(
                self.engine.start, capacity=capacity, planned_simulations=planned,
                noise=self.noise), self.variables, key, states, kept=kept)
        state = _PROGRAMS[shape_key]
        run = self._aot(("simulate", *name, chunk),
                        lambda: self._simulate.lower(self.variables, state, chunk))
        finish = self._aot(("finish", *name), lambda: self._finish.lower(state))
        return start, run, finish

    def played(self, actions: Any) -> None:
        """Moves every game's kept tree down `actions` [B] (a move of either player): the next
        search starts from the subtree under them. Call it after each ply, with the moves
        played in every game. Without `keep_tree` it does nothing."""
        if not self.keep_tree:
            return
        source = self._last if self._last is not None else self._kept
        if source is None:
            return
        self._kept = self._advance(source, jnp.asarray(actions, jnp.int32))
        self._last = None

    def reset(self) -> None:
        """Forgets the kept trees (a new game)."""
        self._kept = self._last = None

    # ---- sizes -----------------------------------------------------------------------------

    def capacity(self, states: Any) -> int:
        """Nodes per tree for the batch `states` [B]: the count (twice it, to leave room for a
        kept tree) plus the root, or with a clock `timed_capacity`."""
        if self._capacity is not None:
            return self._capacity
        if self.movetime is not None:
            batch = int(states.current_player.shape[0])
            return timed_capacity(batch, _node_bytes(states, self.engine.num_actions))
        room = 2 if self.keep_tree else 1
        return room * self.num_simulations + 1

    def _planned(self, capacity: int) -> int:
        """The simulations this move's search may run (it stops there even with time left):
        the fixed count; with a clock, for puct as many as the tree holds, for gumbel (whose
        sequential halving is scheduled for a count) what the measured speed reaches in the
        time, rounded down to a step of 2**(1/4) (each count compiles its own program). A
        kept tree needs room beside them: with `keep_tree` at most half the tree."""
        room = capacity // 2 if self.keep_tree else capacity - 1
        if self.movetime is None:
            return max(1, min(self.num_simulations, capacity - 1))
        if self.engine.config.algorithm != "gumbel":
            return max(1, room)
        expected = self.num_simulations if self._rate is None else self._rate * self.movetime
        quarters = math.floor(4 * math.log2(max(expected, 1.0)))
        return int(max(1, min(round(2 ** (quarters / 4)), room)))

    def _chunk_size(self, planned: int) -> int:
        """Simulations per compiled call. A fixed count: all of them in one call (with the
        solver, calls of at most 64, so a proven root ends the search early). With a clock: a
        power of two near a sixteenth of what a move reaches (the measured speed, else the
        count), so a move overshoots its time by about a sixteenth."""
        if self._chunk is not None:
            return self._chunk
        if self.movetime is None:
            return min(planned, 64) if self.engine.config.solver else planned
        expected = self.num_simulations if self._rate is None else self._rate * self.movetime
        return min(timed_chunk(expected), planned)

    def _aot(self, name: tuple, lower: Callable[[], Any]) -> Callable:
        """The engine's compiled program `name`, compiled now (before any clock starts) if no
        player of this engine has compiled it yet."""
        key = (self.engine, *name)
        if key not in _PROGRAMS:
            _PROGRAMS[key] = lower().compile()
        return _PROGRAMS[key]
