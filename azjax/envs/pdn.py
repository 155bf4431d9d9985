"""Draughts games as PDN (Portable Draughts Notation), the text format checkers programs
(CheckerBoard and its engines, game databases) read and write: tag pairs, then the moves
numbered by whole moves, then the result.

`pdn_game` writes one game from its start and its env actions (a multi-jump's hops are
written as one capture, `9x18x27`). English checkers is `GameType "21"`; a game that starts
elsewhere than the initial position carries it as `SetUp "1"` and `FEN`. The result is
written as CheckerBoard writes it for English checkers, from the side that moves first:
`1-0` when Black won, `0-1` when White did, `1/2-1/2` for a draw and `*` for a game not
finished (international draughts, where White moves first, reads the same two the other way).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import jax

from azjax.envs.core import Env, whole_moves, winner_of
from azjax.envs.draughts import Draughts, State

__all__ = ["GAME_TYPE", "check_recordable", "pdn_game", "pdn_result", "result_of_winner"]

GAME_TYPE = "21"  # PDN's number for English draughts (American checkers)


def check_recordable(env: Env) -> None:
    """Refuses `--pdn` in one line for a game PDN does not record (anything but draughts)."""
    if not isinstance(env, Draughts):
        raise ValueError(f"--pdn: PDN records draughts games; {env.name} is not draughts")


def pdn_result(state: State) -> str:
    """The PDN result of a game's last position: `1-0` (Black won), `0-1` (White won),
    `1/2-1/2` or `*` (still running)."""
    if not bool(state.terminated | state.truncated):
        return "*"
    return result_of_winner(winner_of(state))


def result_of_winner(winner: int | None) -> str:
    """The PDN result of a finished game won by player `winner` (0: Black, 1: White; None: a
    draw): `1-0`, `0-1` or `1/2-1/2`. For results the board does not show (a forfeit)."""
    return "1/2-1/2" if winner is None else ("1-0" if winner == 0 else "0-1")


def pdn_game(env: Draughts, actions: Sequence[int], *, start: State | None = None,
             black: str = "?", white: str = "?", event: str = "?", site: str = "?",
             date: str = "????.??.??", round_: str = "?", result: str | None = None) -> str:
    """One game as PDN text, ending in a blank line (games of a file follow one another).

    Args:
      env: the draughts env the game was played in.
      actions: the env actions played from `start`, in order (each legal where played).
      start: the position the game started from (one unbatched state; default: the initial
        position, which needs no FEN tag).
      black, white, event, site, date, round_: the tags' values (who played Black, who
        played White; `date` as YYYY.MM.DD).
      result: the result to write (`1-0`, `0-1`, `1/2-1/2`, `*`); default: the last
        position's (`pdn_result`), which a game decided off the board (a forfeit) overrides.

    Returns:
      The tag pairs, the numbered moves (wrapped under 80 columns) and the result.

    Raises:
      ValueError: an action that is not legal where it is played.
    """
    initial = env.init(jax.random.PRNGKey(0))
    fen = env.to_fen(initial if start is None else start)
    moves, state = whole_moves(env, actions, start, describe=env.to_fen)
    outcome = result or pdn_result(state)
    tags = [("Event", event), ("Site", site), ("Date", date), ("Round", round_),
            ("Black", black), ("White", white), ("Result", outcome), ("GameType", GAME_TYPE)]
    if fen != env.to_fen(initial):
        tags += [("SetUp", "1"), ("FEN", fen)]
    words, number = [], 1  # a pair is Black's move and White's reply
    for index, (mover, hops) in enumerate(moves):
        move = env.format_move(hops)
        if mover == 0:
            words.append(f"{number}. {move}")
        else:
            words.append(f"{number}... {move}" if index == 0 else move)
            number += 1
    body = textwrap.fill(" ".join(words + [outcome]), width=79)
    return "".join(f'[{name} "{_quoted(value)}"]\n' for name, value in tags) + "\n" + body + "\n\n"


def _quoted(value: str) -> str:
    """A tag's value with its backslashes and double quotes escaped, as PGN's tags are."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
