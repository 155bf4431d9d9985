"""The wheel `pip install` builds: the azjax package with its data, nothing beside it, and an
install that lives beside another project's top-level `envs` package. Offline: the wheel is
built without build isolation and installed with `--no-index --no-deps`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import HANG_S, REPO_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a copy of the checkout's sources (a build writes `build/` and
    `*.egg-info` beside them; the checkout gets neither)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "azjax", source / "azjax",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp), str(source)], check=True, capture_output=True,
                   timeout=HANG_S)
    (built,) = tmp.glob("azjax-*.whl")
    return built


def test_the_wheel_holds_the_azjax_package_and_its_dist_info_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    (dist_info,) = tops - {"azjax"}
    assert dist_info.startswith("azjax-") and dist_info.endswith(".dist-info")
    assert "envs" not in tops  # the games are azjax.envs
    modules = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "azjax").rglob("*.py")}
    assert modules <= set(names), sorted(modules - set(names))


def test_the_labels_models_and_pages_ship_inside_the_wheel(wheel):
    """A pip install carries the package data: the oracle files (so `--oracle` works
    anywhere), the anchor tables, the shipped models and the browser page; every file of
    those folders in the checkout."""
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"azjax/data/oracles/connect4/Test_L1_R1.jsonl",
                "azjax/data/oracles/tictactoe/positions.jsonl", "azjax/data/oracles/README.md",
                "azjax/models/connect_four/params.msgpack", "azjax/apps/static/index.html",
                "azjax/data/anchors/draughts.json", "azjax/data/anchors/draughts_openspiel.json"}
    for folder in ("data", "models", "apps/static"):
        expected |= {p.relative_to(REPO_ROOT).as_posix()
                     for p in (REPO_ROOT / "azjax" / folder).rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts}
    assert expected <= names, sorted(expected - names)


def test_azjax_installs_beside_another_top_level_envs_package(wheel, tmp_path):
    """A venv that already has a top-level `envs` (another project's) takes the wheel, and
    both import: `envs` stays the other project's, `azjax.envs` makes azjax's games. The venv
    sees this interpreter's packages (jax and the rest) and pip."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, capture_output=True, timeout=HANG_S)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True,
                          timeout=HANG_S).stdout.strip()
    (Path(site) / "envs").mkdir(parents=True)
    (Path(site) / "envs" / "__init__.py").write_text('MARK = "another project"\n')
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--ignore-installed", str(wheel)], check=True, capture_output=True,
                   timeout=HANG_S)
    check = ("import envs, azjax, azjax.envs\n"
             "assert envs.MARK == 'another project', envs.__file__\n"
             f"assert azjax.__file__.startswith({site!r}), azjax.__file__\n"
             "assert azjax.envs.make('tic_tac_toe').num_actions == 9\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no checkout on the path
    out = subprocess.run([python, "-c", check], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=HANG_S)
    assert out.returncode == 0, out.stderr[-3000:]
