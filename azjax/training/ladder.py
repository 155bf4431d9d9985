"""An Elo ladder for a training run: its snapshots against each other and the baselines.

    result = run_ladder("runs/ttt", key=jax.random.PRNGKey(0))   # writes ladder.json/.png
    print("\\n".join(format_ladder(result)))

`run_ladder` picks up to `max_snapshots` snapshots spread over the run (first and last
included), plays each (greedy search) against its neighbours in the ladder and against each
baseline, plays the baselines against each other, and fits Elo ratings with random = 0 by
`fit_elo`. Every match starts its games from paired random openings, and all of them share
one compiled arena (`azjax.training.ladder_arena`), but those of an external engine
(``cb:PATH[@SECONDS]``, draughts), which are played ply by ply from the host.

Anchored ladders: given an anchor table (`rate_anchors`, `load_anchors`; see
`azjax.training.anchors`), a ladder holds the table's ratings fixed and fits only the
snapshots, so a rating means the same from run to run.

The pieces live by job: `elo` (the fit), `ladder_arena` (the compiled arena), `anchors` (anchor
tables), `ladder_result` (the result, its plot and lines); their public names are importable
from here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.agent import default_simulations
from azjax.config import is_engine_name
from azjax.core.search import make_network_search
from azjax.evaluation.arena import PAIRED_OPENING_PLIES, ArenaResult
from azjax.evaluation.checkerboard import engine_player
from azjax.evaluation.players import make_opponent, search_player
from azjax.model_files import CheckpointError, load_model, snapshot_dirs
from azjax.training.anchors import (
    SHIPPED,
    AnchorTable,
    load_anchors,
    rate_anchors,
    shipped_anchors,
)
from azjax.training.elo import fit_elo
from azjax.training.ladder_arena import engine_match, ladder_arena
from azjax.training.ladder_result import LadderPlayer, LadderResult, format_ladder, plot_ladder
from azjax.training.metrics import read_metrics

__all__ = ["SHIPPED", "AnchorTable", "LadderPlayer", "LadderResult", "fit_elo",
           "format_ladder", "load_anchors", "rate_anchors", "run_ladder", "shipped_anchors"]


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
    anchors: AnchorTable | str | None = None,
) -> LadderResult:
    """Rates a run's snapshots and the baselines (random = 0); writes ladder.json, ladder.png.

    Args:
      run_dir: a run dir with ``snapshots/<iteration>/``.
      key: PRNG key; match m plays with ``fold_in(key, m)``.
      games_per_pair: games per pairing, even (half with each colour).
      simulations: greedy search simulations (default: the model's evaluation default).
      baselines: names for `make_opponent` (random, greedy, mcts:N), or external engines
        ``cb:PATH[@SECONDS]`` (draughts; a game an engine forfeits is its loss); random is
        always added.
      max_snapshots: at most this many snapshots, spread over the run, first and last included.
      opening_plies: random plies opening each pair of games (see the module docstring).
      progress: called with one line per match played (e.g. ``print``).
      anchors: an anchor table of the run's game (`load_anchors`), or `SHIPPED` for the one
        azjax ships for its game and rules (`shipped_anchors`): its players join the
        baselines with their ratings held fixed, and do not play each other.

    Returns:
      The `LadderResult` (also written to its json_path and png_path).
    """
    run_dir = Path(run_dir)
    if games_per_pair < 2 or games_per_pair % 2:
        raise ValueError(f"games_per_pair must be even and >= 2, got {games_per_pair}")
    if max_snapshots < 2:
        raise ValueError(f"max_snapshots must be >= 2, got {max_snapshots}")
    loaded = [load_model(d) for d in _snapshot_dirs(run_dir, max_snapshots)]
    config = loaded[0][1]
    env = envs.make(config.game)
    if anchors == SHIPPED:
        anchors = shipped_anchors(env)
    if anchors is not None:
        anchors.check(env)
        if opening_plies != anchors.opening_plies:
            raise ValueError(f"the anchor table was measured from {anchors.opening_plies} "
                             f"opening plies; a ladder on it plays the same, not {opening_plies}")
    fixed = dict(anchors.ratings) if anchors is not None else {}
    baseline_names = list(dict.fromkeys(["random", *fixed, *baselines]))
    for _, other, _ in loaded[1:]:
        if other.game != config.game or other.network != config.network:
            raise CheckpointError(f"the snapshots in {run_dir} differ in game or network")
    search_fn = make_network_search(env, config.network, config.search)
    meta0 = loaded[0][2]
    sims = int(simulations or meta0.get("num_simulations") or default_simulations(config))
    snapshots = _snapshots(run_dir, loaded)
    matches = _ladder_matches(env, search_fn, sims, baseline_names, snapshots, key,
                              games_per_pair, opening_plies, progress, set(fixed))
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
    plot_ladder(result)
    return result


def _snapshot_dirs(run_dir: Path, max_snapshots: int) -> list[Path]:
    found = snapshot_dirs(run_dir)
    if not found:
        raise CheckpointError(f"run dir {run_dir} has no snapshots (snapshots/<iteration>/)")
    if len(found) <= max_snapshots:
        return found
    picks = np.unique(np.round(np.linspace(0, len(found) - 1, max_snapshots)).astype(int))
    return [found[i] for i in picks]


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """One loaded snapshot of the ladder."""

    name: str
    params: Any
    iteration: int
    wall_s: Any
    positions: Any


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


def _ladder_matches(env: Any, search_fn: Callable, sims: int, baseline_names: list[str],
                    snapshots: list[_Snapshot], key: jax.Array, games: int, opening_plies: int,
                    progress: Callable[[str], None] | None,
                    fixed: set[str]) -> list[tuple[str, str, ArenaResult]]:
    """`_play_matches` with the ladder's one compiled arena, and its external engines started
    for their matches (and stopped after them)."""
    engines = {name: engine_player(env, name, report=progress)
               for name in baseline_names if is_engine_name(name)}
    try:
        opponents = [make_opponent(env, name) for name in baseline_names if name not in engines]
        arena = ladder_arena(env, search_fn, sims, opponents, num_games=games,
                             opening_plies=opening_plies)
        host = functools.partial(_host_match, env, engines, search_fn, sims, games,
                                 opening_plies)
        return _play_matches(arena, key, baseline_names, snapshots, progress, fixed, host)
    finally:
        for engine in engines.values():
            engine.close()


def _host_match(env: Any, engines: dict[str, Any], search_fn: Callable, sims: int,
                games: int, opening_plies: int, a: str, b: str, params_of: dict[str, Any],
                key: jax.Array) -> ArenaResult:
    """A match of the ladder with an external engine (`engine_match`): a snapshot plays its
    greedy search, a baseline itself, an engine its `CheckerBoardPlayer`."""

    def player(name: str) -> Any:
        if name in engines:
            return engines[name]
        if name in params_of:
            return search_player(search_fn, params_of[name], sims)
        return make_opponent(env, name)

    return engine_match(env, player(a), player(b), games, opening_plies, key)


def _play_matches(arena: Callable, key: jax.Array, baseline_names: list[str],
                  snapshots: list[_Snapshot], progress: Callable[[str], None] | None,
                  fixed: set[str] = frozenset(), host: Callable | None = None
                  ) -> list[tuple[str, str, ArenaResult]]:
    """The ladder's matches, in order: the baselines among themselves (but two `fixed` ones),
    each snapshot against each baseline, each snapshot against the next; match m plays with
    ``fold_in(key, m)``. A match with an external engine is ``host(a, b, params_of, key)``
    (`_host_match`); the others are the compiled `arena`'s."""
    params_of = {s.name: s.params for s in snapshots}
    compiled = [name for name in baseline_names if not is_engine_name(name)]
    which = {name: i + 1 for i, name in enumerate(compiled)}
    dummy = snapshots[0].params  # a baseline's (unused) params
    pairs = [(a, b) for i, a in enumerate(baseline_names) for b in baseline_names[i + 1:]
             if not (a in fixed and b in fixed)]
    pairs += [(s.name, b) for s in snapshots for b in baseline_names]
    pairs += [(a.name, b.name) for a, b in zip(snapshots, snapshots[1:], strict=False)]
    matches: list[tuple[str, str, ArenaResult]] = []
    for a, b in pairs:
        match_key = jax.random.fold_in(key, len(matches))
        if is_engine_name(a) or is_engine_name(b):
            result = host(a, b, params_of, match_key)
        else:
            outcomes = arena(params_of.get(a, dummy), jnp.int32(which.get(a, 0)),
                             params_of.get(b, dummy), jnp.int32(which.get(b, 0)), match_key)
            result = ArenaResult.from_outcomes(*outcomes)
        matches.append((a, b, result))
        if progress is not None:
            progress(f"{a:>12} vs {b:<12} {result}")
    return matches
