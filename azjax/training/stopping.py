"""When a run stops: its budget, perfect play, or a signal, decided alike in every process.

Each process has its own clock and receives its own signals, so every decision that ends the
loop is process 0's, sent to the others (`agreed`): all of them stop after the same iteration
and save the last checkpoint together.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import numpy as np

from azjax.config import ExperimentConfig

__all__ = ["BUDGET_REASONS", "SIGNALS", "StopRequests", "agreed", "over_budget", "stop_reason"]

BUDGET_REASONS = (None, "iterations", "wall clock")  # what `over_budget` returns
SIGNALS = (None, "SIGINT", "SIGTERM")  # the signals `StopRequests` handles

T = TypeVar("T")


def stop_reason(config: ExperimentConfig, budget_spent: str | None,
                last_record: dict[str, Any], requests: StopRequests) -> str | None:
    """Whether and why the loop stops before another iteration, the same in every process.

    Args:
      config: the experiment (`budget.stop_when_perfect`).
      budget_spent: the budget's verdict (`over_budget`, agreed), reached right after the last
        iteration and again after its evaluation, not here: so the iteration the budget ends
        on is evaluated and snapshotted, however long its checkpoint then takes.
      last_record: the record of the last iteration trained ({} before the first): its
        evaluation's "eval/perfect".
      requests: the signals received (process 0's count).

    Returns:
      "iterations" or "wall clock" (the budget), "perfect play" (the last evaluation met the
      bar, with `budget.stop_when_perfect`), "SIGINT" or "SIGTERM"; None to go on.
    """
    if budget_spent is not None:
        return budget_spent
    if config.budget.stop_when_perfect and bool(last_record.get("eval/perfect", False)):
        return "perfect play"
    return agreed(requests.signal_name, SIGNALS)


def over_budget(config: ExperimentConfig, iteration: int, wall_s: float,
                next_cost_s: float = 0.0) -> str | None:
    """Why another iteration may not start, None when it may.

    Returns:
      "iterations" once `budget.max_iterations` are done; "wall clock" when `wall_s +
      next_cost_s` (the next iteration's expected cost: the last one's training and
      evaluation) reaches `budget.max_wall_s`, so the last snapshot lands inside the budget.
    """
    budget = config.budget
    if budget.max_iterations and iteration >= budget.max_iterations:
        return "iterations"
    if budget.max_wall_s and wall_s + next_cost_s >= budget.max_wall_s:
        return "wall clock"
    return None


def agreed(value: T, choices: Sequence[T]) -> T:
    """Process 0's `value` in every process; `value` is one of `choices`, sent as its index."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    index = multihost_utils.broadcast_one_to_all(np.int32(choices.index(value)))
    return choices[int(index)]


class StopRequests:
    """The first SIGINT/SIGTERM asks the loop to stop after the current iteration (it then
    checkpoints and exits normally); a second one interrupts at once."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.signal_name: str | None = None
        self._say = say
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        self._say(f"{self.signal_name}: stopping after this iteration and saving a checkpoint "
                  "(send it again to stop now)")

    def install(self) -> None:
        """Handles SIGINT and SIGTERM (only the main thread can)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle)
                              for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore(self) -> None:
        """Puts back the handlers `install` replaced."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
