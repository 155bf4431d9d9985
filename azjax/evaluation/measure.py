"""`azjax eval` and model cards: measuring a saved agent against oracles, baselines and other
agents, with the scorer and arena the training evaluator uses.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from azjax.agent import Agent, search_effort
from azjax.config import is_engine_name
from azjax.envs.pdn import check_recordable
from azjax.evaluation.arena import (
    arena_devices,
    arena_metrics,
    arena_split_note,
    elo_difference,
    play_arena,
)
from azjax.evaluation.arena_pdn import ArenaGames
from azjax.evaluation.checkerboard import check_engine_opponent, engine_player
from azjax.evaluation.engine_arena import PlayerStats, play_engine_arena
from azjax.evaluation.oracle import load_oracle
from azjax.evaluation.oracle_score import error_percent, oracle_error_metrics, oracle_errors
from azjax.evaluation.players import (
    arena_opening_plies,
    is_baseline,
    make_opponent,
    network_player,
    search_player,
)

__all__ = ["PROGRESS_LINE_EVERY_S", "arena_bar", "evaluate_agent", "measure_agent", "shows_a_bar"]


def measure_agent(agent: Agent, *, against: list[str], oracle: str | None, games: int,
                  num_simulations: int | None, seed: int, oracle_positions: int | None = None,
                  report: Callable[[str], None] | None = None, progress: bool = False,
                  opponent_simulations: int | None = None, opening_plies: int | None = None,
                  movetime: float | None = None, opponent_movetime: float | None = None,
                  equal_time: bool = False, pdn: str | Path | None = None
                  ) -> tuple[dict[str, Any], list[str]]:
    """Scores a loaded `azjax.Agent`: oracle errors and arenas (both colours).

    Args:
      agent: the evaluated agent; it plays greedy search with `num_simulations` (None: its
        model's default).
      against: opponents: random, greedy, mcts:N, alphabeta:D, an external engine
        ``cb:PATH[@SECONDS]`` (draughts; `azjax.evaluation.checkerboard`) or another agent's
        spec; [] plays random and greedy when there is no oracle, nothing otherwise.
      oracle: None for no oracle scoring; "" for the game's default oracle; else a directory
        of oracle files. Scores the raw network and greedy search on every position of every
        set, or on its first `oracle_positions`.
      games: arena games per opponent.
      seed: the PRNG seed of every measurement.
      report: receives each line as soon as it is measured.
      progress: shows a bar of each arena's finished games and plies while it runs (stderr).
      opponent_simulations: an agent opponent's search simulations (None: its own model's,
        not `num_simulations`, which is the evaluated agent's); the line before its arena
        says which.
      opening_plies: paired random plies opening every arena's games (None: per opponent,
        `arena_opening_plies`); recorded as ``eval/vs_<name>/opening_plies``.
      movetime: the agent thinks this many seconds per move instead of a fixed count: per
        ply of an arena's batch of games, and per oracle position (scored one at a time).
      opponent_movetime: an agent opponent's seconds per move; when only one of the two
        times is given, both players get it (equal time). Baselines keep their fixed
        depth or rollouts; their seconds per move are reported beside.
      equal_time: in each arena the agent thinks, on each ply, as long as the opponent took
        on that ply (`play_engine_arena`): equal time against baselines of fixed depth.
      pdn: a file every arena's games are appended to in PDN (draughts), the arenas then
        played ply by ply from the host (the games of one device).

    With a time per move, or a model that keeps its tree between moves (`search.tree_reuse`),
    the arenas are played ply by ply from the host (`azjax.evaluation.engine_arena`) and
    report each side's seconds and simulations per move. An external engine always plays
    there; the games it forfeits (a crash, a hang, an illegal move: one line each) count as
    its losses, and their number is ``eval/vs_<name>/forfeits``.

    Returns:
      (metrics under the training run's keys: `eval/oracle/...`, `eval/vs_<name>/...`;
      the human-readable lines `azjax eval` prints).
    """
    sims = agent.search_simulations(num_simulations)
    key = jax.random.PRNGKey(seed)
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        if report is not None:
            report(line)

    if movetime is None:
        movetime = opponent_movetime
    elif opponent_movetime is None:
        opponent_movetime = movetime
    clock = f", {movetime} s per move" if movetime is not None else ""
    clock = ", at equal time with each opponent" if equal_time else clock
    emit(f"{agent!r}, evaluated with {search_effort(agent.config.search, sims)}{clock}")
    metrics: dict[str, Any] = {"eval/num_simulations": sims}
    if movetime is not None:
        metrics["eval/movetime"] = movetime
    if oracle is not None:
        metrics.update(_measure_oracle(agent, sims, key, oracle, oracle_positions, emit,
                                       movetime))
    opponents = against or (["random", "greedy"] if oracle is None else [])
    _check_arenas(agent, opponents, opponent_simulations, opening_plies, pdn)
    if opponents:  # the count of devices is part of what makes an arena's result repeatable
        metrics["eval/arena_devices"] = len(arena_devices(games))
        if (note := arena_split_note(games)) is not None:
            emit(note)
    _play_arenas(agent, opponents, sims, key, games, metrics, emit, progress=progress,
                 opponent_simulations=opponent_simulations, opening_plies=opening_plies,
                 movetime=movetime, opponent_movetime=opponent_movetime,
                 equal_time=equal_time, pdn=pdn)
    return metrics, lines


def _check_arenas(agent: Agent, opponents: list[str], opponent_simulations: int | None,
                  opening_plies: int | None, pdn: str | Path | None = None) -> None:
    """Refuses, before any game, what `measure_agent`'s arenas cannot play: negative opening
    plies, opponent simulations without an agent opponent, an engine for another game, PDN
    for another game than draughts."""
    if pdn is not None:
        check_recordable(agent.env)
    for name in filter(is_engine_name, opponents):
        check_engine_opponent(agent.env, name)
    if opening_plies is not None and opening_plies < 0:
        raise ValueError(f"opening plies must be >= 0, got {opening_plies}")
    if opponent_simulations is not None and all(
            is_baseline(name) or is_engine_name(name) for name in opponents):
        raise ValueError("opponent simulations apply to agent opponents (a model SPEC); none "
                         f"of {opponents} is one (mcts:N names its own rollouts)")


def _play_arenas(agent: Agent, opponents: list[str], sims: int, key: jax.Array, games: int,
                 metrics: dict[str, Any], emit: Callable[[str], None], *, progress: bool,
                 opponent_simulations: int | None, opening_plies: int | None,
                 movetime: float | None, opponent_movetime: float | None,
                 equal_time: bool = False, pdn: str | Path | None = None) -> None:
    """`measure_agent`'s arenas, one per opponent, into `metrics` and lines. With a clock or
    a kept tree they are played ply by ply (`play_engine_arena`) and report their pace; with
    `pdn` too, their games written down."""
    clocked = movetime is not None or agent.config.search.tree_reuse or equal_time
    for name in opponents:
        engine = clocked or is_engine_name(name)
        if equal_time:  # the first move's time, until the opponent's is measured
            movetime = movetime or 1.0
        opponent, plies = _opponent(agent, name, opponent_simulations, metrics, emit,
                                    engine=engine, movetime=opponent_movetime)
        plies = plies if opening_plies is None else opening_plies
        with contextlib.closing(opponent) if is_engine_name(name) else contextlib.nullcontext():
            stepped = clocked or (engine and agent.config.search.algorithm == "alphabeta")
            me = (agent.player(num_simulations=sims, movetime=movetime) if stepped  # its pace
                  else search_player(agent.search_fn, agent.params, sims))
            record = None if pdn is None else ArenaGames(
                agent.env, games, agent.record_name, name)
            with arena_bar(name, games, progress) as tick:
                if engine or record is not None:
                    result, mine, theirs = play_engine_arena(
                        agent.env, me, opponent, key=key, num_games=games,
                        opening_plies=plies, progress=tick, equal_time=equal_time,
                        on_ply=record)
                else:
                    result = play_arena(agent.env, me, opponent, key=key, num_games=games,
                                        opening_plies=plies, progress=tick)
        metrics.update(arena_metrics(name, result))
        metrics[f"eval/vs_{name}/opening_plies"] = plies
        openings = f"; {plies} paired random opening plies" if plies else ""
        emit(f"vs {name:>10}: {result}  (Elo difference "
             f"{elo_difference(result.score):+.0f}{openings})")
        if engine:
            metrics.update(_engine_metrics(name, mine, theirs))
            emit(f"    {_pace('agent', mine)}; {_pace(name, theirs)}")
        if record is not None:
            record.write(pdn)
            emit(f"    its {games} games are saved in {pdn} (PDN)")


def _pace(name: str, stats: PlayerStats) -> str:
    """`agent 0.201 s and 412 simulations per move` (the simulations when it searched; an
    alpha-beta agent: `and 5120 positions to depth 5.4`);
    `cb:/x/cake.so 0.104 s per game move over 212 moves, 1 game forfeited` (an engine)."""
    sims = (f" and {stats.simulations_per_move:.0f} simulations"
            if stats.simulations_per_move is not None else "")
    if stats.depth_per_move is not None:  # alpha-beta: positions and the depth finished
        sims = (f" and {stats.simulations_per_move:.0f} positions to depth "
                f"{stats.depth_per_move:.1f}")
    if not stats.per_game_move:
        return f"{name} {stats.seconds_per_move:.3f} s{sims} per move"
    forfeits = f", {stats.forfeits} game{'s' * (stats.forfeits != 1)} forfeited"
    return (f"{name} {stats.seconds_per_move:.3f} s per game move over {stats.moves} "
            f"moves{forfeits}")


def _engine_metrics(name: str, mine: PlayerStats, theirs: PlayerStats) -> dict[str, float]:
    """An engine arena's pace as metrics: ``eval/vs_<name>/seconds_per_move`` (the agent's),
    ``.../simulations_per_move``, and the opponent's under ``.../opponent_...``."""
    metrics = {}
    for prefix, stats in (("", mine), ("opponent_", theirs)):
        metrics[f"eval/vs_{name}/{prefix}seconds_per_move"] = stats.seconds_per_move
        if stats.simulations_per_move is not None:
            metrics[f"eval/vs_{name}/{prefix}simulations_per_move"] = stats.simulations_per_move
        if stats.depth_per_move is not None:
            metrics[f"eval/vs_{name}/{prefix}depth_per_move"] = stats.depth_per_move
    if theirs.per_game_move:
        metrics[f"eval/vs_{name}/forfeits"] = theirs.forfeits
    return metrics


def _timed_oracle_errors(agent: Agent, sims: int, key: jax.Array, states: Any,
                         preserving: Any, movetime: float) -> tuple[int, float]:
    """(errors, mean simulations per position) of the agent thinking `movetime` seconds on
    each position in turn."""
    from azjax.evaluation.oracle import wrong_moves

    player = agent.player(num_simulations=sims, movetime=movetime, keep_tree=False)
    errors, simulations = 0, 0
    for i in range(preserving.shape[0]):
        state = jax.tree.map(lambda x, i=i: x[i:i + 1], states)
        move = player.move(jax.random.fold_in(key, i), state)
        errors += int(wrong_moves(preserving[i:i + 1], jnp.asarray(move.action))[0])
        simulations += int(move.simulations[0])
    return errors, simulations / max(preserving.shape[0], 1)


def _measure_oracle(agent: Agent, sims: int, key: jax.Array, oracle: str,
                    oracle_positions: int | None, emit: Callable[[str], None],
                    movetime: float | None = None) -> dict[str, float]:
    """`measure_agent`'s oracle scores: one line per set, the run's oracle metrics. Each set
    is scored on its own (its own compiled size), with the same key; with `movetime`, the
    search thinks that long on each position."""
    env = agent.env
    directory = oracle or None
    if directory is not None and not Path(directory).is_dir():
        raise FileNotFoundError(f"oracle directory not found: {directory}")
    sets = load_oracle(env, directory)
    raw_fn = jax.jit(lambda p, k, s, m: oracle_errors(
        network_player(env, agent.apply_fn, p), k, s, m))
    search_fn = jax.jit(lambda p, k, s, m: oracle_errors(
        search_player(agent.search_fn, p, sims), k, s, m))
    if oracle_positions is not None and oracle_positions < 1:
        raise ValueError(f"oracle positions must be >= 1, got {oracle_positions}")
    raw_errors, search_errors = {}, {}
    for name, oracle_set in sets.items():
        states = jax.tree.map(lambda x: x[:oracle_positions], oracle_set.states)
        preserving = oracle_set.preserving[:oracle_positions]
        args = (agent.params, key, states, preserving)
        raw_errors[name] = error_percent(raw_fn(*args), len(preserving))
        pace = ""
        if movetime is None:
            search_errors[name] = error_percent(search_fn(*args), len(preserving))
        else:
            errors, per_move = _timed_oracle_errors(agent, sims, key, states, preserving,
                                                    movetime)
            search_errors[name] = error_percent(errors, len(preserving))
            pace = f"; {per_move:.0f} simulations per position"
        label = f"{oracle_set.title} ({name})" if oracle_set.title else name
        emit(f"oracle {label:>32}: raw network {raw_errors[name]:6.2f}% errors, "
             f"search {search_errors[name]:6.2f}% errors ({len(preserving)} positions{pace})")
    return oracle_error_metrics(raw_errors, search_errors)


def _opponent(agent: Agent, name: str, opponent_simulations: int | None,
              metrics: dict[str, Any], emit: Callable[[str], None], *, engine: bool = False,
              movetime: float | None = None) -> tuple[Any, int]:
    """(the player of opponent `name`, the arena's paired random opening plies:
    `arena_opening_plies`). An agent opponent plays greedy search (with `engine`, as an
    `EnginePlayer` on `movetime`); its simulations go into `metrics` and a line. An external
    engine (``cb:PATH[@SECONDS]``) is a `CheckerBoardPlayer`, its forfeits reported as they
    happen; the caller closes it."""
    if is_engine_name(name):
        player = engine_player(agent.env, name, report=emit)
        about = f"{player.engine_name!r}, " if player.engine_name else ""
        emit(f"opponent {name}: {about}an external engine, {player.seconds:g} s per move")
        return player, arena_opening_plies(name)
    if is_baseline(name):
        return make_opponent(agent.env, name), arena_opening_plies(name)
    other = Agent.load(name)
    if other.env.name != agent.env.name:
        raise ValueError(f"{name} plays {other.env.name}, not {agent.env.name}")
    other_sims = other.search_simulations(opponent_simulations)
    metrics[f"eval/vs_{name}/simulations"] = other_sims
    clock = f", {movetime} s per move" if movetime is not None else ""
    emit(f"opponent {name}: {other!r}, searching with {other_sims} simulations{clock}")
    if engine:
        return other.player(num_simulations=other_sims, movetime=movetime), \
            arena_opening_plies(name)
    return search_player(other.search_fn, other.params, other_sims), arena_opening_plies(name)


PROGRESS_LINE_EVERY_S = 10.0
"""Off a terminal, the seconds between two plain progress lines (the last one always prints)."""


def shows_a_bar(stream: Any) -> bool:
    """Whether a progress bar belongs on `stream`: a terminal or a notebook (tqdm.auto's widget).
    A file or a pipe (`azjax train ... > log 2>&1`) would keep every carriage-return frame."""
    from tqdm.auto import tqdm

    if any(cls.__module__ == "tqdm.notebook" for cls in tqdm.__mro__):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


@contextlib.contextmanager
def arena_bar(name: str, games: int,
              show: bool) -> Iterator[Callable[[int, int], None] | None]:
    """While open, the progress of one arena's finished games (with the plies played so far:
    most games end late): a bar on a terminal, else a plain line every `PROGRESS_LINE_EVERY_S`
    seconds and when the last game ends. Yields the `play_arena` progress callback, or None
    when not `show`."""
    if not show:
        yield None
        return
    if not shows_a_bar(sys.stderr):
        last_line_at: list[float] = []

        def say(finished: int, plies: int) -> None:
            now = time.monotonic()
            if finished == games or not last_line_at or now - last_line_at[0] >= (
                    PROGRESS_LINE_EVERY_S):
                print(f"vs {name}: {finished}/{games} games, ply {plies}", file=sys.stderr,
                      flush=True)
                last_line_at[:] = [now]

        yield say
        return
    from tqdm.auto import tqdm

    # The finished bar is cleared, so the result printed next starts a line of its own.
    with tqdm(total=games, desc=f"vs {name}", unit="game", leave=False,
              mininterval=1.0) as bar:
        def tick(finished: int, plies: int) -> None:
            bar.set_postfix_str(f"ply {plies}", refresh=False)
            bar.update(finished - bar.n)

        yield tick


def evaluate_agent(spec: str, *, against: list[str], oracle: str | None, games: int,
                   num_simulations: int | None, seed: int,
                   oracle_positions: int | None = None,
                   report: Callable[[str], None] | None = None,
                   overrides: list[str] | None = None, progress: bool = False,
                   opponent_simulations: int | None = None,
                   opening_plies: int | None = None, movetime: float | None = None,
                   opponent_movetime: float | None = None,
                   equal_time: bool = False, pdn: str | Path | None = None) -> list[str]:
    """`azjax eval SPEC`: loads the agent at `spec` and runs `measure_agent` on it.

    Args:
      spec: a game id (shipped model), run dir or model dir.
      overrides: ``KEY=VALUE`` changes to how the evaluated agent searches
        (`Agent.with_search`); reported in the first line.
      against, oracle, games, num_simulations, seed, oracle_positions, report, progress,
        opponent_simulations, opening_plies, movetime, opponent_movetime, equal_time, pdn: as
        in `measure_agent`.

    Returns:
      The printed lines.
    """
    agent = Agent.load(spec).with_search(overrides or [])
    header = [f"search overrides: {' '.join(overrides)}"] if overrides else []
    if report is not None:
        for line in header:
            report(line)
    _, lines = measure_agent(agent, against=against, oracle=oracle, games=games,
                             num_simulations=num_simulations, seed=seed,
                             oracle_positions=oracle_positions, report=report,
                             progress=progress, opponent_simulations=opponent_simulations,
                             opening_plies=opening_plies, movetime=movetime,
                             opponent_movetime=opponent_movetime, equal_time=equal_time,
                             pdn=pdn)
    return header + lines
