"""Training: TrainState (arrays only), the optax optimizer, the update step, one iteration.

One iteration = a jitted self-play chunk that also adds its finished games to the replay
buffer, then K update steps: by default K calls of one jitted step from a Python loop (the
programs every earlier run used), or with `train.updates_per_call: n` K / n calls of one
`lax.scan` over n steps, drawing the same K keys (on the tic-tac-toe config the scan took 0.68x
the loop's time, `benchmarks/bench_update_steps.py`). With `reanalyse.fraction` > 0 one more
jitted call before the updates re-searches positions of the buffer (`azjax.core.reanalyse`) and
each update's batch takes its share of them. Every function compiles once; the big buffers are
donated so XLA updates them in place.

Where the state lives and how each function is compiled is the placement's
(`azjax.core.placement`): plain jit on one device; over a mesh, `NamedSharding`s with the games
(and, fully sharded, the replay slots and the training batch) split on the batch axis. The
Learner's code is the same for every layout.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from jax.sharding import Mesh

from azjax.config import ConfigError, ExperimentConfig, TrainConfig
from azjax.core import replay as replay_lib
from azjax.core.losses import alphazero_loss
from azjax.core.network import init_network, make_network
from azjax.core.placement import OneDevice, choose_placement
from azjax.core.reanalyse import reanalyse
from azjax.core.search import make_network_search, tree_env
from azjax.core.selfplay import (
    SelfPlayState,
    StartPool,
    branches_from_replay,
    init_selfplay,
    zero_states,
)
from azjax.core.targets import AuxiliaryTargets
from azjax.core.types import Positions
from azjax.envs.core import Env

__all__ = ["Learner", "RunState", "TrainState", "make_optimizer", "reanalysed_per_update",
           "stores_states"]

# fold_in data of the side draws (reanalysis, start pool): no split of the same key reaches it
_SIDE_STREAM = 2**31 - 1


@struct.dataclass
class TrainState:
    """The network being trained and its optimizer."""

    step: jax.Array  # int32 []: update steps taken
    params: Any
    opt_state: Any


@struct.dataclass
class RunState:
    """Everything a run needs to continue exactly: checkpointed as one pytree."""

    iteration: jax.Array  # int32 []: iterations completed
    train: TrainState
    selfplay: SelfPlayState
    replay: replay_lib.ReplayBuffer
    # With AlphaGo Zero's gating (`eval.gating`), the params self-play uses: the best so far,
    # replaced only when newer params beat them. None without gating (self-play uses the
    # latest params).
    selfplay_params: Any = None


def _learning_rate(config: TrainConfig) -> optax.Schedule:
    """The learning rate by update step; both cosines end at `lr_floor` x the peak."""
    if config.lr_schedule == "cosine":
        return optax.cosine_decay_schedule(config.learning_rate, config.lr_decay_steps,
                                           config.lr_floor)
    if config.lr_schedule == "warmup_cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, config.learning_rate, max(config.warmup_steps, 1),
            max(config.lr_decay_steps, config.warmup_steps + 1),
            config.learning_rate * config.lr_floor)
    return optax.constant_schedule(config.learning_rate)


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """The optimizer: clip (optional) -> L2 weight decay on kernels only -> SGD+momentum or Adam.

    Args:
      config: the training settings (optimizer, learning-rate schedule, decay, clipping).

    Returns:
      An optax transformation over the network's parameters.
    """
    decay_kernels = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)
    parts = []
    if config.max_grad_norm > 0:
        parts.append(optax.clip_by_global_norm(config.max_grad_norm))
    # AlphaZero's c||theta||^2 term: its gradient 2c*theta, folded into the update.
    parts.append(optax.add_decayed_weights(2.0 * config.weight_decay, mask=decay_kernels))
    schedule = _learning_rate(config)
    if config.optimizer == "sgd":
        parts.append(optax.sgd(schedule, momentum=config.momentum, nesterov=True))
    else:
        parts.append(optax.adam(schedule))
    return optax.chain(*parts)


def _augment(env: Env, key: chex.PRNGKey, batch: Positions) -> Positions:
    """Applies one random symmetry of the game to each sampled position (`Positions` [B]);
    a reply-policy target turns with the same symmetry as its position's policy."""
    chex.assert_rank(batch.policy, 2)
    obs, policy = jax.vmap(env.symmetries)(batch.observation, batch.policy)  # [B, S, ...]
    choice = jax.random.randint(key, (obs.shape[0],), 0, obs.shape[1])
    pick = lambda x: jnp.take_along_axis(
        x, choice.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[:, 0]
    if batch.reply_policy is not None:
        # A symmetry permutes the action ids alike in every position (`symmetry_permutations`),
        # so the next position's policy maps as this one's does.
        _, reply = jax.vmap(env.symmetries)(batch.observation, batch.reply_policy)
        batch = batch.replace(reply_policy=pick(reply))
    return batch.replace(observation=pick(obs), policy=pick(policy))


def stores_states(config: ExperimentConfig) -> bool:
    """Whether the run's replay buffer stores each position's env state and outcome: needed by
    reanalysis (`reanalyse.fraction`) and branching starts (`selfplay.random_start_source:
    replay`), and only then (it costs memory)."""
    return config.reanalyse.fraction > 0 or branches_from_replay(config.selfplay)


def reanalysed_per_update(config: ExperimentConfig) -> int:
    """The reanalysed positions in each update's batch: round(fraction x train.batch_size)."""
    return round(config.reanalyse.fraction * config.train.batch_size)


@jax.jit
def _mean_of_dicts(dicts: list[dict[str, jax.Array]]) -> dict[str, jax.Array]:
    """Element-wise mean of a list of metric dicts, in one compiled call."""
    return jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *dicts)


class Learner:
    """The compiled pieces of one experiment: self-play, replay, update step.

    Host code (CLI, checkpoints, logging) drives `iteration`; everything here is pure. Where
    the arrays live and how each piece is compiled is the placement's
    (`azjax.core.placement.choose_placement`), picked here once; the Learner's methods are the
    same for every layout.

    Args:
      env: the game.
      config: the experiment; its sizes are global (summed over the devices).
      mesh: a 1-D mesh over several devices (`azjax.core.placement.make_mesh`) to split the
        games and the training batch over; None or one device = unsharded.
      updates_on_one_device: split only the games, keeping the replay buffer, the parameters
        and the updates on the mesh's first device (`azjax.core.placement.updates_on_one_device`
        says when that pays).

    Attributes:
      placement: the device layout (`OneDevice`, `SplitGames` or `FullySharded`).
      mesh: the placement's mesh, None on one device; split: whether the updates stay on one
        device while the games are split.
      apply_fn: the network's apply function (`azjax.core.network.make_network`).
      search_fn: the batched search self-play runs (`azjax.core.search.make_network_search`).
      selfplay_step: `(run, key) -> (run, metrics)`, a chunk of self-play added to the buffer.
      update_step: `(train, replay, key, window) -> (train, metrics)`, one update step, or
        `train.updates_per_call` of them in one call (keys [n, 2]); with reanalysis a fifth
        argument, the call's reanalysed positions ([m] or [n, m]).
      reanalyse_step: `(params, replay, key, window) -> (replay, positions, metrics)`, the
        iteration's reanalysis (`reanalyse.fraction` > 0), the replay buffer donated.
    """

    def __init__(self, env: Env, config: ExperimentConfig, *, mesh: Mesh | None = None,
                 updates_on_one_device: bool = False):
        self.env = env
        self.config = config
        self.placement = choose_placement(config, mesh,
                                          updates_on_one_device=updates_on_one_device)
        self.mesh = self.placement.mesh
        self.split = self.placement.updates_on_one_device
        self.module, self.apply_fn = make_network(config.network, env.num_actions)
        self.search_fn = make_network_search(env, config.network, config.search)
        # Self-play walks the same game tree as the search: decisions only, when asked.
        self.selfplay_env = tree_env(env, config.search)
        self.optimizer = make_optimizer(config.train)
        self.learning_rate = _learning_rate(config.train)  # host side, for the metrics
        if stores_states(config) and not isinstance(self.placement, OneDevice):
            raise ConfigError("reanalyse.fraction and selfplay.random_start_source: replay run "
                              "on one device only (no mesh)")
        self._selfplay = self.placement.make_selfplay(
            self.selfplay_env, self.search_fn, config.selfplay,
            auxiliary=AuxiliaryTargets.from_config(config))
        self._replay_ready = False
        # `compile()` swaps these for ahead-of-time executables: after that, an input whose
        # shape or dtype drifts fails loudly instead of silently recompiling every iteration.
        # One update step per call, or `train.updates_per_call` of them (keys [n, 2]).
        self.selfplay_step = self.placement.jit_selfplay_step(
            self._selfplay_and_add, self.state_shardings, play=self._selfplay, add=self._add,
            variables=self._selfplay_variables)
        update = self._update if config.train.updates_per_call == 1 else self._updates
        self.update_step = self.placement.jit_update_step(update, self.state_shardings)
        # (params, replay, key, window) -> (replay, positions [calls, (n,) m], metrics).
        self.reanalyse_step = jax.jit(self._reanalyse, donate_argnums=(1,))

    # ---- placement -----------------------------------------------------------------------------

    def state_shardings(self) -> RunState:
        """A RunState of shardings, one per leaf: where this run's placement keeps each array
        (`azjax.core.placement`: games [B] and step records [T, B] split on B over a mesh,
        replay slots [C] on C when fully sharded, the rest replicated or on one device)."""
        return self.placement.state_shardings(jax.eval_shape(self._init_state,
                                                             jax.random.PRNGKey(0)))

    def abstract_state(self) -> RunState:
        """Shapes, dtypes and shardings of the run state: a restore target. The shardings are
        this run's (a checkpoint written on other devices or processes is laid out anew)."""
        abstract = jax.eval_shape(self._init_state, jax.random.PRNGKey(0))
        return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                            abstract, self.placement.state_shardings(abstract))

    # ---- state -----------------------------------------------------------------------------

    def init_state(self, key: chex.PRNGKey) -> RunState:
        """A fresh run: new network, B new games, an empty buffer (one compiled call).

        Args:
          key: the run's PRNG key; the network is drawn from its first split (`initial_params`).

        Returns:
          A RunState laid out as `state_shardings()` says.
        """
        run = self.placement.init_state(self._init_state, key, self.state_shardings)
        # One buffer per leaf: the state is donated to the jitted step, and an env's init may
        # hand back the same array in two fields.
        return jax.tree.map(lambda x: jnp.array(x, copy=True), run)

    def initial_params(self, key: chex.PRNGKey) -> Any:
        """The network `init_state(key)` starts from (plain arrays, on one device)."""
        k_net, _ = jax.random.split(key)
        env, cfg = self.env, self.config
        return init_network(cfg.network, env.num_actions, env.observation_shape, k_net)["params"]

    def _init_state(self, key: chex.PRNGKey) -> RunState:
        _, k_play = jax.random.split(key)
        env, cfg = self.env, self.config
        params = self.initial_params(key)
        example = Positions(
            observation=jnp.zeros(env.observation_shape, jnp.float32),
            policy=jnp.zeros(env.num_actions, jnp.float32),
            value=jnp.zeros((), jnp.float32),
            value_mask=jnp.zeros((), jnp.bool_),
            material=jnp.zeros((), jnp.float32) if cfg.network.material_head else None,
            reply_policy=(jnp.zeros(env.num_actions, jnp.float32)
                          if cfg.network.reply_policy_head else None),
            short_value=jnp.zeros((), jnp.float32) if cfg.network.short_value_head else None,
        )
        if stores_states(cfg):  # a zero env state of the game self-play walks
            example = example.replace(state=zero_states(self.selfplay_env, ()),
                                      outcome=jnp.zeros((), jnp.float32))
        return RunState(
            iteration=jnp.zeros((), jnp.int32),
            train=TrainState(step=jnp.zeros((), jnp.int32), params=params,
                             opt_state=self.optimizer.init(params)),
            selfplay=init_selfplay(self.selfplay_env, cfg.selfplay, k_play,
                                   material=cfg.network.material_head,
                                   states=stores_states(cfg)),
            replay=replay_lib.init(example, cfg.replay.capacity),
            selfplay_params=params if cfg.eval.gating else None,
        )

    # ---- compiled pieces ------------------------------------------------------------------

    def _selfplay_and_add(self, run: RunState, key: chex.PRNGKey):
        """One self-play chunk, its finished positions added to the buffer. Jitted."""
        pool = self._start_pool(run, key)
        extra = {} if pool is None else {"start_pool": pool}  # the mesh's self-play takes none
        selfplay, positions, emit, stats = self._selfplay(self._selfplay_variables(run), key,
                                                          run.selfplay, **extra)
        return self._add(run.replace(selfplay=selfplay), positions, emit, stats)

    def _start_pool(self, run: RunState, key: chex.PRNGKey) -> StartPool | None:
        """With branching starts (`random_start_source: replay`), B states drawn uniformly from
        the replay window for the chunk's new games; else None."""
        play = self.config.selfplay
        if not branches_from_replay(play):
            return None
        window = replay_lib.window_size(self.config.replay, run.iteration)
        slots = replay_lib.sample_slots(run.replay, jax.random.fold_in(key, _SIDE_STREAM),
                                        play.batch_size, window)
        return StartPool(states=replay_lib.gather(run.replay, slots).state,
                         available=run.replay.size > 0)

    def _selfplay_variables(self, run: RunState) -> dict[str, Any]:
        return {"params": run.selfplay_params if self.config.eval.gating else run.train.params}

    def _add(self, run: RunState, positions: Positions, emit: jax.Array, stats):
        """The chunk's finished positions into the buffer, the iteration counted, metrics."""
        buffer = replay_lib.add(run.replay, positions, emit)
        new_run = run.replace(replay=buffer, iteration=run.iteration + 1)
        metrics = {f"selfplay/{f.name}": getattr(stats, f.name)
                   for f in dataclasses.fields(stats)}
        metrics["selfplay/positions_added"] = jnp.sum(emit, dtype=jnp.int32)
        metrics["replay/size"] = buffer.size
        return new_run, metrics

    def _update(self, train: TrainState, buffer: replay_lib.ReplayBuffer, key: chex.PRNGKey,
                window: jax.Array, reanalysed: Positions | None = None):
        """One optimizer step on a batch sampled from the newest `window` positions (with
        reanalysis: the rest of the batch after the `reanalysed` positions [m]). Jitted."""
        cfg = self.config.train
        k_sample, k_sym = jax.random.split(key)
        fresh = 0 if reanalysed is None else reanalysed.value.shape[0]
        batch = replay_lib.sample(buffer, k_sample, cfg.batch_size - fresh, window)
        batch = batch.training_view()
        if reanalysed is not None:
            batch = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), batch, reanalysed)
        batch = self.placement.constrain_batch(batch)  # e.g. each device: its share
        if self.config.selfplay.symmetries:
            batch = _augment(self.env, k_sym, batch)
        grad_fn = jax.value_and_grad(alphazero_loss, has_aux=True)
        (loss, metrics), grads = grad_fn(
            train.params, self.apply_fn, batch, value_loss_weight=cfg.value_loss_weight,
            material_loss_weight=cfg.material_loss_weight,
            reply_policy_loss_weight=cfg.reply_policy_loss_weight,
            short_value_loss_weight=cfg.short_value_loss_weight)
        updates, opt_state = self.optimizer.update(grads, train.opt_state, train.params)
        params = optax.apply_updates(train.params, updates)
        metrics = dict(metrics, loss=loss, **{"train/grad_norm": optax.tree_utils.tree_norm(grads)})
        return TrainState(step=train.step + 1, params=params, opt_state=opt_state), metrics

    def _updates(self, train: TrainState, buffer: replay_lib.ReplayBuffer, keys: jax.Array,
                 window: jax.Array, reanalysed: Positions | None = None):
        """`_update` once per key of `keys` [n, 2] (and group of `reanalysed` [n, m]), in one
        `lax.scan`: metrics averaged over the n steps. Jitted."""
        train, metrics = jax.lax.scan(
            lambda t, xs: self._update(t, buffer, xs[0], window, xs[1]), train,
            (keys, reanalysed))
        return train, jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)

    def _reanalyse(self, params: Any, buffer: replay_lib.ReplayBuffer, key: chex.PRNGKey,
                   window: jax.Array):
        """The iteration's reanalysis (`azjax.core.reanalyse.reanalyse`): K x m positions of
        the window searched again, their targets refreshed in the buffer. Returns the buffer,
        the positions grouped per update call ([calls, m] or [calls, n, m]) and the metrics
        (`reanalyse/...`). Jitted."""
        cfg = self.config
        per_update = reanalysed_per_update(cfg)
        weight = cfg.reanalyse.value_weight
        buffer, positions, _, metrics = reanalyse(
            self.search_fn, {"params": params}, buffer, key, window,
            count=cfg.train.updates_per_iteration * per_update,
            num_simulations=cfg.reanalyse.num_simulations or cfg.search.num_simulations,
            value_weight=cfg.selfplay.search_value_weight if weight < 0 else weight)
        group = (per_update,) if cfg.train.updates_per_call == 1 else (
            cfg.train.updates_per_call, per_update)
        positions = jax.tree.map(lambda x: x.reshape(-1, *group, *x.shape[1:]), positions)
        return buffer, positions, {f"reanalyse/{k}": v for k, v in metrics.items()}

    def _update_keys(self, key: chex.PRNGKey) -> list:
        """The iteration's K update keys, one entry per compiled call ([2] or [n, 2] each):
        the same K keys whatever the grouping, so the steps draw the same batches."""
        cfg = self.config.train
        keys = np.asarray(jax.random.split(key, cfg.updates_per_iteration))
        # (The reanalysis key, fold_in(key, _SIDE_STREAM), is none of these.)
        if cfg.updates_per_call > 1:
            keys = keys.reshape(-1, cfg.updates_per_call, *keys.shape[1:])
        return [self.placement.update_input(k) for k in keys]

    def compile(self, run: RunState) -> None:
        """Compiles the self-play and update steps ahead of time, the update step in a second
        thread (XLA compiles without the GIL, so the two overlap on two cores).

        Args:
          run: a state shaped and laid out as the ones `iteration` will get.
        """
        from concurrent.futures import ThreadPoolExecutor

        key = jax.random.PRNGKey(0)
        window = self.placement.update_input(
            replay_lib.window_size(self.config.replay, run.iteration))
        play_key = self.placement.selfplay_input(key)
        update_key = self._update_keys(key)[0] if self.config.train.updates_per_iteration else key
        extra = ()
        if self._reanalyses():  # the shape of one call's reanalysed positions
            groups = jax.eval_shape(self._reanalyse, run.train.params, run.replay, key, window)[1]
            extra = (jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), groups),)
        with ThreadPoolExecutor(max_workers=1) as pool:
            update = pool.submit(
                lambda: self.update_step.lower(run.train, run.replay, update_key,
                                               window, *extra).compile())
            self.selfplay_step = self.placement.compile_selfplay_step(self.selfplay_step, run,
                                                                      play_key)
            self.update_step = update.result()

    def update_flops(self) -> float:
        """FLOPs of one update step at `train.batch_size` (sampling, augmentation, forward,
        backward and the optimizer), from XLA's cost analysis of one compiled step.

        Always a single step on one device: XLA's analysis counts a scan's body once (so not
        the `updates_per_call` scan), and a partitioned program's is one device's share. The
        step `compile()` built is reused when it is that; else one more is compiled.

        Returns:
          The step's floating-point operations (0.0 if XLA reports none).
        """
        compiled = self.update_step
        if not (self.mesh is None and self.config.train.updates_per_call == 1
                and isinstance(compiled, jax.stages.Compiled)):
            single = self if self.mesh is None else Learner(self.env, self.config)
            key = jax.random.PRNGKey(0)
            abstract = jax.eval_shape(single._init_state, key)
            compiled = jax.jit(single._update).lower(
                abstract.train, abstract.replay, key,
                replay_lib.window_size(self.config.replay, 0)).compile()
        analysis = compiled.cost_analysis()
        if isinstance(analysis, list):
            analysis = analysis[0] if analysis else {}
        return float((analysis or {}).get("flops", 0.0))

    # ---- one iteration (host loop over compiled calls) -------------------------------------

    def _reanalyses(self) -> bool:
        """Whether each iteration reanalyses positions before its updates."""
        return self.config.reanalyse.fraction > 0 and self.config.train.updates_per_iteration > 0

    def iteration(self, run: RunState, key: chex.PRNGKey) -> tuple[RunState, dict[str, Any]]:
        """Self-play chunk + replay add + K updates.

        Args:
          run: the state (donated: use the returned one).
          key: this iteration's PRNG key.

        Returns:
          The new state and the metrics: host floats, losses averaged over the K updates,
          self-play counts of the chunk, and `train/update_steps` (K, or 0 while the buffer
          fills).
        """
        cfg = self.config
        k_play, k_train = jax.random.split(key)
        # Host values as the steps take them (over a mesh: global arrays, alike in every process).
        window = self.placement.update_input(replay_lib.window_size(cfg.replay, run.iteration))
        run, metrics = self.selfplay_step(run, self.placement.selfplay_input(k_play))
        train = run.train
        update_metrics = []
        if self._replay_ready or int(run.replay.size) >= max(cfg.train.min_replay_size, 1):
            self._replay_ready = True  # the buffer only grows: stop asking (a device sync)
            groups = None
            if self._reanalyses():
                replay, groups, reanalyse_metrics = self.reanalyse_step(
                    train.params, run.replay, jax.random.fold_in(k_train, _SIDE_STREAM),
                    window)
                run = run.replace(replay=replay)
                metrics.update(reanalyse_metrics)
            for call, k in enumerate(self._update_keys(k_train)):
                extra = () if groups is None else (jax.tree.map(lambda x, c=call: x[c], groups),)
                train, step_metrics = self.update_step(train, run.replay, k, window, *extra)
                update_metrics.append(step_metrics)
        run = run.replace(train=train)
        if update_metrics:
            metrics.update(_mean_of_dicts(update_metrics))
        metrics, step = jax.device_get((metrics, train.step))  # one transfer for both
        if update_metrics:  # the rate of the iteration's last update step (optax counts from 0)
            metrics["train/learning_rate"] = float(self.learning_rate(int(step) - 1))
        metrics["train/update_steps"] = cfg.train.updates_per_iteration if update_metrics else 0
        return run, metrics
