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
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from azjax.envs.core import BoardView, Cell, Env, GameState, tree_select

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


class ForcedMovesPlayed(Env):
    """`env` with forced actions played at once; everything else is `env`'s.

    Use it where the game tree is searched or self-played (`SearchConfig.play_forced_moves`);
    hand people and opponents the base game: its positions and notation are the same.
    """

    def __init__(self, env: Env) -> None:
        if isinstance(env, ForcedMovesPlayed):
            raise TypeError("the env already plays forced moves at once")
        self.base = env
        self.name = env.name
        self.num_actions = env.num_actions
        self.observation_shape = env.observation_shape
        self.max_game_length = env.max_game_length
        self.player_names = env.player_names

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

    def observe(self, state: GameState) -> jax.Array:
        """The base game's observation: float32 `observation_shape`."""
        return self.base.observe(state)

    def material(self, state: GameState) -> jax.Array:
        """The base game's material: float32 [2] by player id."""
        return self.base.material(state)

    def forcing(self, state: GameState) -> jax.Array:
        """The base game's forcing positions: bool []."""
        return self.base.forcing(state)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The base game's symmetries: ([S, *observation_shape], [S, A])."""
        return self.base.symmetries(obs, policy)

    # People see the base game: its positions and notation are the same.

    @property
    def title(self) -> str:
        """The base game's title."""
        return self.base.title

    @property
    def move_hint(self) -> str:
        """The base game's move hint."""
        return self.base.move_hint

    def render(self, state: GameState) -> str:
        """The base game's text board."""
        return self.base.render(state)

    def board_view(self, state: GameState) -> BoardView | None:
        """The base game's board view."""
        return self.base.board_view(state)

    def board_cells(self) -> tuple[Cell, ...]:
        """The base game's board cells."""
        return self.base.board_cells()

    def board_codes(self, state: GameState) -> jax.Array:
        """The base game's board codes."""
        return self.base.board_codes(state)

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """The base game's clicks for `action`."""
        return self.base.action_clicks(action)

    def action_to_str(self, action: int) -> str:
        """The base game's notation of one action."""
        return self.base.action_to_str(action)

    def str_to_action(self, text: str) -> int:
        """The base game's parse of one action; ValueError as its."""
        return self.base.str_to_action(text)

    def format_move(self, actions: Sequence[int]) -> str:
        """The base game's notation of one whole turn."""
        return self.base.format_move(actions)

    def legal_moves(self, state: GameState) -> dict[str, list[int]]:
        """The base game's whole legal turns: notation -> action ids."""
        return self.base.legal_moves(state)

    def describe_illegal(self, state: GameState, action: int) -> str:
        """The base game's reason why `action` is illegal."""
        return self.base.describe_illegal(state, action)

    def parse_move(self, state: GameState, text: str) -> list[int]:
        """The base game's parse of one whole turn; ValueError as its."""
        return self.base.parse_move(state, text)

    def _init(self) -> GameState:  # pragma: no cover - `init` is overridden
        return self.base._init()

    def _apply_legal_action(self, state: GameState, action: jax.Array) -> GameState:
        return self.base._apply_legal_action(state, action)  # pragma: no cover

    def __repr__(self) -> str:
        return f"ForcedMovesPlayed({self.base!r})"


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
