"""`from_pgx(pgx_env)`: any pgx game as an azjax `Env`.

pgx draws which player id moves first at random; azjax's contract says player 0 moves first.
The adapter keeps pgx's state inside its own and relabels player ids so that the first mover
is player 0: `our id = pgx id XOR pgx's first mover`. Rewards are permuted the same way.
Everything else (terminal no-ops, illegal moves, the all-True mask at the end) is azjax's
`Env.step`, as for our own games.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from azjax.envs.core import Env

__all__ = ["PgxEnv", "from_pgx"]


@struct.dataclass
class PgxState:
    """A pgx state inside the azjax `GameState` fields, player ids relabelled."""

    current_player: jax.Array  # int32 []: relabelled, 0 = the first mover
    legal_action_mask: jax.Array  # bool [A]
    rewards: jax.Array  # float32 [2], relabelled
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []
    first_mover: jax.Array  # int32 []: pgx's id of the player who moved first
    inner: Any  # the pgx State


# Two-player pgx games that AlphaZero's deterministic, perfect-information search cannot play.
_CHANCE_OR_HIDDEN = frozenset({"backgammon", "kuhn_poker", "leduc_holdem"})


class PgxEnv(Env):
    """A pgx environment behind azjax's Env contract (see the module docstring)."""

    num_players = 2

    def __init__(self, pgx_env, *, max_game_length: int = 0):
        if pgx_env.num_players != 2:
            raise ValueError(f"azjax plays two-player games; pgx {pgx_env.id!r} has "
                             f"{pgx_env.num_players} players")
        if pgx_env.id in _CHANCE_OR_HIDDEN:
            raise ValueError(f"pgx {pgx_env.id!r} has chance or hidden information; azjax's "
                             "search assumes deterministic, perfect-information games")
        self.pgx_env = pgx_env
        self.name = f"pgx:{pgx_env.id}"
        self.num_actions = int(pgx_env.num_actions)
        self.observation_shape = tuple(pgx_env.observation_shape)
        self.max_game_length = max_game_length

    def _wrap(self, inner, first_mover, step_count) -> PgxState:
        relabel = jnp.array([0, 1], jnp.int32) ^ first_mover  # our id -> pgx id
        return PgxState(
            current_player=(inner.current_player ^ first_mover).astype(jnp.int32),
            legal_action_mask=inner.legal_action_mask,
            rewards=inner.rewards[relabel].astype(jnp.float32),
            terminated=inner.terminated,
            truncated=inner.truncated,
            step_count=step_count,
            first_mover=first_mover,
            inner=inner,
        )

    @property
    def title(self) -> str:
        """pgx's id of the game (`othello`)."""
        return self.pgx_env.id

    def init(self, key: jax.Array) -> PgxState:
        """pgx's initial state, relabelled so that its first mover is player 0.

        Args:
          key: a PRNG key: pgx draws its first mover from it.

        Returns:
          The initial state.
        """
        inner = self.pgx_env.init(key)
        return self._wrap(inner, inner.current_player.astype(jnp.int32), jnp.int32(0))

    def _init(self) -> PgxState:  # pragma: no cover - init(key) is overridden
        return self.init(jax.random.PRNGKey(0))

    def _apply_legal_action(self, state: PgxState, action: jax.Array) -> PgxState:
        inner = self.pgx_env.step(state.inner, action)
        return self._wrap(inner, state.first_mover, state.step_count)

    def observe(self, state: PgxState) -> jax.Array:
        """pgx's observation for the player to move: float32 `observation_shape`."""
        obs = self.pgx_env.observe(state.inner)  # the player to move's view
        return obs.astype(jnp.float32)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The identity only: ([1, *observation_shape], [1, A])."""
        return obs[None], policy[None]

    def __repr__(self) -> str:
        return f"from_pgx(pgx.make({self.pgx_env.id!r}))"


def from_pgx(pgx_env, *, max_game_length: int = 0) -> PgxEnv:
    """Wraps a pgx environment as an azjax `Env` (notation: action ids; text rendering: the
    base class's status line).

    Args:
      pgx_env: a two-player, deterministic, perfect-information pgx environment
        (`pgx.make(id)`).
      max_game_length: the longest game in steps, 0 if unknown; bounds self-play games.

    Returns:
      A `PgxEnv`.

    Raises:
      ValueError: for a game with other than two players, chance or hidden information.
    """
    return PgxEnv(pgx_env, max_game_length=max_game_length)
