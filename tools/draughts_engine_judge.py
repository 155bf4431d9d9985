"""How much a draughts agent's moves lose in a checkers engine's judgement, and how that
changes with its search: a strength gauge of minutes where a match takes most of an hour.

    CAKE=$(bash ../shared/engines/cake/build.sh)
    python tools/draughts_engine_judge.py draughts --judge cb:$CAKE@0.5 \
        --simulations 64 1024 [--variant search.algorithm=puct] [--engine-row cb:$CAKE@0.1]
    python tools/draughts_engine_judge.py runs/my_model --judge cb:$CAKE@0.5 \
        --draw-positions 400 --games 40 --save-positions positions.txt

Positions: by default the 400 of `tools/data/draughts_positions_vs_cake.txt` (one
`FEN counter ply` a line, the counter OpenSpiel's draw counter), drawn as below from 40 games
of the shipped model at 256 simulations against Cake 1.22 at 0.1 s, seed 0. With
`--draw-positions N` the agent first plays `--games` games against the judge engine at
`--games-seconds` a move (paired random 3-ply openings, both colours;
`tools/draughts_game_trace.py`, at `--games-simulations`), and N of the positions where the
agent was to move are drawn at random (seeded): not mid-capture, after the opening plies, with
two legal actions or more. They are the positions a game against the engine leads to.

`--answers FILE` keeps the judge's answers (its value and move per position) in a JSON file
and reuses them in a later run with the same judge, which then asks the engine only about
moves it has not judged: a new search variant is judged in the minutes its search takes.

Judgement: for each position and each simulation count, the agent plays its greedy search's
whole move (every hop of a multi-jump). The engine, at the judge's time per move, is asked for
its move and value in the position, and for its value after the agent's move (with the
opponent to move, so negated). The move's *loss* is the engine's value of its own move minus
its value of the agent's: 0 when the agent played the engine's move, and positive by how much
worse the engine thinks the agent's move is, in its own units (for Cake, a man is 100, a king
130, a won position 5,000 less a little). A position the engine answers from its opening book
(no value) is left out; a move into the book counts as no loss. The loss is read only as deep
as the engine searches in its time; a small negative loss is the engine changing its mind
between the two searches.

The table gives, per simulation count and search (the plain one, then each `--variant`),
and for each `--engine-row` engine's own moves (for scale):
positions judged, the share of moves equal to the engine's, the mean loss capped at 300
(three men), and the shares of moves losing 50 or more and 100 or more (a man), in all and by
phase (opening: before ply 20; ending: 10 pieces or fewer; else the middle game), each share
with its standard error. The value is read from the engine's info string (`value N`, as Cake
writes it); an engine that writes none is refused in one line. Results for the shipped model
are in docs/results.md ("Draughts").
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent
from azjax.envs.core import jitted_step
from azjax.envs.draughts import Draughts
from azjax.evaluation.checkerboard import (
    EngineFault,
    EngineProcess,
    check_engine_opponent,
    engine_board,
    match_move,
    square_of,
)

OPENING_PLIES = 20  # plies of the opening, for the phases
ENDING_PIECES = 10  # pieces on the board at most in an ending
LOSS_CAP = 300  # the mean loss caps each move's loss here, so that a lost win does not swamp it
THRESHOLDS = (50, 100)  # the losses whose shares are reported
POSITIONS = Path(__file__).with_name("data") / "draughts_positions_vs_cake.txt"
_VALUE = re.compile(r"value\s*[<>]?\s*(-?\d+)")


def read_value(text: str) -> int | None:
    """The last `value N` of an engine's info string (Cake writes `value>N` or `value<N`
    when its aspiration window failed high or low; N is taken as it is), None without one."""
    found = _VALUE.findall(text)
    return int(found[-1]) if found else None


@dataclass(frozen=True)
class Position:
    """One position to judge: its FEN, draw counter and ply in the game it came from."""
    fen: str
    counter: int
    ply: int


@dataclass(frozen=True)
class Verdict:
    """The engine's judgement of one move: the moves in PDN, the engine's value of the
    position with its own move (mover's view), of the agent's move (mover's view; None when
    the move leads into the engine's book), and the loss (None when not judged)."""
    engine_move: str
    agent_move: str
    engine_value: int | None
    agent_value: int | None
    loss: int | None


@functools.cache
def _batch_step(env):
    """`env.step` over a batch, jitted once per env (every search row reuses it)."""
    return jax.jit(jax.vmap(env.step))


def whole_moves(agent: Agent, states, simulations: int, key: jax.Array) -> list[list[int]]:
    """The agent's greedy whole move in each position of a batch [B]: its search's action,
    then, while the same player must continue a capture, the search's next hop."""
    step = _batch_step(agent.env)
    mover = np.asarray(states.current_player)
    moves: list[list[int]] = [[] for _ in range(len(mover))]
    live = np.ones(len(mover), bool)
    for hop in range(16):  # a multi-jump takes at most 9 captures
        if not live.any():
            break
        action = np.asarray(agent.search_output(jax.random.fold_in(key, hop), states,
                                                num_simulations=simulations).action)
        for i in np.flatnonzero(live):
            moves[i].append(int(action[i]))
        stepped = step(states, jnp.asarray(action, jnp.int32))
        keep = jnp.asarray(live)
        states = jax.tree.map(
            lambda new, old, keep=keep: jnp.where(
                keep.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
            stepped, states)
        live &= (np.asarray(states.jumper) >= 0) & ~np.asarray(states.terminated) & (
            np.asarray(states.current_player) == mover)
    return moves


class Judge:
    """A checkers engine judging moves (`cb:PATH[@SECONDS]`), its answers cached by FEN."""

    def __init__(self, env, name: str, answers: str | None = None):
        library, self.seconds = check_engine_opponent(env, name)
        self.env = env
        self.name = name
        self.cache: dict[str, tuple[int | None, list[int] | None]] = {}
        self.answers = Path(answers) if answers else None
        if self.answers is not None and self.answers.exists():
            saved = json.loads(self.answers.read_text())
            if saved.get("judge") != name:
                raise SystemExit(f"error: {answers} holds the answers of {saved.get('judge')}, "
                                 f"not of {name}")
            self.cache = {fen: (value, move) for fen, (value, move) in saved["answers"].items()}
        self.engine = EngineProcess(library, name)
        self.engine.start()
        self.calls = 0
        self.seconds_total = 0.0

    def ask(self, state) -> tuple[int | None, list[int] | None]:
        """(the engine's value for the side to move, None from its book; its whole move)."""
        fen = self.env.to_fen(state)
        if fen not in self.cache:
            board, color = engine_board(state)
            began = time.perf_counter()
            reply = self.engine.getmove(board, color, self.seconds, 1)
            self.seconds_total += time.perf_counter() - began
            self.calls += 1
            jumps = int(reply["jumps"])
            captured = [square_of(*xy) for xy in reply["del"][:jumps]] if jumps > 0 else []
            move = match_move(self.env.legal_moves(state), square_of(*reply["from"]),
                              square_of(*reply["to"]), captured)
            if move is None:
                raise SystemExit(f"{self.engine.label}: answered a move that is not legal in "
                                 f"{fen}: it cannot judge")
            value = read_value(str(reply.get("text", "")))
            if value is None and not _in_book(reply):
                raise SystemExit(f"{self.engine.label}: its info string gives no `value N` "
                                 f"(it said {reply.get('text', '')!r}): it cannot judge")
            self.cache[fen] = (value, move)
        return self.cache[fen]

    def judge(self, state, agent_move: list[int]) -> Verdict:
        """The engine's verdict on `agent_move` (action ids of one whole move) in `state`."""
        value, engine_move = self.ask(state)
        env, step = self.env, jitted_step(self.env)
        after = state
        for action in agent_move:
            after = step(after, jnp.int32(action))
        mover = int(state.current_player)
        if engine_move == agent_move:
            agent_value = value
        elif bool(after.terminated | after.truncated):  # won, or drawn by rule
            agent_value = int(5000 * float(after.rewards[mover]))
        else:
            reply_value, _ = self.ask(after)
            agent_value = None if reply_value is None else -reply_value
        loss = None if value is None else value - (value if agent_value is None
                                                   else agent_value)
        return Verdict(env.format_move(engine_move), env.format_move(agent_move), value,
                       agent_value, loss)

    def close(self) -> None:
        """Stops the engine; with `answers`, saves every answer for the next run."""
        self.engine.close()
        if self.answers is not None:
            self.answers.write_text(json.dumps({"judge": self.name, "answers": self.cache}))


def _in_book(reply: dict) -> bool:
    """Whether a reply without a value is a book move (Cake leaves its info string empty)."""
    return not str(reply.get("text", "")).strip()


def _trace_tool():
    """tools/draughts_game_trace.py, which plays and records the games the positions come from."""
    path = Path(__file__).with_name("draughts_game_trace.py")
    spec = importlib.util.spec_from_file_location("draughts_game_trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def positions_from_games(agent: Agent, opponent: str, games: int, simulations: int,
                         count: int | None, seed: int, opening_plies: int = 3,
                         shuffle: bool = True) -> list[Position]:
    """`count` positions (None: all) drawn from the agent's side of `games` games against
    `opponent`: the agent to move, not mid-capture, after the opening plies, two legal
    actions or more; in a seeded random order, or with `shuffle` off in the games' order."""
    trace = _trace_tool().play(agent, opponent, games, simulations, seed, opening_plies,
                               both_colours=True)
    player = trace["player"]
    candidates, games_of = [], []
    for ply in range(opening_plies + 1, player.shape[0]):
        for game in range(games):
            mover = player[ply, game]
            if mover == trace["me"][game] and player[ply - 1, game] != mover:
                candidates.append(Position(Draughts.fen(trace["board"][ply, game], int(mover)),
                                           int(trace["counter"][ply, game]), ply))
                games_of.append(game)
    if not shuffle:  # game by game, each in its plies' order (a stable sort)
        candidates = [candidates[i] for i in np.argsort(games_of, kind="stable")]
    rng = np.random.default_rng(seed)
    chosen = []
    order_of = rng.permutation(len(candidates)) if shuffle else range(len(candidates))
    for i in order_of:
        state = agent.env.from_fen(candidates[i].fen, counter=candidates[i].counter)
        if int(np.asarray(state.legal_action_mask).sum()) >= 2:
            chosen.append(candidates[i])
        if len(chosen) == count:
            break
    return chosen


def read_positions(path: str) -> list[Position]:
    """Positions saved by `--save-positions`: `FEN counter ply` a line."""
    out = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise SystemExit(f"{path}:{number}: expected `FEN counter ply`, got {line!r}")
        out.append(Position(parts[0], int(parts[1]), int(parts[2])))
    return out


def phase(position: Position) -> str:
    """opening (before ply 20), ending (10 pieces or fewer) or middle."""
    pieces = sum(len(list(filter(None, side[1:].split(","))))
                 for side in position.fen.split(":")[1:])
    return ("opening" if position.ply < OPENING_PLIES else "ending" if pieces <= ENDING_PIECES
            else "middle")


def _share(hits: int, n: int) -> str:
    if n == 0:
        return "-"
    p = hits / n
    return f"{100 * p:.1f} +- {100 * np.sqrt(p * (1 - p) / n):.1f}"


def summarise(label: str, positions: list[Position], verdicts: list[Verdict]) -> str:
    """One table row: judged positions, same moves, mean capped loss, shares of large losses
    (all, then >= 100 by phase)."""
    judged = [(p, v) for p, v in zip(positions, verdicts, strict=True) if v.loss is not None]
    losses = np.array([v.loss for _, v in judged])
    same = sum(v.agent_move == v.engine_move for _, v in judged)
    cells = [label, str(len(judged)), _share(same, len(judged)),
             f"{np.mean(np.clip(losses, 0, LOSS_CAP)):.1f}" if len(judged) else "-"]
    cells += [_share(int((losses >= t).sum()), len(judged)) for t in THRESHOLDS]
    for name in ("opening", "middle", "ending"):
        mine = [v.loss for p, v in judged if phase(p) == name]
        cells.append(f"{_share(sum(x >= THRESHOLDS[-1] for x in mine), len(mine))} "
                     f"({len(mine)})")
    return " | ".join(cells)


def show_worst(positions: list[Position], verdicts: list[Verdict], count: int) -> None:
    """Prints the `count` judged moves of largest loss: ply, FEN, both moves and values."""
    judged = sorted((v.loss, i) for i, v in enumerate(verdicts) if v.loss is not None)
    for loss, i in judged[::-1][:count]:
        p, v = positions[i], verdicts[i]
        print(f"    loss {loss}: ply {p.ply} {p.fen} (counter {p.counter}): played "
              f"{v.agent_move} ({v.agent_value}), the judge's {v.engine_move} ({v.engine_value})")


HEADER = ("simulations (search) | judged | same move as the judge % | mean loss (cap 300) | "
          "loss >= 50 % | loss >= 100 % | >= 100 in the opening % (n) | in the middle % (n) | "
          "in the ending % (n)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", help="a game id (shipped model), run dir or model dir")
    parser.add_argument("--judge", required=True, help="the judging engine, cb:PATH[@SECONDS]")
    parser.add_argument("--simulations", type=int, nargs="+", default=[None],
                        help="the agent's simulation counts to judge (default: its model's)")
    parser.add_argument("--positions-file", default=str(POSITIONS),
                        help="the positions to judge (default: the saved set of 400)")
    parser.add_argument("--draw-positions", type=int, default=0, metavar="N",
                        help="judge N positions drawn from new games instead")
    parser.add_argument("--save-positions", help="write the drawn positions here")
    parser.add_argument("--games", type=int, default=40, help="games to draw positions from")
    parser.add_argument("--games-simulations", type=int, default=256,
                        help="the agent's simulations in those games")
    parser.add_argument("--games-seconds", type=float, default=0.1,
                        help="the engine's seconds a move in those games")
    parser.add_argument("--variant", dest="variants", action="append", default=[],
                        metavar="KEY=VALUE[,KEY=VALUE]", help="judge the search with these "
                        "overrides too, beside the plain one (repeatable)")
    parser.add_argument("--engine-row", dest="engine_rows", action="append", default=[],
                        metavar="cb:PATH[@SECONDS]", help="judge this engine's moves in the "
                        "same positions too, for scale (repeatable)")
    parser.add_argument("--show", type=int, default=0, metavar="N",
                        help="after each row, the N moves of largest loss")
    parser.add_argument("--answers", metavar="FILE", help="keep the judge's answers in this "
                        "JSON file, and reuse those of an earlier run with the same judge")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a search override for the agent, as "
                        "`azjax eval --set` (repeatable)")
    return parser


def main() -> None:
    args = _parser().parse_args()
    agent = Agent.load(args.agent).with_search(args.overrides)
    env = agent.env
    if env.name != "draughts":
        raise SystemExit(f"{args.agent} plays {env.name}; an engine judges draughts only")
    try:
        judge = Judge(env, args.judge, args.answers)
    except (ValueError, EngineFault) as error:
        raise SystemExit(f"error: {args.judge}: {error}") from None
    if args.draw_positions:
        positions = positions_from_games(agent, f"cb:{judge.engine.library}@{args.games_seconds}",
                                         args.games, args.games_simulations,
                                         args.draw_positions, args.seed)
    else:
        positions = read_positions(args.positions_file)
    if args.save_positions:
        Path(args.save_positions).write_text(
            "".join(f"{p.fen} {p.counter} {p.ply}\n" for p in positions))
    try:
        states = [env.from_fen(p.fen, counter=p.counter) for p in positions]
    except ValueError as error:
        raise SystemExit(f"error: {args.positions_file}: {error}") from None
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    print(f"{len(positions)} positions; judge {args.judge}, seed {args.seed}", flush=True)
    print(HEADER)
    key = jax.random.PRNGKey(args.seed)
    searches = [("", agent)] + [(f" {v}", agent.with_search(v.split(",")))
                                for v in args.variants]
    for simulations in args.simulations:
        simulations = agent.search_simulations(simulations)
        for label, searcher in searches:
            began = time.perf_counter()
            moves = whole_moves(searcher, batch, simulations, key)
            searched = time.perf_counter() - began
            verdicts = [judge.judge(s, m) for s, m in zip(states, moves, strict=True)]
            print(summarise(f"{simulations}{label}", positions, verdicts)
                  + f"   [agent {searched:.0f} s; judge {judge.calls} calls, "
                  f"{judge.seconds_total:.0f} s so far]", flush=True)
            show_worst(positions, verdicts, args.show)
    for name in args.engine_rows:
        player = Judge(env, name)
        moves = [player.ask(s)[1] for s in states]
        player.close()
        verdicts = [judge.judge(s, m) for s, m in zip(states, moves, strict=True)]
        print(summarise(name, positions, verdicts)
              + f"   [judge {judge.calls} calls, {judge.seconds_total:.0f} s so far]", flush=True)
        show_worst(positions, verdicts, args.show)
    judge.close()


if __name__ == "__main__":
    sys.exit(main())
