"""English draughts (American checkers): 8x8 board, 12 men a side, no flying kings.

Squares are numbered 1-32 as in PDN. Player 0 plays Black, starts on 1-12 and moves first, down
the board; player 1 plays White, starts on 21-32 and moves up::

       .   1   .   2   .   3   .   4        "up": towards row 0 (White is crowned on 1-4)
       5   .   6   .   7   .   8   .
       .   9   .  10   .  11   .  12        up-left    up-right
      13   .  14   .  15   .  16   .               \\ /
       .  17   .  18   .  19   .  20                 X
      21   .  22   .  23   .  24   .               / \\
       .  25   .  26   .  27   .  28        down-left  down-right
      29   .  30   .  31   .  32   .        "down": towards row 7 (Black is crowned on 29-32)

Actions (170) are absolute (not relative to the mover): ids 0-97 are the simple moves `a-b`
between diagonal neighbours, sorted by (a, b); ids 98-169 the single jumps `axb`, sorted the
same way. So 0 = `1-5`, 1 = `1-6`, 2 = `2-6`, 23 = `9-13`, 97 = `32-28`, 98 = `1x10`,
111 = `9x18`, 169 = `32x23` (the full table is in docs/games/draughts.md). A multi-jump `9x18x27` is
two actions, `9x18` then `18x27`, by the same player: `current_player` does not change while a
capture must go on, and only the jumping piece may move. OpenSpiel's `checkers` shows the same
board turned by 180 degrees (its player 0, "White" `o`, moves first, up from its rows 1-3):
`action_to_openspiel` / `openspiel_to_action` map the ids.

Rules: men move one square diagonally forward, kings one square in any diagonal direction;
captures are mandatory and a capturing piece must keep capturing while it can (any sequence may
be chosen); a captured piece leaves the board at once; a man reaching the far row is crowned and
the move ends there; a player with no legal move loses. Draw rules (`draw_rule`):
- "laws" (the default; the laws of the English Draughts Association and the World
  Checkers/Draughts Federation): the game is drawn when neither side has captured nor moved a
  man in its own last 40 moves (80 actions), or when a move makes the same position, with the
  same side to move, for the third time;
- "openspiel" (exactly OpenSpiel's `checkers`): a counter of consecutive actions without a
  capture, reset by a capture; at 40 the game is drawn (even if the next player is stuck).

A capture or a man's move can never be undone (pieces leave the board, men only go forward), so
a position can only repeat one seen since the last of them: the state keeps those positions
(`history`, at most 80), and within that stretch the men stand still, so each side's pieces
bitboard names the position.

The position is three 32-bit bitboards (bit s = square s + 1): each player's pieces and the
kings. Legal moves come from shifts of whole bitboards: for each kind (move, jump) and direction
one bitboard of the squares such moves leave from; an action is legal when its from-square's
bit is set in its kind-and-direction bitboard.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax.envs.core import BoardView, Cell, Env, jitted_step, status_line, tree_select

__all__ = ["EVAL_WEIGHTS", "Draughts", "EvalWeights", "State", "action_to_openspiel",
           "openspiel_to_action"]

NUM_SQUARES = 32
DRAW_RULES = {"laws": 80, "openspiel": 40}  # the counter value that draws the game
REPEATS_TO_DRAW = 3  # "laws": a position made for the third time draws
_NO_POSITION = np.uint32(0xFFFFFFFF)  # an empty history slot: no position has both sides' pieces
                                      # on every square
RANDOM_START_MAX_PIECES = 6  # per side, in `Draughts.random_start`'s endings
KING_VALUE = 1.5  # in men, for `Draughts.material`: the usual rule of thumb
RANDOM_START_TRIES = 4  # draws per random start (0.07% of single draws leave the mover stuck)
PLANE_SETS = {"basic": 7, "tactics": 11}  # `Draughts(planes=...)`: observation planes (and
                                           # one more, the repetitions, under "laws")
_DIRECTIONS = ((-1, -1), (-1, 1), (1, -1), (1, 1))  # up-left, up-right, down-left, down-right
_OPPOSITE = (3, 2, 1, 0)


@dataclasses.dataclass(frozen=True)
class EvalWeights:
    """The weights of `Draughts.heuristic_value`, in men, for the side to move minus the other
    side (docs/games/draughts.md lists them; a change of any weight needs a new
    `Draughts.evaluation_version`, since the `alphabeta:D` anchors are defined by them)."""

    man: float = 1.0
    king: float = KING_VALUE
    advancement: float = 0.03  # per row a man has come forward from its own back row (0-6)
    back_rank: float = 0.1  # per man still on its own back row, guarding it against crowning
    mobility: float = 0.02  # per action the side could play if it were to move
    scale: float = 4.0  # heuristic = SQUASH * tanh(score / scale)


EVAL_WEIGHTS = EvalWeights()
SQUASH = 0.9  # keeps every static score clear of a result's +-1


def _square_rc(square: int) -> tuple[int, int]:
    """(row, col), row 0 on top, of a 0-based square index (PDN square - 1)."""
    row = square // 4
    return row, 2 * (square % 4) + (1 if row % 2 == 0 else 0)


def _rc_square(row: int, col: int) -> int:
    """0-based square index of (row, col), or -1 off the board or on a light square."""
    if 0 <= row < 8 and 0 <= col < 8 and (row + col) % 2 == 1:
        return row * 4 + col // 2
    return -1


# The dark square (0-based) of each of the 64 cells of the board view, row-major; -1 light.
_CELL_SQUARE = np.array([_rc_square(r, c) for r in range(8) for c in range(8)], np.int32)


def _bits(squares) -> int:
    return sum(1 << int(s) for s in squares)


def _action_table() -> np.ndarray:
    """int32 [170, 5]: (from, to, over, is_jump, direction) per action, moves then jumps, each
    sorted by (from, to); over = from for a move."""
    rows = []
    for jump in (0, 1):
        for sq in range(NUM_SQUARES):
            for direction, (dr, dc) in enumerate(_DIRECTIONS):
                row, col = _square_rc(sq)
                to = _rc_square(row + (1 + jump) * dr, col + (1 + jump) * dc)
                if to >= 0:
                    over = _rc_square(row + dr, col + dc) if jump else sq
                    rows.append((jump, sq, to, over, direction))
    rows.sort()
    return np.array([(f, t, o, j, d) for j, f, t, o, d in rows], dtype=np.int32)


_ACTIONS = _action_table()
NUM_ACTIONS = len(_ACTIONS)
_FROM, _TO, _OVER, _IS_JUMP, _DIRECTION = (_ACTIONS[:, i] for i in range(5))
_IS_JUMP = _IS_JUMP.astype(bool)
_ACTION_ID = {(int(f), int(t)): a for a, (f, t) in enumerate(_ACTIONS[:, :2])}
# Each action's kind-and-direction bitboard (4 * is_jump + direction) and from-square bit.
_BLOCK = (4 * _IS_JUMP + _DIRECTION).astype(np.int32)
_FROM_BIT = np.array([1 << int(f) for f in _FROM], np.uint32)


def _shift_table() -> list[list[tuple[int, int]]]:
    """For each direction, (shift, source squares bitboard) pairs: the neighbour of square s in
    that direction is s + shift for the sources of each pair (shift 3, 4 or 5, signed)."""
    table = []
    for dr, dc in _DIRECTIONS:
        by_shift: dict[int, list[int]] = {}
        for sq in range(NUM_SQUARES):
            to = _rc_square(_square_rc(sq)[0] + dr, _square_rc(sq)[1] + dc)
            if to >= 0:
                by_shift.setdefault(to - sq, []).append(sq)
        table.append(sorted((shift, _bits(squares)) for shift, squares in by_shift.items()))
    return table


_SHIFTS = _shift_table()
_ALL = np.uint32(0xFFFFFFFF)
_CROWN_ROW = np.array([_bits(range(28, 32)), _bits(range(4))], np.uint32)  # by player
# Per player: bitboards of the squares a man has come k rows forward on (k = 0..7), and the
# player's own back row (Black starts on rows 0-2 and moves down, White the other way).
_ADVANCED_ROWS = np.array([[_bits(range(4 * k, 4 * k + 4)) for k in range(8)],
                           [_bits(range(4 * (7 - k), 4 * (7 - k) + 4)) for k in range(8)]],
                          np.uint32)
_BACK_ROW = np.array([_bits(range(4)), _bits(range(28, 32))], np.uint32)
# 8x8 cells, row-major: the bit of the cell's square (0 on light cells).
_CELL_BIT = np.array([1 << sq if sq >= 0 else 0 for sq in
                      (_rc_square(r, c) for r in range(8) for c in range(8))], np.uint32)
# The 180-degree turn: square s <-> 31 - s; each action's image.
_ROTATED = np.array([_ACTION_ID[31 - int(f), 31 - int(t)] for f, t in _ACTIONS[:, :2]], np.int32)


def _openspiel_ids() -> np.ndarray:
    """int32 [170]: OpenSpiel's id of each action. OpenSpiel's board is ours turned by 180
    degrees; its id is ((row * 8 + col) * 4 + direction) * 2 + is_jump in its own frame
    (row 0 on top), directions 0-3 = up-left, up-right, down-right, down-left."""
    theirs = {(-1, -1): 0, (-1, 1): 1, (1, 1): 2, (1, -1): 3}
    ids = []
    for f, _, _, jump, direction in _ACTIONS:
        row, col = _square_rc(int(f))
        dr, dc = _DIRECTIONS[direction]
        ids.append((((7 - row) * 8 + 7 - col) * 4 + theirs[-dr, -dc]) * 2 + int(jump))
    return np.array(ids, np.int32)


OPENSPIEL_IDS = _openspiel_ids()
_FROM_OPENSPIEL = {int(o): a for a, o in enumerate(OPENSPIEL_IDS)}


def action_to_openspiel(action: int) -> int:
    """OpenSpiel `checkers` action id (0-511) of our action id (0-169); ValueError outside."""
    if not 0 <= int(action) < NUM_ACTIONS:
        raise ValueError(f"draughts action id must be 0-{NUM_ACTIONS - 1}, got {action}")
    return int(OPENSPIEL_IDS[int(action)])


def openspiel_to_action(openspiel_id: int) -> int:
    """Our action id of an OpenSpiel `checkers` action id; ValueError for the ids that leave
    the board or start on a light square (never legal in OpenSpiel either)."""
    if int(openspiel_id) not in _FROM_OPENSPIEL:
        raise ValueError(f"OpenSpiel checkers action {openspiel_id} is never a legal move")
    return _FROM_OPENSPIEL[int(openspiel_id)]


@struct.dataclass
class State:
    """A draughts position: the `GameState` fields, three bitboards, the capture in progress,
    the draw counter and (under "laws") the positions since the last capture or man's move."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [170]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []
    pieces: jax.Array  # uint32 [2]: bitboard of each player's pieces (bit s = square s + 1)
    kings: jax.Array  # uint32 []: bitboard of the kings, both colours
    jumper: jax.Array  # int8 []: square index of the piece that must keep capturing, else -1
    counter: jax.Array  # int8 []: actions counted towards the draw rule
    # uint32 [H, 2]: the `pieces` of the positions before this one since the last capture or
    # man's move, newest first (empty slots `_NO_POSITION`); H = 80 under "laws", else 1
    # (unused)
    history: jax.Array
    repeats: jax.Array  # int8 []: how many times this position stood before (0-2; "laws")


def _neighbours(bb: jax.Array, direction: int) -> jax.Array:
    """The squares next to those of `bb` in `direction` (off-board neighbours dropped)."""
    out = jnp.uint32(0)
    for shift, sources in _SHIFTS[direction]:
        moved = bb & np.uint32(sources)
        out = out | (moved << shift if shift > 0 else moved >> -shift)
    return out


def _jump_words(mine, theirs, kings, player, movers) -> jax.Array:
    """uint32 [4]: per direction, the squares of `movers` (pieces of `player`) that can jump."""
    empty = ~(mine | theirs)
    words = []
    for direction in range(4):
        back = _OPPOSITE[direction]  # the squares whose neighbour in `direction` is in a set
        forward = (player == 0) == (direction >= 2)
        able = movers & (kings | jnp.where(forward, _ALL, jnp.uint32(0)))
        words.append(able & _neighbours(theirs & _neighbours(empty, back), back))
    return jnp.stack(words)


def _move_words(mine, theirs, kings, player, jumper) -> jax.Array:
    """uint32 [8]: per block (kind, direction), the bitboard of the squares its legal actions
    leave from. Jumps only (and only by `jumper` when >= 0) if any jump exists."""
    jumper = jumper.astype(jnp.int32)  # int8 inside a while loop trips jax2onnx's types
    only = jnp.where(jumper >= 0, jnp.uint32(1) << jnp.maximum(jumper, 0).astype(jnp.uint32),
                     _ALL)
    jumps = _jump_words(mine, theirs, kings, player, mine & only)
    empty = ~(mine | theirs)
    steps = []
    for direction in range(4):
        forward = (player == 0) == (direction >= 2)
        able = mine & (kings | jnp.where(forward, _ALL, jnp.uint32(0)))
        steps.append(able & _neighbours(empty, _OPPOSITE[direction]))
    steps = jnp.where(jnp.any(jumps != 0), jnp.uint32(0), jnp.stack(steps))
    return jnp.concatenate([steps, jumps])


def _mask(words: jax.Array) -> jax.Array:
    """bool [170] from the eight kind-and-direction bitboards: each action's from-square bit in
    its own bitboard (one fused elementwise pass; as fast as a gather and quicker to compile
    than slicing per bitboard)."""
    selected = jnp.uint32(0)
    for k in range(8):
        selected = selected | jnp.where(k == _BLOCK, words[k], jnp.uint32(0))
    return (selected & _FROM_BIT) != 0


def _capture_planes(mine, theirs, kings, player) -> jax.Array:
    """uint32 [2]: the pieces of `player` that could capture now (ignoring which piece must go
    on with a capture) and the pieces of the other side they could take, each as a bitboard."""
    jumps = _jump_words(mine, theirs, kings, player, mine)  # [4], per direction
    capturers = functools.reduce(jnp.bitwise_or, list(jumps))
    # A jump over direction d takes the piece next to its square in d (always one of theirs).
    victims = functools.reduce(jnp.bitwise_or, [_neighbours(jumps[d], d) for d in range(4)])
    return jnp.stack([capturers, victims])


class Draughts(Env):
    """English draughts (see the module docstring): 170 actions, Black (player 0) first."""

    num_actions = NUM_ACTIONS
    player_names = ("Black (b)", "White (w)")
    title = "Draughts"
    move_hint = "PDN such as 9-13, or a whole capture 9x18x27"
    move_chain = "x"  # a multi-jump's hops 9x18, 18x27 are one move, 9x18x27 (format_move)
    endgame_max_pieces = 5  # azjax.envs.draughts_endings

    def __init__(self, draw_rule: str = "laws", planes: str = "basic") -> None:
        """`draw_rule`: "laws" (the laws' forty-move rule and threefold repetition) or
        "openspiel" (OpenSpiel's counter); see the module docstring. `planes`: "basic" (7
        planes, the game's id `draughts`) or "tactics" (11: the basic ones and each side's
        one-hop captures, id `draughts_tactics`), each with one more under "laws" (the
        repetitions); see `observe`."""
        if draw_rule not in DRAW_RULES:
            raise ValueError(f"draw_rule must be one of {sorted(DRAW_RULES)}, got {draw_rule!r}")
        if planes not in PLANE_SETS:
            raise ValueError(f"planes must be one of {sorted(PLANE_SETS)}, got {planes!r}")
        self.planes = planes
        self.name = "draughts" if planes == "basic" else f"draughts_{planes}"
        self.draw_rule = self.rules = draw_rule
        self.laws = draw_rule == "laws"
        self.observation_shape = (8, 8, PLANE_SETS[planes] + self.laws)
        self.draw_limit = DRAW_RULES[draw_rule]
        # Under the laws a position can repeat only one of the draw_limit before it since the
        # last capture or man's move (the forty-move rule draws at draw_limit).
        # OpenSpiel's rule keeps one slot it never reads: an array of size 0 in the state
        # cannot be checkpointed (orbax refuses it) and loses its sharding when copied.
        self.history_length = self.draw_limit if self.laws else 1
        # A sound bound. Captures: at most 12 + 11 = 23 (a side with no piece has lost). Between
        # two counter resets at most limit - 1 actions, and limit after the last. "openspiel"
        # resets on captures only: 40 * 23 + 40 = 960. "laws" also resets on each man's move,
        # at most 24 men x 7 rows = 168 of them: 80 * (23 + 168) + 80 = 15,360.
        resets = 23 + (24 * 7 if self.laws else 0)
        self.max_game_length = self.draw_limit * (resets + 1)

    def __repr__(self) -> str:
        planes = "" if self.planes == "basic" else f", planes={self.planes!r}"
        return f"Draughts(draw_rule={self.draw_rule!r}{planes})"

    @property
    def evaluation_version(self) -> str:
        """`Env.evaluation_version`: the weights' version, and the rules where they are not
        OpenSpiel's (the draw rules change what the `alphabeta:D` anchors' games come to)."""
        return "draughts-1" if self.draw_rule == "openspiel" else f"draughts-{self.draw_rule}-1"

    # ---- rules -------------------------------------------------------------------------------

    def _init(self) -> State:
        pieces = jnp.array([_bits(range(12)), _bits(range(20, 32))], jnp.uint32)
        return self._state(pieces, jnp.uint32(0), jnp.int32(0), jnp.int8(-1), jnp.int8(0))

    def _state(self, pieces, kings, player, jumper, counter) -> State:
        """A state from its position, with its mask and end computed (zero rewards, no earlier
        positions: a repetition counts from here)."""
        words = _move_words(pieces[player], pieces[1 - player], kings, player, jumper)
        done = jnp.all(words == 0) | (counter >= self.draw_limit)
        return State(
            current_player=player,
            legal_action_mask=_mask(words) | done,
            rewards=jnp.zeros(2, jnp.float32),
            terminated=done,
            truncated=jnp.bool_(False),
            step_count=jnp.int32(0),
            pieces=pieces,
            kings=kings,
            jumper=jumper,
            counter=counter,
            history=jnp.full((self.history_length, 2), _NO_POSITION, jnp.uint32),
            repeats=jnp.int8(0),
        )

    def _apply_legal_action(self, state: State, action: jax.Array) -> State:
        mover = state.current_player
        frm, to, over = (jnp.asarray(t, jnp.uint32)[action] for t in (_FROM, _TO, _OVER))
        jump = jnp.asarray(_IS_JUMP)[action]
        one = jnp.uint32(1)
        from_bit, to_bit = one << frm, one << to
        over_bit = jnp.where(jump, one << over, jnp.uint32(0))
        was_king = (state.kings & from_bit) != 0
        crowned = ~was_king & ((to_bit & jnp.asarray(_CROWN_ROW)[mover]) != 0)
        mine = (state.pieces[mover] & ~from_bit) | to_bit
        theirs = state.pieces[1 - mover] & ~over_bit
        kings = (state.kings & ~from_bit & ~over_bit) | jnp.where(was_king | crowned, to_bit,
                                                                 jnp.uint32(0))
        pieces = jnp.where(mover == 0, jnp.stack([mine, theirs]), jnp.stack([theirs, mine]))

        # The jumping piece goes on if it can jump again (a man just crowned cannot).
        again = jump & ~crowned & jnp.any(_jump_words(mine, theirs, kings, mover, to_bit) != 0)
        player = jnp.where(again, mover, 1 - mover)
        jumper = jnp.where(again, to.astype(jnp.int8), jnp.int8(-1))
        resets = jump | (~was_king & self.laws)
        counter = jnp.where(resets, 0, state.counter + 1).astype(jnp.int8)
        history, repeats = self._remember(state, resets, pieces)

        words = _move_words(pieces[player], pieces[1 - player], kings, player, jumper)
        draw = self._drawn(counter, repeats)
        stuck = jnp.all(words == 0) & ~draw
        loser_sign = jnp.where(player == 0, -1.0, 1.0)
        rewards = jnp.where(stuck, jnp.array([1.0, -1.0]) * loser_sign, 0.0).astype(jnp.float32)
        return state.replace(
            current_player=player,
            legal_action_mask=_mask(words),
            rewards=rewards,
            terminated=draw | stuck,
            pieces=pieces,
            kings=kings,
            jumper=jumper,
            counter=counter,
            history=history,
            repeats=repeats,
        )

    def _drawn(self, counter: jax.Array, repeats: jax.Array) -> jax.Array:
        """bool []: the draw rule ends the game (the counter at its limit, or a third time)."""
        return (counter >= self.draw_limit) | (repeats >= REPEATS_TO_DRAW - 1)

    def _remember(self, state: State, irreversible: jax.Array, pieces: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
        """(history, repeats) after a move from `state` to `pieces`: the history gains
        `state`'s position, or empties after a capture or a man's move (no earlier position
        can come back); repeats counts the earlier positions equal to the new one with the
        same side to move. No multi-jump happens inside a stretch, so the side to move
        alternates: those are the history's entries an even number of moves back (1, 3, ...
        in the newest-first order)."""
        if not self.laws:
            return state.history, state.repeats
        shifted = jnp.concatenate([state.pieces[None], state.history[:-1]])
        history = jnp.where(irreversible, _NO_POSITION, shifted)
        same = jnp.all(history[1::2] == pieces[None], axis=-1)
        return history, jnp.sum(same).astype(jnp.int8)

    # ---- random endings for self-play -------------------------------------------------------

    def random_start(self, key: jax.Array) -> State:
        """A random ending: each side 1-`RANDOM_START_MAX_PIECES` pieces on distinct random
        squares, each a king with probability 1/2 (a man never stands on its crowning row: it
        would have been crowned), a random player to move and a draw counter uniform in
        [0, draw limit / 2). Positions whose mover cannot move are drawn again
        (`RANDOM_START_TRIES` tries, then the initial position). Pure; vmap for a batch.

        Why: self-play between equals rarely reaches endings with few pieces, and the agent
        drew such endings against MCTS-1000 (3 kings against 2 drawn by the counter; king
        against king searched at -0.5: docs/results.md);
        `selfplay.random_start_prob` starts that share of games here instead.
        """
        square_bit = np.uint32(1) << np.arange(NUM_SQUARES, dtype=np.uint32)
        on_crown_row = (_CROWN_ROW[:, None] & square_bit) != 0  # bool [2, 32], by player

        def candidate(key):
            k_order, k_count, k_king, k_player, k_counter = jax.random.split(key, 5)
            rank = jax.random.permutation(k_order, NUM_SQUARES)  # square s is the rank[s]-th
            black_n, white_n = jax.random.randint(k_count, (2,), 1, RANDOM_START_MAX_PIECES + 1)
            black = rank < black_n
            white = (rank >= black_n) & (rank < black_n + white_n)
            king = (jax.random.bernoulli(k_king, 0.5, (NUM_SQUARES,))
                    | (black & on_crown_row[0]) | (white & on_crown_row[1]))

            def pack(occupied):
                return jnp.sum(jnp.where(occupied, square_bit, jnp.uint32(0)), dtype=jnp.uint32)

            return self._state(
                jnp.stack([pack(black), pack(white)]), pack((black | white) & king),
                jax.random.randint(k_player, (), 0, 2), jnp.int8(-1),
                jax.random.randint(k_counter, (), 0, self.draw_limit // 2).astype(jnp.int8))

        tries = jax.vmap(candidate)(jax.random.split(key, RANDOM_START_TRIES))
        live = ~tries.terminated
        first = jnp.argmax(live)
        chosen = jax.tree.map(lambda x: x[first], tries)
        return tree_select(jnp.any(live), chosen, self._init())

    def material(self, state: State) -> jax.Array:
        """float32 [2]: (men + KING_VALUE x kings) / 12 per player id, so each side starts at 1
        (12 men); a lone king is 0.125."""
        men = jax.lax.population_count(state.pieces & ~state.kings)
        kings = jax.lax.population_count(state.pieces & state.kings)
        return (men.astype(jnp.float32) + KING_VALUE * kings.astype(jnp.float32)) / 12.0

    def endgame_adjudicator(self, max_pieces: int):
        """`Env.endgame_adjudicator`: positions of at most `max_pieces` (2-5) pieces, whole
        moves made (no capture in progress), finished with their result with perfect play from
        the solved table of `azjax.envs.draughts_endings` (solved on first use, then cached),
        valued by its `result_value`. The table counts no draw rule: a win it names may still
        meet the forty-move rule or a repetition in the real game."""
        from azjax.envs.draughts_endings import load_table, result_value

        if not 2 <= max_pieces <= self.endgame_max_pieces:
            raise ValueError(f"draughts endgame tables hold 2-{self.endgame_max_pieces} "
                             f"pieces, got {max_pieces}")
        lookup = load_table(max_pieces).lookup_fn()

        def adjudicate(state: State) -> State:
            found, result = lookup(state.pieces, state.kings, state.current_player)
            known = found & (state.jumper < 0) & ~state.terminated & ~state.truncated
            value = result_value(result)
            mine_first = jnp.stack([value, -value])
            rewards = jnp.where(state.current_player == 0, mine_first, mine_first[::-1])
            return state.replace(terminated=state.terminated | known,
                                 rewards=jnp.where(known, rewards, state.rewards))

        return adjudicate

    def heuristic_value(self, state: State) -> jax.Array:
        """float32 []: the side to move's hand-made score minus the other side's, squashed into
        (-0.9, 0.9) by `SQUASH * tanh(difference / scale)`; the terms and weights are
        `EVAL_WEIGHTS` (material, men's advancement, back-rank guard, mobility)."""
        w = EVAL_WEIGHTS
        me = state.current_player
        popcount = jax.lax.population_count

        def score(player, mobility):
            pieces = state.pieces[player]
            men = pieces & ~state.kings
            kings = pieces & state.kings
            rows = jnp.asarray(_ADVANCED_ROWS)[player]
            advanced = sum(k * popcount(men & rows[k]) for k in range(1, 8))
            guards = popcount(men & jnp.asarray(_BACK_ROW)[player])
            return (w.man * popcount(men) + w.king * popcount(kings) + w.advancement * advanced
                    + w.back_rank * guards + w.mobility * mobility).astype(jnp.float32)

        def mobility(player, jumper):
            words = _move_words(state.pieces[player], state.pieces[1 - player], state.kings,
                                player, jumper)
            return jnp.sum(popcount(words))  # each set bit is one action

        mine = score(me, mobility(me, state.jumper))
        theirs = score(1 - me, mobility(1 - me, jnp.int8(-1)))
        return (SQUASH * jnp.tanh((mine - theirs) / w.scale)).astype(jnp.float32)

    def forcing(self, state: State) -> jax.Array:
        """bool []: a capture is pending (captures are compulsory, so every legal action is
        one): the alpha-beta baseline searches on through the exchange."""
        return jnp.any(state.legal_action_mask[int(np.argmax(_IS_JUMP)):]) & ~state.terminated

    def observe(self, state: State) -> jax.Array:
        """float32 [8, 8, P], row 0 on top as in the module's diagram, "my" = the mover's.

        Planes 0-6 (every plane set): my men, my kings, their men, their kings, the piece that
        must continue a capture, "player 1 (White) to move" (all ones or zeros: which way is
        forward), draw counter / draw limit (all cells). With `planes="tactics"` also 7: my
        pieces that could capture, 8: their pieces I could take, 9: their pieces that could
        capture were it their move, 10: my pieces they could take (one hop each, from the rules'
        own jump bitboards): what a dense network would otherwise learn square by square.
        Under "laws" a last plane: how many times this position stood before, / 2 (all cells;
        one more time draws).
        """
        me = state.current_player
        mine, theirs, kings = state.pieces[me], state.pieces[1 - me], state.kings
        square = state.jumper.astype(jnp.int32)  # as in _move_words
        jumper = jnp.where(square >= 0, jnp.uint32(1) << jnp.maximum(square, 0).astype(jnp.uint32),
                           jnp.uint32(0))
        none = jnp.uint32(0)
        words = [mine & ~kings, mine & kings, theirs & ~kings, theirs & kings, jumper, none, none]
        zero = jnp.float32(0)
        constant = [zero, zero, zero, zero, zero, me.astype(jnp.float32),
                    state.counter.astype(jnp.float32) / self.draw_limit]
        if self.planes == "tactics":
            words += [*_capture_planes(mine, theirs, kings, me),
                      *_capture_planes(theirs, mine, kings, 1 - me)]
            constant += [zero] * 4
        if self.laws:
            words.append(none)
            constant.append(state.repeats.astype(jnp.float32) / (REPEATS_TO_DRAW - 1))
        # One fused elementwise pass: cell c of plane p is the bit of c's square in words[p]
        # (a light cell's bit is 0, so it stays 0), plus the plane's constant.
        bits = ((jnp.stack(words)[None, :] & _CELL_BIT[:, None]) != 0).astype(jnp.float32)
        return (bits + jnp.stack(constant)[None, :]).reshape(self.observation_shape)

    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Identity and the 180-degree turn with the colours swapped: ([2, 8, 8, P], [2, 170]).

        No reflection or quarter turn keeps dark squares dark and forward forward, so the board
        alone has no symmetry. But turning the board and swapping the colours (Black's men
        become White's on the turned squares, and forward turns with them) is an exact symmetry
        of the rules: the turned position with the other colour to move has the same value and
        the turned moves. The planes already say "mine" and "theirs", so besides the turn only
        the "player 1 to move" plane flips.
        """
        turned = obs[::-1, ::-1]
        turned = turned.at[..., 5].set(1.0 - turned[..., 5])
        return jnp.stack([obs, turned]), jnp.stack([policy, policy[_ROTATED]])

    # ---- positions and notation (host side) --------------------------------------------------

    @staticmethod
    def board(state: State) -> np.ndarray:
        """int8 [32] by PDN square - 1: 0 empty, 1 / 2 Black man / king, -1 / -2 White's."""
        bit = 1 << np.arange(NUM_SQUARES, dtype=np.uint64)
        black, white = (np.uint64(int(p)) & bit != 0 for p in np.asarray(state.pieces))
        king = np.uint64(int(state.kings)) & bit != 0
        return ((black.astype(np.int8) - white) * (1 + king)).astype(np.int8)

    def from_fen(self, fen: str, *, jumper: int | None = None, counter: int = 0) -> State:
        """A state from a PDN FEN such as `B:W18,24,K27:B12,16,K2` (B = Black = player 0 to move;
        K marks a king; ranges like `1-12` allowed). `jumper` is the PDN square of a piece that
        must continue a capture; `counter` the draw counter. Raises ValueError on bad input."""
        text = fen.strip().strip('"').rstrip(".")
        parts = text.split(":")
        if len(parts) != 3 or parts[0] not in ("B", "W"):
            raise ValueError(f"a FEN looks like 'B:W21,22:B1,K2' (side to move first), got {fen!r}")
        squares = {"B": [], "W": []}
        kings = []
        for part in parts[1:]:
            if not part or part[0] not in "BW":
                raise ValueError(f"each FEN side starts with B or W, got {part!r} in {fen!r}")
            for item in filter(None, part[1:].split(",")):
                king = item.startswith("K")
                found = re.fullmatch(r"(\d{1,2})(?:-(\d{1,2}))?", item[king:])
                low, high = (found.group(1), found.group(2) or found.group(1)) if found else (0, 0)
                if not found or not 1 <= int(low) <= int(high) <= NUM_SQUARES:
                    raise ValueError(f"bad FEN square {item!r} in {fen!r}")
                span = range(int(low) - 1, int(high))
                squares[part[0]].extend(span)
                kings.extend(span if king else [])
        if set(squares["B"]) & set(squares["W"]):
            raise ValueError(f"a square holds pieces of both colours in {fen!r}")
        if not 0 <= counter < 128:
            raise ValueError(f"counter must be 0-127, got {counter}")
        player = "BW".index(parts[0])
        if jumper is not None and not (1 <= jumper <= NUM_SQUARES
                                       and jumper - 1 in squares[parts[0]]):
            raise ValueError(f"square {jumper} holds no piece of the player to move")
        pieces = jnp.array([_bits(squares["B"]), _bits(squares["W"])], jnp.uint32)
        state = _jitted(self, "_state")(pieces, jnp.uint32(_bits(kings)), jnp.int32(player),
                                        jnp.int8(-1 if jumper is None else jumper - 1),
                                        jnp.int8(counter))
        if jumper is not None and not np.asarray(state.legal_action_mask)[98:].any():
            raise ValueError(f"the piece on {jumper} has no capture to continue")
        return state

    def parse_position(self, text: str) -> State:
        """The state of a FEN (`from_fen`), taken from the start of `text`: the rest of the line
        is ignored, so the `FEN counter ply` lines of `tools/draughts_engine_judge.py` read as
        their positions. The draw counter starts at 0 and the repetition history empty.

        Raises:
          ValueError: an empty line or a bad FEN, as `from_fen`.
        """
        fields = text.split()
        if not fields:
            raise ValueError("an empty line holds no position")
        return self.from_fen(fields[0])

    def to_fen(self, state: State) -> str:
        """The PDN FEN of a state's pieces and player to move (`B:W...:B...`)."""
        return self.fen(self.board(state), int(state.current_player))

    @staticmethod
    def fen(board: np.ndarray, player: int) -> str:
        """The PDN FEN of an int8 [32] board (as `board` gives it) with `player` to move
        (0 Black, 1 White)."""
        def side(sign):
            return ",".join(("K" if v == 2 * sign else "") + str(s + 1)
                            for s, v in enumerate(board) if v * sign > 0)

        return f"{'BW'[player]}:W{side(-1)}:B{side(1)}"

    def render(self, state: State) -> str:
        """The board (b/B Black men/kings, w/W White's, `.` empty) beside the square numbers."""
        board = self.board(state)
        glyph = {0: ".", 1: "b", 2: "B", -1: "w", -2: "W"}
        lines = []
        for row in range(8):
            cells, numbers = [], []
            for col in range(8):
                sq = _rc_square(row, col)
                cells.append("   " if sq < 0 else f" {glyph[int(board[sq])]} ")
                numbers.append("   " if sq < 0 else f"{sq + 1:>2} ")
            lines.append(("".join(cells) + "    " + "".join(numbers)).rstrip())
        draw = bool(self._drawn(state.counter, state.repeats))
        winner = None if draw else 1 - int(state.current_player)
        lines.append(status_line(state, winner, ("Black (b)", "White (w)")))
        if not bool(state.terminated | state.truncated) and int(state.jumper) >= 0:
            lines.append(f"The capture goes on with the piece on {int(state.jumper) + 1}.")
        lines.append(f"Draw counter: {int(state.counter)}/{self.draw_limit} ({self.draw_rule}).")
        if self.laws and int(state.repeats):
            lines.append(f"This position has stood {int(state.repeats) + 1} times.")
        return "\n".join(lines)

    def board_view(self, state: State) -> BoardView:
        """8 x 8 cells, row 0 on top as in the module's diagram: dark squares noted with their
        PDN number, black and white men, kings labelled `K`."""
        board = self.board(state)
        cells = []
        for row in range(8):
            for col in range(8):
                sq = _rc_square(row, col)
                value = int(board[sq]) if sq >= 0 else 0
                cells.append(Cell(shade="light") if sq < 0 else Cell(
                    player=None if value == 0 else int(value < 0),
                    label="K" if abs(value) == 2 else "", note=str(sq + 1), shade="dark"))
        return BoardView(rows=8, cols=8, cells=tuple(cells), pieces="disc",
                         colors=("#222", "#fafafa"))

    def board_cells(self) -> tuple[Cell, ...]:
        """Code 0: a light square; 1 + 5 * s + k: dark square s (PDN s + 1) empty (k = 0),
        with a Black man (1), a White man (2), a Black king (3), a White king (4)."""
        pieces = (None, ""), (0, ""), (1, ""), (0, "K"), (1, "K")
        return (Cell(shade="light"), *(Cell(player=player, label=label, note=str(sq + 1),
                                            shade="dark")
                                       for sq in range(NUM_SQUARES) for player, label in pieces))

    def board_codes(self, state: State) -> jax.Array:
        """int32 [64]: `board_view`'s cells as indices into `board_cells`."""
        squares = np.arange(NUM_SQUARES, dtype=np.uint32)  # a constant: ONNX has no uint Range
        black, white = (((p >> squares) & 1).astype(jnp.int32) for p in state.pieces)
        king = ((state.kings >> squares) & 1).astype(jnp.int32)
        kind = jnp.where(black | white, 1 + white + 2 * king, 0)  # [32], k as in board_cells
        codes = 1 + 5 * jnp.arange(NUM_SQUARES, dtype=jnp.int32) + kind
        return jnp.where(_CELL_SQUARE >= 0, codes[jnp.maximum(_CELL_SQUARE, 0)], 0)

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """Two clicks: the piece's square, then the square it moves or jumps to."""
        f, t = (_square_rc(int(sq)) for sq in _ACTIONS[int(action), :2])
        return ((f[0] * 8 + f[1],), (t[0] * 8 + t[1],))

    def action_to_str(self, action: int) -> str:
        """`9-13` for a simple move, `9x18` for one jump."""
        if not 0 <= int(action) < NUM_ACTIONS:
            raise ValueError(f"draughts action id must be 0-{NUM_ACTIONS - 1}, got {action}")
        f, t, _, jump, _ = _ACTIONS[int(action)]
        return f"{f + 1}{'x' if jump else '-'}{t + 1}"

    def str_to_action(self, text: str) -> int:
        """The action id of one move `9-13` or one jump `9x18`; ValueError naming a bad one."""
        text = text.strip()
        found = re.fullmatch(r"([0-9]{1,2})([-x])([0-9]{1,2})", text)
        if found is None:
            raise ValueError("a draughts action is 'from-to' (a move) or 'fromxto' (one jump) "
                             f"with squares 1-32, got {text!r}")
        f, sep, t = int(found.group(1)) - 1, found.group(2), int(found.group(3)) - 1
        action = _ACTION_ID.get((f, t))
        if action is None or _IS_JUMP[action] != (sep == "x"):
            kind = "one jump (two squares on a diagonal)" if sep == "x" else \
                "a move to a diagonal neighbour"
            raise ValueError(f"{text!r} is not {kind} between squares 1-32")
        return action

    def legal_moves(self, state: State) -> dict[str, list[int]]:
        """Every whole legal move of the player to move, in PDN (`9-13`, `9x18x27`), with its
        successive action ids (from a state mid-capture: the rest of the capture)."""
        if bool(state.terminated | state.truncated):
            return {}
        step = jitted_step(self)
        moves: dict[str, list[int]] = {}
        pending = [(state, [])]
        while pending:
            node, path = pending.pop()
            for action in np.flatnonzero(np.asarray(node.legal_action_mask)).tolist():
                child = step(node, jnp.int32(action))
                if not bool(child.terminated) and int(child.jumper) >= 0:
                    pending.append((child, path + [action]))
                else:
                    moves[self.format_move(path + [action])] = path + [action]
        return dict(sorted(moves.items(), key=lambda m: [int(s) for s in re.split("[-x]", m[0])]))

    def parse_move(self, state: State, text: str) -> list[int]:
        """The action ids of a whole PDN move from `state`: `9-13`, `9x18x27`, or the short form
        `9x27` when one capture only goes from 9 to 27. Raises ValueError naming the legal
        moves."""
        if bool(state.terminated | state.truncated):
            raise ValueError("the game is over: no move can be played")
        text = text.strip()
        if re.fullmatch(r"[0-9]{1,2}(-[0-9]{1,2}|(x[0-9]{1,2})+)", text) is None:
            raise ValueError(f"a draughts move looks like '9-13' or '9x18x27', got {text!r}")
        moves = self.legal_moves(state)
        if text in moves:
            return moves[text]
        ends = text.split("x")
        short = [m for m in moves if len(ends) == 2 and "x" in m
                 and (m.split("x")[0], m.split("x")[-1]) == (ends[0], ends[1])]
        if len(short) == 1:
            return moves[short[0]]
        why = f"ambiguous ({', '.join(short)})" if short else "not legal here"
        raise ValueError(f"{text!r} is {why}; legal moves: {', '.join(moves)}")

    def format_move(self, actions) -> str:
        """PDN of successive action ids by one player: [`9x18`, `18x27`] -> `9x18x27`.

        Raises:
          ValueError: when the actions do not chain into one move.
        """
        names = [self.action_to_str(int(a)) for a in actions]
        if len(names) == 1:
            return names[0]
        hops = [name.split("x") for name in names]
        if not names or any(len(h) != 2 for h in hops) or any(
                a[1] != b[0] for a, b in zip(hops, hops[1:], strict=False)):
            raise ValueError(f"actions {names} do not chain into one move")
        return "x".join([hops[0][0]] + [h[1] for h in hops])


@functools.cache
def _jitted(env: Draughts, method: str):
    return jax.jit(getattr(env, method))
