"""External checkers engines as opponents: the CheckerBoard engine API (Cake, KingsRow, GuiNN).

An engine is a shared library with two C functions, ``getmove(board[8][8], color, maxtime,
str, playnow, info, moreinfo, CBmove *)`` and ``enginecommand(command, reply)``. azjax names
one ``cb:PATH[@SECONDS]`` (`azjax.config.parse_engine_name`): the library and its time per
move (default 0.1 s), for English draughts (`azjax.envs.draughts.Draughts`) only.

The engine runs in a child process (`azjax.evaluation.checkerboard_worker`), started in the
library's folder (engines read their books and databases from there, as under CheckerBoard)
and spoken to over two pipes of its own, so an engine that prints, crashes, aborts or hangs
cannot disturb azjax: the game it was playing is forfeited (counted as the engine's loss), one
line says what happened, and a fresh process plays on in the other games. A move that is not
legal in azjax's position forfeits the game too. A library that cannot be loaded, or lacks
`getmove`, is refused before any game.

Squares: square s (1-32, Black's men on 1-12, as in azjax) is ``board[x][y]`` with
``y = (s - 1) // 4`` and ``x = 2 * (3 - (s - 1) % 4) + y % 2``; a square holds WHITE 1 or
BLACK 2 plus MAN 4 or KING 8. Black (azjax's player 0) moves first. The engine's move is read
from its CBmove's `from`, `to` and captured squares (`del`, the first `jumps` of them); its
`path` is not needed: the move is matched against the whole legal moves azjax knows
(`Draughts.legal_moves`), and a multi-jump's later hops are played on the following plies
without asking the engine again.

Shape legend: B games.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax.config import is_engine_name, parse_engine_name
from azjax.envs.core import Env
from azjax.envs.draughts import Draughts
from azjax.evaluation.engine_arena import HostPlayer, PlayerStats

__all__ = ["ENGINE_OPENING_PLIES", "CheckerBoardPlayer", "EngineFault", "EngineProcess",
           "captured_squares", "check_engine_opponent", "engine_board", "engine_player",
           "match_move", "move_name", "move_timeout", "square_of", "square_xy"]

WHITE, BLACK, MAN, KING = 1, 2, 4, 8
ENGINE_OPENING_PLIES = 3
"""Random paired plies opening every game against an engine: checkers' three-move ballot
(Black, White, Black), so the engine's book does not replay one game per colour."""
STARTUP_TIMEOUT_S = 60.0  # loading a library with its book and database
_REPLY_LIMIT = 1 << 20  # bytes of one protocol line: past it, the worker is broken


def move_timeout(seconds: float) -> float:
    """The wall seconds an engine asked for `seconds` per move may take before it counts as
    hung: 10 x `seconds` + 10 s (engines overshoot their time, and the first move loads)."""
    return 10.0 * seconds + 10.0


# ---- squares, boards and moves ------------------------------------------------------------------


def square_xy(square: int) -> tuple[int, int]:
    """(x, y) of PDN square `square` (1-32) on the API's ``board[x][y]``."""
    y = (square - 1) // 4
    return 2 * (3 - (square - 1) % 4) + y % 2, y


def square_of(x: int, y: int) -> int | None:
    """The PDN square (1-32) at ``board[x][y]``, None off the board or on a light square."""
    if not (0 <= x < 8 and 0 <= y < 8) or (x - y % 2) % 2:
        return None
    return 4 * y + 3 - (x - y % 2) // 2 + 1


def _row_col(square: int) -> tuple[int, int]:
    """(row, col) of a PDN square on azjax's diagram: row 0 holds 1-4, col 0 is the left."""
    row = (square - 1) // 4
    return row, 2 * ((square - 1) % 4) + (row + 1) % 2


def _square_at(row: int, col: int) -> int:
    return 4 * row + col // 2 + 1


def engine_board(state: Any) -> tuple[list[int], int]:
    """One draughts state (numpy or jax fields, unbatched) as the API's board and colour.

    Returns:
      (64 ints, ``board[x][y]`` at index ``8 x + y``: 0 or colour | kind; the side to move,
      BLACK for player 0, WHITE for player 1).
    """
    black, white = (int(p) for p in np.asarray(state.pieces))
    kings = int(np.asarray(state.kings))
    board = [0] * 64
    for square in range(1, 33):
        bit = 1 << (square - 1)
        colour = BLACK if black & bit else WHITE if white & bit else 0
        if colour:
            x, y = square_xy(square)
            board[8 * x + y] = colour | (KING if kings & bit else MAN)
    return board, BLACK if int(np.asarray(state.current_player)) == 0 else WHITE


def captured_squares(pdn: str) -> list[int]:
    """The squares a whole move in PDN jumps over, in order: `9x18x27` -> [14, 23]; [] for
    a simple move."""
    if "x" not in pdn:
        return []
    hops = [int(s) for s in pdn.split("x")]
    over = []
    for start, end in zip(hops, hops[1:], strict=False):
        (r0, c0), (r1, c1) = _row_col(start), _row_col(end)
        over.append(_square_at((r0 + r1) // 2, (c0 + c1) // 2))
    return over


def move_name(start: int | None, end: int | None, captured: Sequence[int | None]) -> str:
    """An engine's move in PDN as it gave it: `9-13`, `9x27` (a capture names its two ends),
    with `?` for a square off the board."""
    text = [("?" if s is None else str(s)) for s in (start, end)]
    return ("x" if captured else "-").join(text)


def match_move(legal: dict[str, list[int]], start: int | None, end: int | None,
               captured: Sequence[int | None]) -> list[int] | None:
    """The legal whole move an engine's (from, to, captured squares) names.

    Args:
      legal: `Draughts.legal_moves` of the position: PDN -> its action ids.
      start, end: the PDN squares the piece leaves and ends on.
      captured: the squares of the pieces it takes, in the order taken ([] for a move).

    Returns:
      The matching move's action ids; None when no legal move matches. Moves equal in
      (from, to, set of captured squares) end in the same position; several of them are
      told apart by the order of `captured`, else the first is played.
    """
    found = [(name, actions) for name, actions in legal.items()
             if int(name.split("x" if "x" in name else "-")[0]) == start
             and int(name.split("x" if "x" in name else "-")[-1]) == end
             and ("x" in name) == bool(captured)
             and sorted(captured_squares(name)) == sorted(c for c in captured if c is not None)
             and len(captured_squares(name)) == len(captured)]
    if not found:
        return None
    in_order = [actions for name, actions in found if captured_squares(name) == list(captured)]
    return (in_order or [actions for _, actions in found])[0]


# ---- the child process --------------------------------------------------------------------------


class EngineFault(Exception):
    """What went wrong with an engine's process, as the end of a line: `crashed (signal 11,
    SIGSEGV)`, `did not answer within 11 s (taken as hung and stopped)`, ..."""


def _ended(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"crashed (signal {-returncode}, {name})"
    if returncode:
        return f"exited with status {returncode}"
    return "exited"


class EngineProcess:
    """One engine library, loaded in a worker process of its own.

    Args:
      library: the shared library's path (made absolute).
      label: how lines name the engine (`cb:/x/cake.so`).
    """

    def __init__(self, library: str | Path, label: str):
        self.library = Path(library).expanduser().resolve()
        self.label = label
        self.name = ""
        self._process: subprocess.Popen | None = None
        self._buffer = b""

    def start(self) -> str:
        """Starts the worker and loads the library; returns the engine's name (its answer to
        ``enginecommand("name")``, "" without one).

        Raises:
          EngineFault: the library is missing, cannot be loaded, lacks `getmove`, or the
            worker died or hung while loading it.
        """
        if not self.library.is_file():
            raise EngineFault(f"{self.library}: no such file")
        package_root = str(Path(__file__).resolve().parents[2])
        environ = dict(os.environ)
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [package_root, environ.get("PYTHONPATH", "")]))
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "azjax.evaluation.checkerboard_worker", str(to_child),
                 str(from_child), str(self.library)],
                cwd=self.library.parent, stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=self._log, pass_fds=(to_child, from_child), env=environ,
                process_group=0)  # its own group: a Ctrl-C reaches azjax only
        finally:
            os.close(to_child)
            os.close(from_child)
        try:
            hello = self._reply(STARTUP_TIMEOUT_S)
        except EngineFault as fault:
            raise EngineFault(f"{fault} while loading{self._last_output()}") from None
        if not hello.get("ok"):
            self.close()
            raise EngineFault(str(hello.get("error", "could not be loaded")))
        self.name = str(hello.get("name", ""))
        return self.name

    @property
    def running(self) -> bool:
        """Whether the worker is up (started, and not ended by a fault or `close`)."""
        return self._process is not None

    def getmove(self, board: list[int], color: int, maxtime: float, info: int,
                timeout: float | None = None) -> dict:
        """The engine's move for one position.

        Args:
          board: 64 ints, ``board[x][y]`` at ``8 x + y`` (`engine_board`).
          color: the side to move, BLACK 2 or WHITE 1.
          maxtime: the seconds the engine is asked to think (the API's `maxtime`).
          info: the API's `info` flags (bit 0: the game's natural course was interrupted).
          timeout: wall seconds before it counts as hung (default `move_timeout(maxtime)`).

        Returns:
          The worker's reply: `jumps`, `from` and `to` as [x, y], `del` and `path` as 12
          [x, y] each, `result` (getmove's return value), `text` (its info string).

        Raises:
          EngineFault: the engine crashed, exited or hung (the worker is stopped).
        """
        return self._ask({"op": "getmove", "board": board, "color": color,
                          "maxtime": maxtime, "info": info},
                         move_timeout(maxtime) if timeout is None else timeout)

    def command(self, text: str, timeout: float = 10.0) -> str:
        """The engine's reply to ``enginecommand(text)`` ("?" without the function)."""
        return str(self._ask({"op": "command", "text": text}, timeout).get("reply", ""))

    def _ask(self, request: dict, timeout: float) -> dict:
        if self._process is None:
            raise EngineFault("is not running")
        with contextlib.suppress(OSError):  # it died: the reply's end of file says how
            os.write(self._to_child, (json.dumps(request) + "\n").encode())
        reply = self._reply(timeout)
        if not reply.get("ok"):
            self.close()
            raise EngineFault(f"failed: {reply.get('error')}")
        return reply

    def _reply(self, timeout: float) -> dict:
        """The next protocol line; EngineFault (and the worker stopped) when the worker ends
        or `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready = select.select([self._from_child], [], [], max(left, 0.0))[0] if left > 0 \
                else []
            if not ready:
                self.close()
                raise EngineFault(f"did not answer within {timeout:g} s (taken as hung and "
                                  f"stopped)")
            chunk = os.read(self._from_child, 65536)
            if not chunk or len(self._buffer) > _REPLY_LIMIT:
                raise EngineFault(self._wait_end())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            self.close()
            raise EngineFault("broke its protocol pipe") from None

    def _wait_end(self) -> str:
        """How the worker ended, once its pipe closed."""
        try:
            code = self._process.wait(timeout=5.0) if self._process else None
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        return _ended(code) if code is not None else "closed its pipe; stopped"

    def _last_output(self) -> str:
        """`; its last output: ...` (the last line the worker or engine printed), or ""."""
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(size - 2000, 0))
            lines = [line.strip() for line in self._log.read().decode("latin-1").splitlines()]
        except (OSError, ValueError):
            return ""
        lines = [line for line in lines if line]
        return f"; its last output: {lines[-1][:200]!r}" if lines else ""

    def close(self) -> None:
        """Stops the worker (killed if it does not end at once); safe to call twice."""
        process, self._process = self._process, None
        if process is not None:
            for fd in (self._to_child, self._from_child):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if process.poll() is None:
                process.kill()
            process.wait()
            self._buffer = b""
            self._log.close()

    def __del__(self) -> None:
        if self._process is not None:  # an engine left running: stop it
            try:  # noqa: SIM105 - at interpreter shutdown, modules may be gone
                self.close()
            except Exception:  # noqa: BLE001
                pass


# ---- the arena's player -------------------------------------------------------------------------


class CheckerBoardPlayer(HostPlayer):
    """An external engine as a `HostPlayer` of the engine arena (`play_engine_arena`).

    For each live game where it is to move, one at a time (engines are not thread-safe), it
    asks the engine for a move in that game's position and plays the legal whole move it
    names; a multi-jump's later hops are played on the following plies. A crash, a hang or
    an illegal move forfeits that game (action -1) with one line to `report`; a crashed or
    hung worker is replaced for the games that follow.

    Args:
      env: English draughts.
      name: ``cb:PATH[@SECONDS]``.
      report: receives each forfeit's line as it happens (default: none; `faults` keeps
        them all).
      timeout: wall seconds per move before the engine counts as hung (default
        `move_timeout` of its seconds).
      clock: the seconds its moves are timed with (default `time.perf_counter`; tests give
        a fake one).

    Raises:
      ValueError: another game than English draughts, a bad name, or a library that cannot
        be loaded or lacks `getmove` (one line naming the engine).
    """

    def __init__(self, env: Env, name: str, *, report: Callable[[str], None] | None = None,
                 timeout: float | None = None, clock: Callable[[], float] = time.perf_counter):
        path, self.seconds = check_engine_opponent(env, name)
        self.env, self.label, self.report, self.clock = env, name, report, clock
        self.timeout = move_timeout(self.seconds) if timeout is None else timeout
        self.process = EngineProcess(path, name)
        try:
            self.engine_name = self.process.start()
        except EngineFault as fault:
            raise ValueError(f"engine {name}: {fault}") from None
        self.faults: list[str] = []
        self.start(0)

    def start(self, num_games: int) -> None:
        self.queued: dict[int, list[int]] = {}
        self.engine_moves: dict[int, int] = {}  # by game: the moves it was asked for
        self.forfeits, self.moves, self.seconds_total = 0, 0, 0.0
        self.last_game = -1

    def move(self, states: Any, turn: np.ndarray) -> tuple[np.ndarray, float | None]:
        turn = np.asarray(turn)
        host = jax.device_get(states)
        actions = np.zeros(turn.shape, np.int32)
        thought = []
        for game in np.flatnonzero(turn).tolist():
            state = jax.tree.map(lambda x, g=game: x[g], host)
            actions[game], seconds = self._move_one(game, state)
            if seconds is not None:
                thought.append(seconds)
        return actions, float(np.mean(thought)) if thought else None

    def stats(self) -> PlayerStats:
        return PlayerStats(self.moves, self.seconds_total / max(self.moves, 1), None,
                           per_game_move=True, forfeits=self.forfeits)

    def close(self) -> None:
        """Stops the engine's process."""
        self.process.close()

    def __enter__(self) -> CheckerBoardPlayer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _move_one(self, game: int, state: Any) -> tuple[int, float | None]:
        """(the action in `game`, the seconds the engine thought, None when not asked)."""
        queued = self.queued.pop(game, [])
        mask = np.asarray(state.legal_action_mask)
        if queued and int(state.jumper) >= 0 and mask[queued[0]]:
            if queued[1:]:
                self.queued[game] = queued[1:]
            return queued[0], None
        legal = self.env.legal_moves(state)
        began = self.clock()
        try:
            reply = self._ask(game, state)
        except EngineFault as fault:
            return self._forfeit(game, state, str(fault)), None
        seconds = self.clock() - began
        self.moves += 1
        self.seconds_total += seconds
        start, end = (square_of(*reply["from"]), square_of(*reply["to"]))
        jumps = int(reply["jumps"])
        captured = [square_of(*xy) for xy in reply["del"][:jumps]] if 0 < jumps <= 12 else []
        actions = match_move(legal, start, end, captured)
        if actions is None and int(state.jumper) >= 0:  # an opening that ended mid-capture:
            actions = next(iter(legal.values()))  # the engine cannot be told which piece
        if actions is None:
            return self._forfeit(game, state, f"played {move_name(start, end, captured)}",
                                 f"not a legal move (legal: {', '.join(legal)})"), seconds
        if actions[1:]:
            self.queued[game] = actions[1:]
        return actions[0], seconds

    def _ask(self, game: int, state: Any) -> dict:
        """The engine's reply for one game's position; restarts a worker that a fault ended."""
        self.engine_moves[game] = self.engine_moves.get(game, 0) + 1
        if not self.process.running:
            self.process = EngineProcess(self.process.library, self.label)
            self.process.start()
            self.last_game = -1
        board, color = engine_board(state)
        info = 0 if game == self.last_game else 1  # bit 0: not the game of the last call
        self.last_game = game
        return self.process.getmove(board, color, self.seconds, info, self.timeout)

    def _forfeit(self, game: int, state: Any, what: str, why: str = "") -> int:
        """Records and reports one forfeited game (`what` the engine did, `why` it forfeits
        when that is not plain); returns the forfeiting action, -1."""
        self.forfeits += 1
        self.queued.pop(game, None)
        line = (f"engine {self.label} {what} on its move {self.engine_moves.get(game, 0)} of "
                f"game {game + 1} in {self.env.to_fen(state)}{', ' + why if why else ''}; "
                f"game {game + 1} forfeited")
        if not self.process.running:
            line += " (a new engine process plays the next games)"
        self.faults.append(line)
        if self.report is not None:
            self.report(line)
        return -1


def check_engine_opponent(env: Env, name: str) -> tuple[str, float]:
    """Checks an engine opponent's name and game without starting it.

    Returns:
      (the library's path as written, its seconds per move).

    Raises:
      ValueError: a bad ``cb:PATH[@SECONDS]``, or a game that is not English draughts.
    """
    path, seconds = parse_engine_name(name)
    if not isinstance(env, Draughts):
        raise ValueError(f"{name}: a CheckerBoard engine plays English draughts; this agent "
                         f"plays {getattr(env, 'name', type(env).__name__)}")
    return path, seconds


def engine_player(env: Env, name: str, *, report: Callable[[str], None] | None = None,
                  timeout: float | None = None) -> CheckerBoardPlayer:
    """The player of an engine opponent ``cb:PATH[@SECONDS]`` (`CheckerBoardPlayer`, started;
    close it after its arena).

    Raises:
      ValueError: in one line, for a bad name, another game than English draughts, or a
        library that cannot be loaded or lacks `getmove`.
    """
    if not is_engine_name(name):
        raise ValueError(f"{name!r} names no engine (cb:PATH[@SECONDS])")
    return CheckerBoardPlayer(env, name, report=report, timeout=timeout)
