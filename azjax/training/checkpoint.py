"""Run checkpoints (orbax): the whole training state, for resuming a run.

Layout of a run dir::

    run_dir/checkpoints/<iteration>/   orbax: the whole RunState + meta (config, wall_s, ...)
    run_dir/snapshots/<iteration>/     params.msgpack + model.json, one per evaluation (and one
                                       unevaluated where a signal stopped the run), kept
    run_dir/metrics.jsonl, events.*, curves.png, config.yaml

Checkpoints are written synchronously and atomically (orbax writes a temporary directory and
renames it), so a process killed at any moment leaves the previous checkpoints intact. Snapshots
and exported models are model files (`azjax.model_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp

from azjax.model_files import CheckpointError

__all__ = ["RunCheckpointer"]

class RunCheckpointer:
    """Saves and restores whole-run checkpoints under `run_dir/checkpoints`.

    Args:
      run_dir: the run dir.
      keep: how many of the newest checkpoints are kept.
      read_only: only read (nothing created, no scratch directories cleaned up).
    """

    def __init__(self, run_dir: str | Path, *, keep: int = 3, read_only: bool = False):
        self.directory = Path(run_dir).absolute() / "checkpoints"
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
        """The newest checkpoint's iteration, or None without one."""
        return self._manager.latest_step()

    def all_iterations(self) -> list[int]:
        """The iterations of the checkpoints kept, oldest first."""
        return list(self._manager.all_steps())

    def save(self, iteration: int, state: Any, meta: dict[str, Any]) -> None:
        """Writes checkpoint `iteration` (replacing one of that iteration) and waits for it.

        Args:
          iteration: the checkpoint's number.
          state: the run state (a pytree of arrays, sharded or not).
          meta: JSON-able facts a resume reads (config, wall_s, ...).
        """
        self._manager.save(iteration, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)
        self._manager.wait_until_finished()

    def restore_meta(self, iteration: int) -> dict[str, Any]:
        """The meta saved with checkpoint `iteration`.

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
                f"(meta: {type(error).__name__}: {error}){self._fallback_hint(iteration)}"
            ) from None

    def restore_state(self, iteration: int, abstract_state: Any) -> Any:
        """The run state of checkpoint `iteration`.

        Args:
          iteration: the checkpoint's number.
          abstract_state: the state's structure, shapes, dtypes and shardings
            (`Trainer.abstract_state`), which the restored arrays take.

        Raises:
          CheckpointError: the checkpoint is corrupt or does not match `abstract_state`.
        """
        try:
            restored = self._manager.restore(
                iteration, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
            return restored["state"]
        except Exception as error:
            raise CheckpointError(
                f"checkpoint {self.directory / str(iteration)} is corrupt or does not match "
                f"this run's state ({type(error).__name__}: {str(error)[:300]})"
                f"{self._fallback_hint(iteration)}") from None

    def _fallback_hint(self, iteration: int) -> str:
        """How to resume from an older checkpoint, when one is kept (nothing is deleted)."""
        older = [i for i in self.all_iterations() if i < iteration]
        if not older:
            return ""
        return (f". Older checkpoints: {', '.join(map(str, older))}; to resume from "
                f"{older[-1]}, move {self.directory / str(iteration)} out of checkpoints/")

    def close(self) -> None:
        """Releases orbax's manager."""
        self._manager.close()
