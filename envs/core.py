"""The environment contract and the step semantics every game shares.

A game is an `Env` object holding only static configuration. Its methods are pure functions of
ONE game; callers `jax.vmap` them over a batch. Shape legend: A actions, S symmetries.

Shared semantics (written once here, in `Env.step`):
- player 0 moves first; `current_player` says who moves, players need not alternate;
- `rewards[p]` is player p's reward for this step: +1 / -1 on the final step, else 0;
- stepping a finished game is a no-op with zero rewards;
- at a finished state `legal_action_mask` is all True, so masked softmaxes stay finite
  (`terminated` / `truncated` are the truth);
- an illegal action ends the game as a loss for the mover.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Iterator
from typing import Any, ClassVar, Protocol

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Env", "GameState", "jitted_step", "material_lead", "play_moves", "positions_along",
           "status_line", "tree_select"]


class GameState(Protocol):
    """Fields every game's `State` carries (names match pgx on purpose)."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [A]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []

    def replace(self, **kwargs: Any) -> GameState: ...


def tree_select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-leaf `jnp.where(pred, on_true, on_false)` for two pytrees of one structure."""
    return jax.tree.map(lambda t, f: jnp.where(pred, t, f), on_true, on_false)


def material_lead(material: jax.Array, player: jax.Array) -> jax.Array:
    """float32 [B]: `player`'s (int32 [B]) material minus the other player's, from
    `material` float32 [B, 2] by player id (`Env.material`)."""
    mine = jnp.take_along_axis(material, player[:, None], axis=1)[:, 0]
    theirs = jnp.take_along_axis(material, 1 - player[:, None], axis=1)[:, 0]
    return mine - theirs


class Env(abc.ABC):
    """A two-player, perfect-information board game as pure functions over a `State` pytree.

    Subclasses implement `_init`, `_apply_legal_action`, `observe`, `render`, `symmetries` and
    the human-notation pair `action_to_str` / `str_to_action`.
    """

    name: ClassVar[str]
    num_actions: ClassVar[int]
    observation_shape: ClassVar[tuple[int, ...]]
    num_players: ClassVar[int] = 2
    # Longest possible game in steps (0 = unbounded); self-play truncates games longer than this.
    max_game_length: ClassVar[int] = 0

    # ---- the public, shared API -------------------------------------------------------------

    def init(self, key: jax.Array) -> GameState:
        """The initial position. `key` is accepted for API symmetry; our games start fixed."""
        del key
        return self._init()

    def step(self, state: GameState, action: jax.Array) -> GameState:
        """Plays `action` (int32 []) for `state.current_player`; pure and branch-free."""
        action = jnp.asarray(action, jnp.int32)
        in_range = (action >= 0) & (action < self.num_actions)
        safe_action = jnp.clip(action, 0, self.num_actions - 1)
        was_done = state.terminated | state.truncated
        is_legal = in_range & state.legal_action_mask[safe_action]

        played = self._apply_legal_action(state, safe_action)
        mover = state.current_player
        forfeit = state.replace(
            rewards=jnp.zeros(2, jnp.float32).at[mover].set(-1.0).at[1 - mover].set(1.0),
            terminated=jnp.bool_(True),
        )
        next_state = tree_select(is_legal, played, forfeit)
        next_state = next_state.replace(step_count=state.step_count + 1)
        # A finished game stays as it was, with zero rewards.
        next_state = tree_select(was_done, state.replace(rewards=jnp.zeros(2, jnp.float32)),
                                 next_state)
        done = next_state.terminated | next_state.truncated
        return next_state.replace(legal_action_mask=next_state.legal_action_mask | done)

    def random_start(self, key: jax.Array) -> GameState:
        """A random live position, for self-play to start some games from
        (`selfplay.random_start_prob`). A game without such a distribution raises
        NotImplementedError."""
        del key
        raise NotImplementedError(f"{self.name} has no random start positions")

    def material(self, state: GameState) -> jax.Array:
        """float32 [2]: each player's material (by player id), scaled so a side's starting
        material is 1; the auxiliary training target `train.material_loss_weight` learns the
        game's final difference. A game without such a count raises NotImplementedError."""
        del state
        raise NotImplementedError(f"{self.name} has no material count")

    def supports(self, optional: str) -> bool:
        """Whether this game implements the optional method named `optional` ("random_start"
        or "material"); traced on abstract values, so nothing is computed."""
        key = jax.random.PRNGKey(0)
        argument = key if optional == "random_start" else jax.eval_shape(self.init, key)
        try:
            jax.eval_shape(getattr(self, optional), argument)
        except NotImplementedError:
            return False
        return True

    @abc.abstractmethod
    def observe(self, state: GameState) -> jax.Array:
        """float32 `observation_shape`, from the view of the player to move."""

    @abc.abstractmethod
    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """All symmetric copies of one (obs, policy) pair: ([S, *obs], [S, A]); copy 0 = input."""

    @abc.abstractmethod
    def render(self, state: GameState) -> str:
        """A board a person can read, labelled in the game's human notation."""

    @abc.abstractmethod
    def action_to_str(self, action: int) -> str:
        """Human notation for an action id (e.g. tic-tac-toe cell `5`)."""

    @abc.abstractmethod
    def str_to_action(self, text: str) -> int:
        """Inverse of `action_to_str`; raises ValueError naming what was wrong."""

    @property
    def num_symmetries(self) -> int:
        obs = jnp.zeros(self.observation_shape, jnp.float32)
        return int(self.symmetries(obs, jnp.zeros(self.num_actions))[1].shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # ---- what a game implements -------------------------------------------------------------

    @abc.abstractmethod
    def _init(self) -> GameState:
        """The initial state."""

    @abc.abstractmethod
    def _apply_legal_action(self, state: GameState, action: jax.Array) -> GameState:
        """The successor of a live state after a legal action: board, player, mask, rewards,
        `terminated`. `Env.step` handles illegal actions, finished games and `step_count`."""


def status_line(state: GameState, winner: int | None, names: tuple[str, str]) -> str:
    """The line under a rendered board: who moves, or how the game ended."""
    if bool(state.terminated | state.truncated):
        return "Game over: draw." if winner is None else f"Game over: {names[winner]} wins."
    return f"{names[int(state.current_player)]} to move."


@functools.cache
def jitted_step(env: Env):
    """The env's single-game `step(state, action)`, jitted once per env (for host loops that
    play one game move by move: replays, play, serving)."""
    return jax.jit(env.step)


def positions_along(env: Env, actions) -> Iterator[GameState]:
    """The initial position, then the position after each move of a move list (action ids),
    each move checked before it is played.

    Raises (when the iteration reaches the bad move):
      ValueError: naming the move index, the move and the legal moves, when a move is illegal
        or the game is already over.
    """
    step = jitted_step(env)
    state = env.init(jax.random.PRNGKey(0))
    yield state
    for index, action in enumerate(actions):
        action = int(action)
        if bool(state.terminated | state.truncated):
            raise ValueError(f"move {index} (action id {action}) comes after the game ended")
        legal = np.flatnonzero(np.asarray(state.legal_action_mask)).tolist()
        if action not in legal:
            raise ValueError(
                f"move {index} is illegal: action id {action} is not among the legal actions "
                f"{legal} (player {int(state.current_player)} to move)"
            )
        state = step(state, jnp.int32(action))
        yield state


def random_positions(env: Env, key: jax.Array, num_games: int, plies: int) -> GameState:
    """`num_games` states [num_games] after `plies` uniformly random legal moves each.

    Games that end early stay as they ended. Jit-able (`num_games` and `plies` static).
    """
    def play(states, k):
        actions = jax.random.categorical(k, jnp.where(states.legal_action_mask, 0.0, -jnp.inf))
        done = states.terminated | states.truncated
        return jax.vmap(tree_select)(done, states, jax.vmap(env.step)(states, actions)), None

    k_init, k_play = jax.random.split(key)
    states = jax.vmap(env.init)(jax.random.split(k_init, num_games))
    return jax.lax.scan(play, states, jax.random.split(k_play, plies))[0]


def play_moves(env: Env, actions) -> GameState:
    """Plays a move list (action ids) from the initial position; the final position.

    Raises:
      ValueError: as `positions_along`.
    """
    *_, state = positions_along(env, actions)
    return state
