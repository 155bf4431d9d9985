"""End to end in headless Chromium (Debian's `chromium`, driven by Playwright, no browser
download): a whole connect-four game played by clicking, against the page `azjax serve` ships.
Saves docs/serve-connect-four.png."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT

import envs

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = REPO_ROOT / "docs" / "serve-connect-four.png"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (apt-get install -y chromium)")


def _turn_done(page, history_length: int) -> None:
    """Waits until the page shows a result, or the human's move again after `history_length`
    moves (the status reads "…" or "thinking" in between)."""
    page.wait_for_function(
        """n => { const s = document.getElementById('status');
                  const count = document.querySelectorAll('#history li').length;
                  return s.dataset.result || (s.textContent === 'Your move.' && count === n); }""",
        arg=history_length, timeout=120_000)


def test_a_whole_connect_four_game_by_clicking(play_server):
    from playwright.sync_api import sync_playwright

    env = envs.make("connect_four")
    replies = []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 980, "height": 620})
        try:
            page = browser.new_page()
            page.on("response", lambda r: replies.append((r.request.post_data, r.json()))
                    if r.url.endswith("/api/move") else None)
            page.goto(play_server.url + "/?game=connect_four")
            assert "untrained" in page.inner_text("#model").lower()
            _turn_done(page, 0)
            clicks = 0
            while not page.get_attribute("#status", "data-result"):
                # The human walks round the columns (3, 6, 2, 5, ...), skipping full ones: the
                # column buttons are enabled only when legal.
                wanted = f"button.column[data-action='{(3 * clicks + 3) % 7}']:not([disabled])"
                page.click(wanted if page.locator(wanted).count()
                           else "button.column:not([disabled])")
                clicks += 1
                _turn_done(page, 2 * clicks)
                assert clicks <= 21
            result = page.get_attribute("#status", "data-result")
            status = page.inner_text("#status")
            history = page.locator("#history li").all_inner_texts()
            stones = page.locator(".c4 .slot.p0, .c4 .slot.p1").count()
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()

    # Every AI reply was a legal whole turn for the position the page sent.
    assert replies and all(len(answer["ai_moves"]) == 1 for _, answer in replies)
    for sent, answer in replies:
        request = json.loads(sent)
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
    assert SCREENSHOT.stat().st_size > 10_000
