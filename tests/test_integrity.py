"""Damage is refused, not loaded: every model and checkpoint carries checksums.json, written
after its files and checked on load, so one flipped bit in params, model.json or a checkpoint's
data is refused in one line naming the file; a resume passes over a damaged newest checkpoint
to the newest intact one, says so, and moves and deletes nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import jax
import pytest
from conftest import TINY_RUN_CONFIG
from typer.testing import CliRunner

from azjax import envs
from azjax.apps.cli import app
from azjax.config import BudgetConfig, config_from_dict
from azjax.core.network import init_network
from azjax.model_files import (
    CHECKSUMS_FILE,
    CheckpointError,
    load_model,
    save_model,
    verify_checksums,
    write_checksums,
)
from azjax.training.checkpoint import RunCheckpointer
from azjax.training.loop import train
from azjax.training.run_dir import open_run

RUNNER = CliRunner()


def _flip(path: Path, offset: int) -> None:
    """Flips the lowest bit of the byte at `offset` (negative: from the end)."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode() + file.read_bytes())
    return digest.hexdigest()


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
def model(tmp_path):
    config = config_from_dict({"game": "tic_tac_toe", "network": {"kind": "mlp",
                                                                  "hidden": [8]}})
    env = envs.make(config.game)
    params = init_network(config.network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(0))["params"]
    return save_model(tmp_path / "model", params, config, {"iteration": 1},
                      text_files={"MODEL_CARD.md": "# a card\n"})


def test_a_model_lists_every_file_in_its_checksums(model):
    data = json.loads((model / CHECKSUMS_FILE).read_text())
    assert data["algorithm"] == "sha256" and data["format_version"] == 1
    assert sorted(data["files"]) == ["MODEL_CARD.md", "model.json", "params.msgpack"]
    assert data["files"]["params.msgpack"] == hashlib.sha256(
        (model / "params.msgpack").read_bytes()).hexdigest()
    assert verify_checksums(model)


@pytest.mark.parametrize(("name", "offset"), [
    ("params.msgpack", -1),  # the last weight's last byte: still a valid msgpack
    ("model.json", 20),
    ("MODEL_CARD.md", 2),
])
def test_a_flipped_bit_in_a_model_is_refused_naming_the_file(model, name, offset):
    _flip(model / name, offset)
    with pytest.raises(CheckpointError) as error:
        load_model(model)
    assert _one_line(str(error.value)) == (
        f"{model / name} is damaged: its sha256 differs from the one in "
        f"{model / CHECKSUMS_FILE}")
    out = RUNNER.invoke(app, ["eval", str(model), "--against", "random"])
    assert out.exit_code == 2 and f"{model / name} is damaged" in _one_line(out.output)
    if name == "params.msgpack":  # without its checksums, the damage would load unnoticed
        (model / CHECKSUMS_FILE).unlink()
        load_model(model)


def test_a_missing_file_or_a_bad_checksums_file_is_refused(model):
    (model / "MODEL_CARD.md").unlink()
    with pytest.raises(CheckpointError, match=re.escape(f"{model / 'MODEL_CARD.md'} is missing")):
        load_model(model)
    for text in ("{not json", json.dumps({"algorithm": "sha256",
                                          "files": {"../elsewhere": "00"}})):
        (model / CHECKSUMS_FILE).write_text(text)
        with pytest.raises(CheckpointError,
                           match=re.escape(f"{model / CHECKSUMS_FILE} is damaged")):
            load_model(model)


def test_a_model_written_before_checksums_loads_unchecked(model):
    (model / CHECKSUMS_FILE).unlink()
    assert not verify_checksums(model)
    params, config, _ = load_model(model)
    assert config.game == "tic_tac_toe" and params


def _draughts_model(directory: Path, game: str) -> Path:
    config = config_from_dict({"game": game, "network": {"kind": "mlp", "hidden": [8]}})
    env = envs.make(config.game)
    params = init_network(config.network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(0))["params"]
    return save_model(directory, params, config)


def _rewrite_meta(model: Path, **changes) -> None:
    meta = json.loads((model / "model.json").read_text())
    meta.update(changes)
    meta = {k: v for k, v in meta.items() if v is not None}
    (model / "model.json").write_text(json.dumps(meta))
    write_checksums(model)


def test_a_model_records_its_rules_and_is_refused_under_others(tmp_path, model):
    openspiel = _draughts_model(tmp_path / "openspiel", "draughts(draw_rule='openspiel')")
    assert json.loads((openspiel / "model.json").read_text())["rules"] == "openspiel"
    assert load_model(openspiel)[1].game == "draughts(draw_rule='openspiel')"
    laws = _draughts_model(tmp_path / "laws", "draughts")
    assert json.loads((laws / "model.json").read_text())["rules"] == "laws"
    # Its spec now plays other rules than those it records (e.g. a changed default).
    _rewrite_meta(laws, rules="openspiel")
    with pytest.raises(CheckpointError) as error:
        load_model(laws)
    assert _one_line(str(error.value)).startswith(
        f"{laws} was trained under the rules 'openspiel', but its game 'draughts' plays the "
        f"rules 'laws' here")
    # A model that records no rules, of a game with variants: which it learnt is unknown.
    _rewrite_meta(laws, rules=None)
    with pytest.raises(CheckpointError, match="records no rules"):
        load_model(laws)
    out = RUNNER.invoke(app, ["eval", str(laws), "--against", "random"])
    assert out.exit_code == 2 and "records no rules" in _one_line(out.output)
    # A game with one set of rules records "" and loads with or without it.
    assert json.loads((model / "model.json").read_text())["rules"] == ""
    _rewrite_meta(model, rules=None)
    assert load_model(model)[1].game == "tic_tac_toe"


# ---- checkpoints ------------------------------------------------------------------------------


def _data_file(step: Path) -> Path:
    """The largest file of a checkpoint's state: an array data chunk."""
    return max((p for p in (step / "state").rglob("*") if p.is_file()),
               key=lambda p: p.stat().st_size)


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    """A copy of the tiny 4-iteration run (checkpoints 2 and 4)."""
    run_dir, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def test_every_checkpoint_carries_checksums_of_all_its_files(run_copy):
    for step in (run_copy / "checkpoints" / "2", run_copy / "checkpoints" / "4"):
        listed = json.loads((step / CHECKSUMS_FILE).read_text())["files"]
        files = {p.relative_to(step).as_posix() for p in step.rglob("*") if p.is_file()}
        assert set(listed) == files - {CHECKSUMS_FILE}
        assert verify_checksums(step)


def test_a_flipped_bit_in_checkpoint_data_is_refused_naming_the_file(run_copy):
    damaged = _data_file(run_copy / "checkpoints" / "4")
    _flip(damaged, -1)
    reader = RunCheckpointer(run_copy, read_only=True)
    try:
        with pytest.raises(CheckpointError) as error:
            reader.restore_state(4, None)
        assert _one_line(str(error.value)) == (
            f"{damaged} is damaged: its sha256 differs from the one in "
            f"{run_copy / 'checkpoints' / '4' / CHECKSUMS_FILE}")
    finally:
        reader.close()


def test_a_damaged_newest_checkpoint_is_passed_over_and_nothing_is_moved(run_copy, capsys):
    damaged = _data_file(run_copy / "checkpoints" / "4")
    _flip(damaged, -1)
    before = _digest(run_copy)
    config, resume = open_run(run_copy, TINY_RUN_CONFIG)
    assert resume["iteration"] == 2 and list(resume["damaged"]) == [4]
    assert _digest(run_copy) == before  # nothing moved, deleted or written

    result = train(TINY_RUN_CONFIG, run_copy, show_progress=False)
    line = (f"checkpoint 4: {damaged} is damaged: its sha256 differs from the one in "
            f"{run_copy / 'checkpoints' / '4' / CHECKSUMS_FILE}; resuming from checkpoint 2, "
            "the newest intact one (nothing moved or deleted)")
    assert line in capsys.readouterr().out.splitlines()
    assert result.iterations == 4  # iterations 3 and 4 trained again
    assert verify_checksums(run_copy / "checkpoints" / "4")  # a new, intact checkpoint 4
    records = [json.loads(r) for r in (run_copy / "metrics.jsonl").read_text().splitlines()]
    assert [r["damaged_checkpoints"] for r in records if r.get("event") == "resume"] == [[4]]


def test_no_intact_checkpoint_is_one_line_and_changes_nothing(run_copy):
    for iteration in (2, 4):
        _flip(_data_file(run_copy / "checkpoints" / str(iteration)), -1)
    before = _digest(run_copy)
    config = dataclasses.replace(TINY_RUN_CONFIG, budget=BudgetConfig(max_iterations=6))
    with pytest.raises(CheckpointError) as error:
        train(config, run_copy, show_progress=False)
    line = _one_line(str(error.value))
    assert line.startswith(f"{run_copy / 'checkpoints' / '4'}") and " is damaged: " in line
    assert line.endswith("; no checkpoint is intact (the older ones, 2, are damaged too)")
    assert _digest(run_copy) == before


def test_a_checkpoint_without_checksums_that_does_not_restore_is_passed_over(run_copy, capsys):
    """A checkpoint written before checksums (none to check) whose data is garbage shows its
    damage only when read: the resume falls back to the older one by itself, saying why in one
    line (orbax's multi-line TensorStore error made one line), and nothing is moved."""
    step = run_copy / "checkpoints" / "4"
    (step / CHECKSUMS_FILE).unlink()
    for file in (step / "state").rglob("*"):
        if file.is_file():
            file.write_bytes(b"garbage")
    result = train(TINY_RUN_CONFIG, run_copy, show_progress=False)
    (line,) = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("checkpoint 4: ")]
    assert line.startswith(f"checkpoint 4: checkpoint {step} is corrupt or does not match "
                           "this run's state")
    assert line.endswith("; resuming from checkpoint 2, the newest intact one (nothing moved "
                         "or deleted)") and len(line) < 600
    assert result.iterations == 4  # iterations 3 and 4 trained again
    assert verify_checksums(step)  # a new, intact checkpoint 4


def test_no_checkpoint_that_restores_is_one_line_and_changes_nothing(run_copy):
    for iteration in (2, 4):
        step = run_copy / "checkpoints" / str(iteration)
        (step / CHECKSUMS_FILE).unlink()
        for file in (step / "state").rglob("*"):
            if file.is_file():
                file.write_bytes(b"garbage")
    before = _digest(run_copy)
    with pytest.raises(CheckpointError) as error:
        train(TINY_RUN_CONFIG, run_copy, show_progress=False)
    line = _one_line(str(error.value))
    assert line.startswith(f"checkpoint {run_copy / 'checkpoints' / '4'} is corrupt or does "
                           "not match this run's state")
    assert line.endswith("; no checkpoint is intact (the older ones, 2, are damaged too)")
    assert _digest(run_copy) == before
