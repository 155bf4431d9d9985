"""The public Agent API, `azjax eval` and `azjax export` on a tiny trained run."""

from __future__ import annotations

import io
import json
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

from azjax import Agent, envs
from azjax.agent import states_from_moves
from azjax.apps.cli import app
from azjax.evaluation.arena import PAIRED_OPENING_PLIES
from azjax.evaluation.measure import arena_bar, measure_agent
from azjax.evaluation.players import arena_opening_plies
from azjax.model_files import CheckpointError

RUNNER = CliRunner()


@pytest.fixture(scope="module")
def agent(tiny_run):
    return Agent.load(tiny_run[0])


def test_load_picks_the_newest_snapshot_and_keeps_the_config(agent, tiny_run):
    assert agent.source.name == "4" and agent.env is envs.make("tic_tac_toe")
    assert agent.config.game == "tic_tac_toe" and agent.num_simulations == 4


def test_act_search_evaluate_shapes_and_legality(agent):
    states = states_from_moves(agent.env, [[], [4], [0, 4, 8], [0, 1, 3, 4]])
    policy, value = agent.evaluate(states)
    assert policy.shape == (4, 9) and value.shape == (4,)
    np.testing.assert_allclose(np.asarray(policy).sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.asarray(policy)[~np.asarray(states.legal_action_mask)] == 0)
    action, search_policy, search_value = agent.search(jax.random.PRNGKey(0), states)
    assert action.shape == (4,) and search_policy.shape == (4, 9) and search_value.shape == (4,)
    for greedy in (True, False):
        for simulations in (0, None):
            moves = np.asarray(agent.act(jax.random.PRNGKey(1), states, greedy=greedy,
                                         num_simulations=simulations))
            assert np.asarray(states.legal_action_mask)[np.arange(4), moves].all()
    raw = np.asarray(agent.act(jax.random.PRNGKey(2), states, num_simulations=0))
    np.testing.assert_array_equal(raw, np.argmax(np.asarray(policy), -1))
    # A search of zero simulations is an error, not a quiet fall-back to the default.
    for search in (agent.search, agent.search_output):
        with pytest.raises(ValueError, match="num_simulations must be >= 1 for a search, got 0"):
            search(jax.random.PRNGKey(0), states, num_simulations=0)


def test_greedy_search_equals_argmax_of_its_policy_and_is_deterministic(agent):
    states = states_from_moves(agent.env, [[0], [2, 4]])
    a1, p1, _ = agent.search(jax.random.PRNGKey(0), states)
    a2, _, _ = agent.search(jax.random.PRNGKey(99), states)
    np.testing.assert_array_equal(a1, np.argmax(np.asarray(p1), -1))
    np.testing.assert_array_equal(a1, a2)


def test_with_search_changes_only_how_the_agent_searches(agent):
    puct = agent.with_search(["search.algorithm=puct", "search.num_simulations=8"])
    assert puct.config.search.algorithm == "puct" and puct.num_simulations == 8
    assert agent.config.search.algorithm != "puct"  # the original is untouched
    assert puct.params is agent.params and puct.config.network == agent.config.network
    assert agent.with_search([]) is agent
    with pytest.raises(ValueError, match="not its network or game"):
        agent.with_search(["network.channels=7"])
    with pytest.raises(ValueError, match="search.algorithm"):
        agent.with_search(["search.algorithm=minimax"])


def test_a_bfloat16_search_plays_the_same_weights(agent):
    """`search.matmul_dtype=bfloat16` searches with bfloat16 matmuls over the same float32
    weights: the raw network (`evaluate`) is unchanged, and the search's root value moves only
    by bfloat16's rounding."""
    fast = agent.with_search(["search.matmul_dtype=bfloat16"])
    assert fast.params is agent.params and fast.config.search.matmul_dtype == "bfloat16"
    states = states_from_moves(agent.env, [[], [4], [0, 4, 8]])
    np.testing.assert_array_equal(np.asarray(fast.evaluate(states)[0]),
                                  np.asarray(agent.evaluate(states)[0]))
    _, policy16, value16 = fast.search(jax.random.PRNGKey(0), states)
    _, policy32, value32 = agent.search(jax.random.PRNGKey(0), states)
    np.testing.assert_allclose(np.asarray(value16), np.asarray(value32), atol=0.05)
    np.testing.assert_allclose(np.asarray(policy16).sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="search.matmul_dtype"):
        agent.with_search(["search.matmul_dtype=float16"])


def test_cli_eval_set_overrides_the_search_and_names_bad_keys(tiny_run):
    run_dir, _ = tiny_run
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--against", "random", "--games", "4",
                              "--set", "search.algorithm=puct"])
    assert out.exit_code == 0, out.output
    assert "search overrides: search.algorithm=puct" in out.output and "vs     random" in out.output
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--set", "search.nonsense=1"])
    assert out.exit_code == 2 and "search.nonsense" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--ladder", "--set", "search.algorithm=puct"])
    assert out.exit_code == 2 and "--ladder" in out.output, out.output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_arena_shows_a_bar_on_a_terminal_and_plain_lines_in_a_log(monkeypatch):
    """`azjax eval 2>&1 | tee log` gets plain lines (the first tick and the last game), no
    carriage-return frames; on a terminal the finished bar is cleared."""
    for stream in (io.StringIO, _Terminal):
        err = stream()
        monkeypatch.setattr(sys, "stderr", err)
        with arena_bar("mcts:5", 4, True) as tick:
            tick(1, 3)
            tick(2, 5)  # within the line interval: not printed
            tick(4, 9)
        written = err.getvalue()
        if stream is _Terminal:
            assert written.endswith("\r") and "4/4" not in written.split("\r")[-1], repr(written)
        else:
            assert written == "vs mcts:5: 1/4 games, ply 3\nvs mcts:5: 4/4 games, ply 9\n"


def test_arenas_against_players_that_do_not_sample_open_from_paired_random_plies(agent,
                                                                                 tiny_run):
    """Alpha-beta and agents pick their moves from the position (alpha-beta's tie-break only
    among exactly equal moves), so greedy search against them would replay a handful of games
    from the start position: their arenas open from paired random plies. Random, greedy and
    mcts:N sample their moves; their arenas start from the start position. The metrics say
    which."""
    for name in ("alphabeta:6", "draughts", "runs/some_run"):
        assert arena_opening_plies(name) == PAIRED_OPENING_PLIES > 0
    for name in ("random", "greedy", "mcts:100"):
        assert arena_opening_plies(name) == 0
    metrics, _ = measure_agent(agent, against=["alphabeta:2", "random"], oracle=None, games=8,
                               num_simulations=None, seed=0)
    assert metrics["eval/vs_alphabeta:2/opening_plies"] == PAIRED_OPENING_PLIES
    assert metrics["eval/vs_random/opening_plies"] == 0
    assert sum(metrics[f"eval/vs_alphabeta:2/{k}"] for k in ("wins", "draws", "losses")) == 8
    # --opening-plies sets them for every arena of the call; a ladder keeps its table's.
    run_dir = str(tiny_run[0])
    out = RUNNER.invoke(app, ["eval", run_dir, "--against", "random", "--games", "2",
                              "--opening-plies", "3"])
    assert out.exit_code == 0 and "; 3 paired random opening plies)" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", run_dir, "--ladder", "--opening-plies", "3"])
    assert out.exit_code == 2 and "--opening-plies applies to arenas" in out.output, out.output


def test_cli_eval_names_the_simulations_of_an_agent_opponent(tiny_run):
    """An agent opponent searches at its own model's simulations unless --against-simulations
    says otherwise (never at --simulations, the evaluated agent's), and the output says which;
    the option is refused where no opponent is an agent."""
    run_dir, _ = tiny_run
    common = ["eval", str(run_dir), "--against", str(run_dir), "--games", "2"]
    out = RUNNER.invoke(app, common + ["--simulations", "6"])
    assert out.exit_code == 0, out.output
    assert "evaluated with 6 simulations" in out.output
    assert f"opponent {run_dir}: " in out.output and "searching with 4 simulations" in out.output
    out = RUNNER.invoke(app, common + ["--against-simulations", "3"])
    assert out.exit_code == 0 and "searching with 3 simulations" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--against", "mcts:5",
                              "--against-simulations", "3"])
    assert out.exit_code == 2 and "apply to agent opponents" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--ladder", "--against-simulations", "3"])
    assert out.exit_code == 2 and "--ladder" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", str(run_dir), "--anchors", "anchors.json"])
    assert out.exit_code == 2, out.output
    assert out.output.splitlines()[-1] == "error: --anchors applies to a --ladder"


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(CheckpointError, match="neither a game id"):
        Agent.load(tmp_path / "nothing-here")
    (tmp_path / "run" / "snapshots").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="has no snapshots yet"):
        Agent.load(tmp_path / "run")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.json").write_text("{not json")
    (bad / "params.msgpack").write_bytes(b"")
    with pytest.raises(CheckpointError, match="corrupt"):
        Agent.load(bad)


def test_a_directory_named_like_a_game_says_it_hides_the_shipped_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tic_tac_toe").mkdir()
    with pytest.raises(CheckpointError, match="hides the shipped 'tic_tac_toe' model: pass"):
        Agent.load("tic_tac_toe")


def test_cli_export_set_changes_the_default_search_and_refuses_network_keys(tiny_run, tmp_path):
    """`azjax export --set` stores a search change in the model (a run that searched in
    bfloat16 can ship a float32 search), and refuses, writing nothing, one that would change
    the network its weights were trained for."""
    run_dir, _ = tiny_run
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(tmp_path / "model"),
                              "--set", "search.matmul_dtype=bfloat16",
                              "--set", "search.contempt=0.2",
                              "--set", "search.symmetry_average=true"])
    assert out.exit_code == 0, out.output
    exported = Agent.load(tmp_path / "model").config.search
    assert exported.matmul_dtype == "bfloat16" and exported.contempt == 0.2
    assert exported.symmetry_average
    card = (tmp_path / "model" / "MODEL_CARD.md").read_text()
    assert "contempt 0.2" in card and "averaged over the game's symmetric copies" in card
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(tmp_path / "other"),
                              "--set", "network.width=7"])
    assert out.exit_code == 2 and "not its network or game" in out.output, out.output
    assert not (tmp_path / "other").exists()


def test_cli_export_then_eval(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(tmp_path / "model")])
    assert out.exit_code == 0, out.output
    meta = json.loads((tmp_path / "model" / "model.json").read_text())
    assert meta["iteration"] == 2 and meta["num_simulations"] == 4 and "machine" in meta
    assert "eval/oracle/search_error" in meta["eval"]
    assert "# azjax model: tic_tac_toe" in (tmp_path / "model" / "MODEL_CARD.md").read_text()
    out = RUNNER.invoke(app, ["eval", str(tmp_path / "model"), "--against", "random",
                              "--games", "20", "--oracle", ""])
    assert out.exit_code == 0, out.output
    assert "oracle" in out.output and "raw network" in out.output
    assert "vs     random: " in out.output
    out = RUNNER.invoke(app, ["eval", str(tmp_path / "model"), "--oracle", "",
                              "--oracle-positions", "50"])
    assert out.exit_code == 0 and "(50 positions)" in out.output, out.output
    out = RUNNER.invoke(app, ["eval", str(tmp_path / "model"), "--oracle", "",
                              "--oracle-positions", "0"])
    assert out.exit_code == 2 and "oracle positions must be >= 1" in out.output


@pytest.mark.parametrize("args, option", [
    (["eval", "tic_tac_toe", "--simulations", "0"], "--simulations"),
    (["eval", "tic_tac_toe", "--games", "0"], "--games"),
    (["export", "runs/x", "--to", "model_x", "--simulations", "-5"], "--simulations"),
    (["play", "tic_tac_toe", "--simulations", "0"], "--simulations"),
    (["report", "runs/x", "--last", "0"], "--last"),
    (["report", "runs/x", "--every", "0"], "--every"),
])
def test_cli_refuses_counts_below_one_naming_the_option(args, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = RUNNER.invoke(app, args)
    assert out.exit_code == 2 and option in out.output, out.output
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_export_credits_the_time_to_perfect_play_only_from_that_point(tmp_path):
    from azjax.training.export import _time_to_perfect

    records = [{"event": "start", "iteration": 0}, {"iteration": 2, "wall_s": 30.0},
               {"iteration": 4, "wall_s": 50.0, "time_to_perfect_s": 50.0},
               {"event": "end", "iteration": 6, "wall_s": 70.0, "time_to_perfect_s": 50.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _time_to_perfect(tmp_path, {"wall_s": 30.0}) is None  # before the bar was met
    assert _time_to_perfect(tmp_path, {"wall_s": 70.0}) == 50.0
    (tmp_path / "metrics.jsonl").write_text(json.dumps(records[2]) + "\n")  # still running
    assert _time_to_perfect(tmp_path, {"wall_s": 50.0}) == 50.0
    assert _time_to_perfect(tmp_path, {"wall_s": 70.0, "time_to_perfect_s": None}) is None


def test_cli_export_measures_the_model_for_its_card(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    out = RUNNER.invoke(app, ["export", str(run_dir), "4", "--to", str(tmp_path / "model"),
                              "--simulations", "8", "--oracle", "", "--against", "random",
                              "--games", "10"])
    assert out.exit_code == 0, out.output
    meta = json.loads((tmp_path / "model" / "model.json").read_text())
    assert meta["num_simulations"] == 8
    card = meta["eval"]
    assert card["eval/measured_at"] == "export" and card["eval/num_simulations"] == 8
    assert card["eval/arena_devices"] == jax.local_device_count()  # 10 games divide over 1 device
    assert card["eval/vs_random/wins"] + card["eval/vs_random/draws"] \
        + card["eval/vs_random/losses"] == 10
    assert "eval/oracle/search_error" in meta["training_eval"]
    # The card's figures are the model's own: re-scoring the export gives the same numbers.
    agent = Agent.load(tmp_path / "model")
    reported: list[str] = []
    again, lines = measure_agent(agent, against=[], oracle="", games=0, num_simulations=None,
                                 seed=0, report=reported.append)
    assert reported == lines and len(lines) == 2  # the header, then the oracle line as measured
    assert again["eval/oracle/search_error"] == card["eval/oracle/search_error"]
    assert again["eval/oracle/raw_error"] == card["eval/oracle/raw_error"]
    text = (tmp_path / "model" / "MODEL_CARD.md").read_text()
    assert "measured at export" in text and "8 simulations by default" in text
    # A model card: how it was trained, how to re-measure each figure, its limits, how to use it.
    for section in ("## Reproduce", "## Training", "## Limits", "## Load and play"):
        assert section in text
    model = tmp_path / "model"
    assert f"azjax eval {model} --oracle" in text
    assert f"azjax eval {model} --against random --games 10" in text
    assert "game: tic_tac_toe" in text
    # Re-exporting the exported model keeps the run's figures as its training_eval.
    out = RUNNER.invoke(app, ["export", str(tmp_path / "model"), "--to", str(tmp_path / "again"),
                              "--oracle", "", "--against", "random", "--games", "2"])
    assert out.exit_code == 0, out.output
    again_meta = json.loads((tmp_path / "again" / "model.json").read_text())
    assert again_meta["training_eval"] == meta["training_eval"]
    assert again_meta["eval"]["eval/vs_random/wins"] + again_meta["eval"]["eval/vs_random/draws"] \
        + again_meta["eval"]["eval/vs_random/losses"] == 2


def test_cli_export_stores_params_at_half_precision(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    full, half = tmp_path / "full", tmp_path / "half"
    for out_dir, dtype in ((full, "float32"), (half, "float16")):
        out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(out_dir),
                                  "--params-dtype", dtype])
        assert out.exit_code == 0, out.output
    size = lambda d: (d / "params.msgpack").stat().st_size  # noqa: E731
    assert size(half) < 0.6 * size(full)
    assert "stored as float16" in (half / "MODEL_CARD.md").read_text()
    # Loaded back as float32, equal to the float32 export up to float16 rounding.
    params32, params16 = Agent.load(full).params, Agent.load(half).params
    for a, b in zip(jax.tree.leaves(params32), jax.tree.leaves(params16), strict=True):
        assert b.dtype == jnp.float32
        np.testing.assert_array_equal(b, np.asarray(a).astype(np.float16).astype(np.float32))
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(tmp_path / "x"),
                              "--params-dtype", "int8"])
    assert out.exit_code == 2 and "int8" in out.output and not (tmp_path / "x").exists()
    meta = json.loads((half / "model.json").read_text())
    (half / "model.json").write_text(json.dumps({**meta, "storage_dtype": "float8"}))
    with pytest.raises(CheckpointError, match="model.json is damaged"):  # edited by hand
        Agent.load(half)
    (half / "checksums.json").unlink()  # accepting the edit: the model loads unchecked
    with pytest.raises(CheckpointError, match="storage_dtype 'float8'"):
        Agent.load(half)


def test_cli_export_replaces_nothing_but_an_earlier_export(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(notes)])
    assert out.exit_code == 2 and "not a model directory" in out.output
    assert (notes / "keep.txt").read_text() == "mine"
    out = RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(run_dir / "model")])
    assert out.exit_code == 2 and "overlaps the run dir" in out.output
    assert not (run_dir / "model").exists()
    # A failed measurement leaves the earlier export as it was.
    model = tmp_path / "model"
    assert RUNNER.invoke(app, ["export", str(run_dir), "2", "--to", str(model)]).exit_code == 0
    before = (model / "model.json").read_text()
    out = RUNNER.invoke(app, ["export", str(run_dir), "4", "--to", str(model), "--against",
                              "mcts:lots", "--games", "2"])
    assert out.exit_code == 2 and "mcts:lots" in out.output
    assert (model / "model.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "notes"]


def test_save_model_replaces_a_model_whole_or_not_at_all(agent, tmp_path):
    """A failed write leaves the old model as it was and no scratch files beside it; a
    successful one replaces it (params, model.json and extra files together)."""
    from azjax.model_files import load_model, save_model

    target = tmp_path / "model"
    neighbour = tmp_path / "model.tmp"  # a user's file with the old scratch name is not touched
    neighbour.mkdir()
    save_model(target, agent.params, agent.config, {"tag": "old"},
               text_files={"MODEL_CARD.md": "old card"})
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(OSError):  # fails while writing: a file name that cannot exist
        save_model(target, agent.params, agent.config, {"tag": "new"},
                   text_files={"no/such/dir.md": "x"})
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["model", "model.tmp"]
    assert load_model(target)[2]["tag"] == "old"
    save_model(target, agent.params, agent.config, {"tag": "new"},
               text_files={"MODEL_CARD.md": "new card"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.tmp"]
    assert load_model(target)[2]["tag"] == "new"
    assert (target / "MODEL_CARD.md").read_text() == "new card"


def test_cli_report_tabulates_every_evaluation_of_a_run(tiny_run):
    run_dir, _ = tiny_run
    result = RUNNER.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    table, totals = result.output.strip().split("\n\n")
    lines = table.splitlines()
    assert lines[0] == ("| iteration | `wall_s` | positions | mean (raw / search) | "
                        "vs random |")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    second = next(r for r in records if r.get("iteration") == 2 and "loss" in r)
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| 0", "| 2", "| 4"]
    assert lines[3].split(" | ")[3] == (f"{second['eval/oracle/raw_error']:.1f} / "
                                        f"{second['eval/oracle/search_error']:.1f}")
    assert lines[3].split(" | ")[4] == f"{second['eval/vs_random/score']:.3f} |"
    last = next(r for r in reversed(records) if "positions_per_s" in r)
    assert totals.startswith(f"Totals: 4 iterations, {last['positions']:,} positions")
    assert f"{last['flops/total']:.3g} FLOPs" in totals
    table = RUNNER.invoke(app, ["report", str(run_dir), "--last", "1"]).output.split("\n\n")[0]
    assert table.count("\n") == 2


def test_cli_errors_are_one_line(tmp_path):
    out = RUNNER.invoke(app, ["export", str(tmp_path), "7", "--to", str(tmp_path / "m")])
    assert out.exit_code == 2 and "error: no snapshot 7" in out.output
    out = RUNNER.invoke(app, ["eval", str(tmp_path / "missing")])
    assert out.exit_code == 2 and "error:" in out.output
    out = RUNNER.invoke(app, ["--version"])
    assert out.exit_code == 0 and out.output.startswith("azjax ")


def test_cli_export_average_stores_the_mean_of_the_snapshots_weights(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    out = RUNNER.invoke(app, ["export", str(run_dir), "--to", str(tmp_path / "swa"),
                              "--average", "4", "--average", "2"])
    assert out.exit_code == 0, out.output
    two, four = Agent.load(run_dir / "snapshots" / "2"), Agent.load(run_dir / "snapshots" / "4")
    averaged = Agent.load(tmp_path / "swa")
    for a, b, mean in zip(jax.tree.leaves(two.params), jax.tree.leaves(four.params),
                          jax.tree.leaves(averaged.params), strict=True):
        np.testing.assert_allclose(mean, (np.asarray(a) + np.asarray(b)) / 2, rtol=1e-6,
                                   atol=1e-7)
    assert not all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(two.params),
                                                        jax.tree.leaves(four.params), strict=True))
    meta = json.loads((tmp_path / "swa" / "model.json").read_text())
    assert meta["averaged_snapshots"] == [2, 4] and meta["iteration"] == 4  # the newest's record
    assert "the mean of snapshots 2, 4" in (tmp_path / "swa" / "MODEL_CARD.md").read_text()
    for args, message in ((["--average", "4"], "two or more distinct snapshots"),
                          (["--average", "4", "--average", "4"], "two or more distinct"),
                          (["--average", "2", "--average", "3"], "no snapshot 3"),
                          (["2", "--average", "2", "--average", "4"], "the newest averaged one")):
        out = RUNNER.invoke(app, ["export", str(run_dir), *args, "--to", str(tmp_path / "x")])
        assert out.exit_code == 2 and message in out.output, (args, out.output)
    # Snapshots of another network do not average, even when their weights' shapes agree
    # (an MLP does not read `blocks`).
    other = tmp_path / "other_run"
    shutil.copytree(run_dir / "snapshots", other / "snapshots")
    meta_path = other / "snapshots" / "2" / "model.json"
    meta = json.loads(meta_path.read_text())
    meta["config"]["network"]["blocks"] += 1
    meta_path.write_text(json.dumps(meta))
    (meta_path.parent / "checksums.json").unlink()  # an edit by hand, accepted
    out = RUNNER.invoke(app, ["export", str(other), "--average", "2", "--average", "4", "--to",
                              str(tmp_path / "x")])
    assert out.exit_code == 2 and "has another game or network" in out.output, out.output
    assert not (tmp_path / "x").exists()
