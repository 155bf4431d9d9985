"""The JSON API of `azjax serve` over real HTTP: answers, bad requests, determinism."""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from play_server import AI_JUMP_LINE, HUMAN_JUMP_LINE

from azjax import envs
from azjax.apps.terminal import parse_start
from azjax.envs.core import jitted_step


def _actions(game: str, line: str) -> list[int]:
    """Action ids of an opening in human notation (each turn may be several actions)."""
    env = envs.make(game)
    state, actions = env.init(jax.random.PRNGKey(0)), []
    for move in line.split():
        turn = env.parse_move(state, move)
        for action in turn:
            state = env.step(state, jnp.int32(action))
        actions += turn
    return actions


def _check_answer(request: dict, answer: dict) -> None:
    """The documented fields, a legal whole turn for the player to move, the right ending."""
    env = envs.make(request["game"])
    state = envs.play_moves(env, request["moves"])
    ai = int(state.current_player)
    assert answer["move"] == answer["ai_moves"][0]
    assert answer["moves"] == request["moves"] + answer["ai_moves"]
    after = envs.play_moves(env, answer["moves"])  # raises if any AI action is illegal
    done = bool(after.terminated)
    assert answer["terminated"] == done
    if not done:  # the AI's turn is whole: the other player moves next
        assert int(after.current_player) != ai
    assert len(answer["policy"]) == env.num_actions
    assert abs(sum(answer["policy"]) - 1) < 1e-4 and -1 <= answer["value"] <= 1
    rewards = np.asarray(after.rewards)
    expected = None if not done else "draw" if not rewards.any() else \
        "ai" if rewards[ai] > 0 else "human"
    assert answer["winner"] == expected


def test_move_answers_every_documented_field(play_server):
    request = {"game": "connect_four", "moves": [3, 3, 4], "simulations": 8}
    status, answer = play_server.post("/api/move", request)
    assert status == 200, answer
    assert set(answer) == {"move", "ai_moves", "moves", "value", "policy", "terminated",
                           "winner", "simulations", "search"}
    assert answer["simulations"] == 8 and answer["search"] == "gumbel"
    _check_answer(request, answer)


def test_the_ai_wins_draws_and_finishes_its_multi_jump(play_server):
    win = {"game": "tic_tac_toe", "moves": [0, 3, 1, 4], "simulations": 8}  # X to play 3
    draw = {"game": "tic_tac_toe", "moves": [0, 1, 2, 4, 3, 5, 7, 6], "simulations": 8}
    jump = {"game": "draughts", "moves": _actions("draughts", AI_JUMP_LINE), "simulations": 8}
    for request, winner in ((win, "ai"), (draw, "draw"), (jump, None)):
        status, answer = play_server.post("/api/move", request)
        assert status == 200, answer
        _check_answer(request, answer)
        assert answer["winner"] == winner
    assert envs.make("draughts").format_move(answer["ai_moves"]) == "22x15x6"


def _bad_requests():
    mid_jump = _actions("draughts", HUMAN_JUMP_LINE + " 8x15x24")[:-1]
    return [
        (b'{"game": "connect_four", "moves": [3,', 400, "malformed JSON"),
        (b"[3, 3, 4]", 400, "must be a JSON object"),
        ({"game": "chess", "moves": []}, 404, "unknown game 'chess'"),
        ({"game": "connect_four", "moves": "3 3 4"}, 400, "moves must be a list"),
        ({"game": "connect_four", "moves": [3] * 7}, 422,
         "move 6 is illegal: action id 3 is not among the legal actions [0, 1, 2, 4, 5, 6]"),
        ({"game": "connect_four", "moves": [9]}, 422, "move 0 is illegal: action id 9 is not"),
        ({"game": "draughts", "moves": mid_jump}, 422, "middle of a multi-jump"),
        ({"game": "tic_tac_toe", "moves": [0, 3, 1, 4, 2]}, 422, "already over"),
        ({"game": "tic_tac_toe", "moves": [], "simulations": 100}, 422,
         "simulations must be one of [8, 32], got 100"),
        ({"game": "tic_tac_toe", "moves": [], "simulations": "8"}, 400,
         "simulations must be an integer, got '8'"),
    ]


@pytest.mark.parametrize("body,status,message", _bad_requests())
def test_bad_requests_get_4xx_saying_why_and_the_server_keeps_serving(play_server, body,
                                                                       status, message):
    got, answer = play_server.post("/api/move", body)
    assert got == status and message in answer["error"], answer
    ok, _ = play_server.post("/api/state", {"game": "tic_tac_toe", "moves": [4]})
    assert ok == 200


def _json(request) -> bytes:
    return json.dumps(request).encode()


TEN_MB = b'{"game": "tic_tac_toe", "moves": [' + b"4, " * (10 * 2**20 // 3) + b"4]}"
TTT = '{"game": "tic_tac_toe", '

# (method, path, body, sent chunked, status, a part of the error message)
HOSTILE_REQUESTS = {
    "nested 100,000 deep": ("POST", "/api/move", b"[" * 100_000 + b"]" * 100_000, False, 413,
                            "over the limit of 65536 bytes"),
    "game a list": ("POST", "/api/move", _json({"game": ["tic_tac_toe"]}), False, 400,
                    "game must be a string, got ['tic_tac_toe']"),
    "game an object": ("POST", "/api/move", _json({"game": {"tic_tac_toe": 1}}), False, 400,
                       "game must be a string"),
    "nested 10,000 deep, inside the size limit": (
        "POST", "/api/move", (TTT + '"moves": ' + "[" * 10_000 + "]" * 10_000 + "}").encode(),
        False, 400, "nests deeper than 8 levels"),
    "nested 9 deep": ("POST", "/api/state", _json({"game": "tic_tac_toe", "moves": [[[[[[[[
        []]]]]]]]]}), False, 400, "nests deeper than 8"),
    "brackets inside a string are not nesting": (
        "POST", "/api/move", _json({"game": '[{"\\' * 20, "moves": []}), False, 404,
        "unknown game"),
    "game a number": ("POST", "/api/move", _json({"game": 3}), False, 400,
                      "game must be a string, got 3"),
    "game true": ("POST", "/api/move", _json({"game": True}), False, 400, "game must be a string"),
    "game null": ("POST", "/api/move", _json({"game": None}), False, 400, "names no game"),
    "no game": ("POST", "/api/move", _json({"moves": [4]}), False, 400, "names no game"),
    "game a 20,000-character string": ("POST", "/api/move", _json({"game": "x" * 20_000}), False,
                                       404, "unknown game 'xxxx"),
    "game a lone surrogate": ("POST", "/api/state", b'{"game": "\\ud800"}', False, 404,
                              "unknown game '\\ud800'"),
    "moves an object": ("POST", "/api/move", _json({"game": "tic_tac_toe", "moves": {"0": 4}}),
                        False, 400, "moves must be a list of action ids (integers), got {'0': 4}"),
    "moves null": ("POST", "/api/state", _json({"game": "tic_tac_toe", "moves": None}), False,
                   400, "moves must be a list"),
    "a move a float": ("POST", "/api/move", _json({"game": "tic_tac_toe", "moves": [4, 0.0]}),
                       False, 400, "move 1 is 0.0"),
    "a move true": ("POST", "/api/move", _json({"game": "tic_tac_toe", "moves": [True]}), False,
                    400, "move 0 is True"),
    "a move a string": ("POST", "/api/state", _json({"game": "tic_tac_toe", "moves": ["5"]}),
                        False, 400, "move 0 is '5'"),
    "a move a list": ("POST", "/api/move", _json({"game": "tic_tac_toe", "moves": [[4]]}), False,
                      400, "move 0 is [4]"),
    "a move negative": ("POST", "/api/move", _json({"game": "tic_tac_toe", "moves": [4, -1]}),
                        False, 422, "move 1 is illegal: action id -1 is not an action id of "
                                    "tic_tac_toe (0 to 8)"),
    "a move 2**40": ("POST", "/api/move", _json({"game": "connect_four", "moves": [2**40]}),
                     False, 422, "move 0 is illegal: action id 1099511627776 is not"),
    "a move of 30 digits": ("POST", "/api/move", _json({"game": "tic_tac_toe",
                                                         "moves": [10**30]}), False, 400,
                            "more than 18 digits"),
    "a move NaN": ("POST", "/api/move", (TTT + '"moves": [NaN]}').encode(), False, 400,
                   "NaN is not a JSON number"),
    "10,000 moves": ("POST", "/api/move", _json({"game": "connect_four", "moves": [3] * 10_000}),
                     False, 422, "10000 moves: a connect_four game here has at most 42"),
    "10,000 draughts moves": ("POST", "/api/move", _json({"game": "draughts",
                                                          "moves": [23] * 10_000}), False, 422,
                              "10000 moves: a draughts game here has at most 1000"),  # MAX_MOVES
    "simulations a float": ("POST", "/api/move", _json({"game": "tic_tac_toe",
                                                         "simulations": 8.0}), False, 400,
                            "simulations must be an integer, got 8.0"),
    "simulations true": ("POST", "/api/move", _json({"game": "tic_tac_toe", "simulations": True}),
                         False, 400, "simulations must be an integer"),
    "simulations null": ("POST", "/api/move", _json({"game": "tic_tac_toe", "simulations": None}),
                         False, 400, "simulations must be an integer, got None"),
    "simulations a list": ("POST", "/api/state", _json({"game": "tic_tac_toe",
                                                         "simulations": [8]}), False, 400,
                           "simulations must be an integer"),
    "simulations negative": ("POST", "/api/move", _json({"game": "tic_tac_toe",
                                                          "simulations": -8}), False, 422,
                             "simulations must be one of [8, 32], got -8"),
    "simulations Infinity": ("POST", "/api/move", (TTT + '"simulations": Infinity}').encode(),
                             False, 400, "Infinity is not a JSON number"),
    "simulations 1e400": ("POST", "/api/move", (TTT + '"simulations": 1e400}').encode(), False,
                          400, "simulations must be an integer, got inf"),
    "an unknown field": ("POST", "/api/move", _json({"game": "tic_tac_toe", "seed": 1}), False,
                         400, "unknown field 'seed'; the fields are game, moves, simulations"),
    "a duplicated key": ("POST", "/api/move", b'{"game": "tic_tac_toe", "game": "chess"}', False,
                         400, "the key 'game' appears twice"),
    "an empty body": ("POST", "/api/move", b"", False, 400, "malformed JSON: Expecting value"),
    "no body": ("POST", "/api/state", None, False, 400, "malformed JSON"),
    "a JSON number": ("POST", "/api/move", b"42", False, 400, "a JSON object, not a number"),
    "a JSON string": ("POST", "/api/move", b'"tic_tac_toe"', False, 400,
                      "a JSON object, not a string"),
    "JSON null": ("POST", "/api/state", b"null", False, 400, "a JSON object, not null"),
    "trailing data": ("POST", "/api/move", b'{"game": "tic_tac_toe"} {}', False, 400,
                      "malformed JSON: Extra data"),
    "not UTF-8": ("POST", "/api/move", b'{"game": "tic_tac_toe\xff"}', False, 400,
                  "the body is not UTF-8"),
    "UTF-16": ("POST", "/api/move", '{"game": "tic_tac_toe"}'.encode("utf-16"), False, 400,
               "the body is not UTF-8"),
    "a byte order mark": ("POST", "/api/move", b"\xef\xbb\xbf" + _json({"game": "tic_tac_toe"}),
                          False, 400, "malformed JSON: Unexpected UTF-8 BOM"),
    "10 MB with its length": ("POST", "/api/move", TEN_MB, False, 413,
                              f"declared length {len(TEN_MB)} is over the limit of 65536 bytes"),
    "10 MB chunked": ("POST", "/api/move", TEN_MB, True, 413,
                      "the body is over the limit of 65536 bytes"),
    "GET on a POST route": ("GET", "/api/move", None, False, 405,
                            "Method Not Allowed: GET /api/move"),
    "POST on a GET route": ("POST", "/api/games", b"{}", False, 405,
                            "Method Not Allowed: POST /api/games"),
    "an unknown route": ("GET", "/api/moves", None, False, 404, "Not Found: GET /api/moves"),
    "an unknown route, POST": ("POST", "/api/nothing", b"{}", False, 404, "Not Found"),
}


@pytest.mark.parametrize("name", list(HOSTILE_REQUESTS))
def test_hostile_requests_get_a_4xx_json_error_and_the_server_keeps_serving(play_server, name):
    method, path, body, chunked, status, message = HOSTILE_REQUESTS[name]
    got, content_type, answer = play_server.request(method, path, body, chunked=chunked)
    assert (got, content_type) == (status, "application/json"), (got, content_type, answer[:200])
    error = json.loads(answer)["error"]
    assert isinstance(error, str) and "\n" not in error and message in error, error
    ok, _ = play_server.post("/api/move", {"game": "tic_tac_toe", "moves": [4]})
    assert ok == 200


def test_an_unexpected_failure_answers_500_json_and_the_server_keeps_serving(play_server,
                                                                            monkeypatch):
    from azjax.apps import serve

    def fail(env, moves):
        raise RuntimeError("a failure the API does not expect")

    monkeypatch.setattr(serve, "replay", fail)
    got, content_type, answer = play_server.request("POST", "/api/state",
                                                    _json({"game": "tic_tac_toe"}))
    assert (got, content_type) == (500, "application/json")
    assert json.loads(answer) == {"error": "internal server error (RuntimeError)"}
    monkeypatch.undo()
    ok, _ = play_server.post("/api/state", {"game": "tic_tac_toe", "moves": [4]})
    assert ok == 200


def test_the_json_depth_scan_skips_strings_and_stops_early():
    from azjax.apps.serve import nesting_depth

    assert nesting_depth('{"a": [1, "[[[\\"[", {"b": []}]}') == 4
    assert nesting_depth('["\\\\", [[]]]') == 3  # an escaped backslash ends before the quote
    assert nesting_depth("[" * 100_000, limit=8) == 9
    assert nesting_depth("4") == 0


def test_state_describes_the_position_for_the_page(play_server):
    """Draughts after 9-13: the env's 8 x 8 board view, the two clicks of each legal action,
    the turn in PDN, the cells the turn changed."""
    draughts = envs.make("draughts")
    status, answer = play_server.post("/api/state", {"game": "draughts",
                                                     "moves": _actions("draughts", "9-13")})
    assert status == 200 and answer["current_player"] == 1 and not answer["terminated"]
    board = answer["board"]
    assert (board["rows"], board["cols"], len(board["cells"])) == (8, 8, 64)
    # Square 13 (row 3, col 0) holds a black man now; square 9 (row 2, col 1) is empty.
    assert board["cells"][24] == {"player": 0, "label": "", "note": "13", "shade": "dark"}
    assert board["cells"][17]["player"] is None and board["cells"][0]["shade"] == "light"
    assert sorted(answer["last_cells"]) == [17, 24]
    assert answer["history"] == [{"player": 0, "actions": [23], "move": "9-13"}]
    legal = draughts.legal_moves(parse_start(draughts, "9-13"))
    assert sorted(answer["legal"]) == sorted(a for m in legal.values() for a in m)
    for action, clicks in zip(answer["legal"], answer["clicks"], strict=True):
        assert len(clicks) == 2  # the piece, then where it goes
        frm, to = (board["cells"][cell[0]]["note"] for cell in clicks)
        assert draughts.action_to_str(action) == f"{frm}-{to}"


def test_games_name_each_game_and_its_players(play_server):
    games = play_server.service.games()["games"]
    assert games["connect_four"]["title"] == "Connect four"
    assert games["draughts"]["players"] == ["Black (b)", "White (w)"]
    assert games["tic_tac_toe"]["labels"] == [str(c) for c in range(1, 10)]
    status, answer = play_server.post("/api/state", {"game": "connect_four", "moves": [3]})
    assert status == 200 and answer["board"]["column_labels"] == list("1234567")
    assert answer["clicks"][3] == [[3, 10, 17, 24, 31, 38]]  # anywhere in column 4
    assert answer["last_cells"] == [38]  # the stone fell to the bottom row
    assert all(game["default_movetime"] is None for game in games.values())  # tree searches


def test_a_model_that_searches_by_alphabeta_is_offered_its_own_search_first():
    """The page selects the longest time per move for an alpha-beta model (the shipped
    draughts one), where its own search plays, not its network's tree search at the default
    simulations."""
    from azjax.apps.serve import MOVETIMES, GameService
    from azjax.apps.turns import untrained_agent

    agent = untrained_agent("draughts")
    service = GameService({"draughts": agent.with_search(["search.algorithm=alphabeta"]),
                           "connect_four": untrained_agent("connect_four")})
    games = service.games()["games"]
    assert games["draughts"]["default_movetime"] == max(MOVETIMES)
    assert games["connect_four"]["default_movetime"] is None


def _random_requests(count: int, seed: int = 0) -> list[dict]:
    """`count` requests from random live positions with the AI to move, over every game and
    both strengths of tic-tac-toe; drawn from a pool of count / 2, so some repeat."""
    rng = random.Random(seed)
    pool = []
    for game, simulations in [("tic_tac_toe", 8), ("tic_tac_toe", 32), ("connect_four", 8),
                              ("draughts", 8)]:
        env = envs.make(game)
        for _ in range(count // 8):
            state, moves, turn_starts = env.init(jax.random.PRNGKey(0)), [], [0]
            for _ in range(rng.randrange(12)):
                mover = int(state.current_player)
                action = rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask)).tolist())
                state = jitted_step(env)(state, jnp.int32(action))
                moves.append(action)
                if bool(state.terminated):
                    break
                if int(state.current_player) != mover:  # a live position, a new turn
                    turn_starts.append(len(moves))
            pool.append({"game": game, "moves": moves[:rng.choice(turn_starts)],
                         "simulations": simulations})
    return [rng.choice(pool) for _ in range(count)]


def test_concurrent_requests_get_legal_answers_identical_to_sequential_ones(play_server):
    """200 requests from 8 concurrent clients (the first ones compile, under the lock), then
    the same requests one by one: every answer legal, every pair identical."""
    requests = _random_requests(200)
    with ThreadPoolExecutor(max_workers=8) as clients:
        concurrent = list(clients.map(lambda r: play_server.post("/api/move", r), requests))
    one_by_one = [play_server.post("/api/move", r) for r in requests]
    for request, (status, answer), again in zip(requests, concurrent, one_by_one, strict=True):
        assert status == 200, (request, answer)
        _check_answer(request, answer)
        assert (status, answer) == again, request


def test_a_port_in_use_is_refused_naming_the_address():
    import socket

    from azjax.apps.serve import _check_address

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=rf"cannot listen on 127\.0\.0\.1:{port}: "):
            _check_address("127.0.0.1", port)


def test_an_alphabeta_model_plays_alphabeta_on_the_clock_and_its_tree_search_by_simulations():
    """The shipped draughts model, alpha-beta by default, is served as it is: a time per move
    plays its alpha-beta search (bounded here by a node budget, so the test does not depend on
    the machine's speed), a simulation count its network's Gumbel search, the same weights."""
    from azjax import Agent
    from azjax.apps.serve import GameService, serve_service

    assert serve_service(("draughts",)).agents["draughts"].config.search.algorithm == \
        "alphabeta"
    shipped = Agent.load("draughts").with_search(["search.endgame_table=0",
                                                  "search.alphabeta_nodes=64"])
    service = GameService({"draughts": shipped}, simulations=(4,), movetimes=(600.0,))
    tree = service._tree_agents["draughts"]  # what the simulation counts search with
    assert tree.config.search.algorithm == "gumbel"
    assert tree.config.network == shipped.config.network
    assert tree.config.search.endgame_table == shipped.config.search.endgame_table
    assert jax.tree.all(jax.tree.map(np.array_equal, tree.params, shipped.params))
    request = {"game": "draughts", "moves": _actions("draughts", "11-15")}
    timed = service.move(json.dumps(dict(request, movetime=600.0)).encode())
    assert timed["search"] == "alphabeta" and 1 <= timed["depth"] <= 12
    assert 1 <= timed["simulations"] <= 64  # positions searched, within the budget
    _check_answer(request, timed)
    counted = service.move(json.dumps(dict(request, simulations=4)).encode())
    assert counted["search"] == "gumbel" and "depth" not in counted
    assert counted["simulations"] == 4
    _check_answer(request, counted)
