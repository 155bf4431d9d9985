"""`search.algorithm: alphabeta`: the network's value searched by alpha-beta, as checkers and
chess engines search their evaluation, for play (evaluation, arenas, `azjax play`).

Gumbel and PUCT spend their simulations where the network's policy points, so a reply the
policy misses (a quiet move that sets up the opponent's two-for-one) stays unsearched however
many simulations they run. Alpha-beta (`azjax.core.alphabeta`) looks at every move to
`search.alphabeta_depth` whole moves, on through pending captures (quiescence), and scores
the positions there with the network's value; the policy only orders the moves, which makes
the pruning cut deeper, never what is found. Finished games score their result, so a win or
loss inside the horizon is seen exactly.

It is a play-time search: it returns one move, not a policy to learn from (self-play needs
gumbel or puct, `azjax.core.steps`), at a fixed depth (no clock, kept trees or solver:
`azjax.core.search.make_search_engine` refuses it). Shape legend: B batch, A actions.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from azjax.config import SearchConfig
from azjax.core.alphabeta import AlphaBetaConfig, alphabeta_search
from azjax.core.network import ApplyFn
from azjax.core.search_apply import material_utility_apply
from azjax.core.search_engine import SearchOutput, check_output
from azjax.envs.core import Env

__all__ = ["LEAF_BOUND", "make_alphabeta_search"]

LEAF_BOUND = 0.999
"""The network's values are clipped to +-LEAF_BOUND at the leaves, so that a game won or lost
inside the horizon (+-1) always outranks a position the network merely rates won or lost."""


def make_alphabeta_search(env: Env, apply_fn: ApplyFn, config: SearchConfig):
    """The batched alpha-beta search over the network (`make_search`'s for `algorithm:
    alphabeta`).

    Args:
      env: the game (its rules and `Env.forcing`, the quiescence test).
      apply_fn: `(variables, obs [B, ...]) -> (logits [B, A], value [B])`, already wrapped by
        `search_apply_fn`; with `config.material_utility` the leaves score the value plus that
        weight times the material head's prediction.
      config: `alphabeta_depth` and `material_utility` are read.

    Returns:
      `search(variables, key, states, *, num_simulations=None, noise=True) -> SearchOutput`:
      `action` int32 [B] the best move (equal moves chosen by `key`), `policy` its one-hot
      [B, A], `value` [B] its alpha-beta value for the player to move, `prior_value` [B] the
      network's value of the root, `visit_counts` [B, A] the positions searched, all on the
      chosen move. `num_simulations` and `noise` are not read: the depth fixes the work.
    """
    if config.material_utility:
        apply_fn = material_utility_apply(apply_fn, config.material_utility)
    searcher = AlphaBetaConfig(depth=config.alphabeta_depth)

    def evaluate(variables: Any, states: Any) -> tuple[jax.Array, jax.Array]:
        logits, value = apply_fn(variables, jax.vmap(env.observe)(states))
        return jnp.clip(value, -LEAF_BOUND, LEAF_BOUND), logits

    def search(variables: Any, key: chex.PRNGKey, states: Any, *,
               num_simulations: int | None = None, noise: bool = True) -> SearchOutput:
        del num_simulations, noise
        result = alphabeta_search(env, key, states, searcher,
                                  leaf=lambda children: evaluate(variables, children))
        chosen = jax.nn.one_hot(result.action, env.num_actions, dtype=jnp.float32)
        return check_output(SearchOutput(
            action=result.action,
            policy=chosen,
            value=result.value,
            prior_value=evaluate(variables, states)[0],
            visit_counts=(chosen * result.nodes[:, None]).astype(jnp.int32),
        ), env.num_actions)

    return search
