"""Anchor tables: fixed baselines rated once, so that a ladder's ratings mean the same from
run to run.

`rate_anchors` plays a round robin of fixed baselines (random, mcts:100, alphabeta:2 ...) and
fits their ratings (random = 0); `azjax anchors` writes the table to a JSON file and
`load_anchors` reads it back. A ladder given the table (`run_ladder(anchors=...)`, `azjax eval
RUN --ladder --anchors FILE`) holds those ratings fixed and fits only the snapshots. The table
names the alpha-beta engine and evaluation versions it was measured with and is refused when
they differ from this azjax's (`AnchorTable.check`). `shipped_anchors` finds the table azjax
ships for a game and its rules (`--anchors shipped`), so an installed azjax needs no path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.resources
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax

from azjax import envs
from azjax.config import is_engine_name
from azjax.evaluation.arena import PAIRED_OPENING_PLIES, ArenaResult
from azjax.evaluation.checkerboard import engine_player
from azjax.evaluation.players import make_opponent
from azjax.training.elo import fit_elo
from azjax.training.ladder_arena import engine_match, paired_arena

__all__ = ["SHIPPED", "AnchorTable", "load_anchors", "rate_anchors", "shipped_anchors"]

SHIPPED = "shipped"
"""What `--anchors` takes for the table azjax ships for the run's game (`shipped_anchors`)."""


@dataclasses.dataclass(frozen=True)
class AnchorTable:
    """Fixed baselines' ratings for one game, from a round robin among them (`rate_anchors`).

    Attributes:
      game: the game id.
      ratings: {baseline name: Elo}, random = 0.
      intervals: {baseline name: (low95, high95)} of the round robin's fit.
      engine: the alpha-beta engine version it was measured with (`ENGINE_VERSION`).
      evaluation: the game's `evaluation_version` it was measured with.
      games_per_pair: games per pairing of the round robin.
      opening_plies: its paired random opening plies.
      matches: its results, (a, b, wins, draws, losses) from a's side.
    """

    game: str
    ratings: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    engine: int
    evaluation: str
    games_per_pair: int
    opening_plies: int
    matches: tuple[tuple[str, str, int, int, int], ...] = ()

    def check(self, env: Any) -> None:
        """Raises ValueError unless the table is of `env`'s game, engine and evaluation."""
        from azjax.core.alphabeta import ENGINE_VERSION

        if self.game != env.name:
            raise ValueError(f"the anchor table is for {self.game!r}, not {env.name!r}")
        if (self.engine, self.evaluation) != (ENGINE_VERSION, env.evaluation_version):
            raise ValueError(
                f"the anchor table was measured with alpha-beta engine {self.engine} and "
                f"evaluation {self.evaluation!r}; this azjax has engine {ENGINE_VERSION} and "
                f"{env.evaluation_version!r}: measure it again (`azjax anchors {self.game}`)")

    def to_dict(self) -> dict[str, Any]:
        """The table as its JSON file holds it."""
        return {"game": self.game, "engine": self.engine, "evaluation": self.evaluation,
                "games_per_pair": self.games_per_pair, "opening_plies": self.opening_plies,
                "ratings": self.ratings,
                "intervals": {k: list(v) for k, v in self.intervals.items()},
                "matches": [dict(zip(("a", "b", "wins", "draws", "losses"), m, strict=True))
                            for m in self.matches]}


def load_anchors(path: str | Path) -> AnchorTable:
    """An anchor table from its JSON file (`rate_anchors` wrote it).

    Raises:
      ValueError: the file is missing, not JSON, or lacks a field (one line naming it).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return AnchorTable(
            game=str(data["game"]), ratings={k: float(v) for k, v in data["ratings"].items()},
            intervals={k: (float(v[0]), float(v[1])) for k, v in data["intervals"].items()},
            engine=int(data["engine"]), evaluation=str(data["evaluation"]),
            games_per_pair=int(data["games_per_pair"]),
            opening_plies=int(data["opening_plies"]),
            matches=tuple((m["a"], m["b"], int(m["wins"]), int(m["draws"]), int(m["losses"]))
                          for m in data.get("matches", [])))
    except FileNotFoundError:
        raise ValueError(f"no anchor table at {path}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"{path} is not an anchor table ({type(error).__name__}: {error})"
                         ) from None


def shipped_anchors(env: Any) -> AnchorTable:
    """The anchor table azjax ships for `env`: the file of `azjax/data/anchors/` measured for
    its game with this azjax's alpha-beta engine and `env.evaluation_version` (which names the
    rules: draughts under the laws and under OpenSpiel's counter have a table each).

    Raises:
      ValueError: azjax ships none for that game, engine and evaluation (one line naming them).
    """
    from azjax.core.alphabeta import ENGINE_VERSION

    folder = importlib.resources.files("azjax") / "data" / "anchors"
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name.endswith(".json"):
            table = load_anchors(str(entry))
            with contextlib.suppress(ValueError):  # another game, engine or evaluation
                table.check(env)
                return table
    raise ValueError(f"azjax ships no anchor table for {env.name} (alpha-beta engine "
                     f"{ENGINE_VERSION}, evaluation {env.evaluation_version!r}): measure one "
                     f"with `azjax anchors {env.name} ...` and pass its path")


def _round_robin(env: Any, names: list[str], players: list[Any], key: jax.Array,
                 games_per_pair: int, opening_plies: int,
                 progress: Callable[[str], None] | None) -> list[tuple[str, str, ArenaResult]]:
    """`rate_anchors`' matches, each pair once; match m plays with ``fold_in(key, m)``."""
    matches = []
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            match_key = jax.random.fold_in(key, len(matches))
            if is_engine_name(a) or is_engine_name(names[j]):
                result = engine_match(env, players[i], players[j], games_per_pair,
                                      opening_plies, match_key)
            else:
                arena = jax.jit(functools.partial(paired_arena, env, players[i], players[j],
                                                  games_per_pair, opening_plies))
                result = ArenaResult.from_outcomes(*arena(match_key))
            matches.append((a, names[j], result))
            if progress is not None:
                progress(f"{a:>14} vs {names[j]:<14} {result}")
    return matches


def rate_anchors(game: str, baselines: Iterable[str], *, key: jax.Array,
                 games_per_pair: int = 200, opening_plies: int = PAIRED_OPENING_PLIES,
                 progress: Callable[[str], None] | None = None) -> AnchorTable:
    """Rates fixed baselines by a round robin among them (random = 0, always included).

    Args:
      game: the game id.
      baselines: names for `make_opponent` (random, greedy, mcts:N, alphabeta:D), or
        external engines ``cb:PATH[@SECONDS]`` (draughts; their matches are played ply by
        ply from the host, `engine_match`; a game an engine forfeits is its loss).
      key: PRNG key; match m plays with ``fold_in(key, m)``.
      games_per_pair: games per pairing, even (half with each colour).
      opening_plies: paired random opening plies of every game (as the ladder's).
      progress: called with one line per match played.

    Returns:
      The `AnchorTable` (write it with ``json.dumps(table.to_dict())``).
    """
    from azjax.core.alphabeta import ENGINE_VERSION

    if games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(f"games_per_pair must be even and >= 2, got {games_per_pair}")
    env = envs.make(game)
    names = list(dict.fromkeys(["random", *baselines]))
    players = [engine_player(env, name, report=progress) if is_engine_name(name)
               else make_opponent(env, name) for name in names]
    try:
        matches = _round_robin(env, names, players, key, games_per_pair, opening_plies,
                               progress)
    finally:
        for name, player in zip(names, players, strict=True):
            if is_engine_name(name):
                player.close()
    fit = fit_elo(names, matches, anchor="random")
    return AnchorTable(
        game=env.name, ratings={n: fit[n][0] for n in names},
        intervals={n: (fit[n][1], fit[n][2]) for n in names}, engine=ENGINE_VERSION,
        evaluation=env.evaluation_version, games_per_pair=games_per_pair,
        opening_plies=opening_plies,
        matches=tuple((a, b, *(int(c) for c in (r.wins, r.draws, r.losses)))
                      for a, b, r in matches))
