"""`Agent`: a trained network plus its search, for notebooks, the CLI and servers.

    agent = azjax.Agent.load("tic_tac_toe")          # shipped model, run dir or snapshot dir
    actions = agent.act(key, states)                  # int32 [B]
    actions = agent.act(key, states, movetime=0.2)    # thinking 0.2 s per move (the batch)
    player = agent.player(movetime=1.0, keep_tree=True)  # an engine: clock, tree kept
    move = player.move(key, states); player.played(move.action)
    action, policy, value = agent.search(key, states) # [B], [B, A], [B]
    policy, value = agent.evaluate(states)            # raw network, masked to legal moves

Every batched method takes a vmapped env State of batch B. Batches are padded to a few fixed
sizes and simulation counts are static, so repeated calls reuse a handful of compiled programs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.config import (
    ConfigError,
    ExperimentConfig,
    SearchConfig,
    apply_overrides,
    config_from_saved,
    config_to_dict,
    resolve_simulations,
)
from azjax.core.network import make_network
from azjax.core.search import SearchOutput, make_network_search, masked_logits
from azjax.envs.core import Env
from azjax.model_files import CheckpointError, load_model, snapshot_dirs

__all__ = ["MODELS_DIR", "Agent", "default_simulations", "resolve_model_dir", "search_effort",
           "states_from_moves"]

MODELS_DIR = Path(__file__).resolve().parent / "models"
_PAD_SIZES = (1, 8, 64, 256, 1024)


def default_simulations(config: ExperimentConfig) -> int:
    """A run's search simulations for evaluation and play when a model names none.

    Args:
      config: the run's config.

    Returns:
      `eval.num_simulations`, else (0) `search.num_simulations` (`resolve_simulations`).
    """
    return resolve_simulations(config.eval.num_simulations, config.search)


def search_effort(search: SearchConfig, num_simulations: int) -> str:
    """How hard a search looks per move, in a few words for logs and cards.

    Args:
      search: the search config.
      num_simulations: the simulations a tree search runs (alpha-beta reads none).

    Returns:
      e.g. "1024 simulations", or "alpha-beta to depth 12 (whole moves), at most 8000
      positions a move".
    """
    if search.algorithm == "alphabeta":
        budget = (f", at most {search.alphabeta_nodes} positions a move"
                  if search.alphabeta_nodes else "")
        return f"alpha-beta to depth {search.alphabeta_depth} (whole moves){budget}"
    return f"{num_simulations} simulations"


def resolve_model_dir(spec: str | Path) -> Path:
    """The model directory (with model.json) a spec names.

    Args:
      spec: a game id (its shipped model), a run dir (its newest snapshot) or a snapshot or
        model dir.

    Returns:
      The directory holding model.json.

    Raises:
      CheckpointError: the spec names none of these (the message says why).
    """
    path = Path(spec)
    if (path / "model.json").is_file():
        return path
    if (path / "snapshots").is_dir():
        snapshots = snapshot_dirs(path)
        if not snapshots:
            raise CheckpointError(f"run dir {path} has no snapshots yet (one is written at "
                                  "every evaluation, and where Ctrl-C stops the run after an "
                                  "iteration)")
        return snapshots[-1]
    if str(spec) in envs.available() and not path.exists():
        shipped = MODELS_DIR / str(spec)
        if not (shipped / "model.json").is_file():
            raise CheckpointError(f"no shipped model for {spec!r} in {MODELS_DIR}")
        return shipped
    if str(spec) in envs.available():  # a directory here has the game's name
        raise CheckpointError(
            f"{path.resolve()} is neither a run dir (with snapshots/) nor a model dir (with "
            f"model.json), and as a directory here it hides the shipped {spec!r} model: pass "
            f"{MODELS_DIR / str(spec)} instead")
    raise CheckpointError(
        f"{spec!r} is neither a game id with a shipped model ({', '.join(envs.available())}), "
        "a run dir (with snapshots/), nor a model dir (with model.json)")


def _pad_size(batch: int) -> int:
    for size in _PAD_SIZES:
        if batch <= size:
            return size
    return -(-batch // _PAD_SIZES[-1]) * _PAD_SIZES[-1]


def _pad(states: Any, size: int) -> Any:
    def pad(x):
        extra = size - x.shape[0]
        return jnp.concatenate([x, jnp.repeat(x[:1], extra, axis=0)]) if extra else x

    return jax.tree.map(pad, states)


def with_search_overrides(config: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    """`config` under overrides that may change how a trained network searches.

    Args:
      config: the model's config.
      overrides: ``KEY=VALUE`` strings, validated like `--set`.

    Returns:
      The changed config.

    Raises:
      ConfigError: an override would change the network or the game.
    """
    changed = config_from_saved(apply_overrides(config_to_dict(config), overrides))
    if changed.network != config.network or changed.game != config.game:
        raise ConfigError(f"{' '.join(overrides)}: an agent's overrides may change how it "
                          "searches, not its network or game")
    return changed


class Agent:
    """A network and its search over one game. Build with `Agent.load(spec)`.

    Args:
      env: the game.
      config: the model's config (network and search).
      params: the network's params.
      meta: the model's metadata (model.json: iteration, num_simulations, ...).
      source: the directory it was loaded from, if any.

    Attributes:
      apply_fn: the network, ``apply_fn({"params": params}, obs [B, ...]) -> (logits [B, A],
        value [B])``.
      search_fn: its search, ``search_fn({"params": params}, key, states[B], *,
        num_simulations, noise) -> SearchOutput`` (`azjax.core.search.make_network_search`);
        traceable, for callers that jit their own programs (arenas, oracle scoring).
    """

    def __init__(self, env: Env, config: ExperimentConfig, params: Any,
                 meta: dict[str, Any] | None = None, source: Path | None = None):
        self.env = env
        self.config = config
        self.params = params
        self.meta = meta or {}
        self.source = source
        _, self.apply_fn = make_network(config.network, env.num_actions)

    @classmethod
    def load(cls, spec: str | Path, *, trust_game: bool = False) -> Agent:
        """The agent of a game id (shipped model), run dir (newest snapshot) or model dir
        (`resolve_model_dir`).

        A model of a game of your own names the game by its import path (`module:Class`)
        and the directory its module was found in when it was trained (`game_dir`). Loading
        never runs code you did not choose: the import path must name an `Env` subclass or a
        marked game factory (`envs.game_factory`), and a module that is not installed (found
        only in that directory, beside the model directory or in the working directory) is
        imported, running its code, only with `trust_game=True` (docs/trust.md). The model's
        files are checked against its `checksums.json` first.

        Args:
          spec: a game id, run dir, snapshot dir or model dir.
          trust_game: import the game's module from where the model says it is, even when it
            is not installed (also granted inside `envs.trust_game_code()`).

        Returns:
          The agent, its default simulations the model's.

        Raises:
          CheckpointError: the spec names no model, a file of the model is damaged or
            corrupt, or its game cannot be imported or is not trusted (one line naming the
            file or module and why).
        """
        directory = resolve_model_dir(spec)
        params, config, meta = load_model(directory, trust_game=trust_game)
        return cls(envs.make(config.game), config, params, meta, directory)

    def with_search(self, overrides: list[str]) -> Agent:
        """The same network and weights searching under config overrides.

        Args:
          overrides: ``KEY=VALUE`` strings (validated like `--set`), e.g.
            ``["search.algorithm=puct", "search.play_forced_moves=true"]``.

        Returns:
          A new agent ([] returns this one).

        Raises:
          ConfigError: an override would change the network or the game (the weights would
            no longer fit them).
        """
        if not overrides:
            return self
        config = with_search_overrides(self.config, overrides)
        return Agent(self.env, config, self.params, self.meta, self.source)

    @property
    def record_name(self) -> str:
        """How game records (PDN) name this agent: `azjax <its model or run directory>`
        (`azjax draughts` for the shipped model), else `azjax untrained <game>`."""
        if self.meta.get("untrained") or self.source is None:
            return f"azjax untrained {self.env.name}"
        return f"azjax {Path(self.source).name}"

    @property
    def num_simulations(self) -> int:
        """The default simulations of `search` and `act`."""
        return int(self.meta.get("num_simulations") or default_simulations(self.config))

    @functools.cached_property
    def search_fn(self) -> Callable:
        """The search (the class docstring), built when first asked for: building it may
        solve an endgame table (5 pieces: 12 minutes), which a caller that reads only the
        config, or refuses it (`azjax export --web`), should not wait for."""
        return make_network_search(self.env, self.config.network, self.config.search)

    # ---- compiled kernels (cached per static arguments) --------------------------------------

    @functools.cached_property
    def _evaluate_jit(self):
        def evaluate(params, states):
            obs = jax.vmap(self.env.observe)(states)
            logits, value = self.apply_fn({"params": params}, obs)
            return jax.nn.softmax(masked_logits(logits, states.legal_action_mask)), value

        return jax.jit(evaluate)

    @functools.cached_property
    def _search_jit(self):
        def search(params, key, states, num_simulations, noise):
            out = self.search_fn({"params": params}, key, states,
                                  num_simulations=num_simulations, noise=noise)
            return out.action, out.policy, out.value

        return jax.jit(search, static_argnums=(3, 4))

    @functools.cached_property
    def _search_output_jit(self):
        def search(params, key, states, num_simulations):
            return self.search_fn({"params": params}, key, states,
                                   num_simulations=num_simulations, noise=False)

        return jax.jit(search, static_argnums=(3,))

    # ---- public API ----------------------------------------------------------------------------

    def evaluate(self, states: Any) -> tuple[jax.Array, jax.Array]:
        """The raw network on a batch of positions.

        Args:
          states: a batched env State [B].

        Returns:
          (policy float32 [B, A], softmax masked to legal moves; value float32 [B]).
        """
        batch = states.current_player.shape[0]
        policy, value = self._evaluate_jit(self.params, _pad(states, _pad_size(batch)))
        return policy[:batch], value[:batch]

    def search(self, key: jax.Array, states: Any, *, num_simulations: int | None = None,
               noise: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Searches a batch of positions.

        Args:
          key: PRNG key.
          states: a batched env State [B].
          num_simulations: simulations per position (None: the model's default).
          noise: root noise and sampled moves, as in self-play; without it the action is the
            search's greedy move.

        Returns:
          (action int32 [B], policy float32 [B, A], value float32 [B]).
        """
        batch = states.current_player.shape[0]
        simulations = self.search_simulations(num_simulations)
        action, policy, value = self._search_jit(
            self.params, key, _pad(states, _pad_size(batch)), simulations, bool(noise))
        return action[:batch], policy[:batch], value[:batch]

    def search_simulations(self, num_simulations: int | None) -> int:
        """The simulations a search runs.

        Args:
          num_simulations: the asked count, or None for the model's default.

        Returns:
          The count (int >= 1).

        Raises:
          ValueError: `num_simulations` below 1.
        """
        if num_simulations is None:
            return int(self.num_simulations)
        if num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1 for a search, got {num_simulations} "
                             "(act(..., num_simulations=0) plays the raw network)")
        return int(num_simulations)

    def search_output(self, key: jax.Array, states: Any, *,
                      num_simulations: int | None = None) -> SearchOutput:
        """The greedy search's whole output: what play and analysis show.

        Args:
          key: PRNG key.
          states: a batched env State [B].
          num_simulations: simulations per position (None: the model's default).

        Returns:
          `SearchOutput` with action [B], policy [B, A], value [B], prior_value [B],
          visit_counts [B, A].
        """
        batch = states.current_player.shape[0]
        simulations = self.search_simulations(num_simulations)
        out = self._search_output_jit(self.params, key, _pad(states, _pad_size(batch)),
                                      simulations)
        return jax.tree.map(lambda x: x[:batch], out)

    def act(self, key: jax.Array, states: Any, *, num_simulations: int | None = None,
            greedy: bool = True, movetime: float | None = None) -> jax.Array:
        """The agent's moves in a batch of positions.

        Args:
          key: PRNG key.
          states: a batched env State [B].
          num_simulations: simulations per move (None: the model's default); 0 plays the raw
            network: argmax of the masked prior (ties -> lowest index) when greedy, else a
            sample from it.
          greedy: the search's greedy move (`search.greedy_action`); else its sampled move.
          movetime: think this many seconds for the whole batch instead of a fixed count
            (`player`); not repeatable, as a fixed count is.

        Returns:
          int32 [B].
        """
        if movetime is not None:
            batch = states.current_player.shape[0]
            player = self._timed_player(float(movetime), bool(greedy))
            return jnp.asarray(player.move(key, _pad(states, _pad_size(batch))).action[:batch])
        if num_simulations == 0:
            policy, _ = self.evaluate(states)
            if greedy:
                return jnp.argmax(policy, axis=-1).astype(jnp.int32)
            return jax.random.categorical(key, jnp.log(policy)).astype(jnp.int32)
        return self.search(key, states, num_simulations=num_simulations, noise=not greedy)[0]

    @functools.cached_property
    def search_engine(self) -> Any:
        """The step-by-step search behind `player`: `azjax.core.search.make_search_engine`'s,
        or for `search.algorithm: alphabeta` `azjax.core.search_alphabeta`'s engine."""
        from azjax.core.search import make_search_engine
        from azjax.core.search_alphabeta import make_alphabeta_engine
        from azjax.core.search_apply import search_apply_fn

        _, apply_fn = make_network(self.config.network, self.env.num_actions,
                                   matmul_dtype=self.config.search.matmul_dtype)
        if self.config.search.algorithm == "alphabeta":
            return make_alphabeta_engine(
                self.env, search_apply_fn(self.env, apply_fn, self.config.search),
                self.config.search)
        return make_search_engine(self.env, apply_fn, self.config.search)

    def player(self, *, num_simulations: int | None = None, movetime: float | None = None,
               keep_tree: bool | None = None, noise: bool = False) -> Any:
        """An engine over a batch of games: a clock per move, the tree kept between moves,
        proven results (with `search.solver`): `azjax.engine_player.EnginePlayer`; for
        `search.algorithm: alphabeta`, `azjax.alphabeta_player.AlphaBetaPlayer` (a clock,
        no kept tree; `num_simulations` and `noise` are not read).

            player = agent.player(movetime=0.5, keep_tree=True)
            move = player.move(key, states)      # move.action [B], move.simulations [B]
            player.played(move.action)           # and after each reply: player.played(reply)

        Args:
          num_simulations: simulations per move (None: the model's default); with `movetime`
            the count the first move plans for.
          movetime: seconds per move for the whole batch; None: a fixed count.
          keep_tree: keep the tree between moves (None: the model's `search.tree_reuse`).
          noise: root noise and sampled moves, as in self-play.

        Raises:
          ValueError: a count below 1, a time that is not a positive number, or a kept tree
            asked of alpha-beta.
        """
        from azjax.alphabeta_player import AlphaBetaPlayer
        from azjax.engine_player import EnginePlayer

        keep = self.config.search.tree_reuse if keep_tree is None else keep_tree
        if self.config.search.algorithm == "alphabeta":
            if keep:
                raise ValueError("search.algorithm: alphabeta keeps no tree between moves: "
                                 "play it with keep_tree=False")
            return AlphaBetaPlayer(self.search_engine, {"params": self.params},
                                   movetime=movetime)
        return EnginePlayer(self.search_engine, {"params": self.params},
                            num_simulations=self.search_simulations(num_simulations),
                            movetime=movetime, keep_tree=keep, noise=noise)

    @functools.lru_cache(maxsize=8)  # noqa: B019 (one player per time: its measured speed)
    def _timed_player(self, movetime: float, greedy: bool) -> Any:
        return self.player(movetime=movetime, keep_tree=False, noise=not greedy)

    def __repr__(self) -> str:
        return (f"Agent(game={self.env.name!r}, network={self.config.network.kind}, "
                f"simulations={self.num_simulations}, source={str(self.source)!r})")


def states_from_moves(env: Env, move_lists: list[list[int]]) -> Any:
    """The positions after some move lists.

    Args:
      env: the game.
      move_lists: B lists of action ids from the start, each validated by `envs.play_moves`.

    Returns:
      A batched env State [B].
    """
    states = [envs.play_moves(env, moves) for moves in move_lists]
    return jax.tree.map(lambda *xs: jnp.stack([np.asarray(x) for x in xs]), *states)
