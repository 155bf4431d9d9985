"""Connect four: 7 columns x 6 rows, four in a row wins.

Actions are columns 0-6 from the left; people type columns 1-7. The board is stored top row
first (row 0 is the top), so a stone dropped in a column lands on its highest empty row index.
Player 0 moves first.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax.envs.core import BoardView, Cell, Env, status_line

__all__ = ["EVAL_WEIGHTS", "ConnectFour", "EvalWeights", "State"]

ROWS, COLS = 6, 7
EMPTY = -1
_SENTINEL = ROWS * COLS  # an always-empty cell past the board, used to pad line tables


def _all_lines() -> np.ndarray:
    """int32 [69, 4]: every run of four cells (flat index row * COLS + col)."""
    lines = []
    for r, c in itertools.product(range(ROWS), range(COLS)):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            cells = [(r + k * dr, c + k * dc) for k in range(4)]
            if all(0 <= rr < ROWS and 0 <= cc < COLS for rr, cc in cells):
                lines.append([rr * COLS + cc for rr, cc in cells])
    return np.array(lines, dtype=np.int32)


def _lines_through_each_cell(lines: np.ndarray) -> np.ndarray:
    """int32 [42, 16, 4]: the lines through each cell, padded with sentinel-only lines.

    A new stone can only complete a line through its own cell, so a step checks 16 lines, not 69.
    """
    table = np.full((ROWS * COLS, 16, 4), _SENTINEL, dtype=np.int32)
    for cell in range(ROWS * COLS):
        through = lines[np.any(lines == cell, axis=1)]
        table[cell, : len(through)] = through
    return table


@dataclasses.dataclass(frozen=True)
class EvalWeights:
    """The weights of `ConnectFour.heuristic_value`, for the side to move minus the other side
    (docs/envs.md lists them; a change of any weight needs a new
    `ConnectFour.evaluation_version`)."""

    three: float = 1.0  # a line of four holding three of the side's stones and an empty cell
    two: float = 0.2  # a line holding two of the side's stones and two empty cells
    centre: float = 0.1  # a stone in the middle column
    scale: float = 4.0  # heuristic = SQUASH * tanh(score / scale)


EVAL_WEIGHTS = EvalWeights()
SQUASH = 0.9  # keeps every static score clear of a result's +-1


_LINES = _all_lines()
_LINES_THROUGH = _lines_through_each_cell(_LINES)


@struct.dataclass
class State:
    """A connect-four position (the `GameState` fields and the board)."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [7]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []
    board: jax.Array  # int8 [6, 7], row 0 on top: -1 empty, else the owner's player id


class ConnectFour(Env):
    """Connect four, 7 columns x 6 rows: 7 actions (the columns), player 0 (X, red) first."""

    name = "connect_four"
    num_actions = COLS
    observation_shape = (ROWS, COLS, 2)
    max_game_length = ROWS * COLS
    player_names = ("Red (X)", "Yellow (O)")
    title = "Connect four"
    move_hint = "a column 1-7 (1 = left)"

    def _init(self) -> State:
        return State(
            current_player=jnp.int32(0),
            legal_action_mask=jnp.ones(COLS, jnp.bool_),
            rewards=jnp.zeros(2, jnp.float32),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            step_count=jnp.int32(0),
            board=jnp.full((ROWS, COLS), EMPTY, jnp.int8),
        )

    def _apply_legal_action(self, state: State, action: jax.Array) -> State:
        mover = state.current_player
        column = state.board[:, action]
        row = jnp.sum(column == EMPTY) - 1  # the lowest empty cell
        cell = row * COLS + action
        flat = state.board.reshape(-1).at[cell].set(mover.astype(jnp.int8))
        padded = jnp.concatenate([flat, jnp.full(1, EMPTY, jnp.int8)])
        won = jnp.any(jnp.all(padded[jnp.asarray(_LINES_THROUGH)[cell]] == mover, axis=-1))
        board = flat.reshape(ROWS, COLS)
        legal = board[0] == EMPTY
        sign = jnp.where(mover == 0, 1.0, -1.0)
        rewards = jnp.where(won, jnp.array([1.0, -1.0]) * sign, jnp.zeros(2)).astype(jnp.float32)
        return state.replace(
            current_player=1 - mover,
            legal_action_mask=legal,
            rewards=rewards,
            terminated=won | ~jnp.any(legal),
            board=board,
        )

    evaluation_version = "connect_four-1"

    def heuristic_value(self, state: State) -> jax.Array:
        """float32 []: open threats, the side to move's minus the other side's, squashed into
        (-0.9, 0.9) by `SQUASH * tanh(difference / scale)`; weights `EVAL_WEIGHTS`."""
        w = EVAL_WEIGHTS
        lines = state.board.reshape(-1)[jnp.asarray(_LINES)]  # [69, 4]
        empty = jnp.sum(lines == EMPTY, axis=-1)

        def score(player):
            stones = jnp.sum(lines == player, axis=-1)
            threes = jnp.sum((stones == 3) & (empty == 1))
            twos = jnp.sum((stones == 2) & (empty == 2))
            centre = jnp.sum(state.board[:, COLS // 2] == player)
            return (w.three * threes + w.two * twos + w.centre * centre).astype(jnp.float32)

        me = state.current_player
        return (SQUASH * jnp.tanh((score(me) - score(1 - me)) / w.scale)).astype(jnp.float32)

    def observe(self, state: State) -> jax.Array:
        """float32 [6, 7, 2], top row first: plane 0 the mover's stones, plane 1 the opponent's."""
        me = state.current_player
        return jnp.stack([state.board == me, state.board == 1 - me], axis=-1).astype(jnp.float32)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Identity and the left-right mirror: ([2, 6, 7, C], [2, 7])."""
        return jnp.stack([obs, obs[:, ::-1]]), jnp.stack([policy, policy[::-1]])

    def render(self, state: State) -> str:
        """The board (X, O, `.` empty, top row first), the column numbers, the status line."""
        board = np.asarray(state.board)
        glyph = {EMPTY: ".", 0: "X", 1: "O"}
        rows = [" ".join(glyph[int(v)] for v in row) for row in board]
        footer = " ".join(str(c + 1) for c in range(COLS))
        return "\n".join([*rows, footer, status_line(state, _board_winner(board), ("X", "O"))])

    def board_view(self, state: State) -> BoardView:
        """6 x 7 cells, top row first: red and yellow stones, the column numbers above."""
        board = np.asarray(state.board).reshape(-1)
        cells = tuple(Cell(player=None if v == EMPTY else int(v)) for v in board)
        return BoardView(rows=ROWS, cols=COLS, cells=cells, pieces="disc",
                         colors=("#d33", "#f2c200"),
                         column_labels=tuple(str(c + 1) for c in range(COLS)))

    def board_cells(self) -> tuple[Cell, ...]:
        """Codes 0: empty; 1: a red stone; 2: a yellow one."""
        return Cell(), Cell(player=0), Cell(player=1)

    def board_codes(self, state: State) -> jax.Array:
        """int32 [42]: `board_view`'s cells as indices into `board_cells`."""
        board = state.board.reshape(-1).astype(jnp.int32)
        return jnp.where(board == EMPTY, 0, board + 1)

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """One click anywhere in the action's column."""
        return (tuple(r * COLS + int(action) for r in range(ROWS)),)

    def describe_illegal(self, state: State, action: int) -> str:
        """`column 4 is full`."""
        return f"column {self.action_to_str(action)} is full"

    def action_to_str(self, action: int) -> str:
        """The column number 1-7 of action id 0-6; ValueError outside 0-6."""
        if not 0 <= int(action) < COLS:
            raise ValueError(f"connect-four action id must be 0-6, got {action}")
        return str(int(action) + 1)

    def str_to_action(self, text: str) -> int:
        """The action id of a column number `1`-`7`; ValueError naming a bad one."""
        text = text.strip()
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= COLS:
            raise ValueError(f"a connect-four move is a column number 1-7, got {text!r}")
        return int(text) - 1


def _board_winner(board: np.ndarray) -> int | None:
    lines = board.reshape(-1)[_LINES]
    for player in (0, 1):
        if np.any(np.all(lines == player, axis=-1)):
            return player
    return None
