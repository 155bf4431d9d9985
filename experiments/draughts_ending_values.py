"""What draughts agents' value heads say about bare endings whose result is known.

    python experiments/draughts_ending_values.py draughts docs/runs/draughts_decisions/snapshot_100

For each agent (game id, run or snapshot dir) and each kind of ending, the raw network's value
for the player to move over every placement of the pieces (kings only, draw counter 0, either
side to move; placements where the mover must capture or cannot move are left out):

- king against king: drawn with correct play (the counter ends it) from nearly every quiet
  placement, value ~0;
- two kings against one, the two to move / the one to move: a win for the two kings without a
  move limit in checkers; whether within the 40-action counter from every placement is not
  checked here, so only the sign is scored.

Prints a Markdown table: mean value and the share of placements valued on the expected side
(|v| < 0.25 for king against king; v > 0 for the two kings to move, v < 0 for the one).
"""

from __future__ import annotations

import argparse
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent


def _placements(kings: tuple[int, int]) -> np.ndarray:
    """uint32 [N, 2]: (Black's, White's) bitboards of every placement of `kings[0]` Black and
    `kings[1]` White kings on distinct squares (bit s = PDN square s + 1)."""
    boards = []
    for black in itertools.combinations(range(32), kings[0]):
        rest = [s for s in range(32) if s not in black]
        for white in itertools.combinations(rest, kings[1]):
            boards.append((sum(1 << s for s in black), sum(1 << s for s in white)))
    return np.array(boards, np.uint32)


def ending_values(agent: Agent, kings: tuple[int, int], mover: int) -> np.ndarray:
    """float32 [N]: the raw network's value for the player to move of each placement where the
    mover has a quiet move and no capture (a capture would decide the ending at once)."""
    env = agent.env
    pieces = jnp.asarray(_placements(kings))
    everything = pieces[:, 0] | pieces[:, 1]  # all kings
    # `_state` is the env's own position constructor (`from_fen` calls it one at a time).
    states = jax.jit(jax.vmap(lambda p, k: env._state(p, k, jnp.int32(mover), jnp.int8(-1),
                                                      jnp.int8(0))))(pieces, everything)
    mask = np.asarray(states.legal_action_mask)
    quiet = ~np.asarray(states.terminated) & ~mask[:, 98:].any(axis=1)  # ids >= 98 are jumps
    _, values = agent.evaluate(jax.tree.map(lambda x: x[quiet], states))
    return np.asarray(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agents", nargs="+", help="game id, run dir or snapshot dir")
    args = parser.parse_args()
    rows = [("king against king", (1, 1), 0, "draw"),
            ("two kings against one, the two to move", (2, 1), 0, "win"),
            ("two kings against one, the one to move", (2, 1), 1, "loss")]
    print("| agent | ending | placements | mean value | on the expected side |")
    print("|---|---|---:|---:|---:|")
    for spec in args.agents:
        agent = Agent.load(spec)
        for name, kings, mover, truth in rows:
            v = ending_values(agent, kings, mover)
            right = {"draw": np.abs(v) < 0.25, "win": v > 0, "loss": v < 0}[truth]
            print(f"| {spec} | {name} | {len(v)} | {v.mean():+.3f} | {right.mean():.1%} |")


if __name__ == "__main__":
    main()
