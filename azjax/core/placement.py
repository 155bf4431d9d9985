"""Data parallelism over devices and hosts with JAX's own runtime (no scheduler, queue or RPC).

One mesh axis, `batch`, spans every device of every process. Games, their step records and
the replay buffer's capacity axis are split on `batch`; parameters, optimizer state and scalars
are replicated. Self-play runs as one games-per-device program under `jax.shard_map`
(`Learner`): each device searches its own games, with no communication. The update step is
the one-device program given `NamedSharding`s: XLA's partitioner (GSPMD) runs each device's
share of the training batch and all-reduces the gradients of the global mean loss.
Checkpoints move between device counts. The games depend on the device count (device d draws
from `fold_in(key, d)`) unless `selfplay.per_game_randomness` is on, when D devices play
exactly the games one device plays (to float rounding in the updates). Multi-host:
`initialize_distributed` (`jax.distributed`) before anything touches JAX; every process runs
the same host loop on its own devices' shards.

Shape legend as in `azjax.core.types`; D = devices in the mesh.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from azjax.config import ConfigError, ExperimentConfig

__all__ = [
    "AXIS",
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
    draughts recipe, 37.4 ms against 24.1 ms per update of 512 (`experiments/bench_iteration.py`,
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
