"""A game defined outside `azjax/envs/`, as a user's own module, for tests/test_user_games.py.

`Pile` is a pile of stones: a move takes 1 to `max_take` (actions 0, 1, ...), never more than
are left; whoever takes the last stone wins. `TheGame` is the pile with moves typed as numbers
of stones. It takes the pile's size as an argument, so a config
can name it with keyword arguments; `small_pile` is a game factory (`@envs.game_factory`). The
other names are bad games, one per error the CLI must explain.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from azjax.envs import game_factory
from azjax.envs.core import BoardView, Cell, Env


@struct.dataclass
class PileState:
    current_player: jax.Array
    legal_action_mask: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    step_count: jax.Array
    stones: jax.Array  # int32 []


class Pile(Env):
    """Take 1 to `max_take` stones from one pile of `stones`; taking the last one wins. Only
    the rules and a board view: every people-facing member is the base class's."""

    name = "pile"

    def __init__(self, stones: int = 6, max_take: int = 3):
        self.stones, self.max_take = int(stones), int(max_take)
        self.num_actions = self.max_take
        self.observation_shape = (self.stones + 1,)
        self.max_game_length = self.stones

    def _init(self):
        return PileState(jnp.int32(0), jnp.arange(self.max_take) < self.stones,
                         jnp.zeros(2, jnp.float32), jnp.bool_(False), jnp.bool_(False),
                         jnp.int32(0), jnp.int32(self.stones))

    def _apply_legal_action(self, state, action):
        stones = state.stones - 1 - action
        mover = state.current_player
        won = stones == 0
        rewards = jnp.where(won, jnp.zeros(2).at[mover].set(1.0).at[1 - mover].set(-1.0),
                            jnp.zeros(2)).astype(jnp.float32)
        return state.replace(current_player=1 - mover, stones=stones, rewards=rewards,
                             terminated=won,
                             legal_action_mask=jnp.arange(self.max_take) < stones)

    def observe(self, state):
        return jax.nn.one_hot(state.stones, self.stones + 1, dtype=jnp.float32)

    def symmetries(self, obs, policy):
        return obs[None], policy[None]

    def board_view(self, state):
        left = int(state.stones)
        return BoardView(rows=1, cols=self.stones, cells=tuple(
            Cell(player=0, label="o") if i < left else Cell() for i in range(self.stones)))


class TheGame(Pile):
    """Take 1-3 stones from one pile; taking the last one wins (the mover wins with a pile
    that is not a multiple of 4). Moves are typed as the stones taken."""

    def __init__(self, stones: int = 6):
        super().__init__(stones, max_take=3)

    def action_to_str(self, action):
        return str(int(action) + 1)

    def str_to_action(self, text):
        if text.strip() not in ("1", "2", "3"):
            raise ValueError(f"a move takes 1, 2 or 3 stones, got {text!r}")
        return int(text) - 1


@game_factory
def small_pile(stones: int = 4) -> TheGame:
    """A factory: the game with a smaller pile."""
    return TheGame(stones)


def unmarked_pile(stones: int = 4) -> TheGame:
    """A function returning a game, not marked as a game factory: an import path may not name
    it (it could be any function)."""
    return TheGame(stones)


class BrokenGame(TheGame):
    """Observes one number too few: `check_env`'s initial-state check refuses it."""

    def observe(self, state):
        return super().observe(state)[:-1]


class NotAGame:
    """A class that is not an `envs.Env`."""


NOT_A_GAME = 42


@game_factory
def not_a_factory() -> str:
    """A function that returns something else than a game."""
    return "chess"
