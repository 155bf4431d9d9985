"""What draughts agents' value heads say about bare king endings, against their exact values.

    python tools/draughts_ending_values.py draughts [RUN_OR_SNAPSHOT_DIR ...]

The exact values come from a small endgame table solved here from the rules (kings only, no
men: no crowning, and a king moves and captures in all four directions): every placement of
1-2 kings against 1-2 kings, either side to move, under the OpenSpiel draw rule (a capture
resets the counter; 40 actions without one draw the game). The table is solved backwards over
the counter: a position's value with c actions on the counter is the best, over its moves, of
minus the next position's value at c + 1 (a quiet move; 0 once that reaches 40) or at 0 (a
capture, which leaves a smaller ending solved first). A player with no piece or no move loses.

For each agent (game id, run or snapshot dir) and each ending, over every placement where the
mover has a quiet move and no capture, counter 0: how many the mover wins, draws and loses with
perfect play, and for each of those outcomes the raw network's mean value for the player to
move and the share of placements it puts on the right side (v > 0.25 for a win, |v| <= 0.25
for a draw, v < -0.25 for a loss), both colours to move. Prints a Markdown table. Solving
takes ~15 s, each agent ~20 s more (2-core EPYC).
"""

from __future__ import annotations

import argparse
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

DRAW_LIMIT = 40  # OpenSpiel's rule: 40 consecutive actions without a capture draw the game
WIN, DRAW, LOSS = 1, 0, -1
ENDINGS = ((1, 1), (2, 1), (1, 2), (2, 2))  # (the mover's kings, the other side's)


# The rules below are written apart from azjax/envs/draughts.py on purpose, as the reference
# rules in tests/ are: the table is ground truth for the env's networks, and is tested against
# both.


def _square(row: int, col: int) -> int | None:
    """0-based square index (PDN number - 1) of a dark square, else None. Row 0 is the top."""
    if 0 <= row < 8 and 0 <= col < 8 and (row + col) % 2 == 1:
        return row * 4 + col // 2
    return None


def _geometry() -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Per square: its diagonal neighbours, and its jumps as (jumped square, landing square)."""
    steps, jumps = [], []
    for s in range(32):
        row = s // 4
        col = 2 * (s % 4) + (1 if row % 2 == 0 else 0)
        step, jump = [], []
        for dr, dc in itertools.product((-1, 1), (-1, 1)):
            near, far = _square(row + dr, col + dc), _square(row + 2 * dr, col + 2 * dc)
            if near is not None:
                step.append(near)
                if far is not None:
                    jump.append((near, far))
        steps.append(step)
        jumps.append(jump)
    return steps, jumps


STEPS, JUMPS = _geometry()


def _captures(mover: frozenset, other: frozenset) -> list[tuple[frozenset, frozenset]]:
    """Every whole capture sequence of the mover's kings: (mover's squares, other's squares)
    after it. A captured piece leaves the board at once, and a king must keep jumping while
    it can."""
    results = []

    def extend(square, mover, other, jumped):
        more = False
        for over, land in JUMPS[square]:
            if over in other and land not in mover and land not in other:
                more = True
                extend(land, (mover - {square}) | {land}, other - {over}, True)
        if jumped and not more:
            results.append((mover, other))

    for square in mover:
        extend(square, mover, other, False)
    return results


def _quiet_moves(mover: frozenset, other: frozenset) -> list[frozenset]:
    """The mover's squares after each one-square king move."""
    return [(mover - {s}) | {t} for s in mover for t in STEPS[s]
            if t not in mover and t not in other]


def _placements(mine: int, theirs: int) -> list[tuple[frozenset, frozenset]]:
    squares = range(32)
    return [(frozenset(a), frozenset(b)) for a in itertools.combinations(squares, mine)
            for b in itertools.combinations([s for s in squares if s not in a], theirs)]


def solve(endings=ENDINGS, draw_limit: int = DRAW_LIMIT
          ) -> dict[tuple[int, int], dict[tuple[frozenset, frozenset], int]]:
    """Exact values at counter 0: {(mover's kings, other's kings): {(mover's squares, other's
    squares): WIN / DRAW / LOSS for the mover}}, for the given endings and every smaller one
    they capture down to, with `draw_limit` quiet actions in a row drawing the game."""
    needed = set()
    for mine, theirs in endings:
        for a in range(mine, 0, -1):
            for b in range(theirs, 0, -1):
                needed |= {(a, b), (b, a)}
    tables: dict = {}
    for size in sorted({a + b for a, b in needed}):  # captures lead to smaller endings
        classes = [c for c in needed if sum(c) == size]
        positions = {c: _placements(*c) for c in classes}
        index = {c: {p: i for i, p in enumerate(positions[c])} for c in classes}
        # Per position: the quiet successors' indices (in the swapped class, other side to
        # move), or the best capture's value, or a loss with no move at all.
        successors, decided = {}, {}
        for c in classes:
            swapped = index[(c[1], c[0])]
            succ, fixed = [], np.full(len(positions[c]), 2, np.int8)  # 2: not decided
            for i, (mover, other) in enumerate(positions[c]):
                captures = _captures(mover, other)
                if captures:  # compulsory; a side left with no piece has lost
                    fixed[i] = max(WIN if not o else -tables[(len(o), len(m))][(o, m)]
                                   for m, o in captures)
                    succ.append([])
                    continue
                quiet = _quiet_moves(mover, other)
                if not quiet:
                    fixed[i] = LOSS
                succ.append([swapped[(other, m)] for m in quiet])
            width = max(1, max(len(s) for s in succ))
            padded = np.array([s + [-1] * (width - len(s)) for s in succ], np.int64)
            successors[c], decided[c] = padded, fixed
        # Backwards over the counter: value[c] at counter k from value[swapped] at k + 1.
        value = {c: np.zeros(len(positions[c]), np.int8) for c in classes}  # the limit: draw
        for _ in range(draw_limit):
            new = {}
            for c in classes:
                nxt = value[(c[1], c[0])]
                succ = successors[c]
                replies = np.where(succ >= 0, -nxt[np.maximum(succ, 0)], -2)
                best = replies.max(axis=1).astype(np.int8)
                new[c] = np.where(decided[c] != 2, decided[c], best)
            value = new
        for c in classes:
            tables[c] = dict(zip(positions[c], value[c].tolist(), strict=True))
    return tables


def ending_states(env, placements, mover: int):
    """Batched env State [N]: the placements, given as (mover's squares, other's squares), as
    positions of all kings with player `mover` to move, counter 0, no capture in progress."""

    def bits(squares):
        return sum(1 << s for s in squares)

    own = np.array([bits(m) for m, _ in placements], np.uint32)
    opp = np.array([bits(o) for _, o in placements], np.uint32)
    black, white = (own, opp) if mover == 0 else (opp, own)
    pieces = jnp.asarray(np.stack([black, white], axis=1))
    return _states_fn(env, mover)(pieces)


@functools.cache
def _states_fn(env, mover: int):
    # `_state` is the env's own position constructor (`from_fen` calls it one at a time).
    return jax.jit(jax.vmap(lambda p: env._state(p, p[0] | p[1], jnp.int32(mover),
                                                 jnp.int8(-1), jnp.int8(0))))


def quiet_placements(table: dict) -> tuple[list, np.ndarray]:
    """The placements whose mover has a quiet move and no capture, and their exact values."""
    keep = [(p, v) for p, v in table.items()
            if not _captures(*p) and _quiet_moves(*p)]
    return [p for p, _ in keep], np.array([v for _, v in keep], np.int8)


def _per_outcome(truth: np.ndarray, numbers: np.ndarray, spec: str) -> str:
    """`numbers`' mean over the wins / draws / losses of `truth`, formatted; "-" for none."""
    return " / ".join(format(numbers[truth == k].mean(), spec) if (truth == k).any() else "-"
                      for k in (WIN, DRAW, LOSS))


def main() -> None:
    from azjax.agent import Agent

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agents", nargs="+", help="game id, run dir or snapshot dir")
    args = parser.parse_args()
    tables = solve()
    quiet = {ending: quiet_placements(tables[ending]) for ending in ENDINGS}
    print("| agent | kings (mover's first) | placements | win / draw / loss | mean value "
          "(wins / draws / losses) | on the right side (wins / draws / losses) |")
    print("|---|---|---:|---|---|---:|")
    for spec in args.agents:
        agent = Agent.load(spec)
        if agent.env.draw_limit != DRAW_LIMIT:
            raise SystemExit(f"{spec} plays to a draw limit of {agent.env.draw_limit} actions; "
                             f"the table is solved for {DRAW_LIMIT}")
        for ending in ENDINGS:
            placements, exact = quiet[ending]
            # Both colours to move: the table is colour-blind, the network is not.
            v = np.concatenate([np.asarray(agent.evaluate(ending_states(agent.env, placements,
                                                                        mover))[1])
                                for mover in (0, 1)])
            truth = np.concatenate([exact, exact])
            right = np.where(truth == WIN, v > 0.25, np.where(truth == LOSS, v < -0.25,
                                                               np.abs(v) <= 0.25))
            counts = " / ".join(str(int((exact == k).sum())) for k in (WIN, DRAW, LOSS))
            print(f"| {spec} | {ending[0]} against {ending[1]} | {len(placements)} | {counts} | "
                  f"{_per_outcome(truth, v, '+.2f')} | {_per_outcome(truth, right, '.0%')} |")


if __name__ == "__main__":
    main()
