"""Loading a model never runs code the user did not choose: a model.json naming any callable
(`os:system`) is refused before anything is called, with or without trust; a game whose module
is not installed (found beside the model, or in the directory the model recorded) is imported
only with `trust_game=True` / `--trust-game`, and refused in one line that says so without it.

The models here are written as an attacker would: model.json edited, then checksums.json
written again, so that only the trust rules stand between the file and the code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import pytest
from typer.testing import CliRunner

from azjax import Agent, envs
from azjax.apps.cli import app
from azjax.config import config_from_dict
from azjax.core.network import init_network
from azjax.model_files import CheckpointError, load_model, save_model, write_checksums

TESTS = Path(__file__).resolve().parent
RUNNER = CliRunner()


def _pile_model(directory: Path) -> Path:
    """A model of the test suite's pile game (tests/user_game_module.py, stones=5)."""
    config = config_from_dict({"game": "user_game_module:TheGame(stones=5)",
                               "network": {"kind": "mlp", "hidden": [8]},
                               "search": {"num_simulations": 2,
                                          "max_num_considered_actions": 3}})
    env = envs.make(config.game)
    params = init_network(config.network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(0))["params"]
    return save_model(directory, params, config, {"iteration": 1})


def _renamed_game(model: Path, game: str, game_dir: str) -> Path:
    """`model` rewritten to name `game` (and `game_dir`), with consistent checksums."""
    meta = json.loads((model / "model.json").read_text())
    meta["game"] = meta["config"]["game"] = game
    meta["config"]["game_dir"] = game_dir
    (model / "model.json").write_text(json.dumps(meta))
    write_checksums(model)
    return model


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_an_os_system_model_is_refused_in_one_line_and_runs_nothing(tmp_path):
    marker = tmp_path / "marker"
    model = _renamed_game(_pile_model(tmp_path / "run" / "snapshots" / "1"),
                          f"os:system(command='touch {marker}')", "")
    for trust in (False, True):  # trust lets a module load, never an arbitrary callable
        with pytest.raises(CheckpointError) as error:
            load_model(model, trust_game=trust)
        line = _one_line(str(error.value))
        assert str(model / "model.json") in line
        assert "names <built-in function system>" in line
        assert "not a subclass of envs.Env or a game factory" in line
    for args in (["eval", str(model), "--against", "random"],
                 ["eval", str(tmp_path / "run"), "--against", "random", "--trust-game"],
                 ["export", str(tmp_path / "run"), "--to", str(tmp_path / "out")],
                 ["play", str(model)]):
        out = RUNNER.invoke(app, args)
        assert out.exit_code == 2, (args, out.output)
        assert _one_line(out.output).startswith("error: ") and "os:system" in out.output
    from azjax.apps.serve import serve_service

    with pytest.raises(CheckpointError, match="not a subclass of envs.Env or a game factory"):
        serve_service((str(model),))
    assert not marker.exists() and not (tmp_path / "out").exists()


def _module_beside(directory: Path, name: str, marker: Path) -> None:
    """The pile game as module `name` in `directory`; importing it creates `marker`."""
    directory.mkdir(parents=True, exist_ok=True)
    source = (TESTS / "user_game_module.py").read_text()
    (directory / f"{name}.py").write_text(
        f"{source}\n\nfrom pathlib import Path  # noqa: E402\n\nPath({str(marker)!r}).touch()\n")


@pytest.mark.parametrize("where", ["game_dir", "beside_the_model"])
def test_a_game_that_is_not_installed_loads_only_with_trust(tmp_path, where):
    """The module lies in the directory the model recorded, or in the folder holding the
    model directory: refused in one line naming it and how to trust it, then loaded with
    `trust_game=True`."""
    name = f"untrusted_pile_{where}"
    marker = tmp_path / "imported"
    project = tmp_path / "project"
    model = _pile_model(tmp_path / "models" / "pile")
    _module_beside(project if where == "game_dir" else model.parent, name, marker)
    game_dir = str(project) if where == "game_dir" else str(tmp_path / "gone")
    _renamed_game(model, f"{name}:TheGame(stones=5)", game_dir)

    with pytest.raises(CheckpointError) as error:
        Agent.load(model)
    line = _one_line(str(error.value))
    found_in = project if where == "game_dir" else model.parent
    assert f"module {name!r} is not installed but found in {found_in.resolve()}" in line
    assert "trust_game=True" in line and "--trust-game" in line
    out = RUNNER.invoke(app, ["eval", str(model), "--against", "random"])
    assert out.exit_code == 2 and "--trust-game" in _one_line(out.output), out.output
    assert not marker.exists()  # nothing of the module ran

    agent = Agent.load(model, trust_game=True)
    assert marker.exists()
    assert type(agent.env).__module__ == name and agent.env.stones == 5


def test_the_cli_passes_trust_game_to_the_models_it_loads(tmp_path):
    """`azjax eval --trust-game` loads the model (the override after loading is what stops
    it), and trust ends with the command."""
    name = "untrusted_pile_cli"
    marker = tmp_path / "imported"
    model = _pile_model(tmp_path / "models" / "pile")
    _module_beside(tmp_path / "project", name, marker)
    _renamed_game(model, f"{name}:TheGame(stones=5)", str(tmp_path / "project"))
    out = RUNNER.invoke(app, ["eval", str(model), "--trust-game", "--set", "network.width=7"])
    assert out.exit_code == 2, out.output
    assert "overrides may change how it searches, not its network" in _one_line(out.output)
    assert marker.exists() and not envs.game_code_trusted()


def test_trust_game_code_is_scoped_and_never_lets_a_plain_function_be_a_game():
    assert not envs.game_code_trusted()
    with envs.trust_game_code():
        assert envs.game_code_trusted()
        with envs.trust_game_code(False):  # False adds no trust and takes none away
            assert envs.game_code_trusted()
        with pytest.raises(ValueError, match="not a subclass of envs.Env or a game factory"):
            envs.make("user_game_module:unmarked_pile")
    assert not envs.game_code_trusted()
    assert envs.make("user_game_module:small_pile(stones=3)").stones == 3  # marked


def test_installed_modules_and_registered_games_need_no_trust(tmp_path):
    """A game of an installed package, a built-in one and a pgx-free registered id load
    untrusted; a module in the working directory does not count as installed."""
    assert envs.make("azjax.envs.tic_tac_toe:TicTacToe", trusted=False).name == "tic_tac_toe"
    assert envs.make("tic_tac_toe", trusted=False).name == "tic_tac_toe"
    shutil.copy(TESTS / "user_game_module.py", tmp_path / "pile_in_cwd.py")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        with pytest.raises(ValueError, match="'pile_in_cwd' is not installed but found in"):
            envs.make("pile_in_cwd:TheGame", trusted=False)
        assert envs.make("pile_in_cwd:TheGame").name == "pile"  # trusted: the user's spec
