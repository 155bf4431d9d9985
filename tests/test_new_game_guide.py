"""docs/new-game.md's code, run as a reader would: its example game (Nim 3-4-5) passes
`check_env` and the tests the page gives for it, plays the positions the page shows, is named by
the page's config, and its labels script writes perfect-play labels that load. So the page
cannot drift from the code."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from azjax import envs

PAGE = Path(__file__).resolve().parents[1] / "docs" / "new-game.md"
# A fenced block at the start of a line; a named one opens with `# <file name>`.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NAMED = re.compile(r"# ([\w.]+\.(?:py|yaml))\b")


def page_files() -> dict[str, str]:
    """The page's named code blocks: file name -> text."""
    files = {}
    for _, text in FENCE.findall(PAGE.read_text()):
        named = NAMED.match(text)
        if named:
            assert named.group(1) not in files, f"two blocks name {named.group(1)}"
            files[named.group(1)] = text
    return files


@pytest.fixture(scope="module")
def guide_dir(tmp_path_factory):
    """A folder holding the page's files, importable as a reader's own modules."""
    folder = tmp_path_factory.mktemp("new_game_guide")
    for name, text in page_files().items():
        (folder / name).write_text(text)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    for module in ("nim", "test_nim"):
        sys.modules.pop(module, None)


def test_the_page_has_the_game_its_tests_its_labels_and_its_config():
    assert set(page_files()) == {"nim.py", "test_nim.py", "nim_oracle.py", "nim.yaml"}


def test_the_game_passes_the_tests_the_page_gives_for_it(guide_dir):
    import test_nim

    tests = [name for name in dir(test_nim) if name.startswith("test_")]
    assert len(tests) == 3
    for name in tests:
        getattr(test_nim, name)()


def test_the_game_plays_as_the_page_says(guide_dir):
    from nim import Nim

    env = Nim()
    start = env.init(jax.random.PRNGKey(0))
    assert list(env.legal_moves(start))[:4] == ["a0", "a1", "a2", "b0"]
    assert len(env.legal_moves(start)) == 3 + 4 + 5 and env.num_symmetries == 2
    # The terminal picture the page shows, after a1 and b2.
    shown = PAGE.read_text().split("In a terminal, after `a1` and `b2`:\n\n```\n")[1]
    state = envs.play_moves(env, [env.str_to_action("a1"), env.str_to_action("b2")])
    assert env.render(state) == shown.split("\n```")[0]
    with pytest.raises(ValueError, match="'a2' is not legal here; legal moves: a0, b0, b1, c0"):
        env.parse_move(state, "a2")
    with pytest.raises(ValueError, match="a pile a-c and the stones to leave 0-4, got 'd1'"):
        env.str_to_action("d1")
    # The clicks: stone j of pile p plays "leave j", the stone's note.
    view = env.board_view(state)
    assert [c.note for c in view.cells if c.player is not None] == ["a0", "b0", "b1", "c0",
                                                                    "c1", "c2", "c3", "c4"]
    assert env.action_clicks(env.str_to_action("c3")) == ((13,),)
    assert env.supports("random_start") and not env.supports("material")
    starts = jax.vmap(env.random_start)(jax.random.split(jax.random.PRNGKey(1), 64))
    assert not np.asarray(starts.terminated).any() and np.asarray(starts.heights).max() <= 5


def test_the_config_names_the_game_beside_it(guide_dir):
    from azjax.config import load_config

    config = load_config(guide_dir / "nim.yaml")
    assert config.game == "nim:Nim" and Path(config.game_dir) == guide_dir.resolve()
    env = envs.make("nim:Nim", search_dirs=[guide_dir])
    assert type(env).__name__ == "Nim" and env.max_game_length == 15
    assert config.network.kind == "mlp" and config.selfplay.random_start_prob == 0.5


def test_the_labels_script_writes_perfect_play_labels_that_load(guide_dir, monkeypatch):
    from nim import Nim

    from azjax.evaluation.oracle import load_oracle

    monkeypatch.chdir(guide_dir)
    runpy.run_path(str(guide_dir / "nim_oracle.py"))
    lines = (guide_dir / "nim_oracle" / "positions.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 5 * 6 - 1  # every position but the finished one
    assert lines[0] == '{"moves": [0, 5, 11], "preserving": [10]}'  # the page's example line
    assert lines[0] in PAGE.read_text()
    sets = load_oracle(Nim(), guide_dir / "nim_oracle")
    assert list(sets) == ["positions"] and len(sets["positions"].moves) == len(lines)
    # The initial position: a1 alone keeps the first player's win.
    assert '{"moves": [], "preserving": [1]}' in lines
