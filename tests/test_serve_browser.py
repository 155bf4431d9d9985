"""End to end in headless Chromium (Debian's `chromium`, driven by Playwright, no browser
download), against the page `azjax serve` ships, which knows no game: a whole connect-four game
against the shipped model, played by clicking, at the strengths `azjax serve` offers (its
screenshot is the docs' picture of the app), a draughts move by two clicks and a tic-tac-toe
move by one."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from azjax import envs
from azjax.apps.serve import MOVETIMES, SIMULATIONS

OPENING = (3, 2, 4)  # the human's first columns (0-based), before the picture
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (apt-get install -y chromium)")


@contextlib.contextmanager
def _page(**options):
    """A page of headless Chromium with a throwaway profile, closed on exit."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, **options)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def _turn_done(page, history_length: int) -> None:
    """Waits until the page shows a result, or the human's move again after `history_length`
    moves (the status reads "…" or "thinking" in between)."""
    page.wait_for_function(
        """n => { const s = document.getElementById('status');
                  const count = document.querySelectorAll('#history li').length;
                  return s.dataset.result || (s.textContent === 'Your move.' && count === n); }""",
        arg=history_length, timeout=120_000)


def _click_column(page, column: int) -> None:
    """Clicks `column` if it is legal (a column's cells are enabled only then), else the first
    legal one."""
    wanted = f"#board button.cell[data-col='{column}']:not([disabled])"
    page.locator(wanted if page.locator(wanted).count()
                 else "#board button.cell:not([disabled])").first.click()


def _check_strengths(page, service) -> None:
    """The page offers the strengths `azjax serve` configures, its default selected."""
    assert service.simulations == SIMULATIONS
    options = page.locator("#strength option")
    assert options.evaluate_all("os => os.map(o => o.value)") == (
        [f"s{n}" for n in SIMULATIONS] + [f"t{t:g}" for t in MOVETIMES])
    assert options.all_inner_texts() == [
        f"{label} ({n} simulations)" for label, n in zip(("easy", "medium", "hard"), SIMULATIONS,
                                                          strict=True)] + [
        f"think {t:g} s a move" for t in MOVETIMES]
    assert page.input_value("#strength") == f"s{service.default_simulations}"


def test_a_whole_connect_four_game_against_the_shipped_model_by_clicking(tmp_path):
    """The service `azjax serve` runs, its shipped connect-four model at the default strength:
    the picture (to $AZJAX_SCREENSHOT when set, e.g. docs/images/serve-connect-four.png, else
    to the test's temporary folder) shows the position after the human's first moves; the game
    is then played out and the page's result checked."""
    from play_server import PlayServer

    from azjax.apps.serve import serve_service
    from azjax.apps.turns import model_label

    # A test run leaves the checkout as it was: the docs' picture is written only on request.
    screenshot = Path(os.environ.get("AZJAX_SCREENSHOT") or tmp_path / "serve-connect-four.png")
    env = envs.make("connect_four")
    service = serve_service()
    assert not service.agents["connect_four"].meta.get("untrained")
    server = PlayServer(service)
    replies = []
    try:
        with _page(viewport={"width": 980, "height": 620}) as page:
            page.on("response", lambda r: replies.append((r.request.post_data, r.json()))
                    if r.url.endswith("/api/move") else None)
            page.goto(server.url + "/?game=connect_four")
            _turn_done(page, 0)
            assert model_label(service.agents["connect_four"]) in page.inner_text("#model")
            _check_strengths(page, service)
            clicks = 0
            while not page.get_attribute("#status", "data-result"):
                # A few natural first moves for the picture, then the human walks round the
                # columns (3, 6, 2, 5, ...), skipping full ones.
                _click_column(page, OPENING[clicks] if clicks < len(OPENING)
                              else (3 * clicks + 3) % 7)
                clicks += 1
                _turn_done(page, 2 * clicks)
                if clicks == len(OPENING):
                    screenshot.parent.mkdir(parents=True, exist_ok=True)
                    page.mouse.move(0, 0)  # no hovered cell in the picture
                    page.screenshot(path=str(screenshot))
                assert clicks <= 21
            result = page.get_attribute("#status", "data-result")
            status = page.inner_text("#status")
            history = page.locator("#history li").all_inner_texts()
            stones = page.locator("#board .piece.p0, #board .piece.p1").count()
            searched = page.inner_text("#searched")
    finally:
        server.stop()

    # Every AI reply was a legal whole turn for the position the page sent, at the default.
    assert replies and all(len(answer["ai_moves"]) == 1 for _, answer in replies)
    # The page says what the search behind the AI's last move looked at.
    assert searched == f"Searched {replies[-1][1]['simulations']:,} simulations (Gumbel search)."
    for sent, answer in replies:
        request = json.loads(sent)
        assert request["simulations"] == service.default_simulations
        state = envs.play_moves(env, request["moves"])
        assert np.asarray(state.legal_action_mask)[answer["move"]], (request, answer)
    # The page shows the game the server played: every move, and the true result.
    moves = replies[-1][1]["moves"]
    if result == "human":
        moves = moves + [int(history[-1].split()[-1]) - 1]
    final = envs.play_moves(env, moves)
    assert bool(final.terminated) and len(history) == len(moves) == stones
    winner = None if not np.asarray(final.rewards).any() else int(np.argmax(final.rewards))
    assert result == {None: "draw", 0: "human", 1: "ai"}[winner]
    assert status.startswith("Game over")
    assert screenshot.stat().st_size > 10_000


def test_draughts_by_two_clicks_and_tic_tac_toe_by_one(play_server):
    """The same page, knowing no game, plays the env's clicks: a draughts man picked on 9
    then moved to 13; a tic-tac-toe mark on the centre cell."""
    with _page() as page:
        page.goto(play_server.url + "/?game=draughts")
        _turn_done(page, 0)
        assert page.locator("#board button.cell").count() == 64
        assert page.locator("#board .piece.p0").count() == 12
        page.click("#board button.cell[data-cell='17']")  # square 9 (row 2, col 1)
        assert "selected" in page.get_attribute("#board [data-cell='17']", "class")
        assert "target" in page.get_attribute("#board [data-cell='24']", "class")
        assert page.locator("#board .target").count() == 2  # 9-13 and 9-14
        page.click("#board button.cell[data-cell='24']")  # square 13
        _turn_done(page, 2)
        draughts_history = page.locator("#history li").all_inner_texts()

        page.goto(play_server.url + "/?game=tic_tac_toe")
        _turn_done(page, 0)
        page.click("#board button.cell[data-cell='4']")
        _turn_done(page, 2)
        ttt_history = page.locator("#history li").all_inner_texts()
        centre = page.inner_text("#board [data-cell='4'] .piece")
    assert draughts_history[0] == "You 9-13" and draughts_history[1].startswith("AI ")
    reply = draughts_history[1].split()[1]
    assert reply in envs.make("draughts").legal_moves(
        envs.play_moves(envs.make("draughts"), [envs.make("draughts").str_to_action("9-13")]))
    assert ttt_history[0] == "You 5" and centre == "X"


def test_a_game_without_a_board_view_is_played_by_its_move_buttons():
    """`RaceToThree` (tests/toy_games.py) has no board view: the page shows its text and a
    button per legal action, and a turn of three actions is one line of the history."""
    from play_server import PlayServer
    from toy_games import RaceToThree

    from azjax.apps.serve import GameService
    from azjax.apps.turns import untrained_agent

    if "race_to_three" not in envs.available():
        envs.register("race_to_three", RaceToThree)
    agent = untrained_agent("race_to_three", num_simulations=4)
    server = PlayServer(GameService({"race_to_three": agent}, simulations=(4,)))
    try:
        with _page() as page:
            page.goto(server.url + "/")
            _turn_done(page, 0)
            assert page.inner_text("#text-board") == "count 0, player 0 to move"
            assert page.locator("button.move").all_inner_texts() == ["pass", "keep"]
            for count in (1, 2):  # keep the turn, twice...
                page.click("button.move[data-action='1']")
                page.wait_for_function(
                    "n => document.getElementById('text-board').textContent"
                    ".startsWith('count ' + n) && !document.querySelector('button.move')"
                    ".disabled", arg=count)
            page.click("button.move[data-action='1']")  # ...and bring the count to 3
            page.wait_for_function("() => document.getElementById('status').dataset.result")
            result = page.get_attribute("#status", "data-result")
            history = page.locator("#history li").all_inner_texts()
    finally:
        server.stop()
    assert result == "human" and history == ["You keep keep keep"]
