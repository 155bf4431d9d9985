"""Batched tree search over the real game (AlphaZero, not MuZero), in mctx's terms.

`SearchConfig` maps one-to-one onto the arguments of mctx's `gumbel_muzero_policy` /
`muzero_policy`; the search runs azjax's own policies and loop (`azjax.core.policies`,
`azjax.core.tree_search`: the same search, batched, with mctx's public action selections and
qtransforms). The tree's embedding is the env `State` itself and `recurrent_fn` steps the real
rules.

Players need not alternate (draughts' multi-jumps): rewards and values are always taken for the
player to move, and the discount between two nodes is -1 when the player to move changes, +1
when it stays, 0 after the end.

`SearchConfig.contempt` > 0 makes the search draw-averse for the player to move at its root
(the tree's embedding then also carries that player): for play against weaker opponents, not
part of the game as trained. `SearchConfig.material_utility` > 0 makes it maximise the outcome
plus that weight times the final material difference (KataGo's score utility, with material as
the score), reading the network's material head. `SearchConfig.symmetry_average` evaluates each
position in all of the game's symmetric copies and averages them (`symmetry_averaged_apply`).
`SearchConfig.greedy_action` chooses between two greedy gumbel moves (see its comment), and
`SearchConfig.prior_temperature` flattens (T > 1) or sharpens the prior the search expands with
(`prior_tempered_apply`).

`SearchConfig.quiescence` values the positions in mid-exchange it evaluates after the exchange
(`azjax.core.quiescence`).

`make_search_engine` gives the same search in steps, for play (`azjax.core.search_engine`):
simulations in chunks (a time budget), the tree kept between moves, and with
`SearchConfig.solver` proven wins, losses and draws (`azjax.core.solver`), which
`make_search`'s search then uses too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import mctx

from azjax.config import ConfigError, NetworkConfig, SearchConfig, resolve_simulations
from azjax.core.endgames import endgame_adjudicator, table_root_actions
from azjax.core.network import ApplyFn, make_network
from azjax.core.policies import gumbel_muzero_search, muzero_search
from azjax.core.quiescence import mover_reward, quiescent_value_fn
from azjax.core.search_alphabeta import make_alphabeta_search
from azjax.core.search_apply import (
    material_utility_apply,
    prior_tempered_apply,
    search_apply_fn,
    symmetry_averaged_apply,
    symmetry_permutations,
)
from azjax.core.search_engine import SearchEngine, SearchOutput, SearchState, check_output
from azjax.envs.core import Env
from azjax.envs.forced import forced_moves_played

__all__ = [
    "SearchEngine",
    "SearchOutput",
    "SearchState",
    "draw_averse_value",
    "make_recurrent_fn",
    "make_root_fn",
    "make_search",
    "make_search_engine",
    "material_utility_apply",
    "prior_tempered_apply",
    "search_apply_fn",
    "make_network_search",
    "masked_logits",
    "symmetry_averaged_apply",
    "symmetry_permutations",
    "tree_env",
    "qtransform_from_name",
]

_ILLEGAL_LOGIT = -1e9  # finite, so softmaxes stay NaN-free even when every action is masked


def masked_logits(logits: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    """Logits with illegal actions set very negative: [B, A], [B, A] -> [B, A]."""
    return jnp.where(legal_action_mask, logits, _ILLEGAL_LOGIT)


def _evaluate(env: Env, apply_fn: ApplyFn, variables: Any, states: Any):
    obs = jax.vmap(env.observe)(states)
    logits, value = apply_fn(variables, obs)
    return masked_logits(logits, states.legal_action_mask), value


def make_root_fn(env: Env, apply_fn: ApplyFn, material_utility: float = 0.0):
    """states[B] -> mctx.RootFnOutput (masked prior logits, network value, embedding=states);
    with `material_utility`, the value adds that weight x the material head's prediction."""
    if material_utility:
        apply_fn = material_utility_apply(apply_fn, material_utility)

    def root_fn(variables: Any, states: Any) -> mctx.RootFnOutput:
        logits, value = _evaluate(env, apply_fn, variables, states)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)

    return root_fn


def make_recurrent_fn(env: Env, apply_fn: ApplyFn, material_utility: float = 0.0,
                      adjudicate: Callable | None = None, resolve: Callable | None = None):
    """mctx recurrent_fn stepping the real env; see the module docstring for the sign rules.

    `recurrent_fn(variables, key, action int32 [B], states [B])` -> (RecurrentFnOutput with
    reward, discount and value float32 [B] and prior_logits float32 [B, A], next states [B]).
    With `material_utility` a finished game's reward adds that weight x the final material
    difference for the player who moved into it, and values the material head's prediction.
    With `adjudicate` (`Env.endgame_adjudicator`) a position the endgame table knows is a
    finished game with its exact result. With `resolve` (`quiescent_value_fn`) the network's
    value of a forcing position is resolved by quiescence.
    """
    if material_utility:
        apply_fn = material_utility_apply(apply_fn, material_utility)

    def recurrent_fn(variables: Any, key: chex.PRNGKey, action: jax.Array, states: Any):
        del key
        mover = states.current_player
        next_states = jax.vmap(env.step)(states, action)
        if adjudicate is not None:
            next_states = jax.vmap(adjudicate)(next_states)
        done = next_states.terminated | next_states.truncated
        reward = mover_reward(env, next_states, mover, material_utility)
        same_player = next_states.current_player == mover
        discount = jnp.where(done, 0.0, jnp.where(same_player, 1.0, -1.0))
        logits, value = _evaluate(env, apply_fn, variables, next_states)
        if resolve is not None:
            value = resolve(variables, next_states, logits, value)
        output = mctx.RecurrentFnOutput(
            reward=reward.astype(jnp.float32),
            discount=discount.astype(jnp.float32),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value).astype(jnp.float32),
        )
        return output, next_states

    return recurrent_fn


def draw_averse_value(value: jax.Array, player: jax.Array, root_player: jax.Array,
                      contempt: float) -> jax.Array:
    """float32 [B]: `value` (for `player` [B]) when a draw costs `root_player` [B] `contempt`.

    A value v in [-1, 1] is read as wins minus losses with a draw share of 1 - |v| (the most
    draws that v allows; the value head has no draw output), so the root player's value drops by
    contempt * (1 - |v|) and the other player's rises by as much: the game stays zero-sum.
    """
    sign = jnp.where(player == root_player, 1.0, -1.0)
    return value - sign * contempt * (1.0 - jnp.abs(value))


def _draw_averse_recurrent_fn(recurrent_fn, contempt: float):
    """`recurrent_fn` over embeddings `(states [B], root_player int32 [B])` with draws scored
    as -contempt for the root player: finished draws in the reward, the rest in the value."""

    def draw_averse(variables: Any, key: chex.PRNGKey, action: jax.Array, embedding: Any):
        states, root_player = embedding
        output, next_states = recurrent_fn(variables, key, action, states)
        done = next_states.terminated | next_states.truncated
        drawn = done & jnp.all(next_states.rewards == 0, axis=-1)
        mover_sign = jnp.where(states.current_player == root_player, 1.0, -1.0)
        value = draw_averse_value(output.value, next_states.current_player, root_player,
                                  contempt)
        output = output.replace(reward=output.reward - contempt * mover_sign * drawn,
                                value=jnp.where(done, 0.0, value))
        return output, (next_states, root_player)

    return draw_averse


def qtransform_from_name(name: str):
    """mctx's qtransform for a `SearchConfig.qtransform` name (min-max uses the game range)."""
    if name == "completed_by_mix_value":
        return mctx.qtransform_completed_by_mix_value
    if name == "by_parent_and_siblings":
        return mctx.qtransform_by_parent_and_siblings
    # Game results lie in [-1, 1].
    return functools.partial(mctx.qtransform_by_min_max, min_value=-1.0, max_value=1.0)


def tree_env(env: Env, config: SearchConfig) -> Env:
    """The game the search's tree (and self-play) walks: `env`, or with
    `config.play_forced_moves` the same game with forced moves played at once."""
    return forced_moves_played(env) if config.play_forced_moves else env


def _policy(config: SearchConfig, recurrent_fn, variables: Any, key: chex.PRNGKey,
            root: mctx.RootFnOutput, invalid: jax.Array, simulations: int,
            noise: bool) -> mctx.PolicyOutput:
    """The config's policy (Gumbel MuZero or PUCT) over azjax's search loop."""
    qtransform = qtransform_from_name(config.qtransform)
    if config.algorithm == "gumbel":
        return gumbel_muzero_search(
            variables, key, root, recurrent_fn,
            num_simulations=simulations,
            invalid_actions=invalid,
            qtransform=qtransform,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=config.gumbel_scale if noise else 0.0,
        )
    return muzero_search(
        variables, key, root, recurrent_fn,
        num_simulations=simulations,
        invalid_actions=invalid,
        qtransform=qtransform,
        dirichlet_fraction=config.dirichlet_fraction if noise else 0.0,
        dirichlet_alpha=config.dirichlet_alpha,
        pb_c_init=config.pb_c_init,
        pb_c_base=config.pb_c_base,
    )


def _search_fns(env: Env, apply_fn: ApplyFn, config: SearchConfig):
    """`(tree_root, recurrent_fn, table_actions)` of `config`'s search:
    `tree_root(variables, states [B]) -> (mctx.RootFnOutput, the network's value [B])`, mctx's
    recurrent function, and `table_root_actions` of the endgame table (None without one)."""
    apply_fn = search_apply_fn(env, apply_fn, config)
    root_fn = make_root_fn(env, apply_fn, config.material_utility)
    # One table for the tree and the root: its arrays are constants of the compiled search.
    adjudicate = endgame_adjudicator(env, config)
    table_actions = None if adjudicate is None else table_root_actions(env, adjudicate)
    # The root is whatever position it is handed; below it, forced moves may be played at once
    # and the endgame table may end the lines.
    walked = tree_env(env, config)
    resolve = None
    if config.quiescence:
        evaluate_fn = material_utility_apply(apply_fn, config.material_utility) \
            if config.material_utility else apply_fn
        resolve = quiescent_value_fn(
            walked, functools.partial(_evaluate, walked, evaluate_fn), config.quiescence,
            config.quiescence_moves, adjudicate, config.material_utility)
    recurrent_fn = make_recurrent_fn(walked, apply_fn, config.material_utility, adjudicate,
                                     resolve)
    if config.contempt:
        recurrent_fn = _draw_averse_recurrent_fn(recurrent_fn, config.contempt)

    def tree_root(variables: Any, states: Any) -> tuple[mctx.RootFnOutput, jax.Array]:
        root = root_fn(variables, states)
        network_value = root.value
        if resolve is not None:
            root = root.replace(value=resolve(variables, states, root.prior_logits, root.value))
        if not config.contempt:
            return root, network_value
        players = states.current_player
        return root.replace(value=draw_averse_value(root.value, players, players,
                                                    config.contempt),
                            embedding=(states, players)), network_value

    return tree_root, recurrent_fn, table_actions


def make_search_engine(env: Env, apply_fn: ApplyFn, config: SearchConfig) -> SearchEngine:
    """The search of `config` over `env` and `apply_fn` (as `make_search`'s) in steps, for
    play and for self-play with kept trees: chunks of simulations, tree reuse, the solver
    (`azjax.core.search_engine`).

    Returns:
      A `SearchEngine`: `start(variables, key, states, *, capacity, planned_simulations,
      noise=False, kept=None)`, `simulate(variables, state, num_simulations)`,
      `finish(state) -> SearchOutput`, `advance(state, actions)`, `simulations_done(state)`,
      `kept_visits(state)`, `root_proven(state)`. A kept tree is used where its root is the
      new root's position, every field of the state equal (and, with contempt, where its
      values are draw-averse for the new root's player to move); elsewhere the search starts
      afresh. With `config.endgame_table`, `finish` plays the table's move at a root it
      solves (`azjax.core.endgames`).

    Raises:
      ConfigError: `config.algorithm` is `alphabeta` (`make_alphabeta_engine` steps it).
    """
    if config.algorithm == "alphabeta":
        raise ConfigError("search.algorithm: alphabeta has no tree to keep or prove: its "
                          "steps are azjax.core.search_alphabeta.make_alphabeta_engine's")
    tree_root, recurrent_fn, table_actions = _search_fns(env, apply_fn, config)

    def states_of(embedding: Any) -> Any:
        return embedding[0] if config.contempt else embedding

    def outcome(parent: Any, child: Any) -> jax.Array:
        mover = states_of(parent).current_player[:, None]
        reward = jnp.take_along_axis(states_of(child).rewards, mover, axis=1)[:, 0]
        return jnp.sign(reward).astype(jnp.int32)

    def same_root(embedding: Any, states: Any) -> jax.Array:
        # The very position, field for field (with forced moves played in the tree, a kept
        # child is the position after them: the caller's is not, and starts afresh).
        equal = jax.tree.map(lambda x, y: jnp.all((x == y).reshape(x.shape[0], -1), axis=1),
                             states_of(embedding), states)
        same = functools.reduce(jnp.logical_and, jax.tree.leaves(equal))
        return same & (embedding[1] == states.current_player) if config.contempt else same

    return SearchEngine(tree_root, recurrent_fn, config, qtransform_from_name(config.qtransform),
                        env.num_actions, legal_fn=lambda e: states_of(e).legal_action_mask,
                        outcome_fn=outcome, same_root_fn=same_root,
                        root_action_fn=None if table_actions is None
                        else lambda e: table_actions(states_of(e)))


def _solver_search(engine: SearchEngine, config: SearchConfig):
    """`make_search`'s search over `engine` (the solver's): one chunk of all simulations."""

    def search(variables: Any, key: chex.PRNGKey, states: Any, *,
               num_simulations: int | None = None, noise: bool = True) -> SearchOutput:
        simulations = resolve_simulations(num_simulations, config)
        state = engine.start(variables, key, states, capacity=simulations + 1,
                             planned_simulations=simulations, noise=noise)
        return engine.finish(engine.simulate(variables, state, simulations))

    return search


def make_search(env: Env, apply_fn: ApplyFn, config: SearchConfig):
    """Builds the batched search of `config` over `env` with the network `apply_fn`.

    Args:
      env: the game (the root's rules; below it `tree_env(env, config)`).
      apply_fn: `(variables, obs [B, ...]) -> (logits [B, A], value [B])` (and the material
        head's prediction [B] when called with `material=True`, for `material_utility`).
      config: the search's settings.

    Returns:
      `search(variables, key, states, *, num_simulations=None, noise=True) -> SearchOutput`
      over a batch of env states [B] (`num_simulations` overrides the config's; 0 or None
      runs the config's, `resolve_simulations`). With `noise=False` the search is
      deterministic (no Dirichlet noise for puct, `gumbel_scale=0` for gumbel) and `action` is
      the greedy move (`config.greedy_action`; the argmax of the final policy by default), as
      used for evaluation and play. With `config.solver` it runs `make_search_engine`'s
      steps, the tree with room for its simulations. With `config.algorithm` `alphabeta`,
      `azjax.core.search_alphabeta`'s search, which reads no simulation count.
    """
    if config.algorithm == "alphabeta":
        return make_alphabeta_search(env, search_apply_fn(env, apply_fn, config), config)
    if config.solver:
        return _solver_search(make_search_engine(env, apply_fn, config), config)
    tree_root, recurrent_fn, table_actions = _search_fns(env, apply_fn, config)
    # Without noise: the gumbel action is sequential halving's survivor (puct's would sample
    # the visits), else the argmax of the final policy.
    survivor = config.algorithm == "gumbel" and config.greedy_action == "halving"

    def search(variables: Any, key: chex.PRNGKey, states: Any, *,
               num_simulations: int | None = None, noise: bool = True) -> SearchOutput:
        simulations = resolve_simulations(num_simulations, config)
        root, prior_value = tree_root(variables, states)
        out = _policy(config, recurrent_fn, variables, key, root,
                      ~states.legal_action_mask, simulations, noise)
        policy = out.action_weights
        action = out.action if noise or survivor else jnp.argmax(policy, axis=-1)
        if table_actions is not None:
            known, best = table_actions(states)
            action = jnp.where(known, best, action)
        summary = out.search_tree.summary()
        return check_output(SearchOutput(
            action=action.astype(jnp.int32),
            policy=policy,
            value=summary.value,
            prior_value=prior_value,
            visit_counts=summary.visit_counts.astype(jnp.int32),
        ), env.num_actions)

    return search


def make_network_search(env: Env, network: NetworkConfig, config: SearchConfig):
    """`make_search` over a fresh network of `network`'s shape whose trunk's dense layers
    multiply in `config.matmul_dtype`: the search every caller holding a config wants. Its
    `variables` are the float32 ones the training step updates."""
    _, apply_fn = make_network(network, env.num_actions, matmul_dtype=config.matmul_dtype)
    return make_search(env, apply_fn, config)
