"""examples/tour.ipynb runs top to bottom, headless, in a fresh kernel (nbclient)."""

from __future__ import annotations

import os

import nbformat
from conftest import REPO_ROOT
from nbclient import NotebookClient

NOTEBOOK = REPO_ROOT / "examples" / "tour.ipynb"


def test_tour_notebook_runs_top_to_bottom(monkeypatch):
    # The kernel inherits the environment: it imports this checkout's azjax and shares the
    # tests' compilation cache.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(REPO_ROOT / ".jax_cache"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel draws inline
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "value for X:" in text and "visit counts" in text and "64 games: X won" in text
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
