"""Where a run's arrays live and how its programs run: one device, or a mesh of them.

One mesh axis, `batch`, spans every device of every process. A `Placement` is one device
layout; `choose_placement` picks it and `azjax.core.learner.Learner` delegates to it
everything that depends on the layout:

* `OneDevice`: plain `jax.jit`, no shardings (also a mesh of one device).
* `SplitGames`: the games (and their step records) split over the mesh, self-play as one
  games-per-device program under `jax.shard_map`; the replay buffer, the parameters and the
  update step on the mesh's first device (forced CPU devices, `updates_on_one_device`).
* `FullySharded`: games, step records and the replay buffer's capacity axis split on `batch`,
  parameters, optimizer state and scalars replicated. Self-play is the same `shard_map` program;
  the update step is the one-device program given `NamedSharding`s, which XLA's partitioner
  (GSPMD) runs as each device's share of the training batch, all-reducing the gradients.

In both mesh layouts each device searches its own games, with no communication. Checkpoints
move between device counts. The games depend on the device count (device d draws from
`fold_in(key, d)`) unless `selfplay.per_game_randomness` is on, when D devices play exactly the
games one device plays (to float rounding in the updates). Multi-host: `initialize_distributed`
(`jax.distributed`) before anything touches JAX; every process runs the same host loop on its
own devices' shards.

Shape legend as in `azjax.core.types`; D = devices in the mesh.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from azjax.config import ConfigError, ExperimentConfig, SelfPlayConfig
from azjax.core.selfplay import SelfPlayFn, SelfPlayState, SelfPlayStats, make_selfplay
from azjax.core.targets import NO_AUXILIARY_TARGETS, AuxiliaryTargets
from azjax.envs.core import Env

if TYPE_CHECKING:  # for annotations only: the learner imports this module
    from azjax.core.learner import RunState

__all__ = [
    "AXIS",
    "FullySharded",
    "OneDevice",
    "Placement",
    "SplitGames",
    "choose_placement",
    "make_sharded_selfplay",
    "avoid_cached_cpu_collectives",
    "check_divisible",
    "initialize_distributed",
    "local_copy",
    "make_mesh",
    "mesh_description",
    "replicate",
    "updates_on_one_device",
]

AXIS = "batch"  # the one mesh axis: games, training samples and replay slots are split on it


def make_mesh(devices: list | None = None) -> Mesh:
    """A 1-D mesh over `devices` (default: every device of every process), axis `batch`."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (AXIS,))


def avoid_cached_cpu_collectives(mesh: Mesh) -> None:
    """Turns JAX's persistent compilation cache off for a multi-device CPU mesh.

    With jax 0.10.2, a sharded CPU program loaded back from the persistent cache deadlocks in
    its first collective (XLA's rendezvous times out after 40 s with the devices waiting in
    different collectives), while the same program freshly compiled runs fine: measured here
    with 4 forced host devices, a fresh cache dir, run twice. One CPU device per process
    (collectives through gloo) and GPUs and TPUs keep the cache.
    """
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    if len(local) > 1 and local[0].platform == "cpu":
        jax.config.update("jax_enable_compilation_cache", False)


def check_divisible(config: ExperimentConfig, num_devices: int, *,
                    split_training: bool = True) -> None:
    """Raises ConfigError naming the key if a global size does not split over the devices.

    selfplay.batch_size (games) is always split; with `split_training`, train.batch_size
    (samples) and replay.capacity (each device stores the slots of its share) are too.
    """
    sizes = [("selfplay.batch_size", config.selfplay.batch_size)]
    if split_training:
        sizes += [("train.batch_size", config.train.batch_size),
                  ("replay.capacity", config.replay.capacity)]
    for key, value in sizes:
        if value % num_devices:
            raise ConfigError(f"{key} ({value}) must be divisible by the device count "
                              f"({num_devices}): it is a global size, split over the devices")


def updates_on_one_device(mesh: Mesh) -> bool:
    """Whether a run on `mesh` should keep its replay buffer and updates on the first device,
    splitting only self-play: a single process whose devices are CPU cores.

    Forced host devices (`--xla_force_host_platform_device_count`) play self-play's many small
    ops side by side, but an update partitioned over them ran slower than the same update on
    one device, whose matmuls use every core anyway: on a 2-core AMD EPYC (Zen 3) with the
    draughts recipe, 37.4 ms against 23.1 ms per update of 512 (`benchmarks/bench_iteration.py`,
    docs/scaling.md). Accelerators and several processes keep the updates split.
    """
    devices = list(mesh.devices.flat)
    return (len(devices) > 1 and devices[0].platform == "cpu"
            and len({d.process_index for d in devices}) == 1)


def mesh_description(mesh: Mesh | None = None) -> dict[str, Any]:
    """{"processes", "devices", "devices_per_process", "platform"} of `mesh` (default: all)."""
    devices = list(mesh.devices.flat) if mesh is not None else jax.devices()
    processes = len({d.process_index for d in devices})
    return {"processes": processes, "devices": len(devices),
            "devices_per_process": len(devices) // processes, "platform": devices[0].platform}


def replicate(mesh: Mesh, value: Any) -> Any:
    """A host value (the same in every process, e.g. a PRNG key) as a global array replicated
    over `mesh`; each process fills its own devices, nothing is sent."""
    sharding = NamedSharding(mesh, PartitionSpec())

    def put(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree.map(put, value)


def local_copy(tree: Any) -> Any:
    """A replicated global pytree as plain arrays on this process's first device: for host-side
    work every process does alike (evaluation, snapshots) without cross-device programs."""
    device = jax.local_devices()[0]
    return jax.tree.map(
        lambda x: jax.device_put(x.addressable_data(0), device) if isinstance(x, jax.Array)
        else x, tree)


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None) -> None:
    """`jax.distributed.initialize`, before any JAX computation. With all three arguments None,
    JAX detects the cluster itself (SLURM, Open MPI, Cloud TPU pods, JAX_COORDINATOR_ADDRESS).

    CPU processes exchange collectives through gloo (TCP), JAX's default on CPU; it is set
    explicitly so that the choice does not depend on the installed version's default.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    except ValueError as error:  # e.g. no cluster detected and no flags
        raise ValueError(f"multi-host set-up: {error} (outside SLURM, Open MPI and TPU pods, "
                         "give --coordinator HOST:PORT --num-processes N --process-id I)"
                         ) from None


# ---- self-play over a mesh ---------------------------------------------------------------------


def make_sharded_selfplay(mesh: Mesh, env: Env, search_fn: Callable[..., Any],
                          config: SelfPlayConfig, *,
                          auxiliary: AuxiliaryTargets = NO_AUXILIARY_TARGETS) -> SelfPlayFn:
    """Self-play as D games-per-device programs (`jax.shard_map`).

    Device d plays games [d B/D, (d+1) B/D) of the batch, with no communication inside the
    search. With `selfplay.per_game_randomness` every game draws its randomness from its own
    index (`make_selfplay`), so the D devices play exactly the games one device would; without
    it (the faster default) device d uses the key `fold_in(key, d)`. (A global program
    partitioned by XLA gathered the tree's batch-indexed arrays across devices at every
    simulation: 0.2x the speed of one device on 2 forced CPU devices, and 600x slower across two
    processes; `docs/scaling.md`.)

    Args:
      mesh: the 1-D mesh (`make_mesh`); D = its device count divides `config.batch_size`.
      env: the game self-play walks; search_fn: `azjax.core.search.make_search(...)`'s function.
      config: self-play settings, `batch_size` B the global number of games.
      auxiliary: the auxiliary targets the positions carry (`make_selfplay`).

    Returns:
      `selfplay(variables, key, state) -> (state, positions, emit, stats)` with
      `make_selfplay`'s signature and global shapes: positions [B * 2T] game by game, in one
      device's order, emit bool [B * 2T], stats summed over the devices.
    """
    devices = mesh.devices.size
    games_per_device = config.batch_size // devices
    local = make_selfplay(env, search_fn, dataclasses.replace(config, batch_size=games_per_device),
                          auxiliary=auxiliary)
    games, steps, rep = PartitionSpec(AXIS), PartitionSpec(None, AXIS), PartitionSpec()

    def per_device(variables, key, state):
        device = jax.lax.axis_index(AXIS)
        if not config.per_game_randomness:  # the games then depend on the device count
            key = jax.random.fold_in(key, device)
        state, positions, emit, stats = local(variables, key, state, device * games_per_device)
        return state, positions, emit, jax.tree.map(lambda x: x[None], stats)

    state_spec = SelfPlayState(games=games, opening_moves=games, previous=steps,
                               previous_emitted=steps)
    sharded = jax.shard_map(per_device, mesh=mesh, in_specs=(rep, rep, state_spec),
                            out_specs=(state_spec, games, games, games), check_vma=False)

    def selfplay(variables, key, state):
        state, positions, emit, stats = sharded(variables, key, state)
        return state, positions, emit, _sum_device_stats(stats)

    return selfplay


def _sum_device_stats(stats: SelfPlayStats) -> SelfPlayStats:
    """The whole batch's stats from the devices' ([D] per field): counts summed, the mean game
    length re-weighted by each device's finished games, root values averaged."""
    chex.assert_rank(stats.games_finished, 1)
    finished = jnp.sum(stats.games_finished)
    steps_played = jnp.sum(stats.mean_game_length
                           * jnp.maximum(stats.games_finished, 1))  # T x B / D each
    return stats.replace(
        games_finished=finished,
        first_player_wins=jnp.sum(stats.first_player_wins),
        second_player_wins=jnp.sum(stats.second_player_wins),
        draws=jnp.sum(stats.draws),
        mean_game_length=steps_played / jnp.maximum(finished, 1).astype(jnp.float32),
        mean_root_value=jnp.mean(stats.mean_root_value),
        network_evaluations=jnp.sum(stats.network_evaluations))


# ---- placements: one per device layout ---------------------------------------------------------

# The learner's compiled pieces, as the placements receive them:
#   play_and_add(run, key) -> (run, metrics): a self-play chunk added to the buffer;
#   play(variables, key, selfplay_state) -> (selfplay_state, positions, emit, stats);
#   add(run, positions, emit, stats) -> (run, metrics): the chunk into the buffer;
#   variables(run) -> {"params": ...}: the network self-play uses;
#   update(train, replay, key or keys, window) -> (train, metrics).
StepFn = Callable[..., tuple[Any, dict[str, jax.Array]]]
StateShardings = Callable[[], "RunState"]  # the run state's shardings, computed when asked


def _every(tree: Any, sharding: Any) -> Any:
    """`sharding` for every leaf of `tree`."""
    return jax.tree.map(lambda _: sharding, tree)


class Placement(abc.ABC):
    """One device layout: where the run state lives and how the learner's programs run there.

    Attributes:
      mesh: the mesh the run spans, None on one device.
      updates_on_one_device: whether the replay buffer and the updates stay on one device
        while the games are split (`SplitGames`).
    """

    mesh: Mesh | None = None
    updates_on_one_device: bool = False

    @abc.abstractmethod
    def state_shardings(self, abstract: RunState) -> RunState:
        """A RunState of shardings, one per leaf of `abstract` (`jax.eval_shape` of a state)."""

    @abc.abstractmethod
    def init_state(self, init: Callable[[chex.PRNGKey], RunState], key: chex.PRNGKey,
                   state_shardings: StateShardings) -> RunState:
        """`init(key)` compiled and run, its state laid out as `state_shardings()` says."""

    @abc.abstractmethod
    def make_selfplay(self, env: Env, search_fn: Callable[..., Any], config: SelfPlayConfig, *,
                      auxiliary: AuxiliaryTargets = NO_AUXILIARY_TARGETS) -> SelfPlayFn:
        """`make_selfplay`'s function for this layout (same signature, global shapes)."""

    @abc.abstractmethod
    def jit_selfplay_step(self, play_and_add: StepFn, state_shardings: StateShardings, *,
                          play: SelfPlayFn, add: StepFn,
                          variables: Callable[[RunState], Any]) -> StepFn:
        """The compiled `selfplay_step(run, key) -> (run, metrics)`, the run state donated.

        A layout that runs the whole step as one program jits `play_and_add`; one that plays
        and adds on different devices composes `play` and `add` with `variables`.
        """

    def jit_update_step(self, update: StepFn, state_shardings: StateShardings) -> StepFn:
        """The compiled `update_step(train, replay, key, window) -> (train, metrics)`, the
        train state donated. By default plain jit, on the device its inputs are on."""
        del state_shardings
        return jax.jit(update, donate_argnums=(0,))

    def compile_selfplay_step(self, step: Any, run: RunState, key: jax.Array) -> StepFn:
        """`step` (from `jit_selfplay_step`) compiled ahead of time for `run` and `key`."""
        return step.lower(run, key).compile()

    def selfplay_input(self, value: Any) -> Any:
        """A host value (a PRNG key) as the self-play step takes it; by default unchanged."""
        return value

    def update_input(self, value: Any) -> Any:
        """A host value (update keys [2] or [n, 2], the int32 [] window) as the update step
        takes it; by default unchanged."""
        return value

    def constrain_batch(self, batch: Any) -> Any:
        """The sampled training batch (`Positions` [B]) laid out for the update: by default
        left where the replay buffer is."""
        return batch


def choose_placement(config: ExperimentConfig, mesh: Mesh | None = None, *,
                     updates_on_one_device: bool = False) -> Placement:
    """The placement of a run: `OneDevice` without a mesh or on a mesh of one device, else
    `SplitGames` with `updates_on_one_device`, else `FullySharded`.

    Raises:
      ConfigError: naming the key, if a global size of `config` does not split over the mesh.
    """
    if mesh is None or mesh.devices.size == 1:
        return OneDevice()
    layout = SplitGames if updates_on_one_device else FullySharded
    return layout(mesh, config)


class OneDevice(Placement):
    """Everything on the default device: plain jit, the programs every one-device run used."""

    def state_shardings(self, abstract: RunState) -> RunState:
        """Every leaf on this process's first device."""
        return _every(abstract, SingleDeviceSharding(jax.local_devices()[0]))

    def init_state(self, init: Callable[[chex.PRNGKey], RunState], key: chex.PRNGKey,
                   state_shardings: StateShardings) -> RunState:
        """`init(key)` in one compiled call."""
        del state_shardings
        return jax.jit(init)(key)

    def make_selfplay(self, env: Env, search_fn: Callable[..., Any], config: SelfPlayConfig, *,
                      auxiliary: AuxiliaryTargets = NO_AUXILIARY_TARGETS) -> SelfPlayFn:
        """`make_selfplay(env, search_fn, config, auxiliary=auxiliary)` itself."""
        return make_selfplay(env, search_fn, config, auxiliary=auxiliary)

    def jit_selfplay_step(self, play_and_add: StepFn, state_shardings: StateShardings, *,
                          play: SelfPlayFn, add: StepFn,
                          variables: Callable[[RunState], Any]) -> StepFn:
        """`play_and_add`, jitted."""
        del state_shardings, play, add, variables
        return jax.jit(play_and_add, donate_argnums=(0,))


class _OnMesh(Placement):
    """What the two mesh layouts share: the mesh, its shardings, self-play under shard_map."""

    def __init__(self, mesh: Mesh, config: ExperimentConfig):
        self.mesh = mesh
        check_divisible(config, mesh.devices.size, split_training=not self.updates_on_one_device)
        avoid_cached_cpu_collectives(mesh)

    @property
    def replicated(self) -> NamedSharding:
        """The same array on every device of the mesh."""
        return NamedSharding(self.mesh, PartitionSpec())

    @property
    def batch_split(self) -> NamedSharding:
        """Split on the leading axis (games, samples, replay slots) over the mesh."""
        return NamedSharding(self.mesh, PartitionSpec(AXIS))

    def selfplay_shardings(self, abstract: RunState) -> SelfPlayState:
        """The games [B] and step records [T, B] split on B."""
        games, steps = self.batch_split, NamedSharding(self.mesh, PartitionSpec(None, AXIS))
        return SelfPlayState(
            games=_every(abstract.selfplay.games, games), opening_moves=games,
            previous=_every(abstract.selfplay.previous, steps), previous_emitted=steps)

    def make_selfplay(self, env: Env, search_fn: Callable[..., Any], config: SelfPlayConfig, *,
                      auxiliary: AuxiliaryTargets = NO_AUXILIARY_TARGETS) -> SelfPlayFn:
        """`make_sharded_selfplay` over this mesh."""
        return make_sharded_selfplay(self.mesh, env, search_fn, config, auxiliary=auxiliary)

    def selfplay_input(self, value: Any) -> Any:
        """The host value as a global array replicated over the mesh (`replicate`)."""
        return replicate(self.mesh, value)


class SplitGames(_OnMesh):
    """Games split over the mesh; the replay buffer, the parameters and the updates on its
    first device (`updates_on_one_device` says when that pays)."""

    updates_on_one_device = True

    @property
    def learner_device(self) -> SingleDeviceSharding:
        """Where everything but the games lives: the mesh's first device."""
        return SingleDeviceSharding(self.mesh.devices.flat[0])

    def state_shardings(self, abstract: RunState) -> RunState:
        """The games and their records split (`selfplay_shardings`), the rest on the learner's
        device."""
        on_learner = _every(abstract, self.learner_device)
        return on_learner.replace(selfplay=self.selfplay_shardings(abstract))

    def init_state(self, init: Callable[[chex.PRNGKey], RunState], key: chex.PRNGKey,
                   state_shardings: StateShardings) -> RunState:
        """Made on the learner's device, the games then moved to their shards."""
        return jax.device_put(jax.jit(init)(key), state_shardings())

    def jit_selfplay_step(self, play_and_add: StepFn, state_shardings: StateShardings, *,
                          play: SelfPlayFn, add: StepFn,
                          variables: Callable[[RunState], Any]) -> StepFn:
        """The chunk played on the mesh, its positions added on the learner's device: two
        compiled calls (`_PlayThenAdd`)."""
        del play_and_add
        games = state_shardings().selfplay
        play_step = jax.jit(play, donate_argnums=(2,),
                            in_shardings=(self.replicated, self.replicated, games),
                            out_shardings=(games, self.batch_split, self.batch_split,
                                           self.replicated))
        add_step = jax.jit(add, donate_argnums=(0,))  # runs where its inputs are
        return _PlayThenAdd(self, play_step, add_step, variables)

    def compile_selfplay_step(self, step: Any, run: RunState, key: jax.Array) -> StepFn:
        """`step`'s two calls compiled ahead of time (`_PlayThenAdd.compile`)."""
        return step.compile(run, key)


class _PlayThenAdd:
    """`SplitGames`' self-play step: the chunk on the mesh (params copied to every device), its
    positions moved to the learner's device and added there. Two compiled calls and two
    transfers, the positions' being the larger (~N x 2.5 KB for draughts)."""

    def __init__(self, placement: SplitGames, play_step: Any, add_step: Any,
                 variables: Callable[[RunState], Any]):
        self._placement = placement
        self._play_step = play_step
        self._add_step = add_step
        self._variables = variables

    def __call__(self, run: RunState, key: jax.Array) -> tuple[RunState, dict[str, jax.Array]]:
        variables = jax.device_put(self._variables(run), self._placement.replicated)
        selfplay, positions, emit, stats = self._play_step(variables, key, run.selfplay)
        positions, emit, stats = jax.device_put((positions, emit, stats),
                                                self._placement.learner_device)
        # The games stay on the mesh, outside the learner device's program.
        new_run, metrics = self._add_step(run.replace(selfplay=None), positions, emit, stats)
        return new_run.replace(selfplay=selfplay), metrics

    def compile(self, run: RunState, key: jax.Array) -> _PlayThenAdd:
        """The same step with both calls compiled ahead of time for `run` and `key`."""
        variables = jax.device_put(self._variables(run), self._placement.replicated)
        _, positions, emit, stats = jax.eval_shape(self._play_step, variables, key, run.selfplay)
        device = self._placement.learner_device
        on_learner = lambda tree: jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), tree)
        add_step = self._add_step.lower(run.replace(selfplay=None), on_learner(positions),
                                        on_learner(emit), on_learner(stats)).compile()
        play_step = self._play_step.lower(variables, key, run.selfplay).compile()
        return _PlayThenAdd(self._placement, play_step, add_step, self._variables)


class FullySharded(_OnMesh):
    """Games, step records, replay slots and the training batch split over the mesh;
    parameters, optimizer state and counters replicated.

    The replay buffer keeps its global ring order (one `next_index`), each device holding a
    contiguous C / D block of slots: `add` writes each position into the device owning its slot
    and `sample` gathers the drawn slots from their owners (a [batch] all-reduce, small next to
    the update). So from the same buffer D devices train exactly as one device would (to float
    rounding), and a checkpoint resumes on any device count.
    """

    def state_shardings(self, abstract: RunState) -> RunState:
        """Games [B] and step records [T, B] split on B, replay slots [C] split on C,
        everything else (params, optimizer, counters) replicated."""
        rep = self.replicated
        return abstract.replace(
            iteration=rep,
            train=_every(abstract.train, rep),
            selfplay=self.selfplay_shardings(abstract),
            replay=abstract.replay.replace(
                positions=_every(abstract.replay.positions, self.batch_split), next_index=rep,
                size=rep, total_added=rep),
            selfplay_params=_every(abstract.selfplay_params, rep),
        )

    def init_state(self, init: Callable[[chex.PRNGKey], RunState], key: chex.PRNGKey,
                   state_shardings: StateShardings) -> RunState:
        """Created in place, each device making its own shards."""
        return jax.jit(init, out_shardings=state_shardings())(replicate(self.mesh, key))

    def jit_selfplay_step(self, play_and_add: StepFn, state_shardings: StateShardings, *,
                          play: SelfPlayFn, add: StepFn,
                          variables: Callable[[RunState], Any]) -> StepFn:
        """`play_and_add` jitted as one program over the mesh, the state keeping its shardings."""
        del play, add, variables
        run, rep = state_shardings(), self.replicated
        return jax.jit(play_and_add, donate_argnums=(0,), in_shardings=(run, rep),
                       out_shardings=(run, rep))

    def jit_update_step(self, update: StepFn, state_shardings: StateShardings) -> StepFn:
        """`update` jitted over the mesh: the batch split, the train state replicated."""
        run, rep = state_shardings(), self.replicated
        return jax.jit(update, donate_argnums=(0,), in_shardings=(run.train, run.replay, rep, rep),
                       out_shardings=(run.train, rep))

    def update_input(self, value: Any) -> Any:
        """The host value replicated over the mesh (`replicate`)."""
        return replicate(self.mesh, value)

    def constrain_batch(self, batch: Any) -> Any:
        """Each device takes its share of the batch (`Positions` [B] split on B)."""
        return jax.lax.with_sharding_constraint(batch, self.batch_split)
