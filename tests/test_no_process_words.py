"""The repository speaks of the product, not of how it was made.

Every tracked text file (README, docs and run records, recipes, code, model cards, tests,
benchmarks, tools, examples) is read for words that belong to a development log: the word for
a working sitting, and references to numbered tickets. pytest's fixture scope of that name is
the one use allowed. Binary files (images, parameters) are skipped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Built from pieces so that this file does not match itself.
_SITTING = "ses" + "sion"
# @pytest.fixture(scope=...), and onnxruntime's class names (its API, not our process).
_ALLOWED = ('scope="' + _SITTING + '"', "Inference" + _SITTING.title(),
            _SITTING.title() + "Options")
_PATTERNS = (
    re.compile(_SITTING, re.IGNORECASE),
    re.compile(r"\b" + "iss" + r"ues?[\s#_-]*\d+", re.IGNORECASE),
)


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (or one deleted but still tracked)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _hits(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line with a process word, the allowed uses aside."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for allowed in _ALLOWED:
            line = line.replace(allowed, "")
        if any(pattern.search(line) for pattern in _PATTERNS):
            found.append((number, line.strip()[:120]))
    return found


def test_the_patterns_catch_what_they_should_and_allow_the_fixture_scope():
    sitting = _SITTING.capitalize()
    ticket = "Iss" + "ue"
    assert _hits(f"see {sitting} 24\n{ticket} #62 says\nfixed in {ticket.lower()}s 3 and 4\n"
                 f"{ticket.lower()}-7") == [
        (1, f"see {sitting} 24"), (2, f"{ticket} #62 says"),
        (3, f"fixed in {ticket.lower()}s 3 and 4"), (4, f"{ticket.lower()}-7")]
    assert _hits(f'@pytest.fixture({_ALLOWED[0]})\nno open {ticket.lower()}s here') == []


def test_no_tracked_file_uses_development_process_words():
    hits = []
    for path in _tracked_files():
        text = _text(path)
        if text is None:
            continue
        lowered = text.lower()
        if _SITTING not in lowered and "iss" + "ue" not in lowered:
            continue  # the common case, without splitting the file into lines
        hits += [f"{path.relative_to(ROOT)}:{number}: {line}" for number, line in _hits(text)]
    assert not hits, f"{len(hits)} lines speak of the development process:\n" + "\n".join(hits)
