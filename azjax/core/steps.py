"""A training run's pure pieces, built from the config sections each one uses.

`make_steps(env, network, search, selfplay, train, replay)` returns `Steps`: the run state's
initialiser, one self-play chunk (`play`), adding its finished positions to the replay buffer
(`add`) and the update step (`update`). Each is a pure function of arrays and PRNG keys, not
yet jitted: `jit_steps` compiles them for a device layout (`azjax.core.layout.Layout`), and
the host iteration (`azjax.training.trainer`) calls them.

    run = steps.init(key)                                           # RunState
    selfplay, positions, emit, stats = steps.play(steps.selfplay_variables(run), key,
                                                  run.selfplay)
    run, metrics = steps.add(run.replace(selfplay=selfplay), positions, emit, stats)
    train, metrics = steps.update(run.train, run.replay, key, window)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax
from flax import struct

from azjax.config import (
    ConfigError,
    NetworkConfig,
    ReplayConfig,
    SearchConfig,
    SelfPlayConfig,
    TrainConfig,
)
from azjax.core import replay as replay_lib
from azjax.core.endgames import endgame_adjudicator
from azjax.core.layout import Layout
from azjax.core.losses import alphazero_loss
from azjax.core.network import ApplyFn, init_network, make_network
from azjax.core.search import make_network_search, make_search_engine, tree_env
from azjax.core.selfplay import SelfPlayFn, SelfPlayState, SelfPlayStats, init_selfplay
from azjax.core.types import Positions
from azjax.envs.core import Env, GameState
from azjax.envs.start_positions import with_start_positions

__all__ = ["JittedSteps", "RunState", "Steps", "TrainState", "augment", "jit_steps",
           "learning_rate", "make_optimizer", "make_steps"]


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


def learning_rate(config: TrainConfig) -> optax.Schedule:
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
    schedule = learning_rate(config)
    if config.optimizer == "sgd":
        parts.append(optax.sgd(schedule, momentum=config.momentum, nesterov=True))
    else:
        parts.append(optax.adam(schedule))
    return optax.chain(*parts)


def augment(env: Env, key: chex.PRNGKey, batch: Positions) -> Positions:
    """Applies one random symmetry of the game (`Env.symmetries`) to each position.

    Args:
      env: the game; key: PRNG key of the draw.
      batch: `Positions` [B].

    Returns:
      The batch with observation and policy of each position turned by its drawn symmetry.
    """
    chex.assert_rank(batch.policy, 2)
    obs, policy = jax.vmap(env.symmetries)(batch.observation, batch.policy)  # [B, S, ...]
    choice = jax.random.randint(key, (obs.shape[0],), 0, obs.shape[1])
    pick = lambda x: jnp.take_along_axis(
        x, choice.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[:, 0]
    return batch.replace(observation=pick(obs), policy=pick(policy))


@dataclasses.dataclass(frozen=True)
class Steps:
    """A run's pure pieces (jit them: `jit_steps`).

    Attributes:
      init: `key -> RunState`: a new network (from the key's first split), B new games (from
        its second), an empty replay buffer.
      play: `(variables, key, selfplay_state) -> (selfplay_state, positions [B * 2T], emit
        bool [B * 2T], stats)`: one self-play chunk (`azjax.core.selfplay.make_selfplay`).
      add: `(run, positions, emit, stats) -> (run, metrics)`: the chunk's finished positions
        into the buffer, the iteration counted, `selfplay/<stat>` and `replay/size` metrics.
        `run.selfplay` is not read (it may be None).
      update: `(train, replay, key, window) -> (train, metrics)`: one optimizer step on a batch
        drawn from the newest `window` positions; with `train.updates_per_call` n > 1, n steps
        in one `lax.scan` over keys [n, 2], metrics averaged.
      selfplay_variables: `run -> {"params": ...}`, the network self-play plays with.
      initial_params: `key -> params`, the network `init(key)` starts from.
      apply_fn: the network (`azjax.core.network.make_network`).
      search_fn: the batched search self-play runs (`azjax.core.search.make_network_search`).
      selfplay_env: the game self-play walks (decisions only, when the search asks).
      learning_rate: the optax schedule, by update step.
    """

    init: Callable[[chex.PRNGKey], RunState]
    play: SelfPlayFn
    add: Callable[..., tuple[RunState, dict[str, jax.Array]]]
    update: Callable[..., tuple[TrainState, dict[str, jax.Array]]]
    selfplay_variables: Callable[[RunState], dict[str, Any]]
    initial_params: Callable[[chex.PRNGKey], Any]
    apply_fn: ApplyFn
    search_fn: Callable[..., Any]
    selfplay_env: Env
    learning_rate: optax.Schedule


def make_steps(env: Env, network: NetworkConfig, search: SearchConfig, selfplay: SelfPlayConfig,
               train: TrainConfig, replay: ReplayConfig, *, gating: bool = False,
               layout: Layout | None = None, starts: GameState | None = None) -> Steps:
    """The pure pieces of a training run (`Steps`).

    Args:
      env: the game.
      network, search, selfplay, train, replay: the config sections they are built from; sizes
        are global (summed over the devices of a mesh).
      gating: keep separate self-play params (AlphaGo Zero's gating, `eval.gating`).
      layout: the device layout (`azjax.core.layout`): it decides how self-play spans a mesh
        and how a training batch is laid out; default one device.
      starts: positions [N] that self-play's random starts are drawn from instead of the
        game's own (`selfplay.start_positions`, `azjax.envs.start_positions`), or None.

    Returns:
      The `Steps`.

    Raises:
      ConfigError: `search.algorithm` is `alphabeta`, which gives no policy to learn from.
    """
    if search.algorithm == "alphabeta":
        raise ConfigError("search.algorithm: alphabeta is a play-time search (one move, no "
                          "policy target); self-play needs gumbel or puct")
    layout = layout or Layout()
    _, apply_fn = make_network(network, env.num_actions)
    search_fn = make_network_search(env, network, search)
    # Self-play walks the same game tree as the search: decisions only, when asked.
    selfplay_env = tree_env(with_start_positions(env, starts), search)
    optimizer = make_optimizer(train)
    engine = None
    if selfplay.tree_reuse:  # the same search in steps, its network as make_network_search's
        _, search_apply = make_network(network, env.num_actions, matmul_dtype=search.matmul_dtype)
        engine = make_search_engine(env, search_apply, search)
    # Games that reach the search's endgame table end there, with its exact result.
    play = layout.make_selfplay(selfplay_env, search_fn, selfplay, engine=engine,
                                adjudicate=endgame_adjudicator(env, search))

    def initial_params(key):
        k_net, _ = jax.random.split(key)
        return init_network(network, env.num_actions, env.observation_shape, k_net)["params"]

    def init(key):
        _, k_play = jax.random.split(key)
        params = initial_params(key)
        example = Positions(
            observation=jnp.zeros(env.observation_shape, jnp.float32),
            policy=jnp.zeros(env.num_actions, jnp.float32),
            value=jnp.zeros((), jnp.float32),
            value_mask=jnp.zeros((), jnp.bool_),
            material=jnp.zeros((), jnp.float32) if network.material_head else None)
        return RunState(
            iteration=jnp.zeros((), jnp.int32),
            train=TrainState(step=jnp.zeros((), jnp.int32), params=params,
                             opt_state=optimizer.init(params)),
            selfplay=init_selfplay(selfplay_env, selfplay, k_play,
                                   material=network.material_head),
            replay=replay_lib.init(example, replay.capacity),
            selfplay_params=params if gating else None)

    def one_update(state, buffer, key, window):
        return _update(env, apply_fn, optimizer, train, selfplay.symmetries, layout, state,
                       buffer, key, window)

    def updates(state, buffer, keys, window):
        state, metrics = jax.lax.scan(lambda t, k: one_update(t, buffer, k, window), state, keys)
        return state, jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)

    return Steps(
        init=init, play=play, add=_add,
        update=one_update if train.updates_per_call == 1 else updates,
        selfplay_variables=lambda run: {
            "params": run.selfplay_params if gating else run.train.params},
        initial_params=initial_params, apply_fn=apply_fn, search_fn=search_fn,
        selfplay_env=selfplay_env, learning_rate=learning_rate(train))


def _add(run: RunState, positions: Positions, emit: jax.Array,
         stats: SelfPlayStats) -> tuple[RunState, dict[str, jax.Array]]:
    """`Steps.add`: the chunk's finished positions into the buffer, the iteration counted."""
    buffer = replay_lib.add(run.replay, positions, emit)
    metrics = {f"selfplay/{f.name}": getattr(stats, f.name) for f in dataclasses.fields(stats)}
    metrics["selfplay/positions_added"] = jnp.sum(emit, dtype=jnp.int32)
    metrics["replay/size"] = buffer.size
    return run.replace(replay=buffer, iteration=run.iteration + 1), metrics


def _update(env: Env, apply_fn: ApplyFn, optimizer: optax.GradientTransformation,
            config: TrainConfig, symmetries: bool, layout: Layout, train: TrainState,
            buffer: replay_lib.ReplayBuffer, key: chex.PRNGKey, window: jax.Array):
    """`Steps.update` for one key: sample, augment, loss and gradient, optimizer step."""
    k_sample, k_sym = jax.random.split(key)
    batch = replay_lib.sample(buffer, k_sample, config.batch_size, window)
    batch = layout.constrain_batch(batch)  # e.g. each device: its share
    if symmetries:
        batch = augment(env, k_sym, batch)
    grad_fn = jax.value_and_grad(alphazero_loss, has_aux=True)
    (loss, metrics), grads = grad_fn(
        train.params, apply_fn, batch, value_loss_weight=config.value_loss_weight,
        material_loss_weight=config.material_loss_weight)
    updates, opt_state = optimizer.update(grads, train.opt_state, train.params)
    params = optax.apply_updates(train.params, updates)
    metrics = dict(metrics, loss=loss, **{"train/grad_norm": optax.tree_utils.tree_norm(grads)})
    return TrainState(step=train.step + 1, params=params, opt_state=opt_state), metrics


@dataclasses.dataclass(frozen=True)
class JittedSteps:
    """A run's pieces jitted for a layout, each donating the state it replaces.

    Attributes:
      init: `key -> RunState`, laid out as the layout says.
      play: `(variables, key, selfplay_state) -> (selfplay_state, positions, emit, stats)`,
        variables and key replicated where the games are.
      add: `(run without selfplay, positions, emit, stats) -> (run, metrics)`, positions and
        emit where the buffer takes them (`Layout.learner_positions`).
      update: `(train, replay, key or keys [n, 2], window) -> (train, metrics)`.
      shardings: the run state's shardings (`Layout.state_shardings`).
    """

    init: Callable[..., Any]
    play: Any
    add: Any
    update: Any
    shardings: Any


def jit_steps(steps: Steps, layout: Layout) -> JittedSteps:
    """`steps` jitted with the in and out shardings of `layout`: one path for every layout.

    Args:
      steps: the run's pure pieces (`make_steps`), built for this layout.
      layout: where each part of the run state lives.

    Returns:
      The `JittedSteps`.
    """
    shardings = layout.state_shardings(jax.eval_shape(steps.init, jax.random.PRNGKey(0)))
    learner = shardings.replace(selfplay=None)
    positions, scalars = layout.learner_positions, layout.learner_scalars
    play = jax.jit(steps.play, donate_argnums=(2,),
                   in_shardings=(layout.replicated, layout.replicated, shardings.selfplay),
                   out_shardings=(shardings.selfplay, layout.games, layout.games,
                                  layout.replicated))
    add = jax.jit(steps.add, donate_argnums=(0,),
                  in_shardings=(learner, positions, positions, scalars),
                  out_shardings=(learner, scalars))
    update = jax.jit(steps.update, donate_argnums=(0,),
                     in_shardings=(shardings.train, shardings.replay, scalars, scalars),
                     out_shardings=(shardings.train, scalars))
    # Made where the learner lives; on a split layout the games then move to their shards.
    made_on = (jax.tree.map(lambda _: layout.first_device, shardings)
               if layout.learner_on_first_device else shardings)
    init = jax.jit(steps.init, out_shardings=made_on)

    def init_state(key):
        return jax.device_put(init(layout.put_host(key, layout.learner_scalars)), shardings)

    return JittedSteps(init_state, play, add, update, shardings)
