"""Plain-Python reference rules for tic-tac-toe and connect four, used to check `azjax/envs/`.

Written from the rules of the games, sharing no code, table or representation with `azjax/envs/`:
no jax, no numpy, boards as lists, wins found by walking from the stone just played. One object
is one game; `play` mutates it. The conventions checked against the envs:

- player 0 moves first and the players alternate; after the final move the turn still passes
  (so `to_move` at a finished game is the player who did NOT make the final move);
- `play` returns the step's rewards indexed by player id: (+1, -1) / (-1, +1) on the winning
  move, (0, 0) otherwise (a draw, or a game still running);
- a finished game has every action "legal" (the envs' all-True mask) and ignores further moves
  with zero rewards;
- playing an illegal action (an occupied cell, a full column) ends the game as a loss for the
  mover, the board unchanged (the project's convention, shared with pgx);
- `board_rows()` gives the board as rows of player ids (-1 empty), top row first, left to right.
"""

from __future__ import annotations

__all__ = ["RefConnectFour", "RefTicTacToe", "make_reference"]


class _RefGame:
    num_actions: int

    def __init__(self) -> None:
        self.to_move = 0
        self.over = False
        self.winner: int | None = None
        self.moves: list[int] = []

    # -- what a game defines -------------------------------------------------------------------
    def _is_open(self, action: int) -> bool:
        raise NotImplementedError

    def _place(self, action: int) -> bool:
        """Puts the mover's mark for `action`; True when that mark wins."""
        raise NotImplementedError

    def _board_full(self) -> bool:
        raise NotImplementedError

    def board_rows(self) -> list[list[int]]:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------------
    def legal_actions(self) -> list[int]:
        return [a for a in range(self.num_actions) if self._is_open(a)]

    def legal_mask(self) -> list[bool]:
        if self.over:
            return [True] * self.num_actions
        return [self._is_open(a) for a in range(self.num_actions)]

    def play(self, action: int) -> tuple[float, float]:
        if self.over:
            return (0.0, 0.0)
        mover = self.to_move
        if not self._is_open(action):
            self.over, self.winner = True, 1 - mover
            self.to_move = 1 - mover
            return (-1.0, 1.0) if mover == 0 else (1.0, -1.0)
        won = self._place(action)
        self.moves.append(action)
        self.to_move = 1 - mover
        if won:
            self.over, self.winner = True, mover
            return (1.0, -1.0) if mover == 0 else (-1.0, 1.0)
        if self._board_full():
            self.over = True
        return (0.0, 0.0)


class RefTicTacToe(_RefGame):
    """Cells 0-8 numbered row by row from the top-left."""

    num_actions = 9

    def __init__(self) -> None:
        super().__init__()
        self.grid = [[None, None, None] for _ in range(3)]  # grid[row][col], row 0 on top

    def _is_open(self, action: int) -> bool:
        row, col = divmod(action, 3)
        return self.grid[row][col] is None

    def _place(self, action: int) -> bool:
        row, col = divmod(action, 3)
        me = self.to_move
        self.grid[row][col] = me
        g = self.grid
        return (
            all(g[row][c] == me for c in range(3))
            or all(g[r][col] == me for r in range(3))
            or (row == col and all(g[i][i] == me for i in range(3)))
            or (row + col == 2 and all(g[i][2 - i] == me for i in range(3)))
        )

    def _board_full(self) -> bool:
        return all(cell is not None for line in self.grid for cell in line)

    def board_rows(self) -> list[list[int]]:
        return [[-1 if cell is None else cell for cell in line] for line in self.grid]


class RefConnectFour(_RefGame):
    """7 columns (0-6 from the left) x 6 rows; stones fall to the lowest empty cell."""

    num_actions = 7
    width, height = 7, 6

    def __init__(self) -> None:
        super().__init__()
        # One list per column, bottom stone first: a column is a stack.
        self.columns: list[list[int]] = [[] for _ in range(self.width)]

    def _is_open(self, action: int) -> bool:
        return len(self.columns[action]) < self.height

    def _owner(self, col: int, height: int) -> int | None:
        if 0 <= col < self.width and 0 <= height < len(self.columns[col]):
            return self.columns[col][height]
        return None

    def _place(self, action: int) -> bool:
        me = self.to_move
        stack = self.columns[action]
        stack.append(me)
        col, h = action, len(stack) - 1
        # Walk out both ways along each direction from the new stone, counting my stones.
        for dcol, dh in ((1, 0), (0, 1), (1, 1), (1, -1)):
            run = 1
            for sign in (1, -1):
                c, y = col + sign * dcol, h + sign * dh
                while self._owner(c, y) == me:
                    run += 1
                    c, y = c + sign * dcol, y + sign * dh
            if run >= 4:
                return True
        return False

    def _board_full(self) -> bool:
        return all(len(stack) == self.height for stack in self.columns)

    def board_rows(self) -> list[list[int]]:
        rows = []
        for y in reversed(range(self.height)):  # top row first
            rows.append([stack[y] if y < len(stack) else -1 for stack in self.columns])
        return rows


def make_reference(game_id: str) -> _RefGame:
    return {"tic_tac_toe": RefTicTacToe, "connect_four": RefConnectFour}[game_id]()
