"""What `azjax train` shows while it runs: a progress bar toward the budget on a terminal, else
a plain line (iteration, wall clock, ETA, positions/s, loss) every few seconds.

Lines printed beside the bar go through `print_line`, so they land above it.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm.auto import tqdm

from azjax.config import ExperimentConfig
from azjax.evaluation.measure import PROGRESS_LINE_EVERY_S, shows_a_bar

__all__ = ["Progress", "advance", "print_line", "progress_bar", "progress_line"]


def print_line(line: str) -> None:
    """Prints `line` above any progress bar, flushed: a log file shows it at once."""
    tqdm.write(line)
    sys.stdout.flush()


class Progress:
    """The training's progress: a tqdm bar on a terminal, else a plain line every
    `PROGRESS_LINE_EVERY_S` seconds and at the end."""

    def __init__(self, config: ExperimentConfig, iteration: int, wall_s: float, *,
                 enabled: bool, line_every_s: float = PROGRESS_LINE_EVERY_S):
        on_terminal = shows_a_bar(sys.stderr)  # where tqdm draws
        self._config = config
        self._lines = enabled and not on_terminal
        self._start = (iteration, wall_s)
        self._line_every_s = line_every_s
        self._last_line_at: float | None = None
        self._unprinted: dict[str, Any] | None = None
        self._bar = progress_bar(config, iteration, wall_s, enabled=enabled and on_terminal,
                                 desc=f"train {config.game}")

    def advance(self, record: dict[str, Any]) -> None:
        """Shows iteration `record` (its positions/s, loss and wall_s)."""
        self._bar.set_postfix(pos_s=f"{record['positions_per_s']:.0f}",
                              loss=f"{record.get('loss', float('nan')):.3f}",
                              wall=f"{record['wall_s']:.0f}s")
        advance(self._bar, record["wall_s"] if _bar_counts_wall(self._config)
                else record["iteration"])
        if self._lines:
            self._unprinted = record
            now = time.monotonic()
            if self._last_line_at is None or now - self._last_line_at >= self._line_every_s:
                self._print_line(now)

    def _print_line(self, now: float, *, last: bool = False) -> None:
        print_line(progress_line(self._config, self._unprinted,
                                 None if last else self._start))
        self._last_line_at, self._unprinted = now, None

    def close(self) -> None:
        """Closes the bar, or prints the last iteration's line if it is still unprinted."""
        self._bar.close()
        if self._unprinted is not None:
            self._print_line(time.monotonic(), last=True)


def _bar_counts_wall(config: ExperimentConfig) -> bool:
    return not config.budget.max_iterations and bool(config.budget.max_wall_s)


def progress_bar(config: ExperimentConfig, iteration: int, wall: float, *, enabled: bool,
                 desc: str, file: Any = None) -> tqdm:
    """The training bar: it counts toward the budget, wall seconds (with an ETA) when only
    `budget.max_wall_s` caps the run, else iterations."""
    by_wall = _bar_counts_wall(config)
    wall_format = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
                   "[{elapsed}<{remaining}{postfix}]")
    return tqdm(total=config.budget.max_wall_s if by_wall else (config.budget.max_iterations
                                                                or None),
                initial=min(round(wall), config.budget.max_wall_s) if by_wall else iteration,
                unit="s" if by_wall else "it", disable=not enabled, desc=desc,
                dynamic_ncols=True, file=file, bar_format=wall_format if by_wall else None)


def advance(bar: tqdm, count: float) -> None:
    """Moves the bar to `count`, held at its total: tqdm drops a total that `n` overshoots,
    and the wall-seconds format cannot print a missing total (the last iteration ends past
    the budget)."""
    bar.update((min(count, bar.total) if bar.total else count) - bar.n)


def progress_line(config: ExperimentConfig, record: dict[str, Any],
                  start: tuple[int, float] | None) -> str:
    """Iteration `record`'s progress as one plain line (rate, ETA, loss), in place of the bar
    off a terminal; `start` is (iteration, wall_s) where this segment of the run began, None
    for the segment's last line (no ETA: the run is ending)."""
    budget = config.budget
    eta = _eta_s(config, record, start) if start is not None else None
    return (f"train {config.game}: iteration {record['iteration']}"
            + (f"/{budget.max_iterations}" if budget.max_iterations else "")
            + f", wall {_duration(record['wall_s'])}"
            + (f" of {_duration(budget.max_wall_s)}" if budget.max_wall_s else "")
            + (f", ETA {_duration(eta)}" if eta is not None else "")
            + f", {record['positions_per_s']:,.0f} positions/s, "
            f"loss {record.get('loss', float('nan')):.3f}")


def _duration(seconds: float) -> str:
    """`seconds` as `1h02m`, `3m05s` or `42s`."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _eta_s(config: ExperimentConfig, record: dict[str, Any], start: tuple[int, float]
           ) -> float | None:
    """Seconds of `wall_s` left until the budget is spent, at this segment's pace so far;
    None before the pace is known."""
    budget = config.budget
    done, spent = record["iteration"] - start[0], record["wall_s"] - start[1]
    left = []
    if budget.max_wall_s:
        left.append(budget.max_wall_s - record["wall_s"])
    if budget.max_iterations and done > 0 and spent > 0:
        left.append((budget.max_iterations - record["iteration"]) * spent / done)
    return min(left) if left else None
