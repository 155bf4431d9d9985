"""Tic-tac-toe.

Actions are cells 0-8, row-major from the top-left; people type cells 1-9::

     1 | 2 | 3
     4 | 5 | 6
     7 | 8 | 9

Player 0 plays X and moves first.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax.envs.core import BoardView, Cell, Env, status_line

__all__ = ["State", "TicTacToe"]

EMPTY = -1
_WIN_LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]],
    dtype=np.int32,
)


def _dihedral_cell_maps() -> np.ndarray:
    """int32 [8, 9]: for each of the 8 symmetries, the source cell of every target cell."""
    grid = np.arange(9).reshape(3, 3)
    maps = []
    for flip in (False, True):
        g = np.fliplr(grid) if flip else grid
        for k in range(4):
            maps.append(np.rot90(g, k).reshape(-1))
    return np.stack(maps).astype(np.int32)


_SYMMETRY_MAPS = _dihedral_cell_maps()


@struct.dataclass
class State:
    """A tic-tac-toe position (the `GameState` fields and the board)."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [9]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []
    board: jax.Array  # int8 [9]: -1 empty, else the owner's player id


class TicTacToe(Env):
    """Tic-tac-toe on a 3 x 3 board: 9 actions (the cells), X (player 0) moves first."""

    name = "tic_tac_toe"
    num_actions = 9
    observation_shape = (3, 3, 2)
    max_game_length = 9
    player_names = ("X", "O")
    title = "Tic-tac-toe"
    move_hint = "a cell 1-9 (1 = top left, 9 = bottom right)"

    def _init(self) -> State:
        return State(
            current_player=jnp.int32(0),
            legal_action_mask=jnp.ones(9, jnp.bool_),
            rewards=jnp.zeros(2, jnp.float32),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            step_count=jnp.int32(0),
            board=jnp.full(9, EMPTY, jnp.int8),
        )

    def _apply_legal_action(self, state: State, action: jax.Array) -> State:
        mover = state.current_player
        board = state.board.at[action].set(mover.astype(jnp.int8))
        won = jnp.any(jnp.all(board[_WIN_LINES] == mover, axis=-1))
        full = jnp.all(board != EMPTY)
        sign = jnp.where(mover == 0, 1.0, -1.0)
        rewards = jnp.where(won, jnp.array([1.0, -1.0]) * sign, jnp.zeros(2)).astype(jnp.float32)
        return state.replace(
            current_player=1 - mover,
            legal_action_mask=board == EMPTY,
            rewards=rewards,
            terminated=won | full,
            board=board,
        )

    def observe(self, state: State) -> jax.Array:
        """float32 [3, 3, 2]: plane 0 the mover's marks, plane 1 the opponent's."""
        me = state.current_player
        planes = jnp.stack([state.board == me, state.board == 1 - me], axis=-1)
        return planes.reshape(3, 3, 2).astype(jnp.float32)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The 8 rotations and reflections: ([8, 3, 3, C], [8, 9])."""
        flat_obs = obs.reshape(9, -1)
        sym_obs = flat_obs[_SYMMETRY_MAPS].reshape(8, *obs.shape)
        return sym_obs, policy[_SYMMETRY_MAPS]

    def render(self, state: State) -> str:
        """The 3 x 3 grid (X, O, or an empty cell's number 1-9) and the status line."""
        board = np.asarray(state.board)
        marks = {EMPTY: None, 0: "X", 1: "O"}
        cells = [marks[int(v)] or str(i + 1) for i, v in enumerate(board)]
        rows = [" " + " | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3)]
        board_text = "\n---+---+---\n".join(rows)
        return board_text + "\n" + status_line(state, _board_winner(board), ("X", "O"))

    def board_view(self, state: State) -> BoardView:
        """3 x 3 cells: X / O marks, an empty cell noted with its number 1-9."""
        board = np.asarray(state.board)
        cells = tuple(Cell(player=None, note=str(i + 1)) if v == EMPTY else
                      Cell(player=int(v), label="XO"[int(v)]) for i, v in enumerate(board))
        return BoardView(rows=3, cols=3, cells=cells, pieces="mark")

    def board_cells(self) -> tuple[Cell, ...]:
        """Codes 0-8: empty cell 1-9 (noted with its number); 9: X; 10: O."""
        return (*(Cell(note=str(i + 1)) for i in range(9)),
                Cell(player=0, label="X"), Cell(player=1, label="O"))

    def board_codes(self, state: State) -> jax.Array:
        """int32 [9]: `board_view`'s cells as indices into `board_cells`."""
        board = state.board.astype(jnp.int32)
        return jnp.where(board == EMPTY, jnp.arange(9, dtype=jnp.int32), 9 + board)

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """One click on the action's own cell."""
        return ((int(action),),)

    def describe_illegal(self, state: State, action: int) -> str:
        """`cell 5 is already taken`."""
        return f"cell {self.action_to_str(action)} is already taken"

    def action_to_str(self, action: int) -> str:
        """The cell number 1-9 of action id 0-8; ValueError outside 0-8."""
        if not 0 <= int(action) < 9:
            raise ValueError(f"tic-tac-toe action id must be 0-8, got {action}")
        return str(int(action) + 1)

    def str_to_action(self, text: str) -> int:
        """The action id of a cell number `1`-`9`; ValueError naming a bad one."""
        text = text.strip()
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 9:
            raise ValueError(f"a tic-tac-toe move is a cell number 1-9, got {text!r}")
        return int(text) - 1


def _board_winner(board: np.ndarray) -> int | None:
    lines = board[_WIN_LINES]
    for player in (0, 1):
        if np.any(np.all(lines == player, axis=-1)):
            return player
    return None
