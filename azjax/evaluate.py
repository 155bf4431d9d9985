"""Arenas: two players over a batch of games in lockstep, inside one jitted `lax.while_loop`.

A player is ``act(key, states[B]) -> int32[B]`` (see `azjax.baselines`). Shape legend: B batch
(here: games), A actions.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from azjax.baselines import Player, _derive_key
from envs.core import Env

__all__ = ["ArenaResult", "elo_difference", "play_arena", "run_arena"]


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
        """Counts from `run_arena`'s outputs: A's total reward per game [B], illegal moves."""
        a_returns = np.asarray(a_returns)
        return cls(
            wins=int(np.sum(a_returns > 0)),
            draws=int(np.sum(a_returns == 0)),
            losses=int(np.sum(a_returns < 0)),
            illegal_moves_a=int(illegal_moves_a),
            illegal_moves_b=int(illegal_moves_b),
        )

    @property
    def num_games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games, in [0, 1]."""
        return (self.wins + 0.5 * self.draws) / max(self.num_games, 1)

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


def run_arena(
    key: jax.Array,
    *,
    env: Env,
    player_a: Player,
    player_b: Player,
    num_games: int,
    max_steps: int | jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plays B = num_games games of A against B in lockstep: a pure, traceable function.

    Call it inside your own jit (players may close over traced params) or use `play_arena`.
    A is player 0 (moves first) in the first ``ceil(B / 2)`` games and player 1 in the rest.
    Each ply calls each player on the whole batch, when any live game has it to move, and
    keeps the action of the player to move in each game; finished games stay finished.

    Returns:
      (A's total reward per game float32 [B], illegal moves by A int32 [], by B int32 []);
      `ArenaResult.from_outcomes` turns them into counts.
    """
    # Keys derived by hashing, not threefry: ~0.5 s less XLA compile time per arena here.
    states = jax.vmap(env.init)(jax.vmap(_derive_key, (None, 0))(key, jnp.arange(num_games)))
    a_id = jnp.where(jnp.arange(num_games) < (num_games + 1) // 2, 0, 1).astype(jnp.int32)
    no_moves = jnp.zeros(num_games, jnp.int32)

    def live(states):
        return ~(states.terminated | states.truncated)

    def cond(carry):
        t, states, *_ = carry
        return (t < max_steps) & jnp.any(live(states))

    def body(carry):
        t, states, totals, bad_a, bad_b = carry
        key_a = _derive_key(key, num_games + 2 * t)
        key_b = _derive_key(key, num_games + 2 * t + 1)
        a_turn = live(states) & (states.current_player == a_id)
        b_turn = live(states) & (states.current_player != a_id)
        # Call a player only when some game needs it (e.g. not at all once its games end).
        act_a = jax.lax.cond(
            jnp.any(a_turn),
            lambda: player_a(key_a, states).astype(jnp.int32),
            lambda: no_moves,
        )
        act_b = jax.lax.cond(
            jnp.any(b_turn),
            lambda: player_b(key_b, states).astype(jnp.int32),
            lambda: no_moves,
        )
        action = jnp.where(a_turn, act_a, act_b)
        safe = jnp.clip(action, 0, env.num_actions - 1)
        legal = (action == safe) & jnp.take_along_axis(
            states.legal_action_mask, safe[:, None], axis=1
        )[:, 0]
        bad_a = bad_a + jnp.sum(a_turn & ~legal, dtype=jnp.int32)
        bad_b = bad_b + jnp.sum(b_turn & ~legal, dtype=jnp.int32)
        states = jax.vmap(env.step)(states, action)  # a finished game stays finished
        return t + 1, states, totals + states.rewards, bad_a, bad_b

    totals = jnp.zeros((num_games, 2), jnp.float32)
    carry = (jnp.int32(0), states, totals, jnp.int32(0), jnp.int32(0))
    _, _, totals, bad_a, bad_b = jax.lax.while_loop(cond, body, carry)
    a_returns = jnp.take_along_axis(totals, a_id[:, None], axis=1)[:, 0]
    return a_returns, bad_a, bad_b


_run_arena_jit = jax.jit(run_arena, static_argnames=("env", "player_a", "player_b", "num_games"))


def play_arena(
    env: Env,
    player_a: Player,
    player_b: Player,
    *,
    key: jax.Array,
    num_games: int,
    max_steps: int | None = None,
) -> ArenaResult:
    """Plays `num_games` games of A against B in lockstep and counts A's results.

    A moves first in the first ``ceil(num_games / 2)`` games and second in the rest. Each ply
    calls each player on the whole batch (when any live game has it to move) and keeps the
    action of the player to move in each game; finished games stay finished.

    Compiles once per (env, player_a, player_b, num_games): reuse player objects
    (the `azjax.baselines` factories are memoised) to reuse the compiled arena.
    """
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if max_steps is None:
        max_steps = getattr(env, "max_game_length", 0) or 10_000
    outcomes = _run_arena_jit(
        key,
        env=env,
        player_a=player_a,
        player_b=player_b,
        num_games=num_games,
        max_steps=jnp.int32(max_steps),
    )
    return ArenaResult.from_outcomes(*outcomes)
