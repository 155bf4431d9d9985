"""The README and docs/ link only to files and headings that exist, and name only commands,
configs and paths of this checkout."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Paths in backticks that look like files of this repository (a folder of it, then a name).
REPO_PATH = re.compile(r"`((?:azjax|envs|experiments|benchmarks|tools|examples|tests|docs)/"
                       r"[\w./-]+\.(?:py|yaml|md|png|ipynb|json|jsonl))`")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(line.lstrip("#")) for line in page.read_text().splitlines()
            if line.startswith("#")}


def _tracked() -> set[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return set(out.splitlines())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        heading_missing = (linked.exists() and bool(anchor) and linked.suffix == ".md"
                           and anchor not in _anchors(linked))
        if not linked.exists() or heading_missing:
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_named_repository_files_exist(page):
    tracked = _tracked()
    missing = sorted({path for path in REPO_PATH.findall(page.read_text())
                      if path not in tracked and not (REPO_ROOT / path).exists()})
    assert not missing, f"{page.name} names files that are not in the repository: {missing}"
