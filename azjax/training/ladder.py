"""An Elo ladder for a training run: its snapshots against each other and the baselines.

    result = run_ladder("runs/ttt", key=jax.random.PRNGKey(0))   # writes ladder.json/.png
    print("\\n".join(format_ladder(result)))

`run_ladder` picks up to `max_snapshots` snapshots spread over the run (first and last
included), plays each (greedy search) against its neighbours in the ladder and against each
baseline, plays the baselines against each other, and fits Elo ratings with random = 0 by
`fit_elo`.

Every arena starts its games from paired random openings: the first `opening_plies` plies are
uniformly random legal moves, the same in game i and game i + B/2, where the colours are
swapped. Greedy search is deterministic, so without openings two snapshots would replay the
same two games over and over; with them each pair of games is one fair sample (both sides play
the same opening from both seats).

Anchored ladders: `rate_anchors` plays a round robin of fixed baselines (random, mcts:100,
alphabeta:2 ...) once and writes their ratings to an anchor table (`azjax anchors`); a ladder
given the table (`anchors=`, `azjax eval RUN --ladder --anchors FILE`) holds those ratings
fixed and fits only the snapshots, so a rating means the same from run to run. The table
names the alpha-beta engine and evaluation versions it was measured with and is refused when
they differ from this azjax's.

Compiles once: the params are traced arguments and each side picks its player (a snapshot's
search or a baseline) with a `lax.switch`, so every pairing shares one compiled arena
(`_ladder_arena`), whatever the number of snapshots and baselines.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.agent import default_simulations
from azjax.core.search import make_network_search
from azjax.evaluation.arena import PAIRED_OPENING_PLIES, ArenaResult, run_arena
from azjax.evaluation.baselines import Player
from azjax.evaluation.hashing import derive_key, hash_seeds
from azjax.evaluation.players import make_opponent, search_player
from azjax.model_files import CheckpointError, load_model, snapshot_dirs
from azjax.training.metrics import read_metrics

__all__ = ["AnchorTable", "LadderPlayer", "LadderResult", "fit_elo", "format_ladder",
           "load_anchors", "rate_anchors", "run_ladder"]

_C = math.log(10.0) / 400.0  # Elo scale: P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))
_Z95 = 1.959963984540054


# ---- the fit --------------------------------------------------------------------------------


def _counts(result: Any) -> tuple[float, float, float]:
    if hasattr(result, "wins"):
        return float(result.wins), float(result.draws), float(result.losses)
    wins, draws, losses = result
    return float(wins), float(draws), float(losses)


def fit_elo(
    names: Iterable[str],
    results: Mapping[tuple[str, str], Any] | Iterable[tuple[str, str, Any]],
    *,
    anchor: str = "random",
    anchor_rating: float = 0.0,
    fixed: Mapping[str, float] | None = None,
    prior_draws: float = 1.0,
    max_iterations: int = 100,
) -> dict[str, tuple[float, float, float]]:
    """Maximum-likelihood Elo (Bradley-Terry on the 400 log10 scale) from pairwise results.

    Args:
      names: the players (each rated, even one without games).
      results: ``{(a, b): r}`` or an iterable of ``(a, b, r)``, where r is an `ArenaResult` or
        ``(wins, draws, losses)`` from a's point of view; a draw counts half a win and half a
        loss; the same pair may appear several times, in either order (counts add up).
      anchor: the player fixed at `anchor_rating`; the others are rated relative to it.
      fixed: more players held at given ratings (on the anchor's scale, e.g. a game's anchor
        table, `load_anchors`): only the others are fitted, and their intervals are relative
        to these fixed ratings, which games between two fixed players do not move.
      prior_draws: a weak prior that keeps every rating finite: each player other than the
        anchor gets this many virtual draws against the anchor. Without it, a player that wins
        (or loses) every game, or one not connected to the anchor by games, has no finite MLE.
        It pulls ratings towards the anchor's by about as much as one more drawn game would.
        0 disables it (then such data raise ValueError).

    Returns:
      ``{name: (rating, low95, high95)}``. The interval is rating +- 1.96 standard errors from
      the inverse of the observed Fisher information (the log-likelihood's negative Hessian,
      prior included) with the anchor held fixed: each interval is the uncertainty relative to
      the anchor, whose own interval is the point. Newton's method with step halving; the
      log-likelihood is concave, so it converges to the unique maximum.
    """
    names = list(names)
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        raise ValueError(f"player names must be unique, got {names}")
    if anchor not in index:
        raise ValueError(f"the anchor {anchor!r} is not among the players {names}")
    if prior_draws < 0:
        raise ValueError(f"prior_draws must be >= 0, got {prior_draws}")
    fixed = dict(fixed or {})
    for name in fixed:
        if name not in index:
            raise ValueError(f"the fixed player {name!r} is not among the players {names}")
    score, games = _tally(index, results)
    k = index[anchor]
    held = {k: 0.0} | {index[name]: rating - anchor_rating for name, rating in fixed.items()
                       if name != anchor}
    free = np.array([i for i in range(len(names)) if i not in held], dtype=int)
    score[free, k] += prior_draws / 2
    score[k, free] += prior_draws / 2
    games[free, k] += prior_draws
    games[k, free] += prior_draws
    theta = np.zeros(len(names))
    theta[list(held)] = list(held.values())
    half = np.zeros(len(names))
    if len(free):
        theta = _newton(score, games, free, max_iterations, anchor, theta)
        half[free] = _half_widths(score, games, free, theta, anchor)
    theta = theta + anchor_rating
    return {name: (float(theta[i]), float(theta[i] - half[i]), float(theta[i] + half[i]))
            for name, i in index.items()}


def _tally(index: dict[str, int], results: Any) -> tuple[np.ndarray, np.ndarray]:
    """(score [n, n]: points of i against j (win 1, draw 1/2), games [n, n]) from `fit_elo`'s
    results, players numbered by `index`."""
    n = len(index)
    score = np.zeros((n, n))
    games = np.zeros((n, n))
    items = results.items() if isinstance(results, Mapping) else (
        ((a, b), r) for a, b, r in results)
    for (a, b), result in items:
        for name in (a, b):
            if name not in index:
                raise ValueError(f"result for unknown player {name!r} (players: {list(index)})")
        if a == b:
            raise ValueError(f"a player cannot play itself: {a!r}")
        wins, draws, losses = _counts(result)
        if min(wins, draws, losses) < 0:
            raise ValueError(f"negative counts for {a!r} vs {b!r}: {result}")
        i, j = index[a], index[b]
        score[i, j] += wins + draws / 2
        score[j, i] += losses + draws / 2
        games[i, j] += wins + draws + losses
        games[j, i] += wins + draws + losses
    return score, games


def _loglik(score: np.ndarray, theta: np.ndarray) -> float:
    """The Bradley-Terry log-likelihood of ratings theta [n]: sum s_ij log p_ij."""
    d = _C * (theta[:, None] - theta[None, :])
    return float(np.sum(score * -np.logaddexp(0.0, -d)))


def _grad_and_fisher(score: np.ndarray, games: np.ndarray, free: np.ndarray,
                     theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood's gradient [F] and observed information [F, F] over the F players
    other than the anchor (`free`)."""
    p = 1.0 / (1.0 + np.exp(-_C * (theta[:, None] - theta[None, :])))
    grad = _C * np.sum(score - games * p, axis=1)
    w = _C * _C * games * p * (1.0 - p)
    fisher = np.diag(w.sum(axis=1)) - w
    return grad[free], fisher[np.ix_(free, free)]


def _newton(score: np.ndarray, games: np.ndarray, free: np.ndarray, max_iterations: int,
            anchor: str, start: np.ndarray) -> np.ndarray:
    """The maximum-likelihood ratings [n] of the `free` players, the others held at `start`
    (the anchor at 0): Newton's method with step halving."""
    theta = start.copy()
    for _ in range(max_iterations):
        grad, fisher = _grad_and_fisher(score, games, free, theta)
        try:
            step = np.linalg.solve(fisher, grad)
        except np.linalg.LinAlgError:
            raise ValueError("no finite Elo fit: some player won or lost all its games, or "
                             f"no games link it to the anchor {anchor!r}; use prior_draws > 0"
                             ) from None
        current, scale = _loglik(score, theta), 1.0
        while scale > 1e-6:  # Newton step, halved until the likelihood does not drop
            trial = theta.copy()
            trial[free] += scale * step
            if _loglik(score, trial) >= current - 1e-12:
                break
            scale /= 2
        theta = trial
        if np.max(np.abs(theta[free])) > 1e5:
            raise ValueError("no finite Elo fit: a player won or lost all its games; "
                             "use prior_draws > 0")
        if np.max(np.abs(scale * step)) < 1e-7:
            break
    return theta


def _half_widths(score: np.ndarray, games: np.ndarray, free: np.ndarray, theta: np.ndarray,
                 anchor: str) -> np.ndarray:
    """The 95% half-widths [F] of the free players' ratings: 1.96 standard errors from the
    inverse observed information at `theta`."""
    _, fisher = _grad_and_fisher(score, games, free, theta)
    try:
        cov = np.linalg.inv(fisher)
    except np.linalg.LinAlgError:
        raise ValueError("singular information matrix: a player is not connected to the "
                         f"anchor {anchor!r}; use prior_draws > 0") from None
    return _Z95 * np.sqrt(np.maximum(np.diag(cov), 0.0))


# ---- anchor tables ----------------------------------------------------------------------------


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
        from azjax.evaluation.alphabeta import ENGINE_VERSION

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


def rate_anchors(game: str, baselines: Iterable[str], *, key: jax.Array,
                 games_per_pair: int = 200, opening_plies: int = PAIRED_OPENING_PLIES,
                 progress: Callable[[str], None] | None = None) -> AnchorTable:
    """Rates fixed baselines by a round robin among them (random = 0, always included).

    Args:
      game: the game id.
      baselines: names for `make_opponent` (random, greedy, mcts:N, alphabeta:D).
      key: PRNG key; match m plays with ``fold_in(key, m)``.
      games_per_pair: games per pairing, even (half with each colour).
      opening_plies: paired random opening plies of every game (as the ladder's).
      progress: called with one line per match played.

    Returns:
      The `AnchorTable` (write it with ``json.dumps(table.to_dict())``).
    """
    from azjax.evaluation.alphabeta import ENGINE_VERSION

    if games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(f"games_per_pair must be even and >= 2, got {games_per_pair}")
    env = envs.make(game)
    names = list(dict.fromkeys(["random", *baselines]))
    players = [make_opponent(env, name) for name in names]
    matches = []
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            match_key = jax.random.fold_in(key, len(matches))
            arena = jax.jit(functools.partial(_paired_arena, env, players[i], players[j],
                                              games_per_pair, opening_plies))
            result = ArenaResult.from_outcomes(*arena(match_key))
            matches.append((a, names[j], result))
            if progress is not None:
                progress(f"{a:>14} vs {names[j]:<14} {result}")
    fit = fit_elo(names, matches, anchor="random")
    return AnchorTable(
        game=env.name, ratings={n: fit[n][0] for n in names},
        intervals={n: (fit[n][1], fit[n][2]) for n in names}, engine=ENGINE_VERSION,
        evaluation=env.evaluation_version, games_per_pair=games_per_pair,
        opening_plies=opening_plies,
        matches=tuple((a, b, *(int(c) for c in (r.wins, r.draws, r.losses)))
                      for a, b, r in matches))


def _paired_arena(env, player_a: Player, player_b: Player, num_games: int, opening_plies: int,
                  key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`run_arena`'s outcomes of A against B from paired openings, its keys derived from
    `key`: the one arena of the ladder's matches and the anchor tables' round robins."""
    return run_arena(derive_key(key, jnp.uint32(1)), env=env, player_a=player_a,
                     player_b=player_b, num_games=num_games, opening_plies=opening_plies,
                     opening_seed=hash_seeds(derive_key(key, jnp.uint32(0)), 1)[0])


# ---- the ladder -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LadderPlayer:
    """One rated player: a snapshot (iteration, wall_s, positions) or a baseline (None)."""

    name: str
    kind: str  # "snapshot" or "baseline"
    elo: float
    low95: float
    high95: float
    iteration: int | None = None
    wall_s: float | None = None
    positions: int | None = None


@dataclasses.dataclass(frozen=True)
class LadderResult:
    """The ladder's players (baselines, then snapshots by iteration) and its games."""

    run_dir: Path
    players: tuple[LadderPlayer, ...]
    matches: tuple[tuple[str, str, ArenaResult], ...]  # (a, b, A's results)
    num_simulations: int
    games_per_pair: int
    opening_plies: int
    json_path: Path
    png_path: Path
    anchors: AnchorTable | None = None

    def ratings(self) -> dict[str, tuple[float, float, float]]:
        """{player name: (Elo, low95, high95)}."""
        return {p.name: (p.elo, p.low95, p.high95) for p in self.players}

    def to_dict(self) -> dict[str, Any]:
        """The ladder as ladder.json holds it (JSON types only)."""
        return {
            "run_dir": str(self.run_dir),
            "anchor": "random",
            "method": "maximum-likelihood Elo (Bradley-Terry, 400 log10 scale, draws = half); "
                      "95% intervals = +-1.96 SE from the inverse observed Fisher information, "
                      "relative to random; prior: 1 virtual draw of each player against random",
            "num_simulations": self.num_simulations,
            "games_per_pair": self.games_per_pair,
            "opening_plies": self.opening_plies,
            "players": [dataclasses.asdict(p) for p in self.players],
            "matches": [{"a": a, "b": b, **r.counts()} for a, b, r in self.matches],
            "fixed_anchors": None if self.anchors is None else self.anchors.to_dict(),
        }


def _snapshot_dirs(run_dir: Path, max_snapshots: int) -> list[Path]:
    found = snapshot_dirs(run_dir)
    if not found:
        raise CheckpointError(f"run dir {run_dir} has no snapshots (snapshots/<iteration>/)")
    if len(found) <= max_snapshots:
        return found
    picks = np.unique(np.round(np.linspace(0, len(found) - 1, max_snapshots)).astype(int))
    return [found[i] for i in picks]


def _switch_player(search_fn: Callable, num_simulations: int, opponents: list[Player],
                   params: Any, which: jax.Array) -> Player:
    """Greedy search with `params` when `which` (int32 []) is 0, else baseline
    ``opponents[which - 1]``: a `lax.switch` runs only the chosen branch."""
    branches = [search_player(search_fn, params, num_simulations)] + opponents

    def act(key, states):
        return jax.lax.switch(which, [lambda k, s, f=f: f(k, s).astype(jnp.int32)
                                      for f in branches], key, states)

    return act


def _ladder_arena(env, search_fn, num_simulations: int, opponents: list, *, num_games: int,
                  opening_plies: int):
    """The one compiled arena of a ladder: ``(params_a, which_a, params_b, which_b, key) ->
    (A's returns [B], illegal A, illegal B)``.

    Each side is a `_switch_player` (a baseline's params unused), so snapshot-vs-snapshot,
    snapshot-vs-baseline and baseline-vs-baseline games all share one program with two copies
    of the search, instead of one program per kind of pairing.
    """
    player = functools.partial(_switch_player, search_fn, num_simulations, opponents)

    def arena(params_a, which_a, params_b, which_b, key):
        return _paired_arena(env, player(params_a, which_a), player(params_b, which_b),
                             num_games, opening_plies, key)

    return jax.jit(arena)


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """One loaded snapshot of the ladder."""

    name: str
    params: Any
    iteration: int
    wall_s: Any
    positions: Any


def run_ladder(
    run_dir: str | Path,
    *,
    key: jax.Array,
    games_per_pair: int = 200,
    simulations: int | None = None,
    baselines: Iterable[str] = ("random", "greedy"),
    max_snapshots: int = 8,
    opening_plies: int = PAIRED_OPENING_PLIES,
    progress: Callable[[str], None] | None = None,
    anchors: AnchorTable | None = None,
) -> LadderResult:
    """Rates a run's snapshots and the baselines (random = 0); writes ladder.json, ladder.png.

    Args:
      run_dir: a run dir with ``snapshots/<iteration>/``.
      key: PRNG key; match m plays with ``fold_in(key, m)``.
      games_per_pair: games per pairing, even (half with each colour).
      simulations: greedy search simulations (default: the model's evaluation default).
      baselines: names for `make_opponent` (random, greedy, mcts:N); random is always added.
      max_snapshots: at most this many snapshots, spread over the run, first and last included.
      opening_plies: random plies opening each pair of games (see the module docstring).
      progress: called with one line per match played (e.g. ``print``).
      anchors: an anchor table of the run's game (`load_anchors`): its players join the
        baselines with their ratings held fixed, and do not play each other.

    Returns:
      The `LadderResult` (also written to its json_path and png_path).
    """
    run_dir = Path(run_dir)
    if games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(f"games_per_pair must be even and >= 2, got {games_per_pair}")
    if max_snapshots < 2:
        raise ValueError(f"max_snapshots must be >= 2, got {max_snapshots}")
    if anchors is not None and opening_plies != anchors.opening_plies:
        raise ValueError(f"the anchor table was measured from {anchors.opening_plies} opening "
                         f"plies; a ladder on it plays the same, not {opening_plies}")
    fixed = dict(anchors.ratings) if anchors is not None else {}
    baseline_names = list(dict.fromkeys(["random", *fixed, *baselines]))
    loaded = [load_model(d) for d in _snapshot_dirs(run_dir, max_snapshots)]
    config = loaded[0][1]
    env = envs.make(config.game)
    if anchors is not None:
        anchors.check(env)
    for _, other, _ in loaded[1:]:
        if other.game != config.game or other.network != config.network:
            raise CheckpointError(f"the snapshots in {run_dir} differ in game or network")
    search_fn = make_network_search(env, config.network, config.search)
    meta0 = loaded[0][2]
    sims = int(simulations or meta0.get("num_simulations") or default_simulations(config))
    opponents = [make_opponent(env, name) for name in baseline_names]
    snapshots = _snapshots(run_dir, loaded)
    arena = _ladder_arena(env, search_fn, sims, opponents, num_games=games_per_pair,
                          opening_plies=opening_plies)
    matches = _play_matches(arena, key, baseline_names, snapshots, progress, set(fixed))
    names = baseline_names + [s.name for s in snapshots]
    ratings = fit_elo(names, [(a, b, r) for a, b, r in matches], anchor="random", fixed=fixed)
    players = [LadderPlayer(name, "baseline", *ratings[name]) for name in baseline_names]
    players += [LadderPlayer(s.name, "snapshot", *ratings[s.name], iteration=s.iteration,
                             wall_s=None if s.wall_s is None else float(s.wall_s),
                             positions=None if s.positions is None else int(s.positions))
                for s in snapshots]
    result = LadderResult(run_dir, tuple(players), tuple(matches), sims, games_per_pair,
                          opening_plies, run_dir / "ladder.json", run_dir / "ladder.png",
                          anchors)
    tmp = result.json_path.with_name("ladder.json.tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    os.replace(tmp, result.json_path)
    _plot(result)
    return result


def _snapshots(run_dir: Path, loaded: list) -> list[_Snapshot]:
    """The loaded `(params, config, meta)` snapshots, their wall_s and positions from their
    metadata, else from the run's metrics."""
    records = {r.get("iteration"): r for r in read_metrics(run_dir / "metrics.jsonl")
               if "wall_s" in r and "loss" in r}
    snapshots = []
    for params, _, meta in loaded:
        iteration = int(meta["iteration"])
        record = records.get(iteration, {})
        snapshots.append(_Snapshot(f"iter_{iteration}", params, iteration,
                                   meta.get("wall_s", record.get("wall_s")),
                                   meta.get("positions", record.get("positions"))))
    return snapshots


def _play_matches(arena: Callable, key: jax.Array, baseline_names: list[str],
                  snapshots: list[_Snapshot], progress: Callable[[str], None] | None,
                  fixed: set[str] = frozenset()) -> list[tuple[str, str, ArenaResult]]:
    """The ladder's matches, in order: the baselines among themselves (but two `fixed` ones),
    each snapshot against each baseline, each snapshot against the next; match m plays with
    ``fold_in(key, m)``."""
    params_of = {s.name: s.params for s in snapshots}
    which = {name: i + 1 for i, name in enumerate(baseline_names)}
    dummy = snapshots[0].params  # a baseline's (unused) params
    pairs = [(a, b) for i, a in enumerate(baseline_names) for b in baseline_names[i + 1:]
             if not (a in fixed and b in fixed)]
    pairs += [(s.name, b) for s in snapshots for b in baseline_names]
    pairs += [(a.name, b.name) for a, b in zip(snapshots, snapshots[1:], strict=False)]
    matches: list[tuple[str, str, ArenaResult]] = []
    for a, b in pairs:
        match_key = jax.random.fold_in(key, len(matches))
        outcomes = arena(params_of.get(a, dummy), jnp.int32(which.get(a, 0)),
                         params_of.get(b, dummy), jnp.int32(which.get(b, 0)), match_key)
        result = ArenaResult.from_outcomes(*outcomes)
        matches.append((a, b, result))
        if progress is not None:
            progress(f"{a:>12} vs {b:<12} {result}")
    return matches


def _plot(result: LadderResult) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    snaps = [p for p in result.players if p.kind == "snapshot"]
    by_wall = all(p.wall_s is not None for p in snaps)
    xs = [p.wall_s if by_wall else float(p.iteration) for p in snaps]
    ys = [p.elo for p in snaps]
    errors = [[p.elo - p.low95 for p in snaps], [p.high95 - p.elo for p in snaps]]
    ax.errorbar(xs, ys, yerr=errors, fmt="o-", capsize=3, label="snapshots (greedy search, "
                f"{result.num_simulations} sims)")
    for x, p in zip(xs, snaps, strict=True):
        ax.annotate(str(p.iteration), (x, p.elo), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(p for p in result.players if p.kind == "baseline"):
        colour = colours[(i + 1) % len(colours)]
        ax.axhline(p.elo, ls="--", lw=1, color=colour, label=f"{p.name} ({p.elo:+.0f})")
        if p.high95 > p.low95:
            ax.axhspan(p.low95, p.high95, color=colour, alpha=0.12)
    ax.set_xlabel("wall_s" if by_wall else "iteration")
    ax.set_ylabel("Elo (random = 0), 95% intervals")
    ax.set_title(f"Elo ladder: {result.run_dir.name} ({result.games_per_pair} games per pair)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(result.png_path, dpi=90)
    plt.close(fig)


def format_ladder(result: LadderResult) -> list[str]:
    """Terminal lines: one per player (baselines, then snapshots), Elo +- the 95% half-width."""
    held = ("" if result.anchors is None else
            f"; held fixed: {', '.join(n for n in result.anchors.ratings if n != 'random')} "
            f"(engine {result.anchors.engine}, {result.anchors.evaluation})")
    lines = [f"Elo ladder of {result.run_dir} (random = 0{held}; greedy search at "
             f"{result.num_simulations} simulations; {result.games_per_pair} games per pair, "
             f"{result.opening_plies} random opening plies; 95% intervals)",
             f"{'player':<14}{'iteration':>10}{'wall_s':>10}{'Elo':>8}   95% interval"]
    for p in result.players:
        iteration = "-" if p.iteration is None else str(p.iteration)
        wall = "-" if p.wall_s is None else f"{p.wall_s:.1f}"
        half = (p.high95 - p.low95) / 2
        lines.append(f"{p.name:<14}{iteration:>10}{wall:>10}{p.elo:>+8.0f} "
                     f"+- {half:<5.0f} [{p.low95:+.0f}, {p.high95:+.0f}]")
    lines.append(f"written: {result.json_path}, {result.png_path}")
    return lines
