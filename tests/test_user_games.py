"""A game of your own, from a module outside `azjax/envs/` (tests/user_game_module.py): named in a
config by its import path, it trains through `azjax train`, exports, reloads by `Agent.load`
from another working directory, plays through `azjax play` over a pipe and answers
`azjax serve`'s JSON API; every bad game gets one error line, exit status 2 and an untouched
run dir."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT
from play_server import PlayServer
from typer.testing import CliRunner

from azjax import envs
from azjax.apps.cli import app
from azjax.config import config_from_dict, config_to_dict, load_config

TESTS = Path(__file__).resolve().parent
CACHE = str(REPO_ROOT / ".jax_cache")
# The CLI would switch this process's compilation cache to ~/.cache; keep the tests' one.
RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": CACHE})

TINY = {
    "network": {"kind": "mlp", "hidden": [16]},
    "search": {"num_simulations": 4, "max_num_considered_actions": 3},
    "selfplay": {"batch_size": 8, "temperature_moves": 5},
    "replay": {"capacity": 256},
    "train": {"batch_size": 16, "updates_per_iteration": 2},
    "eval": {"every_iterations": 2, "opponents": [], "oracle": False},
    "budget": {"max_iterations": 2},
    "checkpoint": {"every_iterations": 2},
}


def _write_config(directory: Path, game, name: str = "pile.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump({"game": game, **TINY}, sort_keys=False))
    return path


def _azjax(args: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m azjax ARGS` in `cwd`, a process whose `sys.path` lacks tests/."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["AZJAX_COMPILATION_CACHE"] = CACHE
    return subprocess.run([sys.executable, "-m", "azjax", *args], input=stdin, text=True,
                          capture_output=True, cwd=cwd, env=env, timeout=300)


def _one_error_line(output: str, *parts: str) -> None:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-iteration run of the game named by the mapping form, trained by `azjax train`,
    and its export: (run_dir, model_dir)."""
    root = tmp_path_factory.mktemp("user_game")
    config = _write_config(root / "project", {"import": "user_game_module:TheGame",
                                              "kwargs": {"stones": 5}})
    run_dir, model_dir = root / "runs" / "pile", root / "models" / "pile"
    out = RUNNER.invoke(app, ["train", str(config), "--run-dir", str(run_dir),
                              "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "done: 2 iterations" in out.output
    out = RUNNER.invoke(app, ["export", str(run_dir), "--to", str(model_dir)])
    assert out.exit_code == 0, out.output
    return run_dir, model_dir


def test_the_run_and_the_model_record_the_import_path_and_its_directory(trained):
    run_dir, model_dir = trained
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["game"] == "user_game_module:TheGame(stones=5)"
    assert saved["game_dir"] == str(TESTS)  # where the module was found (not installed)
    meta = json.loads((model_dir / "model.json").read_text())
    assert meta["config"]["game"] == saved["game"] and meta["config"]["game_dir"] == str(TESTS)
    assert "# azjax model: user_game_module:TheGame(stones=5)" in (
        model_dir / "MODEL_CARD.md").read_text()


def test_the_model_reloads_and_plays_over_a_pipe_from_another_directory(trained, tmp_path):
    """A fresh process elsewhere, without tests/ on its path: `Agent.load(trust_game=True)`
    imports the game from the directory the model recorded, and `azjax play --trust-game`
    plays it to the end."""
    _, model_dir = trained
    # One process for both, so that they share the compiled search: `Agent.load`, then the
    # `azjax` console script's own entry point reading the pipe.
    script = textwrap.dedent(f"""
        import sys
        import jax
        from azjax import Agent
        from azjax.agent import states_from_moves
        from azjax.apps.cli import run
        agent = Agent.load({str(model_dir)!r}, trust_game=True)
        move = agent.act(jax.random.PRNGKey(0), states_from_moves(agent.env, [[]]),
                         num_simulations=4)
        print("loaded", agent.config.game, agent.env.stones, type(agent.env).__module__,
              int(move[0]) in (0, 1, 2), flush=True)
        sys.argv = ["azjax", "play", {str(model_dir)!r}, "--simulations", "4", "--trust-game"]
        run()
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["AZJAX_COMPILATION_CACHE"] = CACHE
    played = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=300, input="junk\n" + "1\n" * 8)
    assert played.returncode == 0, played.stderr
    loaded, text = played.stdout.split("\n", 1)
    assert loaded.split() == ["loaded", "user_game_module:TheGame(stones=5)", "5",
                              "user_game_module", "True"]
    assert f"pile: playing against {model_dir}" in text
    assert "Illegal move: a move takes 1, 2 or 3 stones, got 'junk'" in text
    assert "AI plays " in text and text.count("Result: ") == 1 and text.rstrip().endswith("Bye.")


def test_the_model_answers_the_json_api_of_azjax_serve(trained):
    from azjax.apps.serve import serve_service

    _, model_dir = trained
    service = serve_service((str(model_dir),))
    service.simulations, service.default_simulations = (4,), 4
    server = PlayServer(service)
    try:
        game = service.games()["games"]["pile"]
        assert game["labels"] == ["1", "2", "3"] and not game["untrained"]
        status, position = server.post("/api/state", {"game": "pile", "moves": [2]})
        assert status == 200 and position["legal"] == [0, 1]
        assert [c["player"] for c in position["board"]["cells"]] == [0, 0, None, None, None]
        status, answer = server.post("/api/move", {"game": "pile", "moves": [2]})
        assert status == 200 and answer["move"] in (0, 1) and answer["moves"][0] == 2
        status, answer = server.post("/api/move", {"game": "pile", "moves": [2, 1]})
        assert status == 422 and "already over" in answer["error"]
    finally:
        server.stop()
    with pytest.raises(ValueError, match="two of the games to serve are named 'pile'"):
        serve_service((str(model_dir), "user_game_module:small_pile"))


def test_a_config_finds_a_module_beside_it_and_the_game_round_trips(tmp_path):
    """The module is looked up in the config file's directory; the spec string, the directory
    and the config survive config_to_dict / config_from_dict and YAML."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(TESTS / "user_game_module.py", project / "pile_beside.py")
    config = load_config(_write_config(project, "pile_beside:TheGame(stones=4)"))
    assert config.game == "pile_beside:TheGame(stones=4)" and config.game_dir == str(project)
    assert envs.make(config.game).stones == 4 and hash(config) == hash(
        config_from_dict(config_to_dict(config)))
    assert config_from_dict(yaml.safe_load(yaml.safe_dump(config_to_dict(config)))) == config
    mapping = load_config(_write_config(project, {"import": "pile_beside:TheGame",
                                                  "kwargs": {"stones": 4}}, "mapping.yaml"))
    assert mapping == config
    assert envs.make("pile_beside:small_pile").stones == 4
    assert envs.make("pile_beside:TheGame(stones=4)") is envs.make(config.game)


def test_an_entry_point_names_a_game_after_the_registered_ids(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "azjax_test_games-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: azjax-test-games\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[azjax.games]\npile_of_three = user_game_module:small_pile\n"
        "tic_tac_toe = user_game_module:small_pile\n")
    monkeypatch.syspath_prepend(str(site))
    assert envs.make("pile_of_three(stones=3)").stones == 3
    assert envs.game_dir("pile_of_three(stones=3)") == ""
    assert type(envs.make("tic_tac_toe")).__name__ == "TicTacToe"  # registered ids first


def _broken_module(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir(exist_ok=True)
    (tmp_path / "project" / "explodes_on_import.py").write_text(
        'raise RuntimeError("this module fails as it loads")\n')
    return tmp_path / "project"


@pytest.mark.parametrize("game, parts", [
    ("no_such_game_module:Game", ["cannot import module 'no_such_game_module'",
                                  "no module named 'no_such_game_module'",
                                  "the working directory"]),
    ("explodes_on_import:Game", ["importing module 'explodes_on_import'",
                                 "RuntimeError: this module fails as it loads"]),
    ("user_game_module:NoSuchGame", ["module 'user_game_module'",
                                     "has no attribute 'NoSuchGame'"]),
    ("user_game_module:NotAGame", ["user_game_module.NotAGame is a class but not a subclass "
                                   "of envs.Env"]),
    ("user_game_module:NOT_A_GAME", ["names 42 (an int), not a subclass of envs.Env"]),
    ("user_game_module:unmarked_pile", ["names <function unmarked_pile", "not a subclass of "
                                        "envs.Env or a game factory", "@envs.game_factory"]),
    ("os:system(command='true')", ["names <built-in function system>", "@envs.game_factory"]),
    ("user_game_module:not_a_factory", ["its factory returned 'chess' (a str)"]),
    ("user_game_module:BrokenGame", ["fails envs.check_initial_state",
                                     "pile: observe gives float32[6], expected float32[7]"]),
    ({"import": "user_game_module:TheGame", "kwargs": {"size": 3}},
     ["building it raised TypeError", "'size'"]),
])
def test_a_bad_game_gets_one_line_and_nothing_is_written(tmp_path, game, parts):
    config = _write_config(_broken_module(tmp_path), game)
    run_dir = tmp_path / "run"
    out = RUNNER.invoke(app, ["train", str(config), "--run-dir", str(run_dir)])
    assert out.exit_code == 2
    _one_error_line(out.output, "error: game: ", *parts)
    assert not run_dir.exists()


def test_a_run_dir_whose_game_module_is_gone_gets_one_line(tmp_path):
    """A run of a module that lived beside its config, loaded after the module was deleted,
    in a fresh process: eval and play refuse it, naming the module, and write nothing."""
    from azjax.apps.turns import untrained_agent
    from azjax.model_files import save_model

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(TESTS / "user_game_module.py", project / "pile_that_goes.py")
    agent = untrained_agent(load_config(_write_config(project, "pile_that_goes:TheGame")).game,
                            num_simulations=4)
    assert agent.config.game_dir == str(project)
    run_dir = tmp_path / "run"
    save_model(run_dir / "snapshots" / "2", agent.params, agent.config, {"iteration": 2})
    (project / "pile_that_goes.py").unlink()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for args in (["eval", str(run_dir), "--against", "random"], ["play", str(run_dir)]):
        out = _azjax(args, tmp_path)
        assert out.returncode == 2, out
        _one_error_line(out.stderr, "cannot import module 'pile_that_goes'", str(project))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    out = RUNNER.invoke(app, ["serve", "--game", "no_such_game_module:Game"])
    assert out.exit_code == 2
    _one_error_line(out.output, "cannot import module 'no_such_game_module'")
