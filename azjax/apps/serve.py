"""`azjax serve`: play every game in the browser against its model, and a JSON API.

    POST /api/move   {"game": "connect_four", "moves": [3, 3, 4], "simulations": 64}
                  -> {"move", "ai_moves", "moves", "value", "policy", "terminated", "winner"}
    POST /api/state  {"game": ..., "moves": [...]} -> the position, for the page to draw:
                  {"board": the env's `BoardView` or null, "clicks", "legal", "history",
                   "last_cells", "current_player", "terminated", "winner_player", "text"}
    GET  /api/games  the games, their titles, player names, notation, the simulation counts
                  offered, which model
    GET  /           the page (static files shipped in `azjax/apps/static/`)

The page knows no game: it draws the env's `board_view` grid and plays the env's
`action_clicks`, or shows `render`'s text and a button per legal move when a game has no view.
Moves are env action ids from the initial position; the player to move is the AI. Bad requests
answer 4xx with `{"error": "..."}`. The search is deterministic per request: its key is derived
from (game, moves, simulations), so the same request always gets the same answer, however many
arrive at once. Simulation counts are a fixed few, and each (game, count) compiles once, under
a per-game lock, so concurrent first requests do not compile twice.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax import envs
from azjax.agent import Agent
from azjax.apps.turns import ai_turn, is_done, load_play_agent, model_label
from azjax.envs.core import Env, positions_along, winner_of

__all__ = ["GAMES", "SIMULATIONS", "ApiError", "GameService", "create_app", "run_server",
           "serve_service"]

GAMES = ("tic_tac_toe", "connect_four", "draughts")
SIMULATIONS = (16, 64, 256)  # the strengths offered: "easy", "medium", "hard"
STATIC_DIR = Path(__file__).resolve().parent / "static"


class ApiError(Exception):
    """A request the API refuses: HTTP `status` and a message naming what was wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def request_key(seed: int, game: str, moves: list[int], simulations: int) -> jax.Array:
    """The search key of one request: the same request, the same key (stable across runs)."""
    digest = hashlib.sha256(json.dumps([game, moves, simulations]).encode()).digest()
    return jax.random.fold_in(jax.random.PRNGKey(seed), int.from_bytes(digest[:4], "little") >> 1)


def replay(env: Env, moves: list[int]) -> list[Any]:
    """The positions along `moves`: the initial one, then one after each move.

    Raises:
      ApiError 422: naming the first illegal move and the legal ones.
    """
    try:
        return list(positions_along(env, moves))
    except ValueError as error:
        raise ApiError(422, f"illegal move list: {error}") from None


def turns_of(env: Env, positions: list[Any], moves: list[int]) -> list[dict[str, Any]]:
    """The move list as whole turns (a multi-jump is one), each with its mover and notation."""
    turns: list[dict[str, Any]] = []
    for before, action in zip(positions, moves, strict=False):
        player = int(before.current_player)
        if turns and turns[-1]["player"] == player:
            turns[-1]["actions"].append(action)
        else:
            turns.append({"player": player, "actions": [action]})
    for turn in turns:
        turn["move"] = env.format_move(turn["actions"])
    return turns


def changed_cells(env: Env, before: Any, view: Any) -> list[int]:
    """The cells of `view` that differ from `before`'s board view: what the last turn did."""
    old = env.board_view(before)
    if old is None or len(old.cells) != len(view.cells):
        return []
    return [i for i, (a, b) in enumerate(zip(old.cells, view.cells, strict=True)) if a != b]


class GameService:
    """The API's logic, free of HTTP: agents per game, the strengths offered, the seed."""

    def __init__(self, agents: dict[str, Agent], *, simulations: tuple[int, ...] = SIMULATIONS,
                 default_simulations: int | None = None, seed: int = 0):
        self.agents = dict(agents)
        self.simulations = tuple(sorted(simulations))
        self.default_simulations = default_simulations or self.simulations[
            len(self.simulations) // 2]
        if self.default_simulations not in self.simulations:
            raise ValueError(f"default simulations {self.default_simulations} is not among "
                             f"{list(self.simulations)}")
        self.seed = seed
        self._locks = {game: threading.Lock() for game in self.agents}
        self._compiled: set[tuple[str, int]] = set()

    # ---- request parsing ---------------------------------------------------------------------

    def _parse(self, body: bytes) -> tuple[str, list[int], int]:
        try:
            request = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ApiError(400, f"malformed JSON: {error}") from None
        if not isinstance(request, dict):
            raise ApiError(400, "the request body must be a JSON object")
        game = request.get("game")
        if game not in self.agents:
            raise ApiError(404, f"unknown game {game!r}; games: {', '.join(self.agents)}")
        moves = request.get("moves", [])
        if not isinstance(moves, list) or not all(
                isinstance(m, int) and not isinstance(m, bool) for m in moves):
            raise ApiError(400, "moves must be a list of action ids (integers)")
        simulations = request.get("simulations", self.default_simulations)
        if not isinstance(simulations, int) or isinstance(simulations, bool) or \
                simulations not in self.simulations:
            raise ApiError(422, f"simulations must be one of {list(self.simulations)}, got "
                                f"{simulations!r}")
        return game, moves, simulations

    # ---- endpoints -----------------------------------------------------------------------------

    def games(self) -> dict[str, Any]:
        """The games served, with what the page shows of each, and the strengths offered."""
        return {
            "simulations": list(self.simulations),
            "default_simulations": self.default_simulations,
            "games": {
                game: {
                    "title": agent.env.title,
                    "players": list(agent.env.player_names),
                    "num_actions": agent.env.num_actions,
                    "labels": [agent.env.action_to_str(a) for a in range(agent.env.num_actions)],
                    "model": model_label(agent),
                    "untrained": bool(agent.meta.get("untrained")),
                }
                for game, agent in self.agents.items()
            },
        }

    def state(self, body: bytes) -> dict[str, Any]:
        """The position after a move list, for the page: the env's board view, the clicks of
        each legal action, the turns so far, the player to move, the text rendering."""
        game, moves, _ = self._parse(body)
        env = self.agents[game].env
        positions = replay(env, moves)
        state = positions[-1]
        done = is_done(state)
        legal = [] if done else np.flatnonzero(np.asarray(state.legal_action_mask)).tolist()
        view = env.board_view(state)
        history = turns_of(env, positions, moves)
        return {
            "game": game, "moves": moves,
            "board": None if view is None else view.to_json(),
            "clicks": [[list(cells) for cells in env.action_clicks(a)] for a in legal],
            "legal": legal, "history": history,
            "last_cells": changed_cells(env, positions[-1 - len(history[-1]["actions"])], view)
            if history and view is not None else [],
            "current_player": int(state.current_player),
            "terminated": done, "winner_player": winner_of(state), "text": env.render(state),
        }

    def move(self, body: bytes) -> dict[str, Any]:
        """The AI's whole turn after a move list; see the module docstring."""
        game, moves, simulations = self._parse(body)
        agent = self.agents[game]
        positions = replay(agent.env, moves)
        state = positions[-1]
        last_mover = int(positions[-2].current_player) if moves else None
        if is_done(state):
            raise ApiError(422, "the game is already over after these moves")
        ai = int(state.current_player)
        if last_mover == ai:
            raise ApiError(422, "the move list ends in the middle of a multi-jump: the human "
                                "must finish the capture before the AI moves")
        key = request_key(self.seed, game, moves, simulations)
        if (game, simulations) in self._compiled:
            turn = ai_turn(agent, state, key, num_simulations=simulations)
        else:
            with self._locks[game]:  # the first request per (game, simulations) compiles
                turn = ai_turn(agent, state, key, num_simulations=simulations)
                self._compiled.add((game, simulations))
        winner = winner_of(turn.state)
        return {
            "move": turn.actions[0],
            "ai_moves": turn.actions,
            "moves": moves + turn.actions,
            "value": turn.value,
            "policy": [float(p) for p in turn.policy],
            "terminated": is_done(turn.state),
            "winner": (None if not is_done(turn.state) else "draw" if winner is None
                       else "ai" if winner == ai else "human"),
        }

    def warm(self) -> None:
        """Compiles every game's search at every strength offered, before serving."""
        for game in self.agents:
            for simulations in self.simulations:
                self.move(json.dumps({"game": game, "moves": [],
                                      "simulations": simulations}).encode())


def create_app(service: GameService):
    """The Starlette app over a `GameService`."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def endpoint(handler):
        async def call(request):
            body = await request.body()
            try:
                # Searches run in worker threads: JAX releases the GIL, the server stays live.
                return JSONResponse(await run_in_threadpool(handler, body))
            except ApiError as error:
                return JSONResponse({"error": str(error)}, status_code=error.status)

        return call

    async def games(request):
        return JSONResponse(service.games())

    async def index(request):
        return FileResponse(STATIC_DIR / "index.html")

    return Starlette(routes=[
        Route("/", index),
        Route("/api/games", games),
        Route("/api/state", endpoint(service.state), methods=["POST"]),
        Route("/api/move", endpoint(service.move), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ])


def serve_service(games: tuple[str, ...] = GAMES) -> GameService:
    """The service `azjax serve` runs: each game's agent (shipped model, else an untrained
    network) at the strengths `SIMULATIONS`, the middle one by default.

    `games`: what `azjax play` takes, each: a registered game id (any game registered with
    `envs.register` is served the same way), a run or model dir (its game served by its
    model, a game of your own included) or a game of your own as `module:Class` (an untrained
    network). The API names a game by its id, else by its env's `name`.

    Raises:
      ValueError: two of them would be served under one name.
    """
    agents: dict[str, Agent] = {}
    for spec in games:
        agent = load_play_agent(spec)
        name = spec if spec in envs.available() else agent.env.name
        if name in agents:
            raise ValueError(f"two of the games to serve are named {name!r} ({spec} and an "
                             "earlier one); serve one of them")
        agents[name] = agent
    return GameService(agents)


def run_server(*, host: str = "127.0.0.1", port: int = 8000, warm: bool = False,
               games: tuple[str, ...] = GAMES) -> None:
    """Serves `serve_service(games)` on `host`:`port` (`azjax serve`, `--game` for `games`)."""
    import uvicorn

    service = serve_service(games)
    for game, agent in service.agents.items():
        print(f"{game}: {model_label(agent)}", flush=True)
    if warm:
        print("compiling the searches...", flush=True)
        service.warm()
    print(f"azjax serve: open http://{host}:{port}/  (Ctrl-C stops)", flush=True)
    uvicorn.run(create_app(service), host=host, port=port, log_level="warning")
