"""Shared test set-up: JAX's persistent compilation cache, so reruns skip most compile time."""

from __future__ import annotations

import os
from pathlib import Path

import jax

REPO_ROOT = Path(__file__).resolve().parents[1]
ORACLES = Path(os.environ.get("AZJAX_ORACLES", REPO_ROOT.parent / "shared" / "oracles"))

jax.config.update("jax_compilation_cache_dir", str(REPO_ROOT / ".jax_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
