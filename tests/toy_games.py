"""A toy game where players do not alternate, to test that nothing assumes they do."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from azjax.envs.core import Env


@struct.dataclass
class RaceState:
    current_player: jax.Array
    legal_action_mask: jax.Array
    rewards: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    step_count: jax.Array
    count: jax.Array  # int32 []


class RaceToThree(Env):
    """A shared counter starts at 0; each move adds one. Action 0 passes the turn, action 1
    keeps it. Whoever brings the counter to 3 wins. Player 0 at count 1 wins by action 1
    (keep the move), then any action; passing instead hands player 1 the win."""

    name = "race_to_three"
    num_actions = 2
    observation_shape = (4,)
    max_game_length = 3

    def _init(self):
        return RaceState(jnp.int32(0), jnp.ones(2, jnp.bool_), jnp.zeros(2, jnp.float32),
                         jnp.bool_(False), jnp.bool_(False), jnp.int32(0), jnp.int32(0))

    def _apply_legal_action(self, state, action):
        count = state.count + 1
        won = count >= 3
        mover = state.current_player
        rewards = jnp.where(won, jnp.zeros(2).at[mover].set(1.0).at[1 - mover].set(-1.0),
                            jnp.zeros(2)).astype(jnp.float32)
        next_player = jnp.where(action == 1, mover, 1 - mover)
        return state.replace(current_player=next_player.astype(jnp.int32), count=count,
                             rewards=rewards, terminated=won)

    def observe(self, state):
        return jax.nn.one_hot(state.count, 4, dtype=jnp.float32)

    def symmetries(self, obs, policy):
        return obs[None], policy[None]

    def render(self, state):
        return f"count {int(state.count)}, player {int(state.current_player)} to move"

    def action_to_str(self, action):
        return ("pass", "keep")[int(action)]

    def str_to_action(self, text):
        return ("pass", "keep").index(text)
