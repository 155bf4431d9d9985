"""The page `azjax export --web` writes, measured in headless Chromium on this machine.

    python benchmarks/bench_web.py [--games tic_tac_toe connect_four draughts hexapawn]
                                   [--positions 5] [--screenshot docs/images/web-connect-four.png]
                                   [--set search.KEY=VALUE ...]

Per game (its shipped model, hexapawn's examples/hexapawn_model; the draughts model with its
4-piece endgame table): the export's wall time, the folder's size (all of it, and without the
onnxruntime-web runtime every page carries), the page's load time (from navigation to "Your
move.", a fresh browser profile, files from a local static server), the AI's time per move at
each simulation count the page offers, and what its search reached in each time per move:
simulations, or for a model that plays alpha-beta there, positions and whole moves deep
(medians over `--positions` positions of random play, in the page, after one warm-up move).
Also the number of those positions where the page's move at the model's default simulations
equals `Agent.act`'s (an alpha-beta model's: its network's Gumbel search, which the page plays
at simulation counts).
Needs Debian's chromium and `npm ci` (onnxruntime-web).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import socketserver
import statistics
import tempfile
import threading
import time
from pathlib import Path

import jax
import numpy as np

from azjax.agent import Agent
from azjax.apps.web_export import export_web
from azjax.envs.core import positions_along, random_move_lists

REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS = {"tic_tac_toe": "tic_tac_toe", "connect_four": "connect_four", "draughts": "draughts",
          "hexapawn": str(REPO_ROOT / "examples" / "hexapawn_model")}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served(folder: Path):
    handler = functools.partial(_Quiet, directory=str(folder))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


def folder_size(folder: Path, skip: str = "") -> int:
    return sum(f.stat().st_size for f in folder.rglob("*")
               if f.is_file() and not (skip and skip in f.parts))


def measure(game: str, out: Path, count: int, screenshot: str | None,
            overrides: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    agent = Agent.load(MODELS[game], trust_game=True).with_search(overrides)
    started = time.perf_counter()
    export_web(agent, out)
    export_s = time.perf_counter() - started
    lists = random_move_lists(agent.env, count, seed=0, plies=(2, 12))
    states = [list(positions_along(agent.env, moves))[-1] for moves in lists]
    batch = jax.tree.map(lambda *xs: np.stack(xs), *states)
    counted = agent.with_search(["search.algorithm=gumbel"]) \
        if agent.config.search.algorithm == "alphabeta" else agent
    want = np.asarray(counted.act(jax.random.PRNGKey(0), batch)).tolist()
    row = {"game": game, "export_s": export_s, "mb": folder_size(out) / 1e6,
           "mb_own": folder_size(out, skip="ort") / 1e6}
    with served(out) as url, tempfile.TemporaryDirectory() as profile, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=FLAGS,
            viewport={"width": 1000, "height": 760})
        page = browser.new_page()
        started = time.perf_counter()
        page.goto(url)
        page.wait_for_function("document.getElementById('status').textContent === 'Your move.'",
                               timeout=300_000)
        row["load_s"] = time.perf_counter() - started
        strengths = page.evaluate("window.azjax.backend.games().then(g => g.simulations)")
        timed = """async r => { const t = performance.now();
                               const reply = await window.azjax.backend.move(r);
                               return [performance.now() - t, reply.move]; }"""
        page.evaluate(timed, {"game": agent.env.name, "moves": lists[0],
                              "simulations": strengths[0]})  # warm-up
        row["ms"] = {}
        for n in strengths:
            replies = [page.evaluate(timed, {"game": agent.env.name, "moves": moves,
                                             "simulations": n}) for moves in lists]
            row["ms"][n] = statistics.median(ms for ms, _ in replies)
            if n == agent.num_simulations:
                row["same"] = sum(m == w for (_, m), w in zip(replies, want, strict=True))
        reached = "r => window.azjax.backend.move(r).then(a => [a.simulations, a.depth ?? null])"
        row["reached"] = {}
        for movetime in page.evaluate("window.azjax.backend.games().then(g => g.movetimes)"):
            replies = [page.evaluate(reached, {"game": agent.env.name, "moves": moves,
                                               "movetime": movetime}) for moves in lists]
            depths = [d for _, d in replies if d is not None]
            row["reached"][movetime] = (statistics.median(n for n, _ in replies),
                                        statistics.median(depths) if depths else None)
        if screenshot:
            for _ in range(3):
                count_before = page.locator("#history li").count()
                page.locator("#board button.cell:not([disabled])").nth(3).click()
                page.wait_for_function(
                    "n => document.querySelectorAll('#history li').length > n + 1 && "
                    "document.getElementById('status').textContent === 'Your move.'",
                    arg=count_before, timeout=300_000)
            page.screenshot(path=screenshot)
        browser.close()
    row["default"] = agent.num_simulations
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--positions", type=int, default=5)
    parser.add_argument("--screenshot", default=None,
                        help="a PNG of the connect-four page after three moves a side")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="search.KEY=VALUE", help="a search setting of every model "
                        "exported (e.g. search.endgame_table=0)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for game in args.games:
            shot = args.screenshot if game == "connect_four" else None
            rows.append(measure(game, Path(tmp) / game, args.positions, shot, args.overrides))
            print(f"measured {game}", flush=True)
    print("\n| game | export s | folder MB (own files) | load s | ms per move at "
          "simulations | reached per time per move | page = Agent.act at the default |")
    print("|---|---:|---:|---:|---|---|---:|")
    for r in rows:
        times = ", ".join(f"{n}: {ms:,.0f}" for n, ms in r["ms"].items())
        reached = ", ".join(
            f"{t} s: {n:,.0f} simulations" if d is None else
            f"{t} s: {n:,.0f} positions, {d:g} moves deep" for t, (n, d) in r["reached"].items())
        print(f"| {r['game']} | {r['export_s']:.0f} | {r['mb']:.1f} ({r['mb_own']:.2f}) | "
              f"{r['load_s']:.1f} | {times} | {reached} | {r.get('same', '-')}/"
              f"{args.positions} at {r['default']} |")


if __name__ == "__main__":
    main()
