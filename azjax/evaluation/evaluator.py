"""Evaluation during training and from `azjax eval`: oracle scoring and arenas.

During training, one compiled call `evaluate(params, key)` scores the raw network (argmax of
the masked prior) and greedy search (argmax of the final search policy) against the game's
perfect-play oracle, and plays search against each baseline opponent, both colours. The
params are an argument, so the call compiles once per run, not once per evaluation.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.config import ConfigError, ExperimentConfig
from azjax.core.search import masked_logits
from azjax.evaluation import baselines
from azjax.evaluation.arena import PAIRED_OPENING_PLIES, ArenaResult, elo_difference, run_arena
from azjax.evaluation.oracle import OracleSet, has_oracle, load_oracle, oracle_files, wrong_moves
from envs.core import Env

__all__ = ["Evaluator", "arenas_due", "evaluate_agent", "is_perfect", "make_opponent",
           "measure_agent", "oracle_errors"]

PERFECT_RAW_ERROR = 0.01  # the bar: search 0% errors, raw network <= 1%, no arena losses


def _is_baseline(name: str) -> bool:
    """Whether `make_opponent` plays `name` (else it is an agent's spec)."""
    return name in ("random", "greedy") or name.startswith("mcts:")


def make_opponent(env: Env, name: str):
    """A baseline player from its name: random, greedy or mcts:N."""
    if name == "random":
        return baselines.random_player(env)
    if name == "greedy":
        return baselines.greedy_player(env)
    if name.startswith("mcts:"):
        try:
            simulations = int(name.split(":", 1)[1])
        except ValueError:
            simulations = 0
        if simulations < 1:
            raise ValueError(f"mcts opponent needs a positive simulation count, e.g. mcts:100; "
                             f"got {name!r}")
        return baselines.mcts_player(env, simulations)
    raise ValueError(f"unknown opponent {name!r}: use random, greedy, mcts:N or a model spec")


def network_player(env: Env, apply_fn, params):
    """The raw network: argmax of the masked prior (ties -> lowest index)."""

    def act(key, states):
        del key
        logits, _ = apply_fn({"params": params}, jax.vmap(env.observe)(states))
        return jnp.argmax(masked_logits(logits, states.legal_action_mask), -1).astype(jnp.int32)

    return act


def search_player(search_fn, params, num_simulations: int):
    """Greedy search: the search's move without noise (`SearchConfig.greedy_action`)."""

    def act(key, states):
        return search_fn({"params": params}, key, states, num_simulations=num_simulations,
                         noise=False).action

    return act


def oracle_errors(player, key, states, preserving: jax.Array) -> jax.Array:
    """int32 []: how many of the positions `states` [P] get a move from `player` outside the
    value-preserving set `preserving` bool [P, A]. (A count, not a float mean: 0 must be 0.)"""
    return jnp.sum(wrong_moves(preserving, player(key, states)), dtype=jnp.int32)


def arenas_due(config: ExperimentConfig, iteration: int, *, last: bool) -> bool:
    """Whether the evaluation at `iteration` plays the arenas: every `eval.arena_every`-th
    evaluation counted from iteration 0 (the untrained baseline), so a resumed run keeps the
    same schedule, and always at the run's last evaluation (the snapshot an export takes)."""
    evaluation = iteration // config.eval.every_iterations
    return last or evaluation % config.eval.arena_every == 0


def is_perfect(metrics: dict[str, Any], opponents: tuple[str, ...]) -> bool:
    """The perfect-play bar (for games with a complete oracle, e.g. tic-tac-toe)."""
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
    """

    def __init__(self, env: Env, config: ExperimentConfig, learner, *, params_example=None):
        self.env, self.config = env, config
        self.num_simulations = config.eval.num_simulations or config.search.num_simulations
        self.opponents = {name: make_opponent(env, name) for name in config.eval.opponents}
        self.apply_fn = learner.apply_fn
        self.search_fn = learner.search_fn  # the same search self-play runs
        self._compiled: dict[str, Any] = {}
        self._pending = None
        self.oracle_sets: dict[str, OracleSet] = {}
        if config.eval.oracle and config.eval.oracle_dir and has_oracle(env):
            # Checked now: the oracle itself loads in the background, first read at the first
            # evaluation, and a typo should not cost the iterations before it.
            try:
                oracle_files(env, config.eval.oracle_dir)
            except FileNotFoundError as error:
                raise ConfigError(f"eval.oracle_dir: {error}") from None
        if params_example is None:
            self.oracle_sets = self._load_oracle_sets()
        else:  # load the oracle and compile in the background while training starts
            def prepare():
                self.oracle_sets = self._load_oracle_sets()
                key = jax.random.PRNGKey(0)
                return {name: jax.jit(getattr(self, f"_{name}_impl")).lower(
                    params_example, key).compile() for name in ("oracle", "arena")}

            self._pending = _in_background(prepare)

    def _load_oracle_sets(self) -> dict[str, OracleSet]:
        """The game's oracle: `eval.oracle_dir`, else azjax's own (tic-tac-toe) or the
        default oracle folder (`$AZJAX_ORACLES` or ../shared/oracles); none for other games."""
        cfg = self.config.eval
        if not cfg.oracle or not has_oracle(self.env):
            return {}
        try:
            return load_oracle(self.env, cfg.oracle_dir or None)
        except FileNotFoundError as error:
            if cfg.oracle_dir:
                raise
            import warnings

            warnings.warn(f"no oracle scoring for {self.env.name}: {error}", stacklevel=2)
            return {}

    def _oracle_impl(self, params, key):
        """Error counts per oracle set, all sets scored as ONE batch (one search in the
        program, not one per set)."""
        if not self.oracle_sets:
            return {}
        limit = self.config.eval.oracle_positions or None
        sets = list(self.oracle_sets.items())
        states = jax.tree.map(lambda *xs: jnp.concatenate([x[:limit] for x in xs]),
                              *[oracle.states for _, oracle in sets])
        preserving = jnp.concatenate([oracle.preserving[:limit] for _, oracle in sets])
        sizes = [oracle.preserving[:limit].shape[0] for _, oracle in sets]
        set_index = jnp.repeat(jnp.arange(len(sets)), jnp.array(sizes),
                               total_repeat_length=sum(sizes))
        out = {}
        for kind, player in (("raw", network_player(self.env, self.apply_fn, params)),
                             ("search", search_player(self.search_fn, params,
                                                      self.num_simulations))):
            wrong = wrong_moves(preserving, player(key, states))
            counts = jax.ops.segment_sum(wrong.astype(jnp.int32), set_index,
                                         num_segments=len(sets))
            for i, (name, _) in enumerate(sets):
                out[f"{name}/{kind}"] = counts[i]
        return out

    def _arena_impl(self, params, key):
        """The opponents' arenas in one program. Cheap opponents share one lockstep arena (one
        copy of the search in the program): game i faces opponent i % K, so each meets both
        colours equally. Each mcts:N opponent gets an arena of its own: in a shared one its
        rollouts would run in every game (a player acts on the whole batch)."""
        if not self.opponents:
            return {}
        search = search_player(self.search_fn, params, self.num_simulations)
        shared = [name for name in self.opponents if not name.startswith("mcts:")]
        groups = ([shared] if shared else []) + [
            [name] for name in self.opponents if name.startswith("mcts:")]
        results = {}
        for g, names in enumerate(groups):
            players = [self.opponents[name] for name in names]
            count = len(players)
            games = self.config.eval.arena_games * count

            def opponent(k, states, players=players, count=count, games=games):
                if count == 1:
                    return players[0](k, states)
                which = jnp.arange(games) % count
                moves = [p(jax.random.fold_in(k, j), states) for j, p in enumerate(players)]
                return jnp.select([which == j for j in range(count)], moves).astype(jnp.int32)

            returns, illegal_a, illegal_b = run_arena(
                jax.random.fold_in(key, g), env=self.env, player_a=search, player_b=opponent,
                num_games=games, max_steps=self.env.max_game_length or 10_000)
            results.update({name: (returns[j::count], illegal_a, illegal_b)
                            for j, name in enumerate(names)})
        return results

    def _gate_impl(self, params, best_params, key):
        """AlphaGo Zero's gate: greedy search with `params` against `best_params`, from paired
        random openings (two greedy searches would otherwise replay two games)."""
        returns, _, _ = run_arena(
            key, env=self.env,
            player_a=search_player(self.search_fn, params, self.num_simulations),
            player_b=search_player(self.search_fn, best_params, self.num_simulations),
            num_games=self.config.eval.gating_games,
            max_steps=self.env.max_game_length or 10_000, opening_plies=PAIRED_OPENING_PLIES)
        return returns

    def gate(self, params, best_params, key) -> tuple[bool, float]:
        """(whether `params` replace `best_params`, their score against them)."""
        if "gate" not in self._compiled:
            self._compiled["gate"] = jax.jit(self._gate_impl)
        result = ArenaResult.from_outcomes(self._compiled["gate"](params, best_params, key))
        return result.score >= self.config.eval.gating_threshold, result.score

    def _call(self, name: str, params, key):
        if name not in self._compiled:
            self._compiled[name] = jax.jit(getattr(self, f"_{name}_impl"))
        return jax.device_get(self._compiled[name](params, key))

    def evaluate(self, params, key, *, arenas: bool = True) -> dict[str, Any]:
        """Flat dict of `eval/...` metrics (oracle errors in percent), plus `eval/perfect`.
        The arenas are played when `arenas` (the caller's schedule) or the oracle bar is met."""
        if self._pending is not None:  # the background set-up must be done
            self._compiled = self._pending.result()
            self._pending = None
        k_oracle, k_arena = jax.random.split(key)
        metrics: dict[str, Any] = {}
        if self.oracle_sets:
            raw = self._call("oracle", params, k_oracle)
            limit = self.config.eval.oracle_positions or None
            sizes = {name: len(oracle.moves[:limit]) for name, oracle in self.oracle_sets.items()}
            raw_errors = [100 * int(raw[f"{name}/raw"]) / sizes[name] for name in sizes]
            search_errors = [100 * int(raw[f"{name}/search"]) / sizes[name] for name in sizes]
            if len(self.oracle_sets) > 1:
                for name, r, s in zip(self.oracle_sets, raw_errors, search_errors, strict=True):
                    metrics[f"eval/oracle/set/{name}/raw"] = r
                    metrics[f"eval/oracle/set/{name}/search"] = s
            metrics["eval/oracle/raw_error"] = float(np.mean(raw_errors))
            metrics["eval/oracle/search_error"] = float(np.mean(search_errors))
        oracle_bar = bool(self.oracle_sets) and is_perfect(metrics, ())
        if self.opponents and (arenas or oracle_bar):
            results = self._call("arena", params, k_arena)
            for name in self.opponents:
                result = ArenaResult.from_outcomes(*results[name])
                metrics[f"eval/vs_{name}/wins"] = result.wins
                metrics[f"eval/vs_{name}/draws"] = result.draws
                metrics[f"eval/vs_{name}/losses"] = result.losses
                metrics[f"eval/vs_{name}/score"] = result.score
        metrics["eval/perfect"] = oracle_bar and is_perfect(metrics, tuple(self.opponents))
        return metrics

    def summary_line(self, iteration: int, record: dict[str, Any]) -> str:
        parts = [f"iter {iteration:>5}", f"wall {record['wall_s']:7.1f}s"]
        if "eval/oracle/raw_error" in record:
            parts.append(f"oracle err raw {record['eval/oracle/raw_error']:5.2f}% "
                         f"search {record['eval/oracle/search_error']:5.2f}%")
        for name in self.opponents:
            if f"eval/vs_{name}/wins" in record:
                parts.append(f"vs {name} W/D/L {record[f'eval/vs_{name}/wins']}/"
                             f"{record[f'eval/vs_{name}/draws']}/"
                             f"{record[f'eval/vs_{name}/losses']}")
        if record.get("eval/perfect"):
            parts.append("PERFECT")
        return " | ".join(parts)


def _in_background(work):
    """Runs `work()` in a thread; returns its future."""
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azjax-eval-compile")
    future = executor.submit(work)
    executor.shutdown(wait=False)
    return future


def measure_agent(agent: Any, *, against: list[str], oracle: str | None, games: int,
                  num_simulations: int | None, seed: int, oracle_positions: int | None = None,
                  report: Callable[[str], None] | None = None, progress: bool = False,
                  opponent_simulations: int | None = None
                  ) -> tuple[dict[str, Any], list[str]]:
    """Scores a loaded `azjax.Agent`: oracle errors (raw network and greedy search, every
    position of every set, or its first `oracle_positions`) and arenas (both colours) against
    baselines or other agents. An agent opponent searches with `opponent_simulations`, or its
    own model's default for None (not `num_simulations`, which is the evaluated agent's); the
    line before its arena says which.

    Returns metrics under the training run's keys (`eval/oracle/...`, `eval/vs_<name>/...`) and
    the human-readable lines `azjax eval` prints; `report`, if given, receives each line as soon
    as it is measured (a 100-game arena against MCTS-1000 can take half an hour); `progress`
    shows a bar of each arena's finished games and plies while it runs (stderr).
    """
    from azjax.agent import Agent
    from azjax.evaluation.arena import arena_devices, arena_split_note, play_arena

    env = agent.env
    sims = agent.search_simulations(num_simulations)
    key = jax.random.PRNGKey(seed)
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        if report is not None:
            report(line)

    emit(f"{agent!r}, evaluated with {sims} simulations")
    metrics: dict[str, Any] = {"eval/num_simulations": sims}
    params = agent.params
    if oracle is not None:
        directory = oracle or None
        if directory is not None and not Path(directory).is_dir():
            raise FileNotFoundError(f"oracle directory not found: {directory}")
        sets = load_oracle(env, directory)
        raw_fn = jax.jit(lambda p, k, s, m: oracle_errors(
            network_player(env, agent.apply_fn, p), k, s, m))
        search_fn = jax.jit(lambda p, k, s, m: oracle_errors(
            search_player(agent._search_fn, p, sims), k, s, m))
        raw_errors, search_errors = [], []
        if oracle_positions is not None and oracle_positions < 1:
            raise ValueError(f"oracle positions must be >= 1, got {oracle_positions}")
        for name, oracle_set in sets.items():
            states = jax.tree.map(lambda x: x[:oracle_positions], oracle_set.states)
            preserving = oracle_set.preserving[:oracle_positions]
            args = (params, key, states, preserving)
            raw_error = 100 * int(raw_fn(*args)) / len(preserving)
            search_error = 100 * int(search_fn(*args)) / len(preserving)
            raw_errors.append(raw_error)
            search_errors.append(search_error)
            if len(sets) > 1:
                metrics[f"eval/oracle/set/{name}/raw"] = raw_error
                metrics[f"eval/oracle/set/{name}/search"] = search_error
            label = f"{oracle_set.title} ({name})" if oracle_set.title else name
            emit(f"oracle {label:>32}: raw network {raw_error:6.2f}% errors, "
                 f"search {search_error:6.2f}% errors ({len(preserving)} positions)")
        metrics["eval/oracle/raw_error"] = float(np.mean(raw_errors))
        metrics["eval/oracle/search_error"] = float(np.mean(search_errors))
    me = search_player(agent._search_fn, params, sims)
    opponents = against or (["random", "greedy"] if oracle is None else [])
    if opponent_simulations is not None and all(map(_is_baseline, opponents)):
        raise ValueError("opponent simulations apply to agent opponents (a model SPEC); none "
                         f"of {opponents} is one (mcts:N names its own rollouts)")
    if opponents:  # the count of devices is part of what makes an arena's result repeatable
        metrics["eval/arena_devices"] = len(arena_devices(games))
        if (note := arena_split_note(games)) is not None:
            emit(note)
    for name in opponents:
        if _is_baseline(name):
            opponent, opening_plies = make_opponent(env, name), 0
        else:
            other = Agent.load(name)
            if other.env.name != env.name:
                raise ValueError(f"{name} plays {other.env.name}, not {env.name}")
            other_sims = other.search_simulations(opponent_simulations)
            metrics[f"eval/vs_{name}/simulations"] = other_sims
            emit(f"opponent {name}: {other!r}, searching with {other_sims} simulations")
            opponent = search_player(other._search_fn, other.params, other_sims)
            opening_plies = PAIRED_OPENING_PLIES  # two greedy searches: vary the games
        with _arena_bar(name, games, progress) as tick:
            result = play_arena(env, me, opponent, key=key, num_games=games,
                                opening_plies=opening_plies, progress=tick)
        metrics.update({f"eval/vs_{name}/wins": result.wins, f"eval/vs_{name}/draws": result.draws,
                        f"eval/vs_{name}/losses": result.losses,
                        f"eval/vs_{name}/score": result.score})
        emit(f"vs {name:>10}: {result}  (Elo difference "
             f"{elo_difference(result.score):+.0f})")
    return metrics, lines


@contextlib.contextmanager
def _arena_bar(name: str, games: int,
               show: bool) -> Iterator[Callable[[int, int], None] | None]:
    """While open, a progress bar of one arena's finished games (with the plies played so far:
    most games end late); yields the `play_arena` progress callback that moves it, or None
    when not `show`."""
    if not show:
        yield None
        return
    from tqdm.auto import tqdm

    # On a terminal the finished bar is cleared; in a log it stays on its own line, so that the
    # result printed next starts a line of its own (not after the bar's last carriage return).
    with tqdm(total=games, desc=f"vs {name}", unit="game", leave=not sys.stderr.isatty(),
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
                   opponent_simulations: int | None = None) -> list[str]:
    """`azjax eval`: arenas against baselines or other agents, and oracle scoring; `overrides`
    (`KEY=VALUE`) change how the evaluated agent searches (`Agent.with_search`); `progress`
    shows each arena's progress bar; `opponent_simulations` as in `measure_agent`."""
    from azjax.agent import Agent

    agent = Agent.load(spec).with_search(overrides or [])
    header = [f"search overrides: {' '.join(overrides)}"] if overrides else []
    if report is not None:
        for line in header:
            report(line)
    _, lines = measure_agent(agent, against=against, oracle=oracle, games=games,
                             num_simulations=num_simulations, seed=seed,
                             oracle_positions=oracle_positions, report=report,
                             progress=progress, opponent_simulations=opponent_simulations)
    return header + lines
