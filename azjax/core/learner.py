"""Training: TrainState (arrays only), the optax optimizer, the update step, one iteration.

One iteration = a jitted self-play chunk that also adds its finished games to the replay
buffer, then K update steps: by default K calls of one jitted step from a Python loop (the
programs every earlier run used), or with `train.updates_per_call: n` K / n calls of one
`lax.scan` over n steps, drawing the same K keys (on the tic-tac-toe config the scan took 0.68x
the loop's time, `experiments/bench_update_steps.py`). Every function compiles once; the big
buffers are donated so XLA updates them in place.

Given a mesh (`azjax.core.placement`), the same functions are jitted with `NamedSharding`s: games and
replay slots split on the batch axis, parameters replicated (`Learner.state_shardings`). The
split layout (`updates_on_one_device`, for forced CPU devices) splits only the games and keeps
the buffer and the updates on the mesh's first device. Without a mesh (a single device)
nothing changes: plain jit, the same programs as before.
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
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from azjax.config import ExperimentConfig, TrainConfig
from azjax.core import replay as replay_lib
from azjax.core.losses import alphazero_loss
from azjax.core.network import init_network, make_network
from azjax.core.placement import AXIS, avoid_cached_cpu_collectives, check_divisible, replicate
from azjax.core.search import make_network_search, tree_env
from azjax.core.selfplay import SelfPlayState, init_selfplay, make_selfplay
from azjax.core.types import Positions
from envs.core import Env

__all__ = ["Learner", "RunState", "TrainState", "make_optimizer"]


@struct.dataclass
class TrainState:
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
    """Clip (optional) -> L2 weight decay on kernels only -> SGD+momentum or Adam."""
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
    """Applies one random symmetry of the game to each sampled position."""
    obs, policy = jax.vmap(env.symmetries)(batch.observation, batch.policy)  # [B, S, ...]
    choice = jax.random.randint(key, (obs.shape[0],), 0, obs.shape[1])
    pick = lambda x: jnp.take_along_axis(
        x, choice.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[:, 0]
    return batch.replace(observation=pick(obs), policy=pick(policy))


@jax.jit
def _mean_of_dicts(dicts: list[dict[str, jax.Array]]) -> dict[str, jax.Array]:
    """Element-wise mean of a list of metric dicts, in one compiled call."""
    return jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *dicts)


class Learner:
    """The compiled pieces of one experiment: self-play, replay, update step.

    Host code (CLI, checkpoints, logging) drives `iteration`; everything here is pure.
    `mesh`: a 1-D mesh over several devices (`azjax.core.placement.make_mesh`) to split the games
    and the training batch over; None or one device = unsharded. `updates_on_one_device`: split
    only the games, keeping the replay buffer, the parameters and the updates on the mesh's
    first device (`azjax.core.placement.updates_on_one_device` says when that pays).
    """

    def __init__(self, env: Env, config: ExperimentConfig, *, mesh: Mesh | None = None,
                 updates_on_one_device: bool = False):
        self.env = env
        self.config = config
        self.mesh = mesh if mesh is not None and mesh.devices.size > 1 else None
        self.split = self.mesh is not None and updates_on_one_device
        if self.mesh is not None:
            check_divisible(config, self.mesh.devices.size, split_training=not self.split)
            avoid_cached_cpu_collectives(self.mesh)
        self.module, self.apply_fn = make_network(config.network, env.num_actions)
        self.search_fn = make_network_search(env, config.network, config.search)
        # Self-play walks the same game tree as the search: decisions only, when asked.
        self.selfplay_env = tree_env(env, config.search)
        self.optimizer = make_optimizer(config.train)
        self.learning_rate = _learning_rate(config.train)  # host side, for the metrics
        self._selfplay = (
            make_selfplay(self.selfplay_env, self.search_fn, config.selfplay)
            if self.mesh is None else self._sharded_selfplay(config.selfplay))
        self._replay_ready = False
        # `compile()` swaps these for ahead-of-time executables: after that, an input whose
        # shape or dtype drifts fails loudly instead of silently recompiling every iteration.
        # One update step per call, or `train.updates_per_call` of them (keys [n, 2]).
        update = self._update if config.train.updates_per_call == 1 else self._updates
        if self.mesh is None:
            self.selfplay_step = jax.jit(self._selfplay_and_add, donate_argnums=(0,))
            self.update_step = jax.jit(update, donate_argnums=(0,))
        elif self.split:
            games = self.state_shardings().selfplay
            self._play_step = jax.jit(self._selfplay, donate_argnums=(2,),
                                      in_shardings=(self._replicated, self._replicated, games),
                                      out_shardings=(games, self._batch_split,
                                                     self._batch_split, self._replicated))
            self._add_step = jax.jit(self._add, donate_argnums=(0,))  # where its inputs are
            self.selfplay_step = self._split_selfplay_step
            self.update_step = jax.jit(update, donate_argnums=(0,))
        else:
            run = self.state_shardings()
            rep = self._replicated
            self.selfplay_step = jax.jit(self._selfplay_and_add, donate_argnums=(0,),
                                         in_shardings=(run, rep), out_shardings=(run, rep))
            self.update_step = jax.jit(update, donate_argnums=(0,),
                                       in_shardings=(run.train, run.replay, rep, rep),
                                       out_shardings=(run.train, rep))

    # ---- sharding ----------------------------------------------------------------------------

    @property
    def _replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, P())

    @property
    def _batch_split(self) -> NamedSharding:
        return NamedSharding(self.mesh, P(AXIS))

    @property
    def _learner_device(self) -> SingleDeviceSharding:
        """Where the split layout keeps everything but the games: the mesh's first device."""
        return SingleDeviceSharding(self.mesh.devices.flat[0])

    def state_shardings(self) -> RunState:
        """A RunState of shardings: games [B] and step records [T, B] split on B, replay
        slots [C] split on C, everything else (params, optimizer, counters) replicated; in the
        split layout everything but the games on the learner's device.

        The replay buffer keeps its global ring order (one `next_index`), each device holding a
        contiguous C / D block of slots: `add` writes each position into the device owning its
        slot and `sample` gathers the drawn slots from their owners (a [batch] all-reduce,
        small next to the update). So from the same buffer D devices train exactly as one
        device would (to float rounding), and a checkpoint resumes on any device count.
        """
        abstract = jax.eval_shape(self._init_state, jax.random.PRNGKey(0))
        rep, games, steps = (self._replicated, self._batch_split,
                             NamedSharding(self.mesh, P(None, AXIS)))
        every = lambda tree, sharding: jax.tree.map(lambda _: sharding, tree)
        selfplay = SelfPlayState(
            games=every(abstract.selfplay.games, games), opening_moves=games,
            previous=every(abstract.selfplay.previous, steps), previous_emitted=steps)
        if self.split:  # all but the games on the learner's device
            one = every(abstract, self._learner_device)
            return one.replace(selfplay=selfplay)
        return RunState(
            iteration=rep,
            train=every(abstract.train, rep),
            selfplay=selfplay,
            replay=replay_lib.ReplayBuffer(
                positions=every(abstract.replay.positions, games), next_index=rep, size=rep,
                total_added=rep),
            selfplay_params=every(abstract.selfplay_params, rep),
        )

    def abstract_state(self) -> RunState:
        """Shapes, dtypes and shardings of the run state: a restore target. The shardings are
        this run's (a checkpoint written on other devices or processes is laid out anew)."""
        abstract = jax.eval_shape(self._init_state, jax.random.PRNGKey(0))
        if self.mesh is None:
            one = SingleDeviceSharding(jax.local_devices()[0])
            shardings = jax.tree.map(lambda _: one, abstract)
        else:
            shardings = self.state_shardings()
        return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                            abstract, shardings)

    # ---- state -----------------------------------------------------------------------------

    def init_state(self, key: chex.PRNGKey) -> RunState:
        """A fresh run: new network, B new games, an empty buffer (one compiled call)."""
        if self.mesh is None:
            run = jax.jit(self._init_state)(key)
        elif self.split:  # made on the learner's device, the games then moved to their shards
            run = jax.device_put(jax.jit(self._init_state)(key), self.state_shardings())
        else:  # created in place, each device making its own shards
            run = jax.jit(self._init_state, out_shardings=self.state_shardings())(
                replicate(self.mesh, key))
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
        )
        return RunState(
            iteration=jnp.zeros((), jnp.int32),
            train=TrainState(step=jnp.zeros((), jnp.int32), params=params,
                             opt_state=self.optimizer.init(params)),
            selfplay=init_selfplay(self.selfplay_env, cfg.selfplay, k_play,
                                   material=cfg.network.material_head),
            replay=replay_lib.init(example, cfg.replay.capacity),
            selfplay_params=params if cfg.eval.gating else None,
        )

    def _sharded_selfplay(self, config):
        """Self-play as D games-per-device programs (`jax.shard_map`).

        Device d plays games [d B/D, (d+1) B/D) of the batch, with no communication inside the
        search. With `selfplay.per_game_randomness` every game draws its randomness from its own
        index (`make_selfplay`), so the D devices play exactly the games one device would;
        without it (the faster default) device d uses the key `fold_in(key, d)`. (A global
        program partitioned by XLA gathered the tree's batch-indexed arrays across devices at
        every simulation: 0.2x the speed of one device on 2 forced CPU devices, and 600x slower
        across two processes; `docs/scaling.md`.) Same signature and global shapes as
        `make_selfplay`'s function; positions come out game by game, in one device's order.
        """
        devices = self.mesh.devices.size
        games_per_device = config.batch_size // devices
        local = make_selfplay(self.selfplay_env, self.search_fn,
                              dataclasses.replace(config, batch_size=games_per_device))
        games, steps, rep = P(AXIS), P(None, AXIS), P()

        def per_device(variables, key, state):
            device = jax.lax.axis_index(AXIS)
            if not config.per_game_randomness:  # the games then depend on the device count
                key = jax.random.fold_in(key, device)
            state, positions, emit, stats = local(variables, key, state,
                                                  device * games_per_device)
            return state, positions, emit, jax.tree.map(lambda x: x[None], stats)

        state_spec = SelfPlayState(games=games, opening_moves=games, previous=steps,
                                   previous_emitted=steps)
        sharded = jax.shard_map(per_device, mesh=self.mesh, in_specs=(rep, rep, state_spec),
                                out_specs=(state_spec, games, games, games), check_vma=False)

        def selfplay(variables, key, state):
            state, positions, emit, stats = sharded(variables, key, state)  # stats [D]
            finished = jnp.sum(stats.games_finished)
            steps_played = jnp.sum(stats.mean_game_length
                                   * jnp.maximum(stats.games_finished, 1))  # T x B / D each
            stats = stats.replace(
                games_finished=finished,
                first_player_wins=jnp.sum(stats.first_player_wins),
                second_player_wins=jnp.sum(stats.second_player_wins),
                draws=jnp.sum(stats.draws),
                mean_game_length=steps_played / jnp.maximum(finished, 1).astype(jnp.float32),
                mean_root_value=jnp.mean(stats.mean_root_value))
            return state, positions, emit, stats

        return selfplay

    # ---- compiled pieces ------------------------------------------------------------------

    def _selfplay_and_add(self, run: RunState, key: chex.PRNGKey):
        """One self-play chunk, its finished positions added to the buffer. Jitted."""
        selfplay, positions, emit, stats = self._selfplay(self._selfplay_variables(run), key,
                                                          run.selfplay)
        return self._add(run.replace(selfplay=selfplay), positions, emit, stats)

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

    def _split_selfplay_step(self, run: RunState, key: jax.Array):
        """`selfplay_step` of the split layout: the chunk on the mesh (params copied to every
        device), its positions moved to the learner's device and added there. Two compiled
        calls and two transfers, the positions' being the larger (~N x 2.5 KB for draughts)."""
        variables = jax.device_put(self._selfplay_variables(run), self._replicated)
        selfplay, positions, emit, stats = self._play_step(variables, key, run.selfplay)
        positions, emit, stats = jax.device_put((positions, emit, stats), self._learner_device)
        # The games stay on the mesh, outside the learner device's program.
        new_run, metrics = self._add_step(run.replace(selfplay=None), positions, emit, stats)
        return new_run.replace(selfplay=selfplay), metrics

    def _update(self, train: TrainState, buffer: replay_lib.ReplayBuffer, key: chex.PRNGKey,
                window: jax.Array):
        """One optimizer step on a batch sampled from the newest `window` positions. Jitted."""
        cfg = self.config.train
        k_sample, k_sym = jax.random.split(key)
        batch = replay_lib.sample(buffer, k_sample, cfg.batch_size, window)
        if self.mesh is not None and not self.split:  # each device: its share of the batch
            batch = jax.lax.with_sharding_constraint(
                batch, NamedSharding(self.mesh, P(AXIS)))
        if self.config.selfplay.symmetries:
            batch = _augment(self.env, k_sym, batch)
        grad_fn = jax.value_and_grad(alphazero_loss, has_aux=True)
        (loss, metrics), grads = grad_fn(
            train.params, self.apply_fn, batch, value_loss_weight=cfg.value_loss_weight,
            material_loss_weight=cfg.material_loss_weight)
        updates, opt_state = self.optimizer.update(grads, train.opt_state, train.params)
        params = optax.apply_updates(train.params, updates)
        metrics = dict(metrics, loss=loss, **{"train/grad_norm": optax.tree_utils.tree_norm(grads)})
        return TrainState(step=train.step + 1, params=params, opt_state=opt_state), metrics

    def _updates(self, train: TrainState, buffer: replay_lib.ReplayBuffer, keys: jax.Array,
                 window: jax.Array):
        """`_update` once per key of `keys` [n, 2], in one `lax.scan`: metrics averaged over
        the n steps. Jitted."""
        train, metrics = jax.lax.scan(lambda t, key: self._update(t, buffer, key, window),
                                      train, keys)
        return train, jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)

    def _update_keys(self, key: chex.PRNGKey) -> list:
        """The iteration's K update keys, one entry per compiled call ([2] or [n, 2] each):
        the same K keys whatever the grouping, so the steps draw the same batches."""
        cfg = self.config.train
        keys = np.asarray(jax.random.split(key, cfg.updates_per_iteration))
        if cfg.updates_per_call > 1:
            keys = keys.reshape(-1, cfg.updates_per_call, *keys.shape[1:])
        if self.mesh is not None and not self.split:
            return [replicate(self.mesh, k) for k in keys]
        return list(keys)

    def compile(self, run: RunState) -> None:
        """Compiles the self-play and update steps ahead of time, the update step in a second
        thread (XLA compiles without the GIL, so the two overlap on two cores)."""
        from concurrent.futures import ThreadPoolExecutor

        key = jax.random.PRNGKey(0)
        window = replay_lib.window_size(self.config.replay, run.iteration)
        play_key = key
        update_key = self._update_keys(key)[0] if self.config.train.updates_per_iteration else key
        if self.mesh is not None:
            play_key = replicate(self.mesh, key)
            if not self.split:
                window = replicate(self.mesh, window)
        with ThreadPoolExecutor(max_workers=1) as pool:
            update = pool.submit(
                lambda: self.update_step.lower(run.train, run.replay, update_key,
                                               window).compile())
            if self.split:
                self._compile_split_selfplay(run, play_key)
            else:
                self.selfplay_step = self.selfplay_step.lower(run, play_key).compile()
            self.update_step = update.result()

    def _compile_split_selfplay(self, run: RunState, key: jax.Array) -> None:
        """Ahead-of-time executables for the split layout's two self-play calls."""
        variables = jax.device_put(self._selfplay_variables(run), self._replicated)
        _, positions, emit, stats = jax.eval_shape(self._play_step, variables, key, run.selfplay)
        on_learner = lambda tree: jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=self._learner_device),
            tree)
        self._add_step = self._add_step.lower(run.replace(selfplay=None), on_learner(positions),
                                              on_learner(emit), on_learner(stats)).compile()
        self._play_step = self._play_step.lower(variables, key, run.selfplay).compile()

    # ---- one iteration (host loop over compiled calls) -------------------------------------

    def iteration(self, run: RunState, key: chex.PRNGKey) -> tuple[RunState, dict[str, Any]]:
        """Self-play chunk + replay add + K updates. Returns the new state and the metrics
        (host floats: losses averaged over the K updates, self-play counts of the chunk)."""
        cfg = self.config
        k_play, k_train = jax.random.split(key)
        window = replay_lib.window_size(cfg.replay, run.iteration)
        if self.mesh is not None:  # host values as global arrays, the same in every process
            k_play = replicate(self.mesh, k_play)
            if not self.split:
                window = replicate(self.mesh, window)
        run, metrics = self.selfplay_step(run, k_play)
        train = run.train
        update_metrics = []
        if self._replay_ready or int(run.replay.size) >= max(cfg.train.min_replay_size, 1):
            self._replay_ready = True  # the buffer only grows: stop asking (a device sync)
            for k in self._update_keys(k_train):
                train, step_metrics = self.update_step(train, run.replay, k, window)
                update_metrics.append(step_metrics)
        run = run.replace(train=train)
        if update_metrics:
            metrics.update(_mean_of_dicts(update_metrics))
        metrics, step = jax.device_get((metrics, train.step))  # one transfer for both
        if update_metrics:  # the rate of the iteration's last update step (optax counts from 0)
            metrics["train/learning_rate"] = float(self.learning_rate(int(step) - 1))
        return run, metrics
