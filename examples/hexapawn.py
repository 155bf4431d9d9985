"""Hexapawn on a 4 x 4 board: a game defined outside azjax, as a user would write one.

Each side has a row of four pawns: White (player 0) on rank 1, moving up; Black on rank 4,
moving down. A pawn steps straight forward onto an empty square or diagonally forward onto an
opponent's pawn, capturing it. A side wins when one of its pawns reaches the far rank, or when
the opponent has no legal move on its turn (which includes having no pawns left). There are
no draws. Squares are named as in chess, files a-d from White's left, ranks 1-4 from White's
side::

    4  b b b b
    3  . . . .
    2  . . . .
    1  w w w w
       a b c d

An action is one of the 60 geometrically possible pawn steps (`MOVES`): 30 upward ones for
White, then 30 downward ones for Black, so a move's notation (`b1-b2`, `a1xb2`) names its id
without the position. Train it with ``azjax train examples/hexapawn.yaml``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax.envs import BoardView, Cell, Env

__all__ = ["COLS", "MOVES", "ROWS", "Hexapawn", "State", "square_name"]

ROWS, COLS = 4, 4
EMPTY = -1
FILES = "abcdefgh"[:COLS]


def _move_table() -> np.ndarray:
    """int32 [A, 3]: (player, from square, to square) of every action id. Squares are
    row * COLS + col, row 0 on top (Black's side)."""
    moves = []
    for player, forward in ((0, -1), (1, 1)):
        for row in range(ROWS):
            if not 0 <= row + forward < ROWS:
                continue
            for col in range(COLS):
                for side in (-1, 0, 1):
                    if 0 <= col + side < COLS:
                        moves.append((player, row * COLS + col,
                                      (row + forward) * COLS + col + side))
    return np.array(moves, np.int32)


MOVES = _move_table()
_PLAYER, _FROM, _TO = (np.ascontiguousarray(column) for column in MOVES.T)
_CAPTURE = (_FROM % COLS) != (_TO % COLS)
_INDEX = {(int(f), int(t)): a for a, (_, f, t) in enumerate(MOVES)}


def _mirror_table() -> np.ndarray:
    """int32 [A]: the action id of each action seen in the left-right mirror."""
    def mirror(square: int) -> int:
        return square - square % COLS + COLS - 1 - square % COLS

    return np.array([_INDEX[mirror(int(f)), mirror(int(t))] for _, f, t in MOVES], np.int32)


_MIRROR = _mirror_table()


def square_name(square: int) -> str:
    """`a1` for the bottom-left square (row ROWS - 1, col 0), `d4` for the top right."""
    return f"{FILES[square % COLS]}{ROWS - square // COLS}"


@struct.dataclass
class State:
    """A hexapawn position (the `GameState` fields and the board)."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [A]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []
    board: jax.Array  # int8 [ROWS * COLS]: -1 empty, else the owner's player id


def legal_mask(board: jax.Array, player: jax.Array) -> jax.Array:
    """bool [A]: the player's legal steps on `board` int8 [ROWS * COLS]."""
    target = board[_TO]
    lands = jnp.where(_CAPTURE, target == 1 - player, target == EMPTY)
    return (jnp.asarray(_PLAYER) == player) & (board[_FROM] == player) & lands


class Hexapawn(Env):
    """4 x 4 hexapawn: 60 actions (`MOVES`), White (player 0) moves first."""

    name = "hexapawn"
    num_actions = len(MOVES)
    observation_shape = (ROWS, COLS, 3)
    max_game_length = 2 * COLS * (ROWS - 2) + 1  # each pawn steps ROWS - 2 times, then wins
    player_names = ("White", "Black")
    title = "Hexapawn 4x4"
    move_hint = "a pawn step such as b1-b2 or a1xb2 (files a-d, ranks 1-4 from White)"

    def _init(self) -> State:
        board = np.full(ROWS * COLS, EMPTY, np.int8)
        board[:COLS], board[-COLS:] = 1, 0
        board = jnp.asarray(board)
        return State(
            current_player=jnp.int32(0),
            legal_action_mask=legal_mask(board, jnp.int32(0)),
            rewards=jnp.zeros(2, jnp.float32),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            step_count=jnp.int32(0),
            board=board,
        )

    def _apply_legal_action(self, state: State, action: jax.Array) -> State:
        mover = state.current_player
        target = jnp.asarray(_TO)[action]
        board = state.board.at[jnp.asarray(_FROM)[action]].set(EMPTY)
        board = board.at[target].set(mover.astype(jnp.int8))
        far_row = jnp.where(mover == 0, 0, ROWS - 1)
        mask = legal_mask(board, 1 - mover)
        won = (target // COLS == far_row) | ~jnp.any(mask)
        rewards = jnp.where(won, jnp.where(mover == 0, 1.0, -1.0) * jnp.array([1.0, -1.0]),
                            0.0).astype(jnp.float32)
        return state.replace(current_player=1 - mover, legal_action_mask=mask,
                             rewards=rewards, terminated=won, board=board)

    def observe(self, state: State) -> jax.Array:
        """float32 [ROWS, COLS, 3]: the mover's pawns, the opponent's, and a plane of ones when
        White is to move (action ids and the board are not turned for Black)."""
        me = state.current_player
        board = state.board.reshape(ROWS, COLS)
        white = jnp.full((ROWS, COLS), me == 0)
        return jnp.stack([board == me, board == 1 - me, white], axis=-1).astype(jnp.float32)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The identity and the left-right mirror: ([2, ROWS, COLS, 3], [2, A])."""
        return jnp.stack([obs, obs[:, ::-1]]), jnp.stack([policy, policy[_MIRROR]])

    # ---- for people -----------------------------------------------------------------------

    def action_to_str(self, action: int) -> str:
        """`b1-b2` (a straight step) or `a1xb2` (a capture); ValueError outside 0..A-1."""
        if not 0 <= int(action) < self.num_actions:
            raise ValueError(f"hexapawn action ids are 0-{self.num_actions - 1}, got {action}")
        _, start, end = MOVES[int(action)]
        return f"{square_name(start)}{'x' if _CAPTURE[int(action)] else '-'}{square_name(end)}"

    def str_to_action(self, text: str) -> int:
        """The action id of `b1-b2`, `a1xb2` (or without the middle sign: `b1b2`)."""
        cleaned = text.strip().lower().replace("-", "").replace("x", "")
        squares = [cleaned[:2], cleaned[2:]]
        try:
            start, end = (self._square(s) for s in squares)
            return _INDEX[start, end]
        except (KeyError, ValueError):
            raise ValueError(f"a hexapawn move is a pawn step such as b1-b2 or a1xb2, "
                             f"got {text!r}") from None

    @staticmethod
    def _square(name: str) -> int:
        if len(name) != 2 or name[0] not in FILES or not "1" <= name[1] <= str(ROWS):
            raise ValueError(name)
        return (ROWS - int(name[1])) * COLS + FILES.index(name[0])

    def describe_illegal(self, state: State, action: int) -> str:
        """Why a step is not legal here: whose pawn stands where."""
        player, start, end = (int(v) for v in MOVES[int(action)])
        board = np.asarray(state.board)
        mover = int(state.current_player)
        if player != mover:
            return f"{self.action_to_str(action)} is a {self.player_names[player]} move"
        if board[start] != mover:
            return f"no {self.player_names[mover]} pawn on {square_name(start)}"
        if _CAPTURE[int(action)]:
            return f"no pawn to capture on {square_name(end)}"
        return f"{square_name(end)} is taken: a pawn captures only diagonally"

    def board_view(self, state: State) -> BoardView:
        """ROWS x COLS cells, rank ROWS on top; each square noted with its name."""
        board = np.asarray(state.board)
        cells = tuple(Cell(player=None if v == EMPTY else int(v), note=square_name(i),
                           shade="dark" if (i // COLS + i % COLS) % 2 else "light")
                      for i, v in enumerate(board))
        return BoardView(rows=ROWS, cols=COLS, cells=cells, colors=("#f4f4f4", "#222"))

    def board_cells(self) -> tuple[Cell, ...]:
        """Code 3 * square + k: that square empty (k = 0), with White's pawn (1), Black's (2)."""
        return tuple(Cell(player=None if k == 0 else k - 1, note=square_name(i),
                          shade="dark" if (i // COLS + i % COLS) % 2 else "light")
                     for i in range(ROWS * COLS) for k in range(3))

    def board_codes(self, state: State) -> jax.Array:
        """int32 [ROWS * COLS]: `board_view`'s cells as indices into `board_cells`."""
        board = state.board.astype(jnp.int32)
        return 3 * jnp.arange(ROWS * COLS, dtype=jnp.int32) + jnp.where(board == EMPTY, 0,
                                                                         board + 1)

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """Two clicks: the pawn's square, then where it goes."""
        _, start, end = MOVES[int(action)]
        return ((int(start),), (int(end),))

    def render(self, state: State) -> str:
        """The board with ranks and files (`w` White, `b` Black), then the status line."""
        board = np.asarray(state.board).reshape(ROWS, COLS)
        glyph = {EMPTY: ".", 0: "w", 1: "b"}
        lines = [f"{ROWS - r}  " + " ".join(glyph[int(v)] for v in row)
                 for r, row in enumerate(board)]
        lines.append("   " + " ".join(FILES))
        return "\n".join([*lines, super().render(state).splitlines()[-1]])
