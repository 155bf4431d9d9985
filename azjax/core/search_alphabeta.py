"""`search.algorithm: alphabeta`: the network's value searched by alpha-beta, as checkers and
chess engines search their evaluation, for play (evaluation, arenas, `azjax play`).

Gumbel and PUCT spend their simulations where the network's policy points, so a reply the
policy misses (a quiet move that sets up the opponent's two-for-one) stays unsearched however
many simulations they run. Alpha-beta (`azjax.core.alphabeta`) looks at every move to
`search.alphabeta_depth` whole moves, on through pending captures (quiescence), and scores
the positions there with the network's value; the policy only orders the moves, which makes
the pruning cut deeper, never what is found. Finished games score their result, so a win or
loss inside the horizon is seen exactly; with `search.endgame_table`, so do the positions the
game's endgame table knows, and a root it solves plays its quickest win or longest resistance
(`azjax.core.endgames`), as engines use their databases.

It is a play-time search: it returns one move, not a policy to learn from (self-play needs
gumbel or puct, `azjax.core.steps`). It deepens one whole move at a time, game by game, to
`search.alphabeta_depth`, within `search.alphabeta_nodes` positions a move when that is set,
or, in steps (`AlphaBetaEngine`), until a clock stops it (`azjax.alphabeta_player`); a step
cut short plays the deepest finished step's move. No kept trees or solver (the tree searches'
`azjax.core.search.make_search_engine`). Shape legend: B batch, A actions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp

from azjax.config import SearchConfig
from azjax.core.alphabeta import (
    AlphaBetaConfig,
    alphabeta_result,
    alphabeta_run,
    alphabeta_searching,
    alphabeta_start,
)
from azjax.core.alphabeta_line import alphabeta_line
from azjax.core.endgames import endgame_adjudicator, table_root_actions
from azjax.core.network import ApplyFn
from azjax.core.search_apply import material_utility_apply
from azjax.core.search_engine import SearchOutput, check_output
from azjax.envs.core import Env, GameState
from azjax.envs.wrapper import EnvWrapper

__all__ = ["LEAF_SCALE", "AlphaBetaEngine", "alphabeta_searcher", "make_alphabeta_engine",
           "make_alphabeta_search"]

LEAF_SCALE = 0.5
"""The leaves score LEAF_SCALE x the network's value (clipped to [-1, 1]), so that a game won
or lost inside the horizon (+-1, or an endgame table's win in d moves, 1 - d/1000) always
outranks a position the network merely rates won or lost; scaling keeps the network's order."""


@dataclasses.dataclass(frozen=True)
class AlphaBetaEngine:
    """The alpha-beta search over a network in steps, so that a clock can stop it between
    compiled calls (`azjax.alphabeta_player.AlphaBetaPlayer`); `make_alphabeta_search` runs
    them in one. Each is a pure function (jit it):

    - ``start(key, states[B]) -> carry``: the search of every game, not yet run;
    - ``run(variables, carry, nodes) -> carry``: searched on until every game finished its
      deepest step or stepped into `nodes` (int32 []) positions since `start`;
    - ``searching(carry) -> bool []``: whether some game could search on with more nodes;
    - ``finish(variables, states[B], carry) -> SearchOutput``: the moves from each game's
      deepest finished step (the table's move at a root it solves), its `visit_counts` the
      positions searched, all on the chosen move;
    - ``depth(carry) -> int32 [B]``: the deepest step each game finished;
    - ``line(carry, first, length) -> int32 [B, length]``: each game's expected line from
      `first` (its move played), -1 padded (`azjax.core.alphabeta_line`; `length` static).
    """

    start: Callable[..., Any]
    run: Callable[..., Any]
    searching: Callable[..., jax.Array]
    finish: Callable[..., SearchOutput]
    depth: Callable[..., jax.Array]
    line: Callable[..., jax.Array]
    config: SearchConfig
    num_actions: int


def alphabeta_searcher(config: SearchConfig) -> AlphaBetaConfig:
    """The alpha-beta searcher `config` plays: `alphabeta_depth` whole moves, and the
    searcher's defaults (quiescence, table size) for the rest."""
    return AlphaBetaConfig(depth=config.alphabeta_depth)


def make_alphabeta_engine(env: Env, apply_fn: ApplyFn, config: SearchConfig) -> AlphaBetaEngine:
    """The alpha-beta search of `config` over `env` and `apply_fn` in steps (`AlphaBetaEngine`;
    the arguments as `make_alphabeta_search`'s)."""
    if config.material_utility:
        apply_fn = material_utility_apply(apply_fn, config.material_utility)
    searcher = alphabeta_searcher(config)
    adjudicate = endgame_adjudicator(env, config)
    table_actions = None if adjudicate is None else table_root_actions(env, adjudicate)
    walked = env if adjudicate is None else _TableEnded(env, adjudicate)

    def network(variables: Any, states: Any) -> tuple[jax.Array, jax.Array]:
        return apply_fn(variables, jax.vmap(env.observe)(states))

    def leaf(variables: Any, states: Any) -> tuple[jax.Array, jax.Array]:
        logits, value = network(variables, states)
        return LEAF_SCALE * jnp.clip(value, -1.0, 1.0), logits

    def start(key: chex.PRNGKey, states: Any) -> dict:
        return alphabeta_start(walked, key, states, searcher)

    def run(variables: Any, carry: dict, nodes: jax.Array | int | None) -> dict:
        return alphabeta_run(walked, searcher, carry, lambda children: leaf(variables, children),
                             nodes)

    def finish(variables: Any, states: Any, carry: dict) -> SearchOutput:
        result = alphabeta_result(carry)
        action = result.action
        if table_actions is not None:
            known, best = table_actions(states)
            action = jnp.where(known, best, action)
        chosen = jax.nn.one_hot(action, env.num_actions, dtype=jnp.float32)
        return check_output(SearchOutput(
            action=action, policy=chosen, value=result.value,
            prior_value=network(variables, states)[1],
            visit_counts=(chosen * result.nodes[:, None]).astype(jnp.int32),
        ), env.num_actions)

    return AlphaBetaEngine(start=start, run=run, searching=alphabeta_searching, finish=finish,
                           depth=lambda carry: alphabeta_result(carry).depth,
                           line=lambda carry, first, length: alphabeta_line(walked, carry, first,
                                                                            length),
                           config=config, num_actions=env.num_actions)


def make_alphabeta_search(env: Env, apply_fn: ApplyFn, config: SearchConfig):
    """The batched alpha-beta search over the network (`make_search`'s for `algorithm:
    alphabeta`).

    Args:
      env: the game (its rules and `Env.forcing`, the quiescence test).
      apply_fn: `(variables, obs [B, ...]) -> (logits [B, A], value [B])`, already wrapped by
        `search_apply_fn`; with `config.material_utility` the leaves score the value plus that
        weight times the material head's prediction.
      config: `alphabeta_depth`, `alphabeta_nodes`, `material_utility` and `endgame_table`
        are read.

    Returns:
      `search(variables, key, states, *, num_simulations=None, noise=True) -> SearchOutput`:
      `action` int32 [B] the best move (equal moves chosen by `key`) of the deepest step
      finished within `alphabeta_nodes`, `policy` its one-hot [B, A], `value` [B] its
      alpha-beta value for the player to move (a result, or LEAF_SCALE x a network value),
      `prior_value` [B] the network's value of the root, `visit_counts` [B, A] the positions
      searched, all on the chosen move. `num_simulations` and `noise` are not read: the depth
      and the node budget fix the work.
    """
    engine = make_alphabeta_engine(env, apply_fn, config)
    budget = config.alphabeta_nodes or None

    def search(variables: Any, key: chex.PRNGKey, states: Any, *,
               num_simulations: int | None = None, noise: bool = True) -> SearchOutput:
        del num_simulations, noise
        carry = engine.run(variables, engine.start(key, states), budget)
        return engine.finish(variables, states, carry)

    return search


class _TableEnded(EnvWrapper):
    """`env` whose steps end where its endgame table knows the result (`adjudicate`)."""

    def __init__(self, env: Env, adjudicate) -> None:
        super().__init__(env)
        self.adjudicate = adjudicate

    def step(self, state: GameState, action: jax.Array) -> GameState:
        """The base game's step, finished with the table's result where it knows one."""
        return self.adjudicate(self.base.step(state, action))
