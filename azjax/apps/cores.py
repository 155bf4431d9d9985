"""Running a command on fewer CPU cores: `azjax play --cores N`.

A game against a person is searched one position at a time. XLA's CPU runtime runs a
program's independent operations on a pool of threads, one per core, and a search over a batch
of one is hundreds of tiny operations per position: handing them between threads costs more
than it saves. On one core the shipped draughts model's alpha-beta move takes 0.6 to 0.7 times
as long as on both of a 2-core Intel Xeon (docs/benchmarks.md, "Alpha-beta over the network").
Linux only (the process's CPU affinity); elsewhere it changes nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["on_cores"]


@contextlib.contextmanager
def on_cores(count: int) -> Iterator[int]:
    """Runs the body on the first `count` of the cores this process may use (0: all of them),
    and gives the process back all of those cores after it. Enter it before JAX's first
    computation: its CPU runtime sizes its thread pool by the cores it may use when it starts,
    and entered later this only confines those threads, which gains nothing. Processes started
    inside inherit the cores (an engine taking turns with the agent shares them).

    Yields:
      The number of cores the body runs on.

    Raises:
      ValueError: `count` is negative.
    """
    if count < 0:
        raise ValueError(f"--cores must be >= 0 (0: every core), got {count}")
    if not hasattr(os, "sched_setaffinity"):
        yield os.cpu_count() or 1
        return
    allowed = os.sched_getaffinity(0)
    chosen = set(sorted(allowed)[:count]) if count else allowed
    os.sched_setaffinity(0, chosen)
    try:
        yield len(chosen)
    finally:
        os.sched_setaffinity(0, allowed)
