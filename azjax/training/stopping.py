"""When a run stops: its budget, perfect play, or a signal, decided alike in every process.

Each process has its own clock and receives its own signals, so every decision that ends the
loop is process 0's, sent to the others (`agreed`): all of them stop after the same iteration
and save the last checkpoint together.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import jax
import numpy as np

from azjax.config import ExperimentConfig

__all__ = ["BUDGET_REASONS", "SIGNALS", "StopNow", "StopRequests", "agreed", "over_budget",
           "stop_reason"]

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


class StopNow(KeyboardInterrupt):
    """A second Ctrl-C or SIGTERM: stop now, keeping what is trained (`StopRequests`)."""


class StopRequests:
    """Ctrl-C and SIGTERM, counted: the first asks the loop to stop after the current
    iteration (it then checkpoints and exits normally); the second stops now, losing nothing:
    the iteration in flight is finished (its compiled calls cannot be cut short), then
    `StopNow` is raised and the loop checkpoints before it ends, skipping any evaluation still
    to come; the third stops at once, with a KeyboardInterrupt, saving nothing more (the run
    then resumes from its last checkpoint).

    Where the second one raises: the loop marks the stretches it may cut short
    (`interruptible()`: evaluation and snapshots, where the run state is whole); anywhere else
    (the iteration's compiled calls, logging, checkpointing) `StopNow` waits for the loop's
    next `check()`, so the run state is never left half-updated.

    Python runs a signal handler only between bytecodes of the main thread, so a signal that
    comes during a long compiled call would wait for its end, and a second one in that window
    would be lost. Each signal is therefore also written to a pipe (`signal.set_wakeup_fd`)
    that a watcher thread reads: every signal is counted and acknowledged (`say`) the moment
    it arrives.

    Args:
      say: prints one line (from the watcher thread too).
    """

    def __init__(self, say: Callable[[str], None]) -> None:
        self.signal_name: str | None = None  # the first signal's name
        self.count = 0  # the signals received
        self._say = say
        self._previous: dict = {}
        self._lock = threading.Lock()
        self._raised = 0  # the signals whose exception has been raised (2: StopNow, 3: at once)
        self._echoes = 0  # SIGINTs the watcher itself sent (`interrupt_main` writes the pipe)
        self._interruptible = False  # inside `interruptible()`
        self._pipe: tuple[int, int] | None = None  # (read end, write end) while watching
        self._previous_wakeup = -1
        self._watcher: threading.Thread | None = None

    def install(self) -> None:
        """Handles SIGINT and SIGTERM (only the main thread can) and starts the watcher."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous = {sig: signal.signal(sig, self._handle)
                          for sig in (signal.SIGINT, signal.SIGTERM)}
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        self._previous_wakeup = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        self._pipe = (read_end, write_end)
        self._watcher = threading.Thread(target=self._watch, args=(read_end,), daemon=True,
                                         name="azjax-signals")
        self._watcher.start()

    def restore(self) -> None:
        """Puts back the handlers and the wakeup fd `install` replaced; ends the watcher."""
        if self._pipe is not None:
            (read_end, write_end), self._pipe = self._pipe, None  # `_handle` counts from here
            signal.set_wakeup_fd(self._previous_wakeup)
            os.close(write_end)  # the watcher reads the end of the pipe and returns
            self._watcher.join()
            os.close(read_end)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """A stretch the second signal may cut short at once (the run state is whole in it)."""
        self._interruptible = True
        try:
            self.check()  # a second signal that came just before
            yield
        finally:
            self._interruptible = False

    def check(self) -> None:
        """Raises `StopNow` if a second signal came and has not been raised yet."""
        if self.count >= 2 and self._raised < 2:
            self._raised = 2
            raise StopNow(f"a second {self.signal_name} stopped the run")

    def _watch(self, read_end: int) -> None:
        """The watcher thread: counts each SIGINT and SIGTERM as the pipe receives it."""
        while data := os.read(read_end, 64):
            for number in data:
                if number == signal.SIGINT and self._echoes:
                    self._echoes -= 1  # not a new signal: the one `_received` sent
                elif number in (signal.SIGINT, signal.SIGTERM):
                    self._received(signal.Signals(number).name, from_watcher=True)

    def _handle(self, signum, frame) -> None:
        """The Python handler (main thread): raises the third signal's KeyboardInterrupt, and
        the second's `StopNow` inside `interruptible()`. Without the watcher (while `restore`
        ends it) it counts the signals itself."""
        if self._pipe is None:
            self._received(signal.Signals(signum).name, from_watcher=False)
        if self.count >= 3 and self._raised < 3:
            self._raised = 3
            raise KeyboardInterrupt(f"a third {self.signal_name} stopped the run at once")
        if self._interruptible:
            self.check()

    def _received(self, name: str, *, from_watcher: bool) -> None:
        """Counts a signal and says what it does (the watcher then has the main thread run its
        handler, which raises as soon as the main thread runs Python, where it may)."""
        with self._lock:
            self.count += 1
            count = self.count
            if count == 1:
                self.signal_name = name
        if count == 1:
            self._say(f"{name}: stopping after this iteration and saving a checkpoint "
                      "(send it again to stop now)")
        elif count == 2:
            self._say(f"{name} again: stopping now, without evaluating; what is trained, the "
                      "iteration in flight included, is checkpointed first (send it a third "
                      "time to stop without saving)")
        elif count == 3:
            self._say(f"{name} a third time: stopping at once; the run resumes from its last "
                      "checkpoint with the same command")
        if count in (2, 3) and from_watcher:  # runs `_handle` in the main thread
            self._echoes += 1
            _thread.interrupt_main(signal.SIGINT)
