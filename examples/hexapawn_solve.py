"""Solves hexapawn by brute force and writes its perfect-play labels.

    python examples/hexapawn_solve.py            # writes examples/hexapawn_oracle/positions.jsonl

Plain Python, with rules of its own (not the env's jax code), memoised negamax over every
position reachable from the start. A position's score is for the player to move: a win in k
more plies (with the loser making the game last) scores ``L + 1 - k``, a loss the negative,
where L = 2 * cols * (rows - 2) + 1 is the longest game; hexapawn has no draws. Each line is
a position in azjax's generic oracle format (``azjax/data/oracles/README.md``): ``moves``,
``preserving`` and ``optimal`` as lists of action ids, numbered as `hexapawn.MOVES` numbers
them, with ``score`` and a ``board`` picture (rows from the top, ``w`` White, ``b`` Black).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EMPTY = -1
OUT = Path(__file__).resolve().parent / "hexapawn_oracle" / "positions.jsonl"


def move_table(rows: int, cols: int) -> list[tuple[int, int, int]]:
    """(player, from square, to square) of every action id: White's upward steps (rows from
    the top), then Black's downward ones; squares row * cols + col, row 0 on Black's side."""
    table = []
    for player, forward in ((0, -1), (1, 1)):
        for row in range(rows):
            if 0 <= row + forward < rows:
                for col in range(cols):
                    for side in (-1, 0, 1):
                        if 0 <= col + side < cols:
                            table.append((player, row * cols + col,
                                          (row + forward) * cols + col + side))
    return table


class Solver:
    """Exact scores of `rows` x `cols` hexapawn positions (board tuple, player to move)."""

    def __init__(self, rows: int = 4, cols: int = 4):
        self.rows, self.cols = rows, cols
        self.moves = move_table(rows, cols)
        self.longest = 2 * cols * (rows - 2) + 1
        self._cache: dict[tuple[tuple[int, ...], int], tuple[int, tuple[int | None, ...]]] = {}

    def start(self) -> tuple[int, ...]:
        """The initial board: Black's pawns on row 0, White's on the last row."""
        cells = self.rows * self.cols
        return tuple(1 if i < self.cols else 0 if i >= cells - self.cols else EMPTY
                     for i in range(cells))

    def legal(self, board: tuple[int, ...], player: int) -> list[int]:
        """The action ids the player may play: straight onto an empty square, diagonally onto
        an opponent's pawn."""
        out = []
        for action, (owner, start, end) in enumerate(self.moves):
            if owner != player or board[start] != player:
                continue
            capture = start % self.cols != end % self.cols
            if board[end] == (1 - player if capture else EMPTY):
                out.append(action)
        return out

    def play(self, board: tuple[int, ...], action: int) -> tuple[tuple[int, ...], bool]:
        """(the board after a legal action, whether it wins at once: the far row reached or
        the opponent left without a move)."""
        player, start, end = self.moves[action]
        after = list(board)
        after[start], after[end] = EMPTY, player
        after = tuple(after)
        far_row = 0 if player == 0 else self.rows - 1
        return after, end // self.cols == far_row or not self.legal(after, 1 - player)

    def solve(self, board: tuple[int, ...], player: int) -> tuple[int, tuple[int | None, ...]]:
        """(score, child_scores) of a live position: each legal action's score for its mover
        (None where illegal), the score their maximum."""
        key = (board, player)
        if key not in self._cache:
            children: list[int | None] = [None] * len(self.moves)
            for action in self.legal(board, player):
                after, won = self.play(board, action)
                if won:
                    children[action] = self.longest
                else:
                    reply = self.solve(after, 1 - player)[0]
                    children[action] = -reply + (1 if reply > 0 else -1)
            self._cache[key] = (max(c for c in children if c is not None), tuple(children))
        return self._cache[key]

    def positions(self):
        """Every reachable live position once, depth-first from the start in action order, as
        (its first move list found, board, player)."""
        seen = set()
        stack = [((), self.start(), 0)]
        while stack:
            moves, board, player = stack.pop()
            if (board, player) in seen:
                continue
            seen.add((board, player))
            yield moves, board, player
            children = []
            for action in self.legal(board, player):
                after, won = self.play(board, action)
                if not won:
                    children.append(((*moves, action), after, 1 - player))
            stack.extend(reversed(children))

    def records(self) -> list[dict]:
        """The labelled positions, as the oracle lines' JSON objects (each action's own score,
    `solve`'s child_scores, is left out: 60 entries a line would quadruple the file)."""
        out = []
        for moves, board, player in self.positions():
            score, children = self.solve(board, player)
            legal = [a for a, c in enumerate(children) if c is not None]
            out.append({
                "moves": list(moves),
                "board": self.picture(board),
                "score": score,
                "preserving": [a for a in legal if (children[a] > 0) == (score > 0)],
                "optimal": [a for a in legal if children[a] == score],
            })
        return out

    def picture(self, board: tuple[int, ...]) -> str:
        """Rows from the top joined by `/`: `w` White, `b` Black, `.` empty."""
        glyphs = "".join({EMPTY: ".", 0: "w", 1: "b"}[v] for v in board)
        return "/".join(glyphs[r * self.cols:(r + 1) * self.cols] for r in range(self.rows))


def main(out: Path = OUT) -> None:
    """Writes every reachable live 4 x 4 position, one JSON line each."""
    records = Solver().records()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as file:
        for record in records:
            file.write(json.dumps(record, separators=(", ", ": ")) + "\n")
    wins = sum(r["score"] > 0 for r in records)
    print(f"{len(records)} positions ({wins} won for the player to move), start scores "
          f"{records[0]['score']} -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
