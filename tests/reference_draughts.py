"""Plain-Python reference rules for English draughts, used to check `azjax/envs/draughts.py`.

Written from the rules text, sharing no code, table or representation with `azjax/envs/`: no jax, no
numpy, the board an 8x8 grid of letters, whole moves (capture sequences) found by a depth-first
search at the start of each turn. The rules:

- 8x8 board, play on the dark squares (row + column odd, row 0 on top), numbered 1-32 row by
  row from the top-left as in PDN. Black (player 0, men `b`, kings `B`) starts on 1-12 and moves
  first, down the board; White (player 1, `w` / `W`) starts on 21-32 and moves up;
- a man moves one square diagonally forward, a king one square diagonally either way; a man
  captures forward only, a king either way, by jumping an adjacent enemy piece onto the empty
  square behind it; the captured piece leaves the board at once;
- capturing is compulsory; a capturing piece must go on capturing while it can, and any capture
  sequence may be chosen (no majority rule);
- a man that reaches the far row becomes a king and the move ends there;
- a player with no legal move loses;
- draws: `draw_rule="openspiel"` counts consecutive moves without a capture (a capture resets
  it) and draws at 40; `"laws"` counts moves with neither a capture nor a man's move and
  draws at 80 (40 by each side), and also draws when a move makes a position (the pieces and
  the side to move) stand for the third time in the game: every position of the game is
  counted, from the first. The draw comes first: reaching the count is a draw even if the
  next player could not move. (The count is reset as soon as a capture is made, so in the
  middle of a multi-jump it is already 0.)

The game is played one hop at a time (`9-13`, or `9x18` then `18x27` for the move `9x18x27`):
the player to move does not change in the middle of a capture sequence. `play` returns the
step's rewards by player id; a hop that is not legal ends the game as a loss for the mover.
"""

from __future__ import annotations

__all__ = ["RefDraughts", "SQUARE_OF", "COORDS_OF"]

# PDN numbering: walk the dark squares row by row, left to right.
SQUARE_OF: dict[tuple[int, int], int] = {}
for _r in range(8):
    for _c in range(8):
        if (_r + _c) % 2 == 1:
            SQUARE_OF[(_r, _c)] = len(SQUARE_OF) + 1
COORDS_OF = {number: rc for rc, number in SQUARE_OF.items()}

_OWNER = {"b": 0, "B": 0, "w": 1, "W": 1}
_FAR_ROW = {0: 7, 1: 0}
_KING_STEPS = ((-1, -1), (-1, 1), (1, -1), (1, 1))
_DIRECTIONS = {"b": ((1, -1), (1, 1)), "w": ((-1, -1), (-1, 1)), "B": _KING_STEPS,
               "W": _KING_STEPS}  # a man moves forward only; a king either way
_ENEMIES = {"b": ("w", "W"), "B": ("w", "W"), "w": ("b", "B"), "W": ("b", "B")}


class RefDraughts:
    """One game of English draughts, played hop by hop."""

    def __init__(self, draw_rule: str = "laws") -> None:
        self.limit = {"openspiel": 40, "laws": 80}[draw_rule]
        self.laws = draw_rule == "laws"
        self.seen: dict[tuple, int] = {}  # position (grid, side to move) -> times it stood
        self.repeated = False  # the last move made a position stand for the third time
        self.grid: list[list[str | None]] = [[None] * 8 for _ in range(8)]
        for (r, c), number in SQUARE_OF.items():
            if number <= 12:
                self.grid[r][c] = "b"
            elif number >= 21:
                self.grid[r][c] = "w"
        self.to_move = 0
        self.over = False
        self.winner: int | None = None
        self.count = 0  # towards the draw
        self.path: list[tuple[int, int]] = []  # squares visited so far in this turn
        self.man_moved = False  # whether this turn's piece was a man when it started
        self._hops: set[str] | None = None  # cache of hops()
        self.moves = self._whole_moves()
        self._count_position()

    @classmethod
    def from_position(cls, pieces: dict[int, str], to_move: int,
                      draw_rule: str = "laws", count: int = 0) -> RefDraughts:
        """A game from a position: {PDN square: letter}; the player to move starts a turn."""
        game = cls(draw_rule)
        game.grid = [[None] * 8 for _ in range(8)]
        for number, letter in pieces.items():
            r, c = COORDS_OF[number]
            game.grid[r][c] = letter
        game.to_move, game.count = to_move, count
        game.moves, game._hops = game._whole_moves(), None
        game.seen = {}
        game._count_position()
        game._check_end()
        return game

    # -- move generation -------------------------------------------------------------------------
    def _captures(self, r: int, c: int, path: list, found: list) -> None:
        """Depth-first: every maximal capture sequence of the piece on (r, c), appended to
        `found` as square lists starting with `path`. The grid is restored on return."""
        grid = self.grid
        piece = grid[r][c]
        enemies = _ENEMIES[piece]
        extended = False
        for dr, dc in _DIRECTIONS[piece]:
            lr, lc = r + 2 * dr, c + 2 * dc
            if not (0 <= lr < 8 and 0 <= lc < 8):
                continue
            mr, mc = r + dr, c + dc
            victim = grid[mr][mc]
            if victim not in enemies or grid[lr][lc] is not None:
                continue
            extended = True
            crowned = piece.islower() and lr == _FAR_ROW[_OWNER[piece]]
            grid[r][c], grid[mr][mc] = None, None
            grid[lr][lc] = piece.upper() if crowned else piece
            if crowned:
                found.append(path + [(lr, lc)])
            else:
                self._captures(lr, lc, path + [(lr, lc)], found)
            grid[r][c], grid[mr][mc], grid[lr][lc] = piece, victim, None
        if not extended and len(path) > 1:
            found.append(path)

    def _whole_moves(self) -> list[list[tuple[int, int]]]:
        """The legal moves of the player to move, each as the list of squares it visits."""
        grid = self.grid
        letters = ("b", "B") if self.to_move == 0 else ("w", "W")
        captures: list = []
        simple = []
        for r, c in SQUARE_OF:
            piece = grid[r][c]
            if piece not in letters:
                continue
            self._captures(r, c, [(r, c)], captures)
            if captures:
                continue
            for dr, dc in _DIRECTIONS[piece]:
                tr, tc = r + dr, c + dc
                if 0 <= tr < 8 and 0 <= tc < 8 and grid[tr][tc] is None:
                    simple.append([(r, c), (tr, tc)])
        return captures or simple

    # -- playing hop by hop ----------------------------------------------------------------------
    def whole_moves(self) -> list[str]:
        """The legal moves in PDN (`9-13`, `9x18x27`), from the start of this turn."""
        out = []
        for path in self.moves:
            jump = abs(path[1][0] - path[0][0]) == 2
            out.append(("x" if jump else "-").join(str(SQUARE_OF[rc]) for rc in path))
        return out

    def hops(self) -> set[str]:
        """The legal next hops (`9-13`, `9x18`), continuing the capture begun this turn."""
        if self.over:
            return set()
        if self._hops is None:
            k = len(self.path)
            self._hops = set()
            for path in self.moves:
                if k == 0 or path[:k] == self.path:
                    a, b = path[max(k - 1, 0)], path[max(k - 1, 0) + 1]
                    sep = "x" if abs(a[0] - b[0]) == 2 else "-"
                    self._hops.add(f"{SQUARE_OF[a]}{sep}{SQUARE_OF[b]}")
        return self._hops

    def jumper(self) -> int | None:
        """PDN square of the piece in the middle of a capture sequence, else None."""
        return SQUARE_OF[self.path[-1]] if self.path and not self.over else None

    def play(self, hop: str) -> tuple[float, float]:
        if self.over:
            return (0.0, 0.0)
        mover = self.to_move
        if hop not in self.hops():
            self.over, self.winner = True, 1 - mover
            return (-1.0, 1.0) if mover == 0 else (1.0, -1.0)
        jump = "x" in hop
        a, b = (COORDS_OF[int(n)] for n in hop.replace("x", "-").split("-"))
        piece = self.grid[a[0]][a[1]]
        if not self.path:  # the first hop of this turn
            self.path, self.man_moved = [a], piece.islower()
        self.grid[a[0]][a[1]] = None
        if jump:
            self.grid[(a[0] + b[0]) // 2][(a[1] + b[1]) // 2] = None
            self.count = 0  # a capture resets the count at once
        if piece.islower() and b[0] == _FAR_ROW[mover]:
            piece = piece.upper()
        self.grid[b[0]][b[1]] = piece
        self.path.append(b)
        self._hops = None
        if self.path not in self.moves:  # the capture goes on
            return (0.0, 0.0)
        if not jump:
            self.count = 0 if self.laws and self.man_moved else self.count + 1
        self.to_move = 1 - mover
        self.path = []
        self.moves = self._whole_moves()
        self._count_position()
        return self._check_end()

    def _count_position(self) -> None:
        key = (tuple(tuple(row) for row in self.grid), self.to_move)
        self.seen[key] = self.seen.get(key, 0) + 1
        self.repeated = self.laws and self.seen[key] >= 3

    def _check_end(self) -> tuple[float, float]:
        if self.count >= self.limit or self.repeated:
            self.over = True
        elif not self.moves:
            self.over, self.winner = True, 1 - self.to_move
            return (1.0, -1.0) if self.winner == 0 else (-1.0, 1.0)
        return (0.0, 0.0)

    def board_rows(self) -> list[list[str | None]]:
        return [list(row) for row in self.grid]
