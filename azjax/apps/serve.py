"""`azjax serve`: play every game in the browser against its model, and a JSON API.

    POST /api/move   {"game": "connect_four", "moves": [3, 3, 4], "simulations": 64}
                     or {..., "movetime": 0.5}: think half a second instead
                  -> {"move", "ai_moves", "moves", "value", "policy", "terminated", "winner",
                      "simulations": the simulations the AI's first search ran (alpha-beta:
                      the positions it searched), "search": "gumbel", "puct" or
                      "alphabeta", and for alpha-beta "depth": the whole moves it saw}
    POST /api/state  {"game": ..., "moves": [...]} -> the position, for the page to draw:
                  {"board": the env's `BoardView` or null, "clicks", "legal", "history",
                   "last_cells", "current_player", "terminated", "winner_player", "text"}
    GET  /api/games  the games, their titles, player names, notation, the simulation counts
                  and times per move offered, which model
    GET  /           the page (static files shipped in `azjax/apps/static/`)

The page knows no game: it draws the env's `board_view` grid and plays the env's
`action_clicks`, or shows `render`'s text and a button per legal move when a game has no view.
Moves are env action ids from the initial position; the player to move is the AI.

Every request the API refuses gets a 4xx status and `{"error": "<one line>"}`, and the server
keeps serving: a body over `MAX_BODY_BYTES` is refused (413) from its declared length or as soon
as that many bytes have arrived, unread past the limit; a body that is not UTF-8, not JSON, JSON
nested deeper than `MAX_NESTING` (refused before it is parsed), with NaN or Infinity, an integer
over `MAX_INT_DIGITS` digits or a duplicated key, or not an object, is refused with 400, as is a
field of the wrong type or a field other than `FIELDS`; an unknown game answers 404, a move list
the game cannot have (an id out of range, an illegal move, too long) or a strength not offered
422; an unknown path 404 and a wrong method 405. An unexpected failure answers 500 with the same
JSON shape.

The search with a simulation count is deterministic per request: its key is derived from
(game, moves, simulations), so the same request always gets the same answer, however many
arrive at once. A time per move (`movetime`, one of `MOVETIMES`) is not: the simulations it
reaches depend on the machine and on the requests served beside it. Simulation
counts are a fixed few, and each (game, count) compiles once, under a per-game lock, so
concurrent first requests do not compile twice.

A model that plays alpha-beta by default (the draughts model) plays its own search, alpha-beta
over the network, on the times per move, and its network's Gumbel search at the simulation
counts (alpha-beta has no simulations to set).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax import envs
from azjax.agent import Agent
from azjax.apps.turns import ai_turn, is_done, load_play_agent, model_label
from azjax.envs.core import Env, positions_along, winner_of

__all__ = ["FIELDS", "GAMES", "MAX_BODY_BYTES", "MAX_INT_DIGITS", "MAX_MOVES", "MAX_NESTING",
           "MOVETIMES", "SIMULATIONS", "ApiError", "GameService", "create_app", "nesting_depth",
           "parse_json_object", "run_server", "serve_service"]

GAMES = ("tic_tac_toe", "connect_four", "draughts")
SIMULATIONS = (16, 64, 256)  # the strengths offered: "easy", "medium", "hard"
MOVETIMES = (0.2, 1.0)  # and the times per move offered, in seconds
STATIC_DIR = Path(__file__).resolve().parent / "static"

FIELDS = ("game", "moves", "simulations", "movetime")  # what a POST body may hold; no more
MAX_BODY_BYTES = 64 * 1024  # a request body's limit: 10,000 moves of two digits fit
MAX_NESTING = 8  # the deepest JSON nesting read; a valid request nests 2 deep
MAX_INT_DIGITS = 18  # the longest JSON integer read, so every one fits in 64 bits
MAX_MOVES = 1000  # the longest move list replayed, whatever the game's own longest game
MAX_ERROR_CHARS = 1000  # an error message's length at most
_JSON_SPECIAL = re.compile(r'[\[\]{}"\\]')
log = logging.getLogger(__name__)


class ApiError(Exception):
    """A request the API refuses: HTTP `status` and a message naming what was wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _shown(value: Any, limit: int = 40) -> str:
    """`repr(value)` on one line, cut to about `limit` characters: safe to put in a message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def nesting_depth(text: str, limit: int = MAX_NESTING) -> int:
    """How deep the arrays and objects of JSON `text` nest, counting brackets outside strings,
    in one pass without recursion; it stops counting once past `limit` (returns limit + 1).
    Text that is not JSON gets a depth too: only `json.loads` says whether it is JSON."""
    depth = deepest = 0
    in_string, escaped = False, -1
    for match in _JSON_SPECIAL.finditer(text):
        position, char = match.start(), match.group()
        if position == escaped:
            continue
        if in_string:
            if char == "\\":
                escaped = position + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif char in "]}":
            depth -= 1
    return deepest


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ApiError(400, f"the integer {text[:MAX_INT_DIGITS]}... has more than "
                            f"{MAX_INT_DIGITS} digits")
    return int(text)


def _json_constant(name: str) -> Any:
    raise ApiError(400, f"{name} is not a JSON number")


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ApiError(400, f"the key {_shown(key)} appears twice in one JSON object")
        result[key] = value
    return result


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The JSON object a request body holds, read strictly.

    Raises:
      ApiError 400: the body is not UTF-8, not JSON, nested deeper than `MAX_NESTING`, holds
        NaN or Infinity, an integer longer than `MAX_INT_DIGITS` digits or a key twice in one
        object, or is not a JSON object.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ApiError(400, f"the body is not UTF-8: {error}") from None
    if nesting_depth(text) > MAX_NESTING:
        raise ApiError(400, f"the JSON nests deeper than {MAX_NESTING} levels")
    try:
        request = json.loads(text, parse_int=_json_int, parse_constant=_json_constant,
                             object_pairs_hook=_json_object)
    except json.JSONDecodeError as error:
        raise ApiError(400, f"malformed JSON: {error}") from None
    except RecursionError:  # unreachable after the depth check; a parser must never 500
        raise ApiError(400, f"the JSON nests deeper than {MAX_NESTING} levels") from None
    if not isinstance(request, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(request), "a number")
        raise ApiError(400, f"the request body must be a JSON object, not {kind}")
    return request


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
                 default_simulations: int | None = None, seed: int = 0,
                 movetimes: tuple[float, ...] = MOVETIMES):
        self.agents = dict(agents)
        self.movetimes = tuple(sorted(movetimes))
        self.simulations = tuple(sorted(simulations))
        self.default_simulations = default_simulations or self.simulations[
            len(self.simulations) // 2]
        if self.default_simulations not in self.simulations:
            raise ValueError(f"default simulations {self.default_simulations} is not among "
                             f"{list(self.simulations)}")
        self.seed = seed
        self._locks = {game: threading.Lock() for game in self.agents}
        self._compiled: set[tuple[str, int | float]] = set()
        self._players: dict[tuple[str, float], Any] = {}  # (game, movetime) -> its player
        # The simulation counts are a tree search's: an alpha-beta model's network searched so.
        self._tree_agents = {game: agent.with_search(["search.algorithm=gumbel"])
                             if agent.config.search.algorithm == "alphabeta" else agent
                             for game, agent in self.agents.items()}

    # ---- request parsing ---------------------------------------------------------------------

    def _parse(self, body: bytes) -> tuple[str, list[int], int | float]:
        """(game, moves, strength) of a POST body, every field checked: the strength is the
        simulations (an int) or, when the body gives one, the movetime (a float).

        Raises:
          ApiError: 400 for a body `parse_json_object` refuses, a field not in `FIELDS`, a
            field of the wrong type, no game; 404 for a game not served; 422 for a move list
            longer than the game's longest game (at most `MAX_MOVES`), an action id out of
            range (naming the move's index), a simulation count or movetime not offered.
        """
        request = parse_json_object(body)
        unknown = [key for key in request if key not in FIELDS]
        if unknown:
            raise ApiError(400, f"unknown field {_shown(unknown[0])}; the fields are "
                                f"{', '.join(FIELDS)}")
        game = request.get("game")
        if game is None:
            raise ApiError(400, f"the request names no game; games: {', '.join(self.agents)}")
        if not isinstance(game, str):
            raise ApiError(400, f"game must be a string, got {_shown(game)}")
        if game not in self.agents:
            raise ApiError(404, f"unknown game {_shown(game)}; games: {', '.join(self.agents)}")
        moves = self._check_moves(self.agents[game].env, request.get("moves", []))
        if "movetime" in request:
            return game, moves, self._check_movetime(request)
        simulations = request.get("simulations", self.default_simulations)
        if not _is_int(simulations):
            raise ApiError(400, f"simulations must be an integer, got {_shown(simulations)}")
        if simulations not in self.simulations:
            raise ApiError(422, f"simulations must be one of {list(self.simulations)}, got "
                                f"{simulations}")
        return game, moves, simulations

    def _check_movetime(self, request: dict[str, Any]) -> float:
        """The request's movetime when it is one offered and comes without simulations."""
        movetime = request["movetime"]
        if "simulations" in request:
            raise ApiError(400, "give simulations or movetime, not both")
        if isinstance(movetime, bool) or not isinstance(movetime, int | float):
            raise ApiError(400, f"movetime must be a number of seconds, got {_shown(movetime)}")
        if float(movetime) not in self.movetimes:
            raise ApiError(422, f"movetime must be one of {list(self.movetimes)}, got "
                                f"{movetime}")
        return float(movetime)

    @staticmethod
    def _check_moves(env: Env, moves: Any) -> list[int]:
        """`moves` when it is a list of `env`'s action ids no longer than its longest game (at
        most `MAX_MOVES`); raises ApiError 400 for a wrong type, 422 for a bad length or id."""
        if not isinstance(moves, list):
            raise ApiError(400, f"moves must be a list of action ids (integers), got "
                                f"{_shown(moves)}")
        for index, move in enumerate(moves):
            if not _is_int(move):
                raise ApiError(400, f"moves must be a list of action ids (integers): move "
                                    f"{index} is {_shown(move)}")
        longest = min(env.max_game_length or MAX_MOVES, MAX_MOVES)
        if len(moves) > longest:
            raise ApiError(422, f"{len(moves)} moves: a {env.name} game here has at most "
                                f"{longest}")
        for index, move in enumerate(moves):
            if not 0 <= move < env.num_actions:
                raise ApiError(422, f"illegal move list: move {index} is illegal: action id "
                                    f"{move} is not an action id of {env.name} (0 to "
                                    f"{env.num_actions - 1})")
        return moves

    # ---- endpoints -----------------------------------------------------------------------------

    def games(self) -> dict[str, Any]:
        """The games served, with what the page shows of each, and the strengths offered:
        the simulation counts, the default one, the times per move, and per game the time per
        move the page selects first (the longest, for a model that searches by alpha-beta:
        its own search; else none, the default simulations)."""
        return {
            "simulations": list(self.simulations),
            "default_simulations": self.default_simulations,
            "movetimes": list(self.movetimes),
            "games": {
                game: {
                    "title": agent.env.title,
                    "players": list(agent.env.player_names),
                    "num_actions": agent.env.num_actions,
                    "labels": [agent.env.action_to_str(a) for a in range(agent.env.num_actions)],
                    "model": model_label(agent),
                    "untrained": bool(agent.meta.get("untrained")),
                    # The page's first choice: a model's own search, alpha-beta on the clock.
                    "default_movetime": max(self.movetimes, default=None)
                    if agent.config.search.algorithm == "alphabeta" else None,
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
            turn = self._turn(game, state, key, simulations)
        else:
            with self._locks[game]:  # the first request per (game, strength) compiles
                turn = self._turn(game, state, key, simulations)
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
            "simulations": int(turn.visits.sum()),
            "search": "alphabeta" if turn.depth is not None else
            self._tree_agents[game].config.search.algorithm,
            **({} if turn.depth is None else {"depth": turn.depth}),
        }

    def _turn(self, game: str, state: Any, key: jax.Array, strength: int | float) -> Any:
        """The AI's turn at a simulation count (an int: the tree search) or a time per move (a
        float: the model's own search, alpha-beta included)."""
        if isinstance(strength, int):
            return ai_turn(self._tree_agents[game], state, key, num_simulations=strength)
        agent = self.agents[game]
        player = self._players.get((game, strength))
        if player is None:  # one per (game, time): it keeps its measured speed
            player = self._players.setdefault((game, strength), agent.player(
                movetime=strength, keep_tree=False))
        return ai_turn(agent, state, key, num_simulations=agent.num_simulations,
                       player=player)

    def warm(self) -> None:
        """Compiles every game's search at every strength offered, before serving."""
        for game in self.agents:
            for simulations in self.simulations:
                self.move(json.dumps({"game": game, "moves": [],
                                      "simulations": simulations}).encode())
            for movetime in self.movetimes:
                self.move(json.dumps({"game": game, "moves": [],
                                      "movetime": movetime}).encode())


async def read_body(request, limit: int = MAX_BODY_BYTES) -> bytes:
    """A Starlette request's body, read chunk by chunk up to `limit` bytes.

    Raises:
      ApiError 413: the declared Content-Length, or the bytes received so far, exceed `limit`;
        nothing past the chunk that crossed it is read.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and (len(declared) > 12 or int(declared) > limit):
        raise ApiError(413, f"the body's declared length {declared[:13]} is over the limit of "
                            f"{limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def error_response(status: int, message: str):
    """`{"error": message}` with HTTP `status`, the message on one line, cut to
    `MAX_ERROR_CHARS`, as ASCII JSON (any character a request smuggled in is escaped)."""
    from starlette.responses import Response

    line = " ".join(message.split())
    if len(line) > MAX_ERROR_CHARS:
        line = line[:MAX_ERROR_CHARS] + "..."
    return Response(json.dumps({"error": line}), status_code=status,
                    media_type="application/json")


def create_app(service: GameService):
    """The Starlette app over a `GameService`: every refusal and failure answers JSON."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.responses import FileResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def endpoint(handler, *, with_body: bool = True):
        async def call(request):
            try:
                if not with_body:
                    return JSONResponse(handler())
                body = await read_body(request)
                # Searches run in worker threads: JAX releases the GIL, the server stays live.
                return JSONResponse(await run_in_threadpool(handler, body))
            except ApiError as error:
                return error_response(error.status, str(error))
            except Exception as error:  # the server answers JSON and keeps serving
                log.exception("%s %s failed", request.method, request.url.path)
                return error_response(500, f"internal server error ({type(error).__name__})")

        return call

    async def http_error(request, error):  # no route (404), a wrong method (405)
        response = error_response(error.status_code,
                                  f"{error.detail}: {request.method} {request.url.path[:80]}")
        response.headers.update(error.headers or {})
        return response

    async def server_error(request, error):  # a failure outside the API endpoints
        return error_response(500, f"internal server error ({type(error).__name__})")

    async def index(request):
        return FileResponse(STATIC_DIR / "index.html")

    return Starlette(routes=[
        Route("/", index),
        Route("/api/games", endpoint(service.games, with_body=False)),
        Route("/api/state", endpoint(service.state), methods=["POST"]),
        Route("/api/move", endpoint(service.move), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ], exception_handlers={HTTPException: http_error, Exception: server_error})


def serve_service(games: tuple[str, ...] = GAMES) -> GameService:
    """The service `azjax serve` runs: each game's agent (shipped model, else an untrained
    network) at the strengths `SIMULATIONS`, the middle one by default, and the times per move
    `MOVETIMES` (an alpha-beta model: its network's Gumbel search at the simulation counts,
    alpha-beta on the times; see the module docstring).

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
    _check_address(host, port)
    print(f"azjax serve: open http://{host}:{port}/  (Ctrl-C stops)", flush=True)
    uvicorn.run(create_app(service), host=host, port=port, log_level="warning")


def _check_address(host: str, port: int) -> None:
    """Raises OSError naming `host`:`port` when the server could not listen there (a port in
    use, an address not of this machine), before the model is served."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {host}:{port}: "
                                   f"{error.strerror or error}") from None
