"""Games that start from given positions (`selfplay.start_positions`).

Self-play starts every game from the initial position, perhaps after a few random moves, so it
reaches the positions a strong opponent steers into only as often as its own play does. A file
of positions, one per line in the game's notation (`Env.parse_position`; draughts: a FEN), such
as those where the agent stood in its games against an engine
(`tools/draughts_engine_judge.py --draw-positions`), lets a share of the games start there
instead: `StartPositions(env, starts)` is `env` whose `random_start` draws one of them
uniformly, and `selfplay.random_start_prob` says how often self-play uses it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from azjax.envs.core import Env, GameState
from azjax.envs.wrapper import EnvWrapper

__all__ = ["StartPositions", "read_start_positions", "start_positions_digest",
           "with_start_positions"]


class StartPositions(EnvWrapper):
    """`env` whose random starts are the positions `starts`, drawn uniformly.

    Args:
      env: the base game.
      starts: N live states of `env`, stacked on a leading axis [N] (`read_start_positions`).
        They are held as constants of every function that draws from them.
    """

    def __init__(self, env: Env, starts: GameState) -> None:
        super().__init__(env)
        sizes = {x.shape[0] for x in jax.tree.leaves(starts)}
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError("starts must be one or more states stacked on a leading axis")
        self.starts = jax.tree.map(jnp.asarray, starts)
        self.num_starts = sizes.pop()

    def random_start(self, key: jax.Array) -> GameState:
        """One of the start positions, drawn uniformly.

        Args:
          key: a PRNG key.

        Returns:
          One live state of the base game.
        """
        index = jax.random.randint(key, (), 0, self.num_starts)
        return jax.tree.map(lambda x: x[index], self.starts)


def read_start_positions(env: Env, path: str | Path) -> GameState:
    """The positions of a text file, one per line in the game's notation; blank lines and lines
    starting with `#` are skipped.

    Args:
      env: the game whose `parse_position` reads each line.
      path: the file.

    Returns:
      The N positions' states stacked on a leading axis [N], as numpy arrays.

    Raises:
      ValueError: one line naming the file (and line) and what is wrong: no such file, no
        positions in it, a line the game cannot read, a finished game, or a game without a
        notation for positions.
    """
    path = Path(path)
    states = []
    for number, line in _position_lines(path):
        try:
            state = env.parse_position(line)
        except NotImplementedError as error:
            raise ValueError(f"{path}: {error}") from None
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: {error}") from None
        if bool(state.terminated | state.truncated):
            raise ValueError(f"{path}, line {number}: the game is over in this position")
        states.append(jax.tree.map(np.asarray, state))
    if not states:
        raise ValueError(f"{path} holds no positions")
    return jax.tree.map(lambda *leaves: np.stack(leaves), *states)


def start_positions_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of a positions file's positions: its lines as `read_start_positions`
    reads them, so that editing a comment or a blank line leaves it. A run records it and
    refuses to resume on other positions, as it refuses another config.

    Raises:
      ValueError: `{path}: no such file`.
    """
    digest = hashlib.sha256()
    for _, line in _position_lines(Path(path)):
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def _position_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, stripped line) of each position line of `path`.

    Raises:
      ValueError: `{path}: no such file`.
    """
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield number, line


def with_start_positions(env: Env, starts: GameState | None) -> Env:
    """`StartPositions(env, starts)`, or `env` itself when `starts` is None."""
    return env if starts is None else StartPositions(env, starts)
