"""Run logging: metrics.jsonl, TensorBoard event files, and a PNG of the learning curves.

Writes to metrics.jsonl are whole or nothing: a record is appended in full or not at all (a
failed write, on a full disk, truncates the file back), and the file is rewritten through a
temporary file and a rename, which leaves no temporary file behind when it fails. Every write
happens in the calling thread, so a full or read-only disk raises its OSError there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "append_line", "machine_description", "plot_curves",
           "read_metrics", "write_atomic"]

_CURVES = (  # (title, metric keys) per panel of curves.png
    ("loss", ("loss/value", "loss/policy", "loss/material")),  # material: with its head
    ("oracle error (%)", ("eval/oracle/raw_error", "eval/oracle/search_error")),
    ("arena score", None),  # every opponent the run met: `_arena_keys`
    ("self-play results", ("selfplay/first_player_win_rate", "selfplay/draw_rate")),
)


def machine_description() -> str:
    """`<CPU model>, <n> cores, jax <version> (<backend>)`, for model cards and benchmarks;
    on an accelerator, `(gpu: <n> x <device kind>)` names it."""
    import os
    import platform

    import jax

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    backend = jax.default_backend()
    if backend != "cpu":
        devices = jax.devices()
        backend = f"{backend}: {len(devices)} x {devices[0].device_kind}"
    return f"{cpu}, {os.cpu_count()} cores, jax {jax.__version__} ({backend})"


def run_game(run_dir: str | Path) -> str:
    """The game id a run dir's `config.yaml` names ("" when there is none)."""
    import yaml

    config = Path(run_dir) / "config.yaml"
    return (yaml.safe_load(config.read_text()) or {}).get("game", "") if config.is_file() else ""


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl, in order ([] without the file); a torn last line (a
    process killed mid-write) and what follows it are left out."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line from a killed process
    return records


def append_line(path: str | Path, line: str) -> None:
    """Appends `line` and a newline to `path` whole or not at all.

    Raises:
      OSError: the write failed (a full or read-only disk); the file is as it was.
    """
    data = memoryview((line + "\n").encode())
    with open(path, "ab", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        try:
            while data:
                written = _write(file, data)
                if not written:
                    raise OSError(errno.EIO, "the write stopped", str(path))
                data = data[written:]
        except BaseException:  # a full disk, or an interrupt mid-line: no partial record
            with contextlib.suppress(OSError):
                file.truncate(size)
            raise


def _write(file: Any, data: memoryview) -> int:
    """Writes what it can of `data` to the unbuffered `file`; the number of bytes written."""
    return file.write(data) or 0


def write_atomic(path: str | Path, text: str) -> None:
    """Replaces `path` by a file holding `text`, through `<path>.tmp` and a rename: a reader or
    a killed process sees the old file or the new one, never a part.

    Raises:
      OSError: the write failed (a full or read-only disk), naming `path`; `path` is as it
        was and no `<path>.tmp` is left.
    """
    path = Path(path)
    scratch = path.with_name(path.name + ".tmp")
    try:
        scratch.write_text(text)
        os.replace(scratch, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            scratch.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.strerror:  # named by the file it replaces
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise


class MetricsLogger:
    """Appends records to `run_dir/metrics.jsonl` and mirrors scalars to TensorBoard.

    Args:
      run_dir: the run dir.
      resume_iteration: None for a fresh run (a fresh file); else the iteration resumed from,
        whose later records are dropped (that work is redone).
      enabled: False: log nothing (a process other than 0).
    """

    def __init__(self, run_dir: str | Path, *, resume_iteration: int | None = None,
                 enabled: bool = True):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self.enabled = enabled
        self._writer = None
        if not enabled:
            return
        # A fresh run starts a fresh file (`run.open_run` has checked there is nothing to keep);
        # a resumed one drops the records of work after the restored checkpoint: it is redone.
        kept = [] if resume_iteration is None else [
            r for r in read_metrics(self.path) if r.get("iteration", 0) <= resume_iteration]
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        self._writer = _EventFile(self.run_dir / "tensorboard")

    def log(self, record: dict[str, Any]) -> None:
        """Appends `record` (numpy values made plain) as one JSON line, whole or not at all;
        its finite numbers also go to TensorBoard at step `record["iteration"]`.

        Raises:
          OSError: a write failed (a full or read-only disk); metrics.jsonl is as it was.
        """
        if not self.enabled:
            return
        clean = {k: _plain(v) for k, v in record.items()}
        # TensorBoard first: a record in metrics.jsonl is one logged in full.
        self._writer.write(int(clean.get("iteration", 0)), {
            key: value for key, value in clean.items()
            if key != "iteration" and isinstance(value, (int, float)) and math.isfinite(value)})
        append_line(self.path, json.dumps(clean))

    def close(self) -> None:
        """Closes the TensorBoard event file."""
        if self._writer is not None:
            self._writer.close()


class _EventFile:
    """A TensorBoard event file written in the calling thread (tensorboardX's `SummaryWriter`
    writes from a worker thread, whose errors on a full disk would print a traceback and then
    block every later write)."""

    def __init__(self, directory: Path):
        from tensorboardX.event_file_writer import EventsWriter

        directory.mkdir(parents=True, exist_ok=True)
        self._events = EventsWriter(str(directory / "events"))

    def write(self, step: int, scalars: dict[str, float]) -> None:
        """Appends `scalars` at `step` and flushes them to disk."""
        from tensorboardX.proto import event_pb2
        from tensorboardX.summary import scalar

        for key, value in scalars.items():
            self._events.write_event(event_pb2.Event(
                wall_time=time.time(), step=step, summary=scalar(key, value)))
        self._events.flush()

    def close(self) -> None:
        """Closes the file."""
        self._events.close()


def _plain(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.ndarray | np.generic):
            value = value.item() if value.size == 1 else value.tolist()
    except ImportError:  # pragma: no cover
        pass
    return value


def _arena_keys(records: list[dict[str, Any]]) -> list[str]:
    """The arena score keys in the records (`eval/vs_<opponent>/score`), first seen first."""
    keys: dict[str, None] = {}
    for record in records:
        keys.update((k, None) for k in record if k.startswith("eval/vs_") and k.endswith("/score"))
    return list(keys)


def plot_curves(run_dir: str | Path) -> Path | None:
    """Draws curves.png (loss, oracle error, arena scores, self-play results) from
    metrics.jsonl against wall_s, and oracle.png for games scored on several oracle sets.

    Returns:
      curves.png's path, or None when no record has a `wall_s` yet.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = [r for r in read_metrics(run_dir / "metrics.jsonl") if "wall_s" in r]
    if not records:
        return None
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (title, keys) in zip(axes.flat, _CURVES, strict=True):
        for key in keys if keys is not None else _arena_keys(records):
            points = _points(records, key)
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o" if len(points) < 30 else None, ms=3,
                        label=key.split("/", 1)[1])
        if title == "loss":
            _plot_learning_rate(ax, records)
        ax.set_title(title)
        ax.set_xlabel("wall_s")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured in this run", ha="center", va="center",
                    transform=ax.transAxes, color="gray")
    fig.suptitle(f"azjax run: {run_dir.name}")
    fig.tight_layout()
    out = run_dir / "curves.png"
    _save_figure(fig, out)
    plt.close(fig)
    _plot_oracle_sets(run_dir, records)
    return out


def _save_figure(fig: Any, out: Path) -> None:
    """Writes `fig` to `out` as a PNG through a temporary file and a rename (`write_atomic`)."""
    scratch = out.with_name(out.name + ".tmp")
    try:
        fig.savefig(scratch, dpi=90, format="png")
        os.replace(scratch, out)
    except BaseException:
        with contextlib.suppress(OSError):
            scratch.unlink(missing_ok=True)
        raise


def _points(records: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(wall_s, value) of each record with a number under `key`."""
    return [(r["wall_s"], r[key]) for r in records if isinstance(r.get(key), (int, float))]


def _plot_learning_rate(ax: Any, records: list[dict[str, Any]]) -> None:
    """The learning rate on a log axis at the right of `ax` (runs that record it)."""
    points = [(x, y) for x, y in _points(records, "train/learning_rate") if y > 0]  # log axis
    if not points:
        return
    right = ax.twinx()
    xs, ys = zip(*points, strict=True)
    right.plot(xs, ys, color="gray", linestyle="--", linewidth=1)
    right.set_yscale("log")
    right.set_ylabel("learning rate (dashed)", color="gray", fontsize=8)
    right.tick_params(axis="y", colors="gray", labelsize=7)


def _plot_oracle_sets(run_dir: Path, records: list[dict[str, Any]]) -> Path | None:
    """oracle.png: one panel per oracle set (raw network dashed, search solid) against wall_s,
    for games scored on several sets (connect four: Pascal Pons's six)."""
    import matplotlib.pyplot as plt

    from azjax.evaluation.oracle import in_set_order, set_titles

    names = sorted({k.split("/")[3] for r in records for k in r
                    if k.startswith("eval/oracle/set/")})
    if not names:
        return None
    game = run_game(run_dir)
    titles = set_titles(game)
    names = in_set_order(game, names)
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.2 * rows), squeeze=False,
                             sharex=True)
    for ax, name in zip(axes.flat, names, strict=False):
        for kind, style in (("raw", "--"), ("search", "-")):
            key = f"eval/oracle/set/{name}/{kind}"
            points = [(r["wall_s"], r[key]) for r in records if key in r]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, marker="o", ms=2, label=kind)
        ax.set_title(titles.get(name, name) + (f" ({name})" if name in titles else ""),
                     fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("wall_s")
    for ax in axes[:, 0]:
        ax.set_ylabel("error (%)")
    fig.suptitle(f"azjax run {run_dir.name}: oracle error per set (% of positions)")
    fig.tight_layout()
    out = run_dir / "oracle.png"
    _save_figure(fig, out)
    plt.close(fig)
    return out
