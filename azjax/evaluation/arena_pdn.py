"""The games of a draughts arena written down as PDN (`azjax eval --pdn FILE`), to replay in
CheckerBoard or any checkers program: who played which colour, every move, the result.

`ArenaGames` is `play_engine_arena`'s `on_ply` hook: it keeps each game's actions as they
are played and its result when it ends (a forfeit is a loss of the side that forfeited,
though the board does not show it), then appends the games to a file in game order.
Shape legend: B games.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax.envs.draughts import Draughts
from azjax.envs.pdn import pdn_game, pdn_result

__all__ = ["ArenaGames"]


class ArenaGames:
    """Records the games of one arena of `num_games` between `name_a` (player A, Black in the
    first ``ceil(num_games / 2)`` games, as in every arena) and `name_b`.

    Args:
      env: the draughts env the games are played in.
      num_games: B.
      name_a, name_b: how the two sides are named in the records.
      event: the records' Event tag.
    """

    def __init__(self, env: Draughts, num_games: int, name_a: str, name_b: str,
                 event: str = "azjax eval"):
        self.env, self.num_games, self.event = env, num_games, event
        self.names = name_a, name_b
        self.actions: list[list[int]] = [[] for _ in range(num_games)]
        self.results: list[str] = ["*"] * num_games

    def __call__(self, actions: np.ndarray, moved: np.ndarray, states: Any) -> None:
        """`play_engine_arena`'s `on_ply`: keeps the actions of the games that moved, and
        the result of each game this ply ended."""
        done = np.asarray(states.terminated | states.truncated)
        for game in np.flatnonzero(moved):
            if actions[game] >= 0:
                self.actions[game].append(int(actions[game]))
            if done[game]:
                self.results[game] = pdn_result(jax.tree.map(lambda x, g=game: x[g], states))

    def write(self, path: str | Path) -> None:
        """Appends every game to `path`, in game order (Round = the game's number)."""
        first_half = (self.num_games + 1) // 2
        date = datetime.date.today().strftime("%Y.%m.%d")
        with open(path, "a", encoding="utf-8") as file:
            for game in range(self.num_games):
                black, white = self.names if game < first_half else self.names[::-1]
                file.write(pdn_game(self.env, self.actions[game], black=black, white=white,
                                    event=self.event, date=date, round_=str(game + 1),
                                    result=self.results[game]))
