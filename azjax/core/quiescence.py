"""Quiescence at the search's leaves: a position in mid-exchange valued after the exchange.

A network value is a static judgement, and the position it misjudges most is one in the middle
of an exchange: material is about to change hands, and which capture is taken decides by how
much. Alpha-beta engines search on through such positions (quiescence search) before they trust
their evaluation. `SearchConfig.quiescence` does the same for every position the tree evaluates:
while `Env.forcing` holds (draughts: the mover must capture), the position is valued as the best
of its `SearchConfig.quiescence_moves` likeliest moves (by the network's prior), each child
valued the same way, `quiescence` levels deep at most. Where captures are compulsory there is
no "standing pat": the mover has to take one of them, so the best child is the position's
value. A finished child counts its result; a child in the endgame table, its exact one.

Only the value changes: the tree expands the position with its own prior, and its children
are searched as usual. The cost is up to 1 + k + ... + k^d network evaluations per position
(k moves, d levels), each level one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.envs.core import Env, material_lead

__all__ = ["mover_reward", "quiescent_value_fn"]

Evaluate = Callable[[Any, Any], tuple[jax.Array, jax.Array]]  # (variables, states [B]) ->
                                                                # (logits [B, A], value [B])


def mover_reward(env: Env, children: Any, mover: jax.Array,
                 material_utility: float = 0.0) -> jax.Array:
    """float32 [B]: the reward of the move into each of `children` [B] for `mover` [B], the
    player who made it; with `material_utility` a finished game's adds that weight x the final
    material difference for the mover (`SearchConfig.material_utility`)."""
    reward = jnp.take_along_axis(children.rewards, mover[:, None], axis=1)[:, 0]
    if material_utility:
        done = children.terminated | children.truncated
        lead = material_lead(jax.vmap(env.material)(children), mover)
        reward = reward + jnp.where(done, material_utility * lead, 0.0)
    return reward


def _mover_values(env: Env, children: Any, mover: jax.Array, value: jax.Array,
                  material_utility: float) -> jax.Array:
    """float32 [B]: each child's worth for `mover` [B], the player who moved into it: a finished
    game's reward, else its `value` [B] (for its own player to move), negated when that player
    is the other one (players need not alternate: draughts' multi-jumps)."""
    done = children.terminated | children.truncated
    reward = mover_reward(env, children, mover, material_utility)
    same_player = children.current_player == mover
    return jnp.where(done, reward, jnp.where(same_player, value, -value))


def quiescent_value_fn(env: Env, evaluate: Evaluate, depth: int, moves: int,
                       adjudicate: Callable | None = None, material_utility: float = 0.0):
    """The network's value with forcing positions resolved (see the module docstring).

    Args:
      env: the game the tree walks (its `step` and `forcing`).
      evaluate: `(variables, states [B]) -> (masked logits [B, A], value [B])`, the network as
        the search reads it.
      depth: how many levels of forcing moves are followed (>= 1).
      moves: how many of a forcing position's likeliest moves are followed (>= 1).
      adjudicate: the endgame table's `Env.endgame_adjudicator`, or None.
      material_utility: `SearchConfig.material_utility`, for finished children's rewards
        (`evaluate`'s values carry it already).

    Returns:
      `resolve(variables, states [B], logits [B, A], value [B]) -> value float32 [B]`: for
      each live forcing position the best of its followed moves for its player to move, the
      network's `value` for every other position.
    """

    def forcing_of(states: Any) -> jax.Array:
        return ~(states.terminated | states.truncated) & jax.vmap(env.forcing)(states)

    def resolve(variables: Any, states: Any, logits: jax.Array, value: jax.Array,
                forcing: jax.Array, level: int) -> jax.Array:
        batch = value.shape[0]
        _, actions = jax.lax.top_k(logits, moves)  # [B, k], the likeliest first
        legal = jnp.take_along_axis(states.legal_action_mask, actions, axis=1)
        parents = jax.tree.map(lambda x: jnp.repeat(x, moves, axis=0), states)
        children = jax.vmap(env.step)(parents, actions.reshape(-1))
        if adjudicate is not None:
            children = jax.vmap(adjudicate)(children)
        child_logits, child_value = evaluate(variables, children)
        if level > 1:
            child_value = resolve(variables, children, child_logits, child_value,
                                  forcing_of(children), level - 1)
        worth = _mover_values(env, children, parents.current_player, child_value,
                              material_utility)
        best = jnp.max(jnp.where(legal, worth.reshape(batch, moves), -jnp.inf), axis=1)
        return jnp.where(forcing & jnp.any(legal, axis=1), best, value)

    def resolve_all(variables: Any, states: Any, logits: jax.Array,
                    value: jax.Array) -> jax.Array:
        # A batch with no forcing position evaluates no child (one `lax.cond`).
        forcing = forcing_of(states)
        return jax.lax.cond(
            jnp.any(forcing), lambda v: resolve(variables, states, logits, v, forcing, depth),
            lambda v: v, value).astype(jnp.float32)

    return resolve_all
