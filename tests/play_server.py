"""A play server on a free loopback port, in a thread, for the API and browser tests."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request

from conftest import HANG_S

# Opening lines in PDN (found by random play) where a multi-jump is the only move:
# after HUMAN_JUMP_LINE Black (the human, moving first) must play 8x15x24; after AI_JUMP_LINE
# White (the AI, moving second) must play 22x15x6.
HUMAN_JUMP_LINE = "9-13 23-19 11-15 24-20 15x24 28x19 7-11 26-23 11-16 20x11"
AI_JUMP_LINE = ("10-15 23-18 12-16 27-23 6-10 21-17 16-19 23x16 11x20x27 32x23 7-11 18-14 "
                "9x18x27 31x24 15-18")


def make_service():
    """The shipped tic-tac-toe model and untrained stand-ins for the other games (the same
    network `azjax play` uses without a shipped model, so compiled programs are shared through
    the persistent cache); simulations 8 (default) and 32."""
    from azjax import Agent
    from azjax.apps.serve import GameService
    from azjax.apps.turns import untrained_agent

    agents = {"tic_tac_toe": Agent.load("tic_tac_toe"),
              "connect_four": untrained_agent("connect_four"),
              "draughts": untrained_agent("draughts")}
    return GameService(agents, simulations=(8, 32), default_simulations=8, seed=0)


class PlayServer:
    """uvicorn serving `create_app(service)` on 127.0.0.1 at a free port until `stop()`."""

    def __init__(self, service):
        import uvicorn

        from azjax.apps.serve import create_app

        self.service = service
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + HANG_S  # ends only a server that never starts
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the play server did not start")
            time.sleep(0.02)

    def post(self, path: str, body) -> tuple[int, dict]:
        """(status, JSON answer); `body` is sent as is when bytes, else as JSON."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=HANG_S) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def request(self, method: str, path: str, body: bytes | None = None, *,
                chunked: bool = False) -> tuple[int, str, bytes]:
        """(status, Content-Type, body) of one raw request on a fresh connection: `body` as is,
        with its Content-Length, or in 64 KiB chunks of chunked transfer encoding."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HANG_S)
        try:
            data = body
            if chunked and body is not None:
                data = (body[i:i + 65536] for i in range(0, len(body), 65536))
            connection.request(method, path, body=data,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.getheader("Content-Type", ""), response.read()
        finally:
            connection.close()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
