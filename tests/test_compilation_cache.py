"""Where compiled programs are kept: the CLI's cache folder, and the suite's, the checkout's
`.jax_cache/`, for the tests and for every `azjax` command they run, in this process or in a
subprocess (never the home directory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
from conftest import HANG_S, JAX_CACHE
from typer.testing import CliRunner

from azjax.apps.cli import _cache_directory, app


def test_the_cli_caches_where_azjax_compilation_cache_says_else_where_jax_or_home_says():
    assert _cache_directory({}) == str(Path.home() / ".cache" / "azjax" / "jax")
    assert _cache_directory({"JAX_COMPILATION_CACHE_DIR": "/j"}) is None  # JAX's own
    assert _cache_directory({"AZJAX_COMPILATION_CACHE": "/a",
                             "JAX_COMPILATION_CACHE_DIR": "/j"}) == "/a"
    assert _cache_directory({"AZJAX_COMPILATION_CACHE": ""}) == ""  # no cache


def test_commands_the_suite_runs_cache_in_the_checkout(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path / "no_run")])
    assert result.exit_code != 0  # the command failed, after the CLI set its cache up
    assert jax.config.jax_compilation_cache_dir == str(JAX_CACHE)
    # a subprocess inherits the setting
    code = "import os; from azjax.apps.cli import _cache_directory as d; print(d(os.environ))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=HANG_S)
    assert out.stdout.strip() == str(JAX_CACHE)
