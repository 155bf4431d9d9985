"""Latency of `azjax serve`'s JSON API under load: many valid `POST /api/move` at once.

Serves `serve_service(games)` (the shipped models, as `azjax serve` does) with uvicorn on
127.0.0.1 at a free port, compiles each game's search at the strength measured and sends a few
requests over HTTP first (none of this timed). Then, per concurrency level, it sends
`--requests` valid requests from random live positions of the games, the AI to move, each on a
fresh connection from its own client thread; with concurrency C, C threads are released
together by a barrier and each sends its share one after another. A request's latency runs
from opening the connection to the last byte of the answer. It prints, per level: requests,
concurrency, the latency's median, 99th percentile and maximum, the errors (any answer but 200
with the documented fields, or no answer) and the requests per second, then the machine.

    python benchmarks/bench_serve.py                      # 200 at once, then one at a time
    python benchmarks/bench_serve.py --game draughts --simulations 16 --concurrency 50
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.apps.serve import SIMULATIONS, create_app, serve_service
from azjax.envs.core import jitted_step
from azjax.training.metrics import machine_description

ANSWER_FIELDS = {"move", "ai_moves", "moves", "value", "policy", "terminated", "winner"}


def live_positions(game: str, count: int, seed: int) -> list[list[int]]:
    """`count` move lists of `game`: random legal play from the start, cut at the start of a
    turn of a live position (0-11 random plies), so that the AI has a whole turn to play."""
    rng = random.Random(seed)
    env = envs.make(game)
    step = jitted_step(env)
    positions = []
    while len(positions) < count:
        state, moves, turn_starts = env.init(jax.random.PRNGKey(0)), [], [0]
        for _ in range(rng.randrange(12)):
            mover = int(state.current_player)
            action = rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask)).tolist())
            state = step(state, jnp.int32(action))
            moves.append(action)
            if bool(state.terminated | state.truncated):
                break
            if int(state.current_player) != mover:
                turn_starts.append(len(moves))
        positions.append(moves[:rng.choice(turn_starts)])
    return positions


class Server:
    """uvicorn serving `create_app(service)` on 127.0.0.1 at a free port, in a thread."""

    def __init__(self, service):
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 120
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)

    def move(self, request: dict, timeout: float) -> tuple[float, str]:
        """(seconds, "" or what went wrong) of one POST /api/move on a fresh connection."""
        start = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                connection.request("POST", "/api/move", body=json.dumps(request).encode(),
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                status, body = response.status, response.read()
            finally:
                connection.close()
        except OSError as error:
            return time.perf_counter() - start, f"{type(error).__name__}: {error}"
        seconds = time.perf_counter() - start
        if status != 200:
            return seconds, f"{status}: {body[:200]!r}"
        answer = json.loads(body)
        if set(answer) != ANSWER_FIELDS or answer["moves"][:len(request["moves"])] != \
                request["moves"]:
            return seconds, f"unexpected answer {body[:200]!r}"
        return seconds, ""

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def load(server: Server, requests: list[dict], concurrency: int,
         timeout: float) -> tuple[list[float], list[str], float]:
    """(latencies, errors, wall seconds) of `requests` from `concurrency` client threads
    released together, thread i sending requests i, i + concurrency, ..."""
    results: list[tuple[float, str]] = [(0.0, "not sent")] * len(requests)
    barrier = threading.Barrier(concurrency + 1)

    def client(first: int) -> None:
        barrier.wait()
        for index in range(first, len(requests), concurrency):
            results[index] = server.move(requests[index], timeout)

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(concurrency)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return [seconds for seconds, _ in results], [error for _, error in results if error], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", action="append", help="a game to serve and ask (repeatable; "
                        "default: tic_tac_toe and connect_four)")
    parser.add_argument("--simulations", type=int, default=64, choices=SIMULATIONS,
                        help="the strength of every request (default 64, the page's default)")
    parser.add_argument("--requests", type=int, default=200, help="requests per level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[200, 1],
                        help="client threads at once, one run per value (default 200 1)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a request may take before it counts as an error")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random positions")
    args = parser.parse_args()
    games = tuple(args.game or ("tic_tac_toe", "connect_four"))

    service = serve_service(games)
    positions = {game: live_positions(game, args.requests, args.seed + i)
                 for i, game in enumerate(games)}
    requests = [{"game": games[i % len(games)], "moves": positions[games[i % len(games)]][i],
                 "simulations": args.simulations} for i in range(args.requests)]
    start = time.perf_counter()
    for game in games:  # compile each search outside the timing
        service.move(json.dumps({"game": game, "moves": [],
                                 "simulations": args.simulations}).encode())
    server = Server(service)
    try:
        for request in requests[:8]:  # the HTTP path warmed up, not timed
            server.move(request, args.timeout)
        print(f"served {', '.join(games)} at {args.simulations} simulations; compiled and "
              f"warmed up in {time.perf_counter() - start:.1f} s\n")
        print("| requests | concurrency | p50 s | p99 s | max s | errors | requests/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        first_errors = []
        for concurrency in args.concurrency:
            latencies, errors, wall = load(server, requests, concurrency, args.timeout)
            first_errors += errors[:3]
            p50, p99 = np.percentile(latencies, [50, 99])
            print(f"| {len(requests)} | {concurrency} | {p50:.3f} | {p99:.3f} | "
                  f"{max(latencies):.3f} | {len(errors)} | {len(requests) / wall:.1f} |",
                  flush=True)
    finally:
        server.stop()
    for error in first_errors:
        print("error:", error)
    print(f"\nmean moves per request {statistics.mean(len(r['moves']) for r in requests):.1f}; "
          f"machine: {machine_description()}")


if __name__ == "__main__":
    main()
