"""What only process 0 of a run writes: printed lines, config.yaml, snapshots, curves.png and
the end record of metrics.jsonl.

Every process runs the same loop over its own shards; the others hold a `MainProcess` with
`enabled=False`, where all of this does nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from azjax.config import ExperimentConfig, config_to_dict
from azjax.model_files import save_model
from azjax.training.metrics import append_line, plot_curves, write_atomic
from azjax.training.progress import print_line

__all__ = ["MainProcess"]


class MainProcess:
    """What only process 0 does: print, write config.yaml, snapshots, plots and the end record.
    Every other process runs the same loop with `enabled=False`, where these do nothing."""

    def __init__(self, run_dir: Path, *, enabled: bool):
        self.run_dir, self.enabled = run_dir, enabled
        self._plotter = _BackgroundPlotter()

    def say(self, line: str) -> None:
        """Prints `line` above the progress bar (flushed: a log file shows it at once)."""
        if self.enabled:
            print_line(line)

    def write_config(self, config: ExperimentConfig) -> None:
        """config.yaml: the config the run goes on with."""
        if self.enabled:
            write_atomic(self.run_dir / "config.yaml",
                         yaml.safe_dump(config_to_dict(config), sort_keys=False))

    def snapshot(self, iteration: int, params: Any, config: ExperimentConfig,
                 meta: dict[str, Any]) -> None:
        """snapshots/<iteration>: `params` as a self-contained model."""
        if self.enabled:
            save_model(self.run_dir / "snapshots" / str(iteration), params, config, meta)

    def plot_soon(self) -> None:
        """Redraws the curves in the background."""
        if self.enabled:
            self._plotter.submit(self.run_dir)

    def close(self) -> None:
        """Waits for a drawing under way, then draws the final curves."""
        self._plotter.close()
        if self.enabled:
            plot_curves(self.run_dir)

    def write_end(self, summary: dict[str, Any]) -> None:
        """The last line of metrics.jsonl (after its logger has closed)."""
        if self.enabled:
            append_line(self.run_dir / "metrics.jsonl", json.dumps(summary))


class _BackgroundPlotter:
    """Redraws curves.png in a worker thread (matplotlib is slow next to an iteration);
    a request made while a drawing is still running is skipped."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="azjax-plot")
        self._future = None

    def submit(self, run_dir: Path) -> None:
        if self._future is None or self._future.done():
            self._future = self._pool.submit(plot_curves, run_dir)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
