"""Evaluation during training: oracle scoring, arenas and gating of a run's params.

One compiled call scores the raw network (argmax of the masked prior) and greedy search
(argmax of the final search policy) against the game's perfect-play oracle; another plays
search against each baseline opponent, both colours. The params are an argument, so each call
compiles once per run, not once per evaluation. (`azjax eval` measures a saved agent with the
same scorer and arena: `azjax.evaluation.measure`.) An external engine among the opponents
(``cb:PATH[@SECONDS]``, draughts) plays its arena ply by ply from the host
(`play_engine_arena`), against the same search at the same count, after the compiled ones.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp

from azjax.agent import default_simulations
from azjax.config import ConfigError, ExperimentConfig, is_engine_name
from azjax.engine_player import EnginePlayer
from azjax.envs.core import Env, GameState
from azjax.evaluation.arena import (
    PAIRED_OPENING_PLIES,
    ArenaResult,
    arena_metrics,
    run_arena,
    wdl_summary,
)
from azjax.evaluation.baselines import Player
from azjax.evaluation.checkerboard import CheckerBoardPlayer, engine_player
from azjax.evaluation.engine_arena import play_engine_arena
from azjax.evaluation.oracle import OracleSet, has_oracle, load_oracle, oracle_files
from azjax.evaluation.oracle_score import (
    count_oracle_errors,
    error_percent,
    oracle_error_metrics,
    stack_oracle_sets,
)
from azjax.evaluation.players import (
    arena_opening_plies,
    make_opponent,
    network_player,
    search_player,
    searching_baseline,
)

__all__ = ["PERFECT_RAW_ERROR", "Evaluator", "arenas_due", "is_perfect"]

PERFECT_RAW_ERROR = 0.01  # the bar: search 0% errors, raw network <= 1%, no arena losses


def arenas_due(config: ExperimentConfig, iteration: int, *, last: bool) -> bool:
    """Whether the evaluation at `iteration` plays the arenas: every `eval.arena_every`-th
    evaluation counted from iteration 0 (the untrained baseline), so a resumed run keeps the
    same schedule, and always at the run's last evaluation (the snapshot an export takes)."""
    evaluation = iteration // config.eval.every_iterations
    return last or evaluation % config.eval.arena_every == 0


def is_perfect(metrics: dict[str, Any], opponents: tuple[str, ...]) -> bool:
    """The perfect-play bar (for games with a complete oracle, e.g. tic-tac-toe): search makes
    no oracle errors, the raw network at most `PERFECT_RAW_ERROR`, and no arena against
    `opponents` (all of which must have been played) was lost.

    Args:
      metrics: an evaluation's `eval/...` metrics (`Evaluator.evaluate`).
      opponents: the opponents whose arenas count (() for the oracle part alone).
    """
    if "eval/oracle/search_error" not in metrics:
        return False
    if any(f"eval/vs_{o}/losses" not in metrics for o in opponents):
        return False
    no_losses = all(metrics.get(f"eval/vs_{o}/losses", 1) == 0 for o in opponents)
    return (metrics["eval/oracle/search_error"] == 0.0
            and metrics["eval/oracle/raw_error"] <= PERFECT_RAW_ERROR * 100 and no_losses)


class Evaluator:
    """Compiled evaluation of a run's params; see the module docstring.

    Two compiled calls: the oracle scoring (every evaluation) and the arenas (when the caller
    asks, see `arenas_due`, and whenever the oracle bar is met, so that a run that stops at
    perfect play has its arenas checked in that same evaluation). Both are compiled
    ahead, in a background thread, while training runs: XLA compiles without the GIL, so
    on a 2-core machine the compile overlaps the first iterations instead of stalling them.

    Args:
      env: the game.
      config: the run's config (`eval` and `search` sections).
      apply_fn: ``apply_fn({"params": p}, obs [B, ...]) -> (logits [B, A], value [B])``.
      search_fn: the search self-play runs, ``search_fn(variables, key, states[B], *,
        num_simulations, noise) -> SearchOutput``.
      params_example: params of the run's structure; given, the oracle loads and both calls
        compile in the background from now on; None, the oracle loads now and the calls
        compile at first use.
    """

    def __init__(self, env: Env, config: ExperimentConfig, apply_fn: Callable,
                 search_fn: Callable, *, params_example: Any = None):
        self.env, self.config = env, config
        self.num_simulations = default_simulations(config)
        self.opponents = {name: make_opponent(env, name) for name in config.eval.opponents
                          if not is_engine_name(name)}
        self.engines = _start_engines(env, config.eval.opponents)
        self._search_engine = None  # the engine arenas' search, made at their first use
        self.apply_fn = apply_fn
        self.search_fn = search_fn
        self._compiled: dict[str, Any] = {}
        self._pending: Future | None = None
        self.oracle_sets: dict[str, OracleSet] = {}
        if config.eval.oracle and config.eval.oracle_dir:
            # Checked now: the oracle itself loads in the background, first read at the first
            # evaluation, and a typo should not cost the iterations before it.
            try:
                oracle_files(env, config.eval.oracle_dir)
            except FileNotFoundError as error:
                raise ConfigError(f"eval.oracle_dir: {error}") from None
        if params_example is None:
            self.oracle_sets = self._load_oracle_sets()
        else:  # load the oracle and compile in the background while training starts
            self._pending = _in_background(lambda: self._prepare(params_example))

    def _prepare(self, params_example: Any) -> dict[str, Any]:
        """Loads the oracle, then compiles the oracle and arena calls for `params_example`."""
        self.oracle_sets = self._load_oracle_sets()
        key = jax.random.PRNGKey(0)
        return {name: jax.jit(getattr(self, f"_{name}_impl")).lower(
            params_example, key).compile() for name in ("oracle", "arena")}

    def _load_oracle_sets(self) -> dict[str, OracleSet]:
        """The game's oracle: `eval.oracle_dir` (any game), else azjax's own (tic-tac-toe) or
        the default oracle folder (`$AZJAX_ORACLES`, else the Pons test sets packaged in
        azjax/data/oracles); none for other games."""
        cfg = self.config.eval
        if not cfg.oracle or not has_oracle(self.env, cfg.oracle_dir):
            return {}
        try:
            return load_oracle(self.env, cfg.oracle_dir or None)
        except FileNotFoundError as error:
            if cfg.oracle_dir:
                raise
            warnings.warn(f"no oracle scoring for {self.env.name}: {error}", stacklevel=2)
            return {}

    def _oracle_limit(self) -> int | None:
        return self.config.eval.oracle_positions or None

    def _oracle_impl(self, params, key) -> dict[str, jax.Array]:
        """Error counts int32 [S] per kind of player (raw, search), all S oracle sets scored
        as ONE batch (one search in the program, not one per set)."""
        if not self.oracle_sets:
            return {}
        states, preserving, set_index, _ = stack_oracle_sets(self.oracle_sets,
                                                             self._oracle_limit())
        players = {"raw": network_player(self.env, self.apply_fn, params),
                   "search": search_player(self.search_fn, params, self.num_simulations)}
        return {kind: count_oracle_errors(player, key, states, preserving, set_index,
                                          len(self.oracle_sets))
                for kind, player in players.items()}

    def _arena_groups(self) -> list[list[str]]:
        """The opponents by arena: the cheap ones share one lockstep arena (one copy of the
        search in the program); each baseline that searches (`searching_baseline`: mcts:N,
        alphabeta:D) gets an arena of its own, as in a shared one its search would run in
        every game (a player acts on the whole batch)."""
        heavy = [name for name in self.opponents if searching_baseline(name)]
        shared = [name for name in self.opponents if name not in heavy]
        return ([shared] if shared else []) + [[name] for name in heavy]

    def _arena_impl(self, params, key) -> dict[str, tuple[jax.Array, jax.Array, jax.Array]]:
        """The opponents' arenas in one program: {opponent: `run_arena`'s outcomes of its
        games}. In a shared arena game i faces opponent i % K, so each meets both colours
        equally; an alpha-beta arena opens from paired random plies (`arena_opening_plies`)."""
        search = search_player(self.search_fn, params, self.num_simulations)
        results = {}
        for g, names in enumerate(self._arena_groups()):
            count = len(names)
            games = self.config.eval.arena_games * count
            opponent = _rotating_player([self.opponents[name] for name in names], games)
            returns, illegal_a, illegal_b = run_arena(
                jax.random.fold_in(key, g), env=self.env, player_a=search, player_b=opponent,
                num_games=games, opening_plies=max(map(arena_opening_plies, names)))
            results.update({name: (returns[j::count], illegal_a, illegal_b)
                            for j, name in enumerate(names)})
        return results

    def _gate_impl(self, params, best_params, key) -> jax.Array:
        """AlphaGo Zero's gate: greedy search with `params` against `best_params`, from paired
        random openings (two greedy searches would otherwise replay two games); A's returns."""
        returns, _, _ = run_arena(
            key, env=self.env,
            player_a=search_player(self.search_fn, params, self.num_simulations),
            player_b=search_player(self.search_fn, best_params, self.num_simulations),
            num_games=self.config.eval.gating_games, opening_plies=PAIRED_OPENING_PLIES)
        return returns

    def gate(self, params: Any, best_params: Any, key: jax.Array) -> tuple[bool, float]:
        """Plays `eval.gating_games` of `params` against `best_params`.

        Returns:
          (whether `params` replace `best_params`: score >= `eval.gating_threshold`, their
          score against them in [0, 1]).
        """
        if "gate" not in self._compiled:
            self._compiled["gate"] = jax.jit(self._gate_impl)
        result = ArenaResult.from_outcomes(self._compiled["gate"](params, best_params, key))
        return result.score >= self.config.eval.gating_threshold, result.score

    def _call(self, name: str, params, key):
        if name not in self._compiled:
            self._compiled[name] = jax.jit(getattr(self, f"_{name}_impl"))
        return jax.device_get(self._compiled[name](params, key))

    def _oracle_metrics(self, params, key) -> dict[str, Any]:
        counts = self._call("oracle", params, key)
        limit = self._oracle_limit()
        sizes = {name: oracle.preserving[:limit].shape[0]
                 for name, oracle in self.oracle_sets.items()}
        raw, search = ({name: error_percent(counts[kind][i], sizes[name])
                        for i, name in enumerate(sizes)} for kind in ("raw", "search"))
        return oracle_error_metrics(raw, search)

    def evaluate(self, params: Any, key: jax.Array, *, arenas: bool = True) -> dict[str, Any]:
        """Scores `params`.

        Args:
          params: the network's params.
          key: PRNG key of this evaluation.
          arenas: whether the arenas are due (the caller's schedule, `arenas_due`); they are
            also played when the oracle bar is met.

        Returns:
          A flat dict of `eval/...` metrics (oracle errors in percent, `arena_metrics` per
          opponent), plus `eval/perfect`.
        """
        if self._pending is not None:  # the background set-up must be done
            self._compiled = self._pending.result()
            self._pending = None
        k_oracle, k_arena = jax.random.split(key)
        metrics: dict[str, Any] = {}
        if self.oracle_sets:
            metrics.update(self._oracle_metrics(params, k_oracle))
        oracle_bar = bool(self.oracle_sets) and is_perfect(metrics, ())
        if self.opponents and (arenas or oracle_bar):
            results = self._call("arena", params, k_arena)
            for name in self.opponents:
                metrics.update(arena_metrics(name, ArenaResult.from_outcomes(*results[name])))
        if self.engines and (arenas or oracle_bar):
            metrics.update(self._engine_arenas(params, k_arena))
        metrics["eval/perfect"] = oracle_bar and is_perfect(metrics, self.config.eval.opponents)
        return metrics

    def _engine_arenas(self, params: Any, key: jax.Array) -> dict[str, Any]:
        """The arenas against external engines, one each, ply by ply from the host: greedy
        search at the evaluation's count (an `EnginePlayer` without a clock, whose compiled
        pieces serve every evaluation) against the engine; `arena_metrics` and
        ``eval/vs_<name>/forfeits`` per engine."""
        if self._search_engine is None:
            from azjax.core.search import make_search_engine

            self._search_engine = make_search_engine(self.env, self.apply_fn,
                                                     self.config.search)
        metrics: dict[str, Any] = {}
        for i, (name, engine) in enumerate(self.engines.items()):
            me = EnginePlayer(self._search_engine, {"params": params},
                              num_simulations=self.num_simulations, keep_tree=False)
            result, _, theirs = play_engine_arena(
                self.env, me, engine, key=jax.random.fold_in(key, 1 + len(self.opponents) + i),
                num_games=self.config.eval.arena_games, opening_plies=arena_opening_plies(name))
            metrics.update(arena_metrics(name, result))
            metrics[f"eval/vs_{name}/forfeits"] = theirs.forfeits
        return metrics

    def summary_line(self, iteration: int, record: dict[str, Any]) -> str:
        """One progress line of an evaluation's `record` (its metrics plus `wall_s`): oracle
        errors, W/D/L per opponent played, PERFECT at the bar."""
        parts = [f"iter {iteration:>5}", f"wall {record['wall_s']:7.1f}s"]
        if "eval/oracle/raw_error" in record:
            parts.append(f"oracle err raw {record['eval/oracle/raw_error']:5.2f}% "
                         f"search {record['eval/oracle/search_error']:5.2f}%")
        parts += [line for name in self.config.eval.opponents
                  if (line := wdl_summary(name, record)) is not None]
        if record.get("eval/perfect"):
            parts.append("PERFECT")
        return " | ".join(parts)


def _start_engines(env: Env, names: tuple[str, ...]) -> dict[str, CheckerBoardPlayer]:
    """The external engines among `names`, started (their forfeits reported on standard
    error); ConfigError naming `eval.opponents` when one cannot be."""
    engines = {}
    for name in filter(is_engine_name, names):
        try:
            engines[name] = engine_player(env, name, report=_to_stderr)
        except ValueError as error:
            for engine in engines.values():
                engine.close()
            raise ConfigError(f"eval.opponents: {error}") from None
    return engines


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _rotating_player(players: list[Player], num_games: int) -> Player:
    """One player over a batch of `num_games`: game i gets the move of ``players[i % K]``
    (each called on the whole batch with its own fold of the key)."""
    if len(players) == 1:
        return players[0]
    count = len(players)

    def act(key: jax.Array, states: GameState) -> jax.Array:
        which = jnp.arange(num_games) % count
        moves = [p(jax.random.fold_in(key, j), states) for j, p in enumerate(players)]
        return jnp.select([which == j for j in range(count)], moves).astype(jnp.int32)

    return act


def _in_background(work: Callable[[], Any]) -> Future:
    """Runs `work()` in a thread; returns its future."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azjax-eval-compile")
    future = executor.submit(work)
    executor.shutdown(wait=False)
    return future
