"""Perfect-play oracles: positions labelled with the moves that keep the game-theoretic result.

- Any game: a folder of ``*.jsonl`` files, one set per file (its stem), each line a position
  as a list of action ids and its preserving moves (format: ``azjax/data/oracles/README.md``).
- Tic-tac-toe: solved here by exact minimax over every reachable position (`solve_tic_tac_toe`).
- Connect four: Pascal Pons's six benchmark sets, read from ``Test_L*_R*.jsonl`` files shipped
  in the package (their ``moves`` are 1-based column digits, read as they are).

A move is an *error* when it is not *preserving*: another legal move has a strictly better
win / draw / loss value (AlphaZero.jl's error rate). Shape legend: B batch, P positions,
A actions.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.core.hashing import derive_key, hash_choice, hash_seeds
from azjax.envs.core import Env, GameState, tree_select
from azjax.evaluation.baselines import Player

__all__ = [
    "DEFAULT_ORACLE_ROOT",
    "PACKAGED_ORACLES",
    "has_oracle",
    "in_set_order",
    "set_titles",
    "OracleFormatError",
    "OracleRecord",
    "OracleSet",
    "load_oracle",
    "oracle_files",
    "oracle_player",
    "read_oracle_file",
    "score_player",
    "solve_tic_tac_toe",
    "wrong_moves",
]

PACKAGED_ORACLES = Path(__file__).resolve().parents[1] / "data" / "oracles"
"""The perfect-play labels installed with azjax (package data)."""

DEFAULT_ORACLE_ROOT = Path(os.environ.get("AZJAX_ORACLES", PACKAGED_ORACLES))
"""`load_oracle`'s default: ``$AZJAX_ORACLES``, else the packaged labels."""


class OracleFormatError(ValueError):
    """A malformed oracle file; the message names the file and the line."""


@dataclasses.dataclass(frozen=True)
class OracleRecord:
    """One labelled position. Actions are the env's action ids (0-based)."""

    moves: tuple[int, ...]  # from the initial position
    preserving: tuple[int, ...]  # moves that keep the game-theoretic result
    optimal: tuple[int, ...] | None = None  # moves with the best exact score
    score: int | None = None  # exact score for the player to move (Pons's convention)
    child_scores: tuple[int | None, ...] | None = None  # per action; None = illegal
    source: str = dataclasses.field(default="", compare=False)  # "file:line", for errors


@dataclasses.dataclass(frozen=True, eq=False)
class OracleSet:
    """A named set of P labelled positions, replayed into batched env states."""

    name: str  # e.g. "Test_L1_R1"
    title: str  # e.g. "Beginning-Easy"
    env: Env
    moves: tuple[tuple[int, ...], ...]  # [P] action ids from the initial position
    states: GameState  # batched [P]
    preserving: jax.Array  # bool [P, A]
    optimal: jax.Array | None  # bool [P, A], where the source has it

    @property
    def num_positions(self) -> int:
        """P, the set's count of positions."""
        return len(self.moves)

    def random_error_rate(self) -> float:
        """The expected error rate of a uniformly random legal move."""
        legal = np.asarray(self.states.legal_action_mask).sum(axis=1)
        return float(1.0 - np.mean(np.asarray(self.preserving).sum(axis=1) / legal))


@dataclasses.dataclass(frozen=True)
class _Format:
    subdir: str  # under DEFAULT_ORACLE_ROOT
    pattern: str  # the set files
    first_digit: int | None  # the digit of action 0 in a `moves` string; None: lists only
    titles: dict[str, str]  # file stem -> human name


def _generic_format(game: str) -> _Format:
    """A game azjax ships no labels for: any ``*.jsonl`` file, `moves` as lists of action ids,
    a sub-folder named for the game id."""
    return _Format(subdir=game, pattern="*.jsonl", first_digit=None, titles={})


_FORMATS = {
    "connect_four": _Format(
        subdir="connect4",
        pattern="Test_L*_R*.jsonl",
        first_digit=1,
        titles={
            "Test_L3_R1": "End-Easy",
            "Test_L2_R1": "Middle-Easy",
            "Test_L2_R2": "Middle-Medium",
            "Test_L1_R1": "Beginning-Easy",
            "Test_L1_R2": "Beginning-Medium",
            "Test_L1_R3": "Beginning-Hard",
        },
    ),
    "tic_tac_toe": _Format(
        subdir="tictactoe",
        pattern="*.jsonl",
        first_digit=0,
        titles={"positions": "All positions"},
    ),
}


def has_oracle(env_or_name: Env | str, directory: str | Path | None = None) -> bool:
    """Whether `load_oracle` can score this game: any game given a `directory` of labels,
    without one the games whose labels azjax ships or computes (draughts has none)."""
    name = env_or_name if isinstance(env_or_name, str) else env_or_name.name
    return bool(directory) or name in _FORMATS


def set_titles(game: str) -> dict[str, str]:
    """Human names of a game's oracle sets by file stem (e.g. Test_L3_R1 -> End-Easy)."""
    fmt = _FORMATS.get(game)
    return dict(fmt.titles) if fmt else {}


def in_set_order(game: str, names) -> list[str]:
    """`names` (oracle set stems) in the order of `set_titles(game)`, unknown names last."""
    order = list(set_titles(game))
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


# ---- tic-tac-toe, solved here ---------------------------------------------------------------

_TTT_LINES = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)
_EMPTY = -1


_TTT_LINES_THROUGH = tuple(tuple(line for line in _TTT_LINES if c in line) for c in range(9))


def _ttt_wins(board: tuple[int, ...], cell: int) -> bool:
    """Whether the stone just placed on `cell` completes a line."""
    player = board[cell]
    return any(all(board[c] == player for c in line) for line in _TTT_LINES_THROUGH[cell])


def _ttt_to_move(board: tuple[int, ...]) -> int:
    return 0 if board.count(0) == board.count(1) else 1


@functools.cache
def _ttt_solve(board: tuple[int, ...]) -> tuple[int, tuple[int | None, ...]]:
    """(score, child_scores) of a live position, for the player to move.

    Scores as in ``azjax/data/oracles/README.md``: a win with the winner's k-th stone
    scores 6 - k, a draw 0, a loss the negative; a move's child score is seen by its mover.
    """
    player = _ttt_to_move(board)
    stones_after = board.count(player) + 1
    child_scores: list[int | None] = []
    for cell in range(9):
        if board[cell] != _EMPTY:
            child_scores.append(None)
            continue
        child = board[:cell] + (player,) + board[cell + 1 :]
        if _ttt_wins(child, cell):
            child_scores.append(6 - stones_after)
        elif _EMPTY not in child:
            child_scores.append(0)
        else:
            child_scores.append(-_ttt_solve(child)[0])
    score = max(s for s in child_scores if s is not None)
    return score, tuple(child_scores)


@functools.cache
def solve_tic_tac_toe() -> tuple[OracleRecord, ...]:
    """Every reachable non-terminal tic-tac-toe position (4,520), labelled by exact minimax.

    Depth-first from the empty board, cells in increasing order, so each position comes with
    its lexicographically smallest move list (as in the shipped ``positions.jsonl``).
    """
    records: list[OracleRecord] = []
    seen: set[tuple[int, ...]] = set()

    def visit(board: tuple[int, ...], moves: tuple[int, ...]) -> None:
        if board in seen:
            return
        seen.add(board)
        score, child_scores = _ttt_solve(board)
        legal = [c for c in range(9) if child_scores[c] is not None]
        records.append(
            OracleRecord(
                moves=moves,
                preserving=tuple(c for c in legal if _sign(child_scores[c]) == _sign(score)),
                optimal=tuple(c for c in legal if child_scores[c] == score),
                score=score,
                child_scores=child_scores,
                source="minimax",
            )
        )
        player = _ttt_to_move(board)
        for cell in legal:
            child = board[:cell] + (player,) + board[cell + 1 :]
            if not _ttt_wins(child, cell) and _EMPTY in child:
                visit(child, (*moves, cell))

    visit((_EMPTY,) * 9, ())
    return tuple(records)


def _sign(x: int | None) -> int:
    return 0 if not x else (1 if x > 0 else -1)


# ---- files ----------------------------------------------------------------------------------


def read_oracle_file(path: str | Path, *, num_actions: int,
                     first_digit: int | None = None) -> list[OracleRecord]:
    """Parses one ``.jsonl`` oracle file (one JSON object per line; blank lines skipped).

    ``moves`` is a list of action ids, or (where `first_digit` is given: the connect-four and
    tic-tac-toe files) a string of digits, digit ``first_digit`` meaning action 0;
    ``preserving`` and ``optimal`` list action ids. Raises `OracleFormatError` naming the file
    and line.
    """
    path = Path(path)
    records = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                records.append(_parse_line(line, f"{path}:{number}", num_actions, first_digit))
    if not records:
        raise OracleFormatError(f"{path}: no positions in the file")
    return records


def _is_action(value: Any, num_actions: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_actions


def _parse_moves(value: Any, num_actions: int, first_digit: int | None) -> tuple[int, ...]:
    """A line's `moves` as action ids; ValueError saying what is wrong with it."""
    if isinstance(value, list):
        if not all(_is_action(a, num_actions) for a in value):
            raise ValueError(f"'moves' must list action ids 0-{num_actions - 1}, got {value!r}")
        return tuple(value)
    if first_digit is None:
        raise ValueError(f"'moves' must be a list of action ids, got {value!r}")
    if not isinstance(value, str) or not all(ch.isdigit() for ch in value):
        raise ValueError(f"'moves' must be a string of digits or a list of action ids, "
                         f"got {value!r}")
    moves = tuple(int(ch) - first_digit for ch in value)
    if any(not 0 <= m < num_actions for m in moves):
        last = first_digit + num_actions - 1
        raise ValueError(f"'moves' {value!r} has a digit outside {first_digit}-{last}")
    return moves


def _parse_line(line: str, where: str, num_actions: int,
                first_digit: int | None) -> OracleRecord:
    def fail(why: str) -> OracleFormatError:
        return OracleFormatError(f"{where}: {why}")

    try:
        item = json.loads(line)
    except json.JSONDecodeError as error:
        raise fail(f"not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(item, dict):
        raise fail("expected a JSON object")
    try:
        moves = _parse_moves(item.get("moves"), num_actions, first_digit)
    except ValueError as error:
        raise fail(str(error)) from None

    def actions(field: str, required: bool) -> tuple[int, ...] | None:
        value = item.get(field)
        if value is None and not required:
            return None
        if (
            not isinstance(value, list)
            or not value
            or not all(_is_action(a, num_actions) for a in value)
        ):
            raise fail(f"'{field}' must be a non-empty list of actions 0-{num_actions - 1}")
        return tuple(value)

    child_scores = item.get("child_scores")
    if child_scores is not None and (
        not isinstance(child_scores, list)
        or len(child_scores) != num_actions
        or not all(s is None or (isinstance(s, int) and not isinstance(s, bool))
                   for s in child_scores)
    ):
        raise fail(f"'child_scores' must list {num_actions} integers or nulls")
    score = item.get("score")
    if score is not None and (not isinstance(score, int) or isinstance(score, bool)):
        raise fail("'score' must be an integer")
    return OracleRecord(
        moves=moves,
        preserving=actions("preserving", required=True),
        optimal=actions("optimal", required=False),
        score=score,
        child_scores=None if child_scores is None else tuple(child_scores),
        source=where,
    )


# ---- building sets --------------------------------------------------------------------------


@functools.cache
def _replayer(env: Env):
    """jitted: int32 [P, L] move lists (-1 = padding) -> (states [P], bad bool [P]).

    bad = a move was illegal, came after the end, or the position reached is finished.
    """

    def replay_one(moves: jax.Array) -> tuple[GameState, jax.Array]:
        def play(carry, action):
            state, bad = carry
            live = ~(state.terminated | state.truncated)
            plays = action >= 0
            safe = jnp.maximum(action, 0)
            bad = bad | (plays & ~(live & state.legal_action_mask[safe]))
            state = tree_select(plays, env.step(state, safe), state)
            return (state, bad), None

        start = env.init(jax.random.PRNGKey(0))
        (state, bad), _ = jax.lax.scan(play, (start, jnp.bool_(False)), moves)
        return state, bad | state.terminated | state.truncated

    return jax.jit(jax.vmap(replay_one))


def _build_sets(
    env: Env, groups: dict[str, tuple[str, list[OracleRecord]]]
) -> dict[str, OracleSet]:
    """Replays every group's positions in one jitted call and checks the labels against them."""
    records = [r for _, group in groups.values() for r in group]
    length = 1 << max(1, max(len(r.moves) for r in records) - 1).bit_length()  # a few shapes
    padded = np.full((len(records), length), -1, np.int32)
    for i, r in enumerate(records):
        padded[i, : len(r.moves)] = r.moves
    states, bad = _replayer(env)(jnp.asarray(padded))
    bad = np.asarray(bad)
    legal = np.asarray(states.legal_action_mask)
    num_actions = env.num_actions

    def mask(rows: list[tuple[int, ...]]) -> np.ndarray:
        out = np.zeros((len(rows), num_actions), bool)
        for i, actions in enumerate(rows):
            out[i, list(actions)] = True
        return out

    preserving = mask([r.preserving for r in records])
    wrong_labels = np.any(preserving & ~legal, axis=1)
    for i in np.flatnonzero(bad | wrong_labels)[:1]:
        r = records[i]
        if bad[i]:
            raise OracleFormatError(
                f"{r.source}: the moves {list(r.moves)} (action ids) are illegal in "
                f"{env.name} or reach a finished game"
            )
        raise OracleFormatError(
            f"{r.source}: 'preserving' {list(r.preserving)} lists an illegal move "
            f"(legal: {np.flatnonzero(legal[i]).tolist()})"
        )

    sets, start = {}, 0
    for name, (title, group) in groups.items():
        rows = slice(start, start + len(group))
        start += len(group)
        has_optimal = all(r.optimal is not None for r in group)
        sets[name] = OracleSet(
            name=name,
            title=title,
            env=env,
            moves=tuple(r.moves for r in group),
            states=jax.tree.map(lambda x, rows=rows: x[rows], states),
            preserving=jnp.asarray(preserving[rows]),
            optimal=jnp.asarray(mask([r.optimal for r in group])) if has_optimal else None,
        )
    return sets


def load_oracle(
    env_or_name: Env | str, directory: str | Path | None = None
) -> dict[str, OracleSet]:
    """The oracle sets of a game, by set name (file stem), sorted by name.

    - With a directory, any game: the ``*.jsonl`` files there (``Test_L*_R*.jsonl`` for
      connect four), each line's ``moves`` a list of action ids (or, in the connect-four and
      tic-tac-toe files, a string of digits). A directory holding the game's sub-folder
      (``connect4``, ``tictactoe``, else the game's id), e.g. the oracle root, works too.
    - ``tic_tac_toe`` without a directory: solved here by minimax (one set, ``"positions"``).
    - ``connect_four`` without one: ``DEFAULT_ORACLE_ROOT/connect4``.

    Loaded once per (game, directory) and cached.

    Raises:
      ValueError: a game without a directory and without labels of azjax's own.
      FileNotFoundError: a missing directory, or one without oracle files.
      OracleFormatError: a corrupt line, naming the file and the line.
    """
    env = envs.make(env_or_name) if isinstance(env_or_name, str) else env_or_name
    if not has_oracle(env, directory):
        raise ValueError(f"no oracle for {env.name!r}: azjax ships labels for "
                         f"{sorted(_FORMATS)}; for another game give a directory of its "
                         "*.jsonl labels")
    if directory is None and env.name == "tic_tac_toe":
        return dict(_load_minimax(env))
    if directory is None:
        directory = DEFAULT_ORACLE_ROOT / _FORMATS[env.name].subdir
    return dict(_load_files(env, str(Path(directory).resolve())))


@functools.cache
def _load_minimax(env: Env) -> dict[str, OracleSet]:
    return _build_sets(env, {"positions": ("All positions (minimax)", list(solve_tic_tac_toe()))})


def oracle_files(env: Env, directory: str | Path) -> list[Path]:
    """The game's oracle files in `directory` (or in its sub-folder named for the game): a
    cheap check, without reading them, that a run can make before it starts.

    Raises:
      FileNotFoundError: a missing directory, or one without the game's oracle files.
    """
    fmt = _FORMATS.get(env.name) or _generic_format(env.name)
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"oracle directory {folder} does not exist ({env.name} oracle)")
    files = sorted(folder.glob(fmt.pattern))
    if not files and (folder / fmt.subdir).is_dir():
        folder = folder / fmt.subdir
        files = sorted(folder.glob(fmt.pattern))
    if not files:
        raise FileNotFoundError(f"no {fmt.pattern} files in {folder} ({env.name} oracle)")
    return files


@functools.cache
def _load_files(env: Env, directory: str) -> dict[str, OracleSet]:
    fmt = _FORMATS.get(env.name) or _generic_format(env.name)
    files = oracle_files(env, directory)
    groups = {
        f.stem: (
            fmt.titles.get(f.stem, f.stem),
            read_oracle_file(f, num_actions=env.num_actions, first_digit=fmt.first_digit),
        )
        for f in files
    }
    return _build_sets(env, groups)


# ---- scoring --------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("player", "batch_size"))
def _chosen_actions(
    player: Player, key: jax.Array, states: GameState, *, batch_size: int
) -> jax.Array:
    """The player's move in each of P positions, ceil(P / batch_size) calls: int32 [P]."""
    num = states.current_player.shape[0]
    num_batches = math.ceil(num / batch_size)
    rows = jnp.arange(num_batches * batch_size) % num  # pad by wrapping around
    batches = jax.tree.map(lambda x: x[rows].reshape(num_batches, batch_size, *x.shape[1:]), states)
    keys = jax.vmap(derive_key, (None, 0))(key, jnp.arange(num_batches))
    actions = jax.lax.map(lambda kb: player(kb[0], kb[1]).astype(jnp.int32), (keys, batches))
    return actions.reshape(-1)[:num]


def wrong_moves(preserving: jax.Array, actions: jax.Array) -> jax.Array:
    """bool [P]: where the move `actions` int [P] is an error, i.e. not in the position's
    value-preserving set `preserving` bool [P, A]. Illegal and out-of-range ids are errors.
    The one definition every oracle score uses (training, `azjax eval`, `score_player`)."""
    num_actions = preserving.shape[1]
    in_range = (actions >= 0) & (actions < num_actions)
    clipped = jnp.clip(actions, 0, num_actions - 1).astype(jnp.int32)
    hit = jnp.take_along_axis(preserving, clipped[:, None], axis=1)[:, 0]
    return ~(in_range & hit)


def score_player(
    player: Player, oracle_set: OracleSet, *, key: jax.Array, batch_size: int = 256
) -> float:
    """The player's error rate on a set: the share of positions where its move (illegal moves
    included) is not preserving. Compiles once per (player, set size, batch_size)."""
    actions = _chosen_actions(
        player, key, oracle_set.states, batch_size=min(batch_size, oracle_set.num_positions)
    )
    return float(np.mean(np.asarray(wrong_moves(oracle_set.preserving, actions))))


@functools.cache
def oracle_player(*oracle_sets: OracleSet) -> Player:
    """A player that knows the sets' positions: it plays a uniformly random preserving move in
    a known position (matched by observation and player to move), a random legal move elsewhere.

    With `load_oracle("tic_tac_toe")` this is a perfect tic-tac-toe player. All sets must be of
    one game.
    """
    env = oracle_sets[0].env
    if any(s.env is not env for s in oracle_sets):
        raise ValueError("oracle_player needs sets of one game")
    known = [
        (
            jax.vmap(env.observe)(s.states).reshape(s.num_positions, -1),
            s.states.current_player,
            s.preserving,
        )
        for s in oracle_sets
    ]
    columns = zip(*known, strict=True)
    known_obs, known_player, known_preserving = (jnp.concatenate(c) for c in columns)
    known_sq = jnp.sum(known_obs * known_obs, axis=1)

    def act(key: jax.Array, states: GameState) -> jax.Array:
        """key, states[B] -> int32 [B]."""
        obs = jax.vmap(env.observe)(states).reshape(states.current_player.shape[0], -1)
        # Squared distances [B, P] by one matmul (observations are small exact integers).
        dist = jnp.sum(obs * obs, axis=1)[:, None] + known_sq[None] - 2.0 * obs @ known_obs.T
        same = (dist == 0.0) & (states.current_player[:, None] == known_player[None])
        found = jnp.any(same, axis=1)
        labels = known_preserving[jnp.argmax(same, axis=1)]
        masks = jnp.where(found[:, None], labels, states.legal_action_mask)
        return jax.vmap(hash_choice, in_axes=(0, None, 0))(
            hash_seeds(key, masks.shape[0]), jnp.uint32(0), masks
        )

    return act
