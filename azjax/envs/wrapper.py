"""A game seen through another: the base class of the wrappers that change how a game is played
(`ForcedMovesPlayed`) or where its games start (`StartPositions`) but not its rules.

`EnvWrapper(env)` is `env` in every respect: its sizes, names, steps, observations and
notation are the base game's. A subclass overrides what it changes and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax

from azjax.envs.core import BoardView, Cell, Env, GameState

__all__ = ["EnvWrapper"]


class EnvWrapper(Env):
    """`env` itself, method for method: subclass it and override what the wrapper changes.

    Args:
      env: the base game; kept as `self.base`.
    """

    def __init__(self, env: Env) -> None:
        self.base = env
        self.name = env.name
        self.num_actions = env.num_actions
        self.observation_shape = env.observation_shape
        self.max_game_length = env.max_game_length
        self.player_names = env.player_names
        self.move_chain = env.move_chain
        self.endgame_max_pieces = env.endgame_max_pieces
        self.evaluation_version = env.evaluation_version

    def init(self, key: jax.Array) -> GameState:
        """The base game's initial position."""
        return self.base.init(key)

    def step(self, state: GameState, action: jax.Array) -> GameState:
        """The base game's step."""
        return self.base.step(state, action)

    def random_start(self, key: jax.Array) -> GameState:
        """The base game's random start (NotImplementedError where it has none)."""
        return self.base.random_start(key)

    def observe(self, state: GameState) -> jax.Array:
        """The base game's observation: float32 `observation_shape`."""
        return self.base.observe(state)

    def material(self, state: GameState) -> jax.Array:
        """The base game's material: float32 [2] by player id."""
        return self.base.material(state)

    def endgame_adjudicator(self, max_pieces: int) -> Callable[[GameState], GameState]:
        """The base game's endgame table (NotImplementedError where it has none)."""
        return self.base.endgame_adjudicator(max_pieces)

    def heuristic_value(self, state: GameState) -> jax.Array:
        """The base game's static estimate: float32 []."""
        return self.base.heuristic_value(state)

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

    def parse_position(self, text: str) -> GameState:
        """The base game's position notation; ValueError as its."""
        return self.base.parse_position(text)

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

    def _init(self) -> GameState:
        return self.base._init()

    def _apply_legal_action(self, state: GameState, action: jax.Array) -> GameState:
        return self.base._apply_legal_action(state, action)  # pragma: no cover

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r})"
