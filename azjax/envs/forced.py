"""Forced moves played at once: the game tree of decisions only.

A position with a single legal action is no decision. In draughts they are common (a forced
capture, the only hop that continues a multi-jump, the recapture after an exchange), and a
search that spends a node and a network evaluation on each of them sees tactics several plies
later than one that plays them at once; self-play that records them spends samples on
policy targets with nothing to learn.

`ForcedMovesPlayed(env)` is the same game with every forced action played inside `step` (and
`init`, `random_start`), so its states are decisions or finished games. It changes no rule and
no result: the games it plays are the base game's games, step counts, rewards and truncation
included.
Under `jax.vmap` the loop runs until the longest forced chain of the batch has been played.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from azjax.envs.core import Env, GameState, tree_select
from azjax.envs.wrapper import EnvWrapper

__all__ = ["ForcedMovesPlayed", "forced_moves_played", "is_forced", "play_forced_moves"]


def is_forced(state: GameState) -> jax.Array:
    """Whether a state's only choice is forced.

    Args:
      state: one game's state.

    Returns:
      bool []: the game is live and has exactly one legal action.
    """
    live = ~(state.terminated | state.truncated)
    return live & (jnp.sum(state.legal_action_mask, dtype=jnp.int32) == 1)


def play_forced_moves(env: Env, state: GameState) -> GameState:
    """Plays the only legal action while there is exactly one (ONE game; vmap for a batch).

    Args:
      env: the game.
      state: one game's state.

    Returns:
      A state live with >= 2 legal actions, or finished. Its `rewards` are those of the last
      action played: every earlier one was non-terminal, so they sum to the same.
    """
    return jax.lax.while_loop(
        is_forced, lambda s: env.step(s, jnp.argmax(s.legal_action_mask)), state)


class ForcedMovesPlayed(EnvWrapper):
    """`env` with forced actions played at once; everything else is `env`'s.

    Use it where the game tree is searched or self-played (`SearchConfig.play_forced_moves`);
    hand people and opponents the base game: its positions and notation are the same.
    """

    def __init__(self, env: Env) -> None:
        if isinstance(env, ForcedMovesPlayed):
            raise TypeError("the env already plays forced moves at once")
        super().__init__(env)

    def init(self, key: jax.Array) -> GameState:
        """The base game's initial position with its forced moves played.

        Args:
          key: a PRNG key, as the base game's `init`.

        Returns:
          A decision or a finished game.
        """
        return play_forced_moves(self.base, self.base.init(key))

    def step(self, state: GameState, action: jax.Array) -> GameState:
        """The base game's step, then every forced action after it.

        Args:
          state: one game's state.
          action: int32 [], an action id.

        Returns:
          A decision or a finished game.
        """
        return play_forced_moves(self.base, self.base.step(state, action))

    def random_start(self, key: jax.Array) -> GameState:
        """The base game's random start with its forced moves played; where they end the game
        (a forced capture of the last piece), the initial position instead.

        Args:
          key: a PRNG key.

        Returns:
          One live state.
        """
        start = play_forced_moves(self.base, self.base.random_start(key))
        return tree_select(start.terminated | start.truncated, self.init(key), start)


@functools.cache
def forced_moves_played(env: Env) -> ForcedMovesPlayed:
    """One shared `ForcedMovesPlayed` per base env, so jitted callers that take the env as a
    static argument compile once.

    Args:
      env: the base game (not itself a `ForcedMovesPlayed`).

    Returns:
      The same wrapper object for every call with this env.
    """
    return ForcedMovesPlayed(env)
