"""`azjax export --web` end to end in headless Chromium (Debian's `chromium`, Playwright, no
browser download): tic-tac-toe and hexapawn (a game from user code, with no change to the
page) exported, served by a plain static file server, played to the end by clicks, and the
page's greedy move on 20 fixed positions per game compared with `Agent.act` at the same
simulations; and an untrained draughts network searched by alpha-beta with an endgame table,
its values and moves compared with azjax's. The shipped connect-four and draughts models
export through the same graphs with bigger networks; `benchmarks/bench_web.py` measures
them."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import HANG_S

from azjax import envs
from azjax.agent import Agent
from azjax.apps.web_export import WebExportError, export_web, find_onnxruntime_web
from azjax.core.endgames import table_root_actions
from azjax.envs.core import jitted_step, positions_along, random_move_lists
from azjax.envs.tic_tac_toe import TicTacToe

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MODELS = {"tic_tac_toe": "tic_tac_toe", "hexapawn": str(REPO_ROOT / "examples" / "hexapawn_model")}
POSITIONS = 20  # fixed positions per game where the page's move must be Agent.act's
SIMULATIONS = 16  # the page's "easy", the strength both sides search at on those positions


def _have_runtime() -> bool:
    try:
        find_onnxruntime_web()
    except WebExportError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="needs Debian's chromium (apt-get install -y chromium)"),
    pytest.mark.skipif(not _have_runtime(), reason="needs onnxruntime-web: `npm ci` here"),
]


@functools.cache
def _agent(game: str) -> Agent:
    return Agent.load(MODELS[game], trust_game=True)


@functools.cache
def _draughts_agent() -> Agent:
    """An untrained draughts network searched by alpha-beta, 2 whole moves deep, with the
    3-piece endgame table (solved in seconds): the table's graph, captures searched on past
    the depth and multi-jumps, at a network's values."""
    from azjax.apps.turns import untrained_agent

    return untrained_agent(envs.make("draughts")).with_search([
        "search.algorithm=alphabeta", "search.alphabeta_depth=2", "search.endgame_table=3"])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """game -> the folder written for its model: hexapawn's by `azjax export --web` as a
    user runs it (the CLI test reads what it printed), the others by `export_web`."""
    root = tmp_path_factory.mktemp("web")
    folders = {game: export_web(_agent(game), root / game) for game in MODELS
               if game != "hexapawn"}
    folders["draughts"] = export_web(_draughts_agent(), root / "draughts")
    folders["hexapawn"] = root / "hexapawn"
    folders["hexapawn_cli"] = subprocess.run(
        [sys.executable, "-m", "azjax", "export", MODELS["hexapawn"], "--web",
         str(folders["hexapawn"]), "--trust-game"], capture_output=True, text=True,
        cwd=REPO_ROOT)
    return folders


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output stays the test's
        pass


@contextlib.contextmanager
def _served(folder: Path):
    """A plain static file server over `folder` on a free port: its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


@contextlib.contextmanager
def _page(url: str):
    """The page at `url` in headless Chromium, loaded (the human to move); JS errors fail."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url)
            page.wait_for_function(
                "document.getElementById('status').textContent === 'Your move.'",
                timeout=HANG_S * 1000)  # only ends a hung page: the wait is on an event
            yield page
        finally:
            browser.close()
    assert not errors, errors


def _play_by_clicks(page, rng: np.random.Generator) -> tuple[str, list[str]]:
    """Plays the human's side by clicks to the end (a random legal move each turn: every
    enabled cell starts one), the page's AI the other: (the result, the move list)."""
    for _ in range(200):
        if page.evaluate("document.getElementById('status').dataset.result || ''"):
            break
        count = page.locator("#history li").count()
        while page.evaluate("document.getElementById('status').textContent") in (
                "Your move.", "Your turn goes on: move again."):
            cells = page.locator("#board button.cell:not([disabled])")
            cells.nth(int(rng.integers(cells.count()))).click()
        page.wait_for_function(
            """n => { const s = document.getElementById('status');
                      const turns = document.querySelectorAll('#history li').length;
                      return s.dataset.result
                             || (s.textContent === 'Your move.' && turns > n); }""",
            arg=count, timeout=HANG_S * 1000)
    return (page.evaluate("document.getElementById('status').dataset.result"),
            page.locator("#history li").all_inner_texts())


@pytest.mark.parametrize("game", sorted(MODELS))
def test_the_exported_page_plays_a_legal_game_to_the_end_by_clicks(exported, game):
    """Each move on the page's list is a legal turn of the game, replayed in Python, and the
    page's result is the game's."""
    env = _agent(game).env
    with _served(exported[game]) as url, _page(url) as page:
        result, history = _play_by_clicks(page, np.random.default_rng(0))
        searched = page.locator("#searched").inner_text()
        timed = page.evaluate("r => window.azjax.backend.move(r)",
                              {"game": env.name, "moves": [], "movetime": 0.2})
    assert timed["simulations"] >= 1 and len(timed["policy"]) == env.num_actions
    # The answer names its search as `azjax serve`'s do, and the page says what it searched.
    assert timed["search"] == _agent(game).config.search.algorithm
    assert re.fullmatch(r"Searched [\d,]+ simulations \((Gumbel|PUCT) search\)\.", searched)
    assert bool(np.asarray(env.init(jax.random.PRNGKey(0)).legal_action_mask)[timed["move"]])
    assert result in ("human", "ai", "draw")
    state, step = env.init(jax.random.PRNGKey(0)), jitted_step(env)
    for line in history:
        who, _, notation = line.partition(" ")
        assert who in ("You", "AI")
        for action in env.parse_move(state, notation):  # ValueError for an illegal turn
            state = step(state, action)
    assert bool(state.terminated | state.truncated)
    rewards = np.asarray(state.rewards)
    human = 0  # the human moves first on the page by default
    expected = "draw" if not rewards.any() else "human" if rewards[human] > 0 else "ai"
    assert result == expected


@pytest.mark.parametrize("game", sorted(MODELS))
def test_the_page_moves_as_agent_act_on_fixed_positions(exported, game):
    """The page's greedy move at `SIMULATIONS` equals `Agent.act`'s on 20 fixed positions in
    at least 19 (float arithmetic in another runtime may part a near tie); the differences
    are named."""
    agent = _agent(game)
    env = agent.env
    lists = random_move_lists(env, POSITIONS, seed=1)
    states = [list(positions_along(env, moves))[-1] for moves in lists]
    batch = jax.tree.map(lambda *xs: np.stack(xs), *states)
    want = np.asarray(agent.act(jax.random.PRNGKey(0), batch, num_simulations=SIMULATIONS))
    with _served(exported[game]) as url, _page(url) as page:
        got = [page.evaluate(
            "r => window.azjax.backend.move(r).then(reply => reply.move)",
            {"game": env.name, "moves": moves, "simulations": SIMULATIONS}) for moves in lists]
    differences = [f"after {moves}: page {a}, Agent.act {b}"
                   for moves, a, b in zip(lists, got, want.tolist(), strict=True) if a != b]
    assert len(differences) <= 1, differences


def _endings(env, pieces: tuple[int, ...], count: int) -> list:
    """`count` random endings (`Env.random_start`) of the given total numbers of pieces."""
    found, start = [], jax.jit(env.random_start)
    for key in jax.random.split(jax.random.PRNGKey(3), 4000):
        state = start(key)
        total = sum(bin(int(x)).count("1") for x in np.asarray(state.pieces))
        if total in pieces and not bool(state.terminated):
            found.append(state)
        if len(found) == count:
            return found
    raise AssertionError(f"fewer than {count} endings of {pieces} pieces")


def test_the_page_searches_a_draughts_model_with_a_table_as_azjax_does(exported):
    """A draughts model that searches by alpha-beta with an endgame table: on 24 fixed
    positions (openings, endings of 4 and 5 pieces whose lines reach the 3-piece table, and
    endings of 2 and 3 pieces that it solves at the root) the page's alpha-beta (alphabeta.js
    over the exported graphs as game.json sets it, no clock) finds azjax's values, its
    network's values through another runtime within 1e-4; its move at a time per move is
    the table's where the table solves the root; its network's Gumbel search at 16
    simulations plays azjax's moves there and finds its values, the table ending its lines
    too (a near tie may part one position). The answers name their search, as `azjax
    serve`'s do."""
    agent = _draughts_agent()
    env = agent.env
    lists = random_move_lists(env, 8, seed=2)
    states = ([list(positions_along(env, moves))[-1] for moves in lists]
              + _endings(env, (4, 5), 8) + _endings(env, (2, 3), 8))
    batch = jax.tree.map(lambda *xs: np.stack(xs), *states)
    key = jax.random.PRNGKey(0)
    _, _, want_values = agent.search(key, batch)
    _, _, tableless = agent.with_search(["search.endgame_table=0"]).search(key, batch)
    # The endings of 4 and 5 pieces are worth something else where lines end in the table.
    assert np.sum(np.abs(np.asarray(want_values - tableless))[8:16] > 0.1) >= 2
    want_moves, _, want_tree_values = agent.with_search(["search.algorithm=gumbel"]).search(
        key, batch, num_simulations=16)
    known, table_moves = jax.device_get(
        table_root_actions(env, env.endgame_adjudicator(3))(batch))
    search = """async r => {
        const { runAlphaBeta } = await import("./static/alphabeta.js");
        const ort = await import("./static/ort/ort.wasm.min.mjs");
        const backend = window.azjax.backend;
        const game = backend.game;
        const arrays = { bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
                         uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
                         float32: Float32Array };
        const state = game.meta.state.map((leaf, i) => new ort.Tensor(
            leaf.dtype, arrays[leaf.dtype].from(r.leaves[i]), leaf.shape));
        const ab = game.meta.search.alphabeta;  // what the export wrote, but no node budget
        const options = { depth: ab.depth, quiescence: ab.quiescence, leafScale: ab.leaf_scale };
        const searched = await runAlphaBeta(game.alphaBetaModel(), state, options);
        const batch = game.meta.steps_batch;
        game.meta.steps_batch = 1;  // step.onnx, an action a call, as without steps.onnx
        const single = r.single && await runAlphaBeta(game.alphaBetaModel(), state, options);
        game.meta.steps_batch = batch;
        const timed = r.timed && await backend.think(state, undefined, 0.2);
        const counted = await backend.think(state, 16, undefined);
        return { searched, single, batch,
                 timed: timed && [timed.action, timed.search, timed.simulations],
                 counted: [counted.action, counted.search, counted.simulations],
                 treeValue: counted.value };
    }"""
    with _served(exported["draughts"]) as url, _page(url) as page:
        assert page.input_value("#strength") == "t1"  # its own search, 1 s a move, first
        got = [page.evaluate(search, {"leaves": [np.asarray(x).reshape(-1).tolist()
                                                 for x in jax.tree.leaves(state)],
                                      "single": i < 4, "timed": i == 0 or bool(known[i])})
               for i, state in enumerate(states)]
    assert all(g["searched"]["complete"] for g in got)
    # The openings' children come from steps.onnx, 8 at a time; one at a time, the same.
    assert all(g["batch"] == 8 for g in got)
    assert [g["single"] for g in got[:4]] == [g["searched"] for g in got[:4]]
    np.testing.assert_allclose([g["searched"]["value"] for g in got], np.asarray(want_values),
                               atol=1e-4)
    assert known[16:].sum() >= 4 and not known[:8].any()  # the table solves most small roots
    for g, solved, move in zip(got, known, table_moves, strict=True):
        assert not g["timed"] or g["timed"][1] == "alphabeta"  # timed: 1st and solved roots
        if solved:
            assert g["timed"][0] == g["counted"][0] == move
    assert all(g["counted"][1:] == ["gumbel", 16] for g in got)
    differences = [(i, g["counted"][0], int(w), g["treeValue"], float(v))
                   for i, (g, w, v) in enumerate(zip(got, want_moves, want_tree_values,
                                                     strict=True))
                   if g["counted"][0] != w or abs(g["treeValue"] - v) > 1e-4]
    assert len(differences) <= 1, differences


def test_a_game_whose_step_does_not_batch_steps_one_action_a_call(exported, tmp_path):
    """steps.onnx (alpha-beta's children, several a call) is written for alpha-beta models
    whose game's step batches into ONNX; tic-tac-toe's writes its board at a batched index (a
    scatter jax2onnx does not convert), so its page steps one action a call, and a model
    that searches by Gumbel has no use for it."""
    from azjax.apps.turns import untrained_agent

    agent = untrained_agent(envs.make("tic_tac_toe")).with_search(["search.algorithm=alphabeta"])
    folder = export_web(agent, tmp_path / "page")
    assert json.loads((folder / "game" / "game.json").read_text())["steps_batch"] == 1
    assert not (folder / "game" / "steps.onnx").exists()
    assert not (exported["tic_tac_toe"] / "game" / "steps.onnx").exists()
    assert (exported["draughts"] / "game" / "steps.onnx").exists()


def test_only_the_table_graph_carries_the_table(exported):
    """describe, step and steps say whether the table knows a position (one cheap test of
    its pieces), and only table.onnx holds the table to read its result: the other graphs
    are left without the unused branch that reads it."""
    game = exported["draughts"] / "game"
    table = (game / "table.onnx").stat().st_size
    for name in ("describe", "step", "steps", "tree_step"):
        assert (game / f"{name}.onnx").stat().st_size < table / 2, name


class _NoBoardCodes(TicTacToe):
    """Tic-tac-toe with a board view but no codes for it."""

    def board_cells(self):
        return ()


def test_a_game_without_board_codes_is_refused_in_one_line(tmp_path):
    """The page draws the board from `board_codes`: a game without them is named, and
    nothing is written."""
    from azjax.apps.turns import untrained_agent

    with pytest.raises(WebExportError, match="tic_tac_toe gives no board_cells") as error:
        export_web(untrained_agent(_NoBoardCodes()), tmp_path / "page")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "page").exists()


def _asking(overrides: list[str]) -> Agent:
    """An untrained draughts model whose search asks for `overrides`; its search is built
    only when played, so refusing it solves no table (5 pieces: 12 minutes, 431 MB)."""
    from azjax.apps.turns import untrained_agent

    return untrained_agent(envs.make("draughts")).with_search(overrides)


@pytest.mark.parametrize("key,value,off", [("endgame_table", "5", "4"), ("quiescence", "1", "0")])
def test_a_big_endgame_table_or_quiescence_is_refused_in_one_line(tmp_path, monkeypatch, key,
                                                                  value, off):
    """The page downloads its endgame table, so it reads one of up to 4 pieces (9.5 MB; 5 are
    431 MB), and has no tree-search quiescence: a model searching with either is named with
    the way out, at once (no table is solved or read first)."""
    from azjax.envs import draughts_endings

    def no_table(max_pieces):
        raise AssertionError(f"the {max_pieces}-piece table was asked for")

    monkeypatch.setattr(draughts_endings, "load_table", no_table)
    agent = _asking([f"search.{key}={value}"])
    with pytest.raises(WebExportError, match=f"search.{key} is not played in the "
                                             f"browser: export with --set search.{key}={off}"):
        export_web(agent, tmp_path / "page")
    assert not (tmp_path / "page").exists()


def test_every_setting_the_page_cannot_play_is_named_in_one_line(tmp_path):
    """A tree search with the 5-piece table and quiescence: one line names both settings and
    the one export command that plays it."""
    with pytest.raises(WebExportError) as error:
        export_web(_asking(["search.endgame_table=5", "search.quiescence=2"]), tmp_path / "page")
    assert str(error.value) == (
        "search.endgame_table, search.quiescence are not played in the browser: export with "
        "--set search.endgame_table=4 --set search.quiescence=0")
    assert not (tmp_path / "page").exists()


def test_the_cli_writes_a_folder_that_a_static_server_serves(exported, tmp_path):
    """`azjax export MODEL --web DIR` as a user runs it: the folder (page, runtime, graphs) and
    a line saying how to serve it; an option that does not apply is one line."""
    done, out = exported["hexapawn_cli"], exported["hexapawn"]
    assert done.returncode == 0, done.stderr
    assert "python -m http.server" in done.stdout
    assert {p.name for p in out.iterdir()} == {"index.html", "static", "game"}
    assert {p.name for p in (out / "game").iterdir()} == {
        "game.json", "describe.onnx", "step.onnx", "tree_step.onnx", "network.onnx"}
    assert (out / "static" / "ort" / "NOTICE.txt").is_file()
    bad = subprocess.run([sys.executable, "-m", "azjax", "export", "tic_tac_toe", "--web",
                          str(tmp_path / "page"), "--against", "random"], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "--against does not apply" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "page").exists()
