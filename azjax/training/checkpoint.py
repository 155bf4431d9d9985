"""Run checkpoints (orbax): the whole training state, for resuming a run.

Layout of a run dir::

    run_dir/checkpoints/<iteration>/   orbax: the whole RunState + meta (config, wall_s, ...),
                                       and checksums.json (sha256 of every file, written last)
    run_dir/snapshots/<iteration>/     params.msgpack + model.json, one per evaluation (and one
                                       unevaluated where a signal stopped the run), kept
    run_dir/metrics.jsonl, events.*, curves.png, config.yaml

Checkpoints are written synchronously and atomically (orbax writes a temporary directory and
renames it), so a process killed at any moment leaves the previous checkpoints intact. Once
orbax has finished, `checksums.json` (`azjax.model_files.write_checksums`) records every file's
sha256; restoring checks them first, so a damaged file is refused by name rather than restored
as wrong numbers, and a resume goes back to the newest intact checkpoint (`newest_intact`),
moving and deleting nothing. A checkpoint without the file (written before checkpoints carried
one, or killed between orbax's rename and the checksums) restores unchecked. Snapshots and
exported models are model files (`azjax.model_files`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from azjax.model_files import CheckpointError, error_line, verify_checksums, write_checksums

__all__ = ["RunCheckpointer"]


class RunCheckpointer:
    """Saves and restores whole-run checkpoints under `run_dir/checkpoints`.

    Args:
      run_dir: the run dir.
      keep: how many of the newest checkpoints are kept.
      read_only: only read (nothing created, no scratch directories cleaned up).
      damaged: iterations whose checkpoints are known to be damaged (`newest_intact`):
        `latest_iteration` and `all_iterations` pass over them, and a `save` at one of their
        iterations replaces it.
    """

    def __init__(self, run_dir: str | Path, *, keep: int = 3, read_only: bool = False,
                 damaged: Iterable[int] = ()):
        self.directory = Path(run_dir).absolute() / "checkpoints"
        self.damaged = set(damaged)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=not read_only,
            read_only=read_only,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=not read_only,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options,
                                              item_names=("state", "meta"))

    def latest_iteration(self) -> int | None:
        """The newest checkpoint's iteration (not one known to be damaged), or None."""
        iterations = self.all_iterations()
        return iterations[-1] if iterations else None

    def all_iterations(self) -> list[int]:
        """The iterations of the checkpoints kept (not those known to be damaged), oldest
        first."""
        return sorted(i for i in self._manager.all_steps() if i not in self.damaged)

    def save(self, iteration: int, state: Any, meta: dict[str, Any]) -> None:
        """Writes checkpoint `iteration` and waits for it, then its checksums.json. A
        checkpoint already there at that iteration (one a resume passed over as damaged, or
        an abandoned branch's) is replaced.

        Args:
          iteration: the checkpoint's number.
          state: the run state (a pytree of arrays, sharded or not).
          meta: JSON-able facts a resume reads (config, wall_s, ...).
        """
        if iteration in self._manager.all_steps():
            self._manager.delete(iteration)
        self._manager.save(iteration, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)
        self._manager.wait_until_finished()
        if jax.process_index() == 0:
            write_checksums(self.directory / str(iteration))
        self.damaged.discard(iteration)

    def verify(self, iteration: int) -> None:
        """Checks checkpoint `iteration`'s files against its checksums.json (if it has one).

        Raises:
          CheckpointError: one line naming the first damaged or missing file.
        """
        verify_checksums(self.directory / str(iteration))

    def newest_intact(self) -> tuple[int, dict[str, Any], dict[int, str]]:
        """The newest checkpoint whose files verify and whose meta reads, for a resume.

        Returns:
          (its iteration, its meta, {iteration: why} for each newer one passed over, newest
          first); those are added to `damaged`. Nothing is moved or deleted.

        Raises:
          CheckpointError: no checkpoint, or none intact (one line: the newest one's damage).
        """
        passed: dict[int, str] = {}
        for iteration in sorted(self._manager.all_steps(), reverse=True):
            try:
                self.verify(iteration)
                meta = self.restore_meta(iteration)
            except CheckpointError as error:
                passed[iteration] = str(error)
                continue
            self.damaged.update(passed)
            return iteration, meta, passed
        if not passed:
            raise CheckpointError(f"{self.directory} holds no checkpoint")
        newest, *older = passed
        raise CheckpointError(passed[newest] + (
            f"; no checkpoint is intact (the older ones, {', '.join(map(str, older))}, are "
            "damaged too)" if older else ""))

    def restore_meta(self, iteration: int) -> dict[str, Any]:
        """The meta saved with checkpoint `iteration` (its files are not verified: `verify`).

        Raises:
          CheckpointError: the checkpoint is corrupt or unreadable.
        """
        try:
            restored = self._manager.restore(
                iteration, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
            return dict(restored["meta"])
        except Exception as error:  # orbax raises many types for damaged files
            raise CheckpointError(
                f"checkpoint {self.directory / str(iteration)} is corrupt or unreadable "
                f"(meta: {type(error).__name__}: {error_line(error)})") from None

    def restore_state(self, iteration: int, abstract_state: Any) -> Any:
        """The run state of checkpoint `iteration`, once its files verify.

        Args:
          iteration: the checkpoint's number.
          abstract_state: the state's structure, shapes, dtypes and shardings
            (`Trainer.abstract_state`), which the restored arrays take.

        Raises:
          CheckpointError: a file is damaged (naming it), or the checkpoint is corrupt or does
            not match `abstract_state` (one line).
        """
        self.verify(iteration)
        try:
            restored = self._manager.restore(
                iteration, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
            return restored["state"]
        except Exception as error:
            raise CheckpointError(
                f"checkpoint {self.directory / str(iteration)} is corrupt or does not match "
                f"this run's state ({type(error).__name__}: {error_line(error)})") from None

    def close(self) -> None:
        """Releases orbax's manager."""
        self._manager.close()
