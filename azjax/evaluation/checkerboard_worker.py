"""The child process that runs one CheckerBoard engine (`azjax.evaluation.checkerboard`).

Started as ``python -m azjax.evaluation.checkerboard_worker READ_FD WRITE_FD LIBRARY`` in the
library's folder. It loads the shared library with ctypes and answers requests on its two
protocol pipes, one JSON object a line, never on its standard output or error (which the
engine may print to, and which the parent sends to a file):

- first, unasked: ``{"ok": true, "name": ...}`` once the library is loaded and has `getmove`,
  else ``{"ok": false, "error": ...}`` and it exits;
- ``{"op": "getmove", "board": [64 ints, board[x][y] at 8 x + y], "color": 1 | 2,
  "maxtime": seconds, "info": int}`` -> ``{"ok": true, "result": int, "jumps": int,
  "from": [x, y], "to": [x, y], "del": [[x, y] * 12], "path": [[x, y] * 12],
  "text": the engine's info string}``;
- ``{"op": "command", "text": ...}`` -> ``{"ok": true, "result": int, "reply": str}``.

It ends at the end of its input, and (on Linux) when its parent dies. A crash of the engine
ends it; the parent sees the pipe close and reads the signal from its exit status. It imports
nothing of azjax and no jax, so it starts in a fraction of a second.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import Any


class Coor(ctypes.Structure):
    """`struct coor { int x; int y; }` of the CheckerBoard API."""

    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int)]


class CBMove(ctypes.Structure):
    """`struct CBmove` of the CheckerBoard API."""

    _fields_ = [("jumps", ctypes.c_int), ("newpiece", ctypes.c_int),
                ("oldpiece", ctypes.c_int), ("from_", Coor), ("to", Coor),
                ("path", Coor * 12), ("del_", Coor * 12), ("delpiece", ctypes.c_int * 12)]


INFO_BYTES = 1024  # the API's `char str[1024]` and `char reply[1024]`
COMMAND_BYTES = 256  # `char command[256]`


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this process when its parent dies (a hung engine must
    not outlive the arena that started it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _load(library: str) -> tuple[Any, Any]:
    """(getmove, enginecommand or None) of the library; raises RuntimeError in one line."""
    try:
        lib = ctypes.CDLL(library)
    except OSError as error:
        raise RuntimeError(f"cannot be loaded ({' '.join(str(error).split())})") from None
    try:
        getmove = lib.getmove
    except AttributeError:
        raise RuntimeError("has no function getmove: not a CheckerBoard engine") from None
    getmove.restype = ctypes.c_int
    getmove.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_double,
                        ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                        ctypes.c_int, ctypes.POINTER(CBMove)]
    command = getattr(lib, "enginecommand", None)
    if command is not None:
        command.restype = ctypes.c_int
        command.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return getmove, command


def _command(function: Any, text: str) -> dict[str, Any]:
    if function is None:
        return {"ok": True, "result": 0, "reply": "?"}
    command = ctypes.create_string_buffer(text.encode("latin-1")[:COMMAND_BYTES - 1],
                                          COMMAND_BYTES)
    reply = ctypes.create_string_buffer(INFO_BYTES)
    result = function(command, reply)
    return {"ok": True, "result": int(result),
            "reply": reply.value.decode("latin-1", "replace").strip()}


def _getmove(function: Any, request: dict[str, Any]) -> dict[str, Any]:
    board = (ctypes.c_int * 64)(*request["board"])
    info = ctypes.create_string_buffer(INFO_BYTES)
    playnow = ctypes.c_int(0)
    move = CBMove()
    result = function(board, int(request["color"]), float(request["maxtime"]), info,
                      ctypes.byref(playnow), int(request.get("info", 0)), 0, ctypes.byref(move))
    return {"ok": True, "result": int(result), "jumps": int(move.jumps),
            "from": [move.from_.x, move.from_.y], "to": [move.to.x, move.to.y],
            "del": [[c.x, c.y] for c in move.del_], "path": [[c.x, c.y] for c in move.path],
            "text": info.value.decode("latin-1", "replace").strip()}


def serve(read_fd: int, write_fd: int, library: str) -> int:
    """Loads `library` and answers requests from `read_fd` on `write_fd` until the input
    ends. Returns the exit status (0, or 1 when the library could not be used)."""
    out = os.fdopen(write_fd, "w", buffering=1, encoding="utf-8")
    inp = os.fdopen(read_fd, "r", encoding="utf-8")

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:
        getmove, command = _load(library)
    except RuntimeError as error:
        send({"ok": False, "error": str(error)})
        return 1
    send({"ok": True, "name": _command(command, "name")["reply"] if command else ""})
    for line in inp:
        request = json.loads(line)
        if request.get("op") == "getmove":
            send(_getmove(getmove, request))
        elif request.get("op") == "command":
            send(_command(command, str(request.get("text", ""))))
        else:
            send({"ok": False, "error": f"unknown request {request.get('op')!r}"})
    return 0


def main(argv: list[str]) -> int:
    """``checkerboard_worker READ_FD WRITE_FD LIBRARY``."""
    _die_with_parent()
    read_fd, write_fd, library = int(argv[1]), int(argv[2]), argv[3]
    return serve(read_fd, write_fd, library)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
