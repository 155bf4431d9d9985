"""Where a run's arrays live: one device, or a mesh of them, described by one `Layout`.

One mesh axis, `batch`, spans every device of every process. A `Layout` says where each part
of the run state lives; `azjax.core.steps.jit_steps` compiles the run's pieces with those
shardings, one path for every layout:

* one device (`Layout()`): everything on it.
* games split (`learner_on_first_device`): games [B] and records [T, B] split on B; the
  replay buffer, params, optimizer and update step on the mesh's first device.
* fully sharded: games and records split on B, replay slots [C] split on C, the rest
  replicated; each device trains on its share of the batch, XLA all-reduces the gradients.

Self-play on a mesh is one games-per-device program under `jax.shard_map`: device d searches
games [d B/D, (d+1) B/D) with no communication. The games depend on the device count (device d
draws from `fold_in(key, d)`) unless `selfplay.per_game_randomness` is on. Checkpoints move
between device counts and layouts. Multi-host: `initialize_distributed` before anything
touches JAX; every process runs the same host loop on its own devices' shards. Which layout
pays where is measured in docs/scaling.md.

Shape legend as in `azjax.core.types`; D = devices in the mesh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from azjax.config import ConfigError, ReplayConfig, SelfPlayConfig, TrainConfig
from azjax.core.search_engine import SearchEngine
from azjax.core.selfplay import SelfPlayFn, SelfPlayState, make_selfplay, sum_device_stats
from azjax.envs.core import Env

__all__ = [
    "AXIS",
    "Layout",
    "avoid_cached_cpu_collectives",
    "check_divisible",
    "choose_layout",
    "initialize_distributed",
    "local_copy",
    "make_mesh",
    "make_sharded_selfplay",
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
    """Turns JAX's persistent compilation cache off for a multi-device CPU mesh in one process.

    A sharded CPU program loaded back from the persistent cache has deadlocked in its first
    collective while the same program freshly compiled ran (docs/scaling.md). One CPU device
    per process (collectives through gloo), GPUs and TPUs keep the cache.
    """
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    if len(local) > 1 and local[0].platform == "cpu":
        jax.config.update("jax_enable_compilation_cache", False)


def check_divisible(selfplay: SelfPlayConfig, train: TrainConfig, replay: ReplayConfig,
                    num_devices: int, *, split_training: bool = True) -> None:
    """Raises ConfigError naming the key if a global size does not split over the devices.

    selfplay.batch_size (games) is always split; with `split_training`, train.batch_size
    (samples) and replay.capacity (each device stores the slots of its share) are too.
    """
    sizes = [("selfplay.batch_size", selfplay.batch_size)]
    if split_training:
        sizes += [("train.batch_size", train.batch_size), ("replay.capacity", replay.capacity)]
    for key, value in sizes:
        if value % num_devices:
            raise ConfigError(f"{key} ({value}) must be divisible by the device count "
                              f"({num_devices}): it is a global size, split over the devices")


def updates_on_one_device(mesh: Mesh) -> bool:
    """Whether a run on `mesh` should keep its replay buffer and updates on the first device,
    splitting only self-play: a single process whose devices are CPU cores.

    Forced host devices play self-play's many small ops side by side, but an update partitioned
    over them runs slower than on one device, whose matmuls use every core anyway
    (docs/scaling.md). Accelerators and several processes keep the updates split.
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

    CPU processes exchange collectives through gloo (TCP), set explicitly so that the choice
    does not depend on the installed version's default.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
    except ValueError as error:  # e.g. no cluster detected and no flags
        raise ValueError(f"multi-host set-up: {error} (outside SLURM, Open MPI and TPU pods, "
                         "give --coordinator HOST:PORT --num-processes N --process-id I)"
                         ) from None


def make_sharded_selfplay(mesh: Mesh, env: Env, search_fn: Callable[..., Any],
                          config: SelfPlayConfig, *,
                          engine: SearchEngine | None = None,
                          adjudicate: Callable[[Any], Any] | None = None) -> SelfPlayFn:
    """Self-play as D games-per-device programs (`jax.shard_map`).

    Device d plays games [d B/D, (d+1) B/D) of the batch, with no communication inside the
    search. With `selfplay.per_game_randomness` every game draws its randomness from its own
    index (`make_selfplay`), so the D devices play exactly the games one device would; without
    it device d uses the key `fold_in(key, d)`. (A global program partitioned by XLA instead
    gathers the tree's batch-indexed arrays across devices at every simulation.)

    Args:
      mesh: the 1-D mesh (`make_mesh`); D = its device count divides `config.batch_size`.
      env: the game self-play walks; search_fn: `azjax.core.search.make_search(...)`'s function.
      engine: the same search in steps, for `config.tree_reuse` (`make_selfplay`).
      adjudicate: the endgame table that ends games (`make_selfplay`), or None.
      config: self-play settings, `batch_size` B the global number of games.

    Returns:
      `selfplay(variables, key, state) -> (state, positions, emit, stats)` with
      `make_selfplay`'s signature and global shapes: positions [B * 2T] game by game, in one
      device's order, emit bool [B * 2T], stats combined over the devices.
    """
    games_per_device = config.batch_size // mesh.devices.size
    local = make_selfplay(env, search_fn, dataclasses.replace(config, batch_size=games_per_device),
                          engine=engine, adjudicate=adjudicate)
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
        return state, positions, emit, sum_device_stats(stats)

    return selfplay


def _every(tree: Any, sharding: Any) -> Any:
    """`sharding` for every leaf of `tree`."""
    return jax.tree.map(lambda _: sharding, tree)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each part of a run lives: the description every compiled piece is jitted with.

    Attributes:
      mesh: the 1-D mesh the run spans; None = one device (this process's first).
      learner_on_first_device: on a mesh, keep the replay buffer, the parameters and the
        updates on its first device and split only the games (`updates_on_one_device` says
        when that pays); False splits the replay slots and the training batch too.
    """

    mesh: Mesh | None = None
    learner_on_first_device: bool = False

    @property
    def first_device(self) -> Sharding:
        """The mesh's first device (this process's first device without a mesh)."""
        device = jax.local_devices()[0] if self.mesh is None else self.mesh.devices.flat[0]
        return SingleDeviceSharding(device)

    @property
    def replicated(self) -> Sharding:
        """The same array on every device of the mesh: the params and keys self-play takes."""
        return self.first_device if self.mesh is None else NamedSharding(self.mesh,
                                                                         PartitionSpec())

    @property
    def games(self) -> Sharding:
        """A leading games, samples or slots axis: split over the mesh."""
        return self.first_device if self.mesh is None else NamedSharding(self.mesh,
                                                                         PartitionSpec(AXIS))

    @property
    def on_learner(self) -> bool:
        """Whether replay, params and updates live on one device (no mesh, or games split)."""
        return self.mesh is None or self.learner_on_first_device

    @property
    def learner_scalars(self) -> Sharding:
        """Where the update step's small inputs and outputs live (keys, window, metrics)."""
        return self.first_device if self.on_learner else self.replicated

    @property
    def learner_positions(self) -> Sharding:
        """Where positions are added to the buffer and training batches are drawn."""
        return self.first_device if self.on_learner else self.games

    def state_shardings(self, abstract: Any) -> Any:
        """A `RunState` (`azjax.core.steps`) of shardings, one per leaf of `abstract` (a
        `jax.eval_shape` of one):
        games [B] and records [T, B] split on B; replay slots [C] as `learner_positions`;
        params, optimizer and counters as `learner_scalars`."""
        records = (self.first_device if self.mesh is None
                   else NamedSharding(self.mesh, PartitionSpec(None, AXIS)))
        selfplay = SelfPlayState(
            games=_every(abstract.selfplay.games, self.games), opening_moves=self.games,
            previous=_every(abstract.selfplay.previous, records), previous_emitted=records)
        scalars = _every(abstract, self.learner_scalars)
        return scalars.replace(
            selfplay=selfplay,
            replay=scalars.replay.replace(
                positions=_every(abstract.replay.positions, self.learner_positions)))

    def put_host(self, value: Any, sharding: Sharding) -> Any:
        """A host value that every process holds alike (a PRNG key, a window size) placed as
        `sharding`: on a mesh, built in each process from its own copy (`replicate`)."""
        if isinstance(sharding, NamedSharding):
            return replicate(self.mesh, value)
        return jax.device_put(value, sharding)

    def make_selfplay(self, env: Env, search_fn: Callable[..., Any], config: SelfPlayConfig,
                      *, engine: SearchEngine | None = None,
                      adjudicate: Callable[[Any], Any] | None = None) -> SelfPlayFn:
        """`make_selfplay`'s function for this layout: under `shard_map` on a mesh."""
        if self.mesh is None:
            return make_selfplay(env, search_fn, config, engine=engine, adjudicate=adjudicate)
        return make_sharded_selfplay(self.mesh, env, search_fn, config, engine=engine,
                                     adjudicate=adjudicate)

    def constrain_batch(self, batch: Any) -> Any:
        """The sampled training batch (`Positions` [B]) laid out for the update: split over
        the mesh when the training is, else left where the buffer is."""
        if self.on_learner:
            return batch
        return jax.lax.with_sharding_constraint(batch, self.games)


def choose_layout(selfplay: SelfPlayConfig, train: TrainConfig, replay: ReplayConfig,
                  mesh: Mesh | None = None, *, learner_on_first_device: bool = False) -> Layout:
    """The layout of a run: one device without a mesh or on a mesh of one device, else the
    games split over `mesh` (with the learner on its first device or sharded too).

    Raises:
      ConfigError: naming the key, if a global size does not split over the mesh.
    """
    if mesh is None or mesh.devices.size == 1:
        return Layout()
    check_divisible(selfplay, train, replay, mesh.devices.size,
                    split_training=not learner_on_first_device)
    avoid_cached_cpu_collectives(mesh)
    return Layout(mesh, learner_on_first_device)
