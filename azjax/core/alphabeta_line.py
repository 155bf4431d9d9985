"""The line an alpha-beta search expects: its move, then the best move its transposition
table holds for each position after it, as engines show their principal variation.

The walk keeps no line of its own (`azjax.core.alphabeta`): its table keeps, for each position
it finished, the value and the move that was best there. A position searched with a window
the value fell inside holds that value exactly (`EXACT`), and the moves of such positions,
followed from the root, are the line the search's value comes from. The line ends at the
first position the table holds no exact value for, at a finished game, or at `length`
actions. A deeper step cut short by the budget may have overwritten some of those entries,
so past its first move the line is what the search last found, not a proof.
Shape legend: B batch, P line length in actions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from azjax.core.alphabeta_table import EXACT, probe
from azjax.core.hashing import position_hash
from azjax.envs.core import Env

__all__ = ["alphabeta_line"]


def alphabeta_line(env: Env, carry: dict, first: jax.Array, length: int) -> jax.Array:
    """Each game's expected line from its root.

    Args:
      env: the game the search walked (the same `Env`, table-ended if its search was).
      carry: an `alphabeta_run` carry.
      first: int32 [B], the move played at each root (the search's, or an endgame table's).
      length: P, the most actions a line holds (static).

    Returns:
      int32 [B, P]: the line's actions from the root, -1 after it ends (a finished root's
      line is all -1). Every action is legal where it is played.
    """
    root = jax.tree.map(lambda x: x[:, 0], carry["states"])

    def ply(state_action_alive, _):
        state, action, alive = state_action_alive
        safe = jnp.maximum(action, 0)
        legal = jnp.take_along_axis(state.legal_action_mask, safe[:, None], axis=1)[:, 0]
        alive = alive & (action >= 0) & legal & ~(state.terminated | state.truncated)
        after = jax.vmap(env.step)(state, safe)
        hit, _, _, flag, move = probe(carry["table"], jax.vmap(position_hash)(after))
        following = jnp.where(hit & (flag == EXACT), move, -1)
        return (after, following, alive), jnp.where(alive, action, -1)

    start = (root, first.astype(jnp.int32), jnp.ones(first.shape, bool))
    _, line = jax.lax.scan(ply, start, None, length=length)
    return line.T
