"""Alpha-beta over the network as an engine plays it: a time per move, met by stopping the
search between compiled calls (`search.algorithm: alphabeta`, `azjax.core.search_alphabeta`).

`AlphaBetaPlayer` drives `AlphaBetaEngine`'s steps from the host for a batch of games: a move
starts every game's search, runs it in compiled chunks of positions until every game has
finished its deepest step, spent `search.alphabeta_nodes` or the clock has run out, and plays
each game's move from its deepest finished step. Iterative deepening makes that safe: a step
cut short leaves the last finished one's move. The whole batch shares one clock; each game
deepens on its own, so one game's long captures do not hold the others back. Compiling is not
thinking: every program is compiled before the clock starts. Without a clock the player
searches to the depth (within the node budget) and is repeatable, bit for bit; on a clock how
deep it gets depends on the machine and its load.

Shape legend: B games.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import engine_player
from azjax.core.search_alphabeta import AlphaBetaEngine
from azjax.engine_player import Move, SearchPlayer, check_movetime, timed_chunk

__all__ = ["AlphaBetaPlayer"]

_FIRST_CHUNK = 64  # positions per chunk until a move has measured the speed
LINE_ACTIONS = 24  # the most actions of a move's expected line (`Move.line`)
_NO_BUDGET = int(np.iinfo(np.int32).max)

# Ahead-of-time compiled programs, shared by the players of an engine:
# (engine, batch, the states' tree structure) -> (start, run, finish).
_PROGRAMS: dict[tuple, Any] = {}


class AlphaBetaPlayer(SearchPlayer):
    """The greedy alpha-beta search of a network over a batch of games, on a clock or not.

    Args:
      engine: `azjax.core.search_alphabeta.make_alphabeta_engine(env, apply_fn, config)`; its
        config's `alphabeta_depth` and `alphabeta_nodes` bound every move.
      variables: the network's variables (`{"params": params}`).
      movetime: seconds per move for the whole batch, or None for the depth alone.
      nodes: the positions each game may search per move (None: the config's
        `alphabeta_nodes`; 0: no bound), on a clock too.
      chunk: positions per compiled call on a clock (default: a power of two near a
        sixteenth of what a move reaches at the measured speed).
      clock: seconds since some start (default `azjax.engine_player.now`).
    """

    searches_subsets = True  # nothing kept; each game's search is its own

    def __init__(self, engine: AlphaBetaEngine, variables: Any, *,
                 movetime: float | None = None, nodes: int | None = None,
                 chunk: int | None = None, clock: Callable[[], float] | None = None):
        check_movetime(movetime)
        if chunk is not None and chunk < 1:
            raise ValueError(f"chunk must be >= 1 positions, got {chunk}")
        nodes = engine.config.alphabeta_nodes if nodes is None else nodes
        if nodes < 0:
            raise ValueError(f"nodes must be >= 0 positions (0: no bound), got {nodes}")
        self.engine, self.variables, self.movetime = engine, variables, movetime
        self.nodes = nodes
        self._chunk, self._given_clock = chunk, clock
        self._rate: float | None = None  # positions per second per game, measured

    def move(self, key: jax.Array, states: Any) -> Move:
        """Searches every game of `states` [B] and returns the moves: `Move.simulations` the
        positions each game searched, `Move.depth` its deepest finished step, `Move.line`
        the line it expects (its move first)."""
        start, run, finish = self._programs(key, states)
        budget = self.nodes or _NO_BUDGET
        clock = self._given_clock or engine_player.now  # read now: tests replace it
        began = clock()  # every program is compiled: from here on, thinking
        carry = start(key, states)
        if self.movetime is None:
            carry, _ = run(self.variables, carry, jnp.int32(budget))
        else:
            nodes, chunk = 0, self._chunk_size()
            while True:
                nodes = min(nodes + chunk, budget)
                carry, searching = run(self.variables, carry, jnp.int32(nodes))
                if not bool(searching) or nodes >= budget:
                    break
                if clock() - began >= self.movetime:
                    break
        output, depth, line = jax.device_get(finish(self.variables, states, carry))
        seconds = clock() - began
        searched = np.asarray(output.visit_counts).sum(axis=-1)
        if seconds > 0 and searched.size and searched.max() > 0:
            self._rate = float(searched.max()) / seconds
        return Move(np.asarray(output.action), output, searched, seconds, depth=np.asarray(depth),
                    line=np.asarray(line))

    def played(self, actions: Any) -> None:
        """Nothing is kept between moves (each search starts afresh)."""

    def reset(self) -> None:
        """Nothing is kept between games."""

    def _chunk_size(self) -> int:
        """Positions per compiled call on the clock: a power of two near a sixteenth of what
        a move reaches at the measured speed (the first move: `_FIRST_CHUNK`)."""
        if self._chunk is not None:
            return self._chunk
        if self._rate is None or self.movetime is None:
            return _FIRST_CHUNK
        return timed_chunk(self._rate * self.movetime)

    def _programs(self, key: jax.Array, states: Any) -> tuple[Callable, Callable, Callable]:
        """The engine's start, run and finish for this batch, compiled ahead of the clock
        (once per engine and batch size, shared by its players)."""
        engine, batch = self.engine, int(states.current_player.shape[0])
        name = (engine, batch, jax.tree.structure(states))
        if name not in _PROGRAMS:
            start = jax.jit(engine.start).lower(key, states).compile()
            carry = jax.eval_shape(engine.start, key, states)

            def run(variables: Any, carry: Any, nodes: jax.Array) -> tuple[Any, jax.Array]:
                carry = engine.run(variables, carry, nodes)
                return carry, engine.searching(carry)

            run = jax.jit(run, donate_argnums=(1,)).lower(
                self.variables, carry, jnp.int32(0)).compile()
            def finish(variables: Any, states: Any, carry: Any) -> tuple[Any, Any, Any]:
                output = engine.finish(variables, states, carry)
                return (output, engine.depth(carry),
                        engine.line(carry, output.action, LINE_ACTIONS))

            finish = jax.jit(finish).lower(self.variables, states, carry).compile()
            _PROGRAMS[name] = (start, run, finish)
        return _PROGRAMS[name]
