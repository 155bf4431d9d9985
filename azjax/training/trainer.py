"""One training iteration on the host: a self-play call, K update calls, the stats.

`Trainer` holds a run's compiled pieces (`azjax.core.steps.make_steps`, jitted for the run's
device layout by `azjax.core.steps.jit_steps`) and drives them: `iteration(run, key)` plays
one self-play chunk, adds its finished positions to the replay buffer, then runs
`train.updates_per_iteration` update steps (in calls of `train.updates_per_call`), and returns
the new state with the iteration's metrics as host floats. `compile(run)` compiles every piece
ahead of time, so an input whose shape or dtype drifts fails loudly instead of recompiling.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from azjax.config import ConfigError, ExperimentConfig
from azjax.core import replay as replay_lib
from azjax.core.layout import choose_layout
from azjax.core.steps import RunState, jit_steps, make_steps
from azjax.envs.core import Env, GameState
from azjax.envs.start_positions import read_start_positions, start_positions_digest

__all__ = ["Trainer", "start_positions_of"]


@jax.jit
def _mean_of_dicts(dicts: list[dict[str, jax.Array]]) -> dict[str, jax.Array]:
    """Element-wise mean of a list of metric dicts, in one compiled call."""
    return jax.tree.map(lambda *xs: jnp.mean(jnp.stack(xs)), *dicts)


def start_positions_of(env: Env, config: ExperimentConfig) -> GameState | None:
    """The positions of `selfplay.start_positions` ([N] stacked states), or None when unset.

    Raises:
      ConfigError: `selfplay.start_positions: <file>: <what is wrong>`.
    """
    path = config.selfplay.start_positions
    if not path:
        return None
    try:
        return read_start_positions(env, path)
    except ValueError as error:
        raise ConfigError(f"selfplay.start_positions: {error}") from None


class Trainer:
    """A run's compiled pieces and the host iteration over them.

    Args:
      env: the game.
      config: the experiment; its sizes are global (summed over the devices).
      mesh: a 1-D mesh (`azjax.core.layout.make_mesh`) to split the games (and the training)
        over; None or one device = unsharded.
      updates_on_one_device: split only the games, keeping the replay buffer, the parameters
        and the updates on the mesh's first device (`azjax.core.layout.updates_on_one_device`
        says when that pays).

    Attributes:
      layout: where the run state lives (`azjax.core.layout.Layout`).
      steps: the pure pieces (`azjax.core.steps.Steps`); jitted: their jitted forms.
      play_step, add_step, update_step: the pieces `iteration` calls (`JittedSteps`' play, add
        and update; ahead-of-time executables after `compile()`).
      mesh: the layout's mesh, None on one device; split: whether the updates stay on one
        device while the games are split.
      apply_fn, search_fn: the network and the search self-play runs.
      starts_digest: the SHA-256 of the positions of `selfplay.start_positions`
        (`start_positions_digest`; checkpoints record it), None without them.

    Raises:
      ConfigError: naming the key, if a global size does not split over the mesh.
    """

    def __init__(self, env: Env, config: ExperimentConfig, *, mesh: Mesh | None = None,
                 updates_on_one_device: bool = False):
        self.env, self.config = env, config
        self.layout = choose_layout(config.selfplay, config.train, config.replay, mesh,
                                    learner_on_first_device=updates_on_one_device)
        starts = start_positions_of(env, config)
        self.starts_digest = (None if starts is None
                              else start_positions_digest(config.selfplay.start_positions))
        self.steps = make_steps(env, config.network, config.search, config.selfplay,
                                config.train, config.replay, gating=config.eval.gating,
                                layout=self.layout, starts=starts)
        self.jitted = jit_steps(self.steps, self.layout)
        self.mesh, self.split = self.layout.mesh, self.layout.learner_on_first_device
        self.apply_fn, self.search_fn = self.steps.apply_fn, self.steps.search_fn
        # `compile()` swaps these jitted functions for ahead-of-time executables.
        self.play_step, self.add_step, self.update_step = (self.jitted.play, self.jitted.add,
                                                           self.jitted.update)
        self._replay_ready = False

    def init_state(self, key: chex.PRNGKey) -> RunState:
        """A fresh run: new network, B new games, an empty buffer, laid out as the layout says.

        Args:
          key: the run's PRNG key; the network is drawn from its first split (`initial_params`).
        """
        run = self.jitted.init(key)
        # One buffer per leaf: the state is donated, and an env's init may hand back the same
        # array in two fields. A copy by device_put keeps each leaf's sharding (jnp.array's
        # copy gives an empty leaf, such as a history of length 0, a replicated one, which
        # the sharded self-play step then refuses).
        return jax.tree.map(lambda x: jax.device_put(x, x.sharding, may_alias=False), run)

    def initial_params(self, key: chex.PRNGKey) -> Any:
        """The network `init_state(key)` starts from (plain arrays, on one device)."""
        return self.steps.initial_params(key)

    def abstract_state(self) -> RunState:
        """Shapes, dtypes and shardings of the run state: a restore target. The shardings are
        this run's (a checkpoint written on other devices or processes is laid out anew)."""
        abstract = jax.eval_shape(self.steps.init, jax.random.PRNGKey(0))
        return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                            abstract, self.jitted.shardings)

    def selfplay_step(self, run: RunState, key: chex.PRNGKey) -> tuple[RunState, dict]:
        """One self-play chunk added to the buffer: `run` donated, the new state and the
        chunk's metrics (device arrays)."""
        layout = self.layout
        variables = jax.device_put(self.steps.selfplay_variables(run), layout.replicated)
        selfplay, positions, emit, stats = self.play_step(
            variables, layout.put_host(key, layout.replicated), run.selfplay)
        positions, emit = jax.device_put((positions, emit), layout.learner_positions)
        stats = jax.device_put(stats, layout.learner_scalars)
        run, metrics = self.add_step(run.replace(selfplay=None), positions, emit, stats)
        return run.replace(selfplay=selfplay), metrics

    def update_inputs(self, key: chex.PRNGKey, iteration: jax.Array) -> tuple[list, Any]:
        """The iteration's update keys, one entry per compiled call ([2] or [n, 2]: the same K
        keys whatever the grouping, so the steps draw the same batches), and the window."""
        cfg, layout = self.config, self.layout
        keys = np.asarray(jax.random.split(key, cfg.train.updates_per_iteration))
        if cfg.train.updates_per_call > 1:
            keys = keys.reshape(-1, cfg.train.updates_per_call, *keys.shape[1:])
        window = replay_lib.window_size(cfg.replay, iteration)
        put = lambda x: layout.put_host(x, layout.learner_scalars)
        return [put(k) for k in keys], put(window)

    def compile(self, run: RunState) -> None:
        """Compiles self-play, the buffer's add and the update step ahead of time, the update
        in a second thread (XLA compiles without the GIL, so they overlap on two cores).

        Args:
          run: a state shaped and laid out as the ones `iteration` will get.
        """
        layout, key = self.layout, jax.random.PRNGKey(0)
        keys, window = self.update_inputs(key, run.iteration)
        update_key = keys[0] if keys else layout.put_host(key, layout.learner_scalars)
        variables = jax.device_put(self.steps.selfplay_variables(run), layout.replicated)
        play_key = layout.put_host(key, layout.replicated)
        _, positions, emit, stats = jax.eval_shape(self.play_step, variables, play_key,
                                                   run.selfplay)
        placed = lambda tree, sharding: jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)
        with ThreadPoolExecutor(max_workers=1) as pool:
            update = pool.submit(lambda: self.update_step.lower(
                run.train, run.replay, update_key, window).compile())
            self.play_step = self.play_step.lower(variables, play_key, run.selfplay).compile()
            self.add_step = self.add_step.lower(
                run.replace(selfplay=None), placed(positions, layout.learner_positions),
                placed(emit, layout.learner_positions),
                placed(stats, layout.learner_scalars)).compile()
            self.update_step = update.result()

    def compiled_update(self) -> Any:
        """The update step as compiled by `compile()` when it is one step on one device (what
        a FLOP count reads), else None."""
        single = self.mesh is None and self.config.train.updates_per_call == 1
        compiled = isinstance(self.update_step, jax.stages.Compiled)
        return self.update_step if single and compiled else None

    def update_flops(self) -> float:
        """FLOPs of one update step (`azjax.training.compute.update_flops`)."""
        from azjax.training.compute import update_flops

        return update_flops(self.env, self.config, self.compiled_update())

    def iteration(self, run: RunState, key: chex.PRNGKey) -> tuple[RunState, dict[str, Any]]:
        """Self-play chunk + replay add + K updates.

        Args:
          run: the state (donated: use the returned one).
          key: this iteration's PRNG key.

        Returns:
          The new state and the metrics: host floats, losses averaged over the K updates,
          self-play counts of the chunk, `train/learning_rate` and `train/update_steps` (K, or
          0 while the buffer fills).
        """
        cfg = self.config
        k_play, k_train = jax.random.split(key)
        keys, window = self.update_inputs(k_train, run.iteration)
        run, metrics = self.selfplay_step(run, k_play)
        train, update_metrics = run.train, []
        if self._replay_ready or int(run.replay.size) >= max(cfg.train.min_replay_size, 1):
            self._replay_ready = True  # the buffer only grows: stop asking (a device sync)
            for call_keys in keys:
                train, step_metrics = self.update_step(train, run.replay, call_keys, window)
                update_metrics.append(step_metrics)
        run = run.replace(train=train)
        if update_metrics:
            metrics.update(_mean_of_dicts(update_metrics))
        metrics, step = jax.device_get((metrics, train.step))  # one transfer for both
        if update_metrics:  # the rate of the iteration's last update step (optax counts from 0)
            metrics["train/learning_rate"] = float(self.steps.learning_rate(int(step) - 1))
        metrics["train/update_steps"] = cfg.train.updates_per_iteration if update_metrics else 0
        return run, metrics
