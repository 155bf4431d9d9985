"""Baseline players: uniform random, one-ply greedy, and plain UCT MCTS with random rollouts.

A *player* is a pure function ``act(key, states) -> int32[B]`` over a batch of env states (a
vmapped ``State`` pytree); it returns a legal action for every live game (for a finished game,
whose mask is all True, any action). The AlphaZero agent plugs in with the same signature.

Every factory is memoised on its arguments, so ``mcts_player(env, num_simulations=64)`` returns
the same function object each time and jitted callers (arenas, oracle scoring) compile it once.

Shape legend: B batch, A actions, N simulations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from azjax.core.hashing import hash32, hash_choice, hash_seeds
from azjax.envs.core import Env, GameState, tree_select

__all__ = ["Player", "greedy_player", "mcts_player", "random_legal_actions", "random_player",
           "uct_search"]

Player = Callable[[jax.Array, GameState], jax.Array]
"""``act(key, states[B]) -> int32[B]``."""


def _done(state: GameState) -> jax.Array:
    return state.terminated | state.truncated


# ---- random ---------------------------------------------------------------------------------


def random_legal_actions(key: jax.Array, masks: jax.Array) -> jax.Array:
    """int32 [B]: a uniformly random legal action per row of `masks` (bool [B, A]).

    One hash per action and the largest legal one wins: ~12 integer operations per action,
    where a cumulative sum over the mask (then `argmax`) cost ~2.3 us per row of 170 actions
    on this CPU and `jax.random.categorical` ~6x that (docs/games/draughts.md).
    """
    return jax.vmap(hash_choice, in_axes=(0, None, 0))(
        hash_seeds(key, masks.shape[0]), jnp.uint32(0), masks)


@functools.cache
def random_player(env: Env) -> Player:
    """A player that moves uniformly at random among the legal actions.

    Args:
      env: the game (unused: the legal mask is all it needs; kept for the memoised factory).

    Returns:
      ``act(key, states[B]) -> int32 [B]``.
    """
    del env  # the legal mask is all it needs

    def act(key: jax.Array, states: GameState) -> jax.Array:
        """key, states[B] -> int32 [B]."""
        return random_legal_actions(key, states.legal_action_mask)

    return act


# ---- greedy (one ply) -----------------------------------------------------------------------


@functools.cache
def greedy_player(env: Env) -> Player:
    """A one-ply player: wins at once if it can; else avoids giving the opponent a win.

    For the player ``me`` to move it steps every action (and every reply to it) with the env:

    1. moves that win at once (``rewards[me] > 0``): pick one uniformly;
    2. else *safe* moves: legal moves that neither lose at once nor leave the player then to
       move (the opponent, or whoever it is: players need not alternate) a reply after which
       ``rewards[me] < 0``. This blocks an opponent's threat and avoids creating one (in
       connect four, never playing under the opponent's winning cell). Pick one uniformly;
    3. else (every move loses at once or next turn) a uniformly random legal move.

    Cost per game: A + A*A env steps.

    Args:
      env: the game.

    Returns:
      ``act(key, states[B]) -> int32 [B]``.
    """
    actions = jnp.arange(env.num_actions, dtype=jnp.int32)
    step_all = jax.vmap(env.step, in_axes=(None, 0))  # state, [A] -> states [A]

    def preferred(state: GameState) -> jax.Array:
        """One game -> bool [A]: the moves the greedy rule would pick among."""
        me = state.current_player
        legal = state.legal_action_mask
        after = step_all(state, actions)  # [A]
        wins = legal & (after.rewards[:, me] > 0)
        replies = jax.vmap(step_all, in_axes=(0, None))(after, actions)  # [A, A]
        reply_beats_me = (
            after.legal_action_mask & ~_done(after)[:, None] & (replies.rewards[:, :, me] < 0)
        )
        safe = legal & (after.rewards[:, me] >= 0) & ~jnp.any(reply_beats_me, axis=1)
        return jnp.where(jnp.any(wins), wins, jnp.where(jnp.any(safe), safe, legal))

    def act(key: jax.Array, states: GameState) -> jax.Array:
        """key, states[B] -> int32 [B]."""
        masks = jax.vmap(preferred)(states)
        return jax.vmap(hash_choice, in_axes=(0, None, 0))(
            hash_seeds(key, masks.shape[0]), jnp.uint32(0), masks
        )

    return act


# ---- plain UCT MCTS -------------------------------------------------------------------------


def uct_search(
    env: Env, key: jax.Array, state: GameState, *, num_simulations: int, uct_c: float
) -> tuple[jax.Array, jax.Array]:
    """Plain UCT for ONE game (see `_uct_search` for the algorithm).

    Args:
      env: the game.
      key: PRNG key of the search.
      state: one unbatched State.
      num_simulations: N simulations (static).
      uct_c: the exploration constant.

    Returns:
      (action int32 [], root child visit counts int32 [A]).
    """
    one = jax.tree.map(lambda x: x[None], state)
    actions, visits = _uct_search(env, hash_seeds(key, 1), one, num_simulations=num_simulations,
                                  uct_c=uct_c)
    return actions[0], visits[0]


def _uct_search(
    env: Env, seeds: jax.Array, states: GameState, *, num_simulations: int, uct_c: float
) -> tuple[jax.Array, jax.Array]:
    """Plain UCT for B games at once: N simulations of select / expand / rollout / backup.

    - Select from the root by UCT, ``Q + uct_c * sqrt(ln n_parent / n_child)``, while the node
      is live and every legal child has been visited; Q is the child's mean return for the
      player to move at the parent (``current_player``, so players need not alternate).
    - Expand one unvisited legal child (uniformly random among them), as OpenSpiel's MCTSBot.
    - Evaluate it by one uniformly random rollout to the end of the game. A terminal node is
      not expanded: its value is the game result.
    - Randomness: `hash32` of the game's uint32 seed, the simulation index and a step counter.
    - Back up the rewards per player id along the path; each node stores the total return,
      for both players, of the games that went through it (the reward of the step into the
      node included), so every parent reads it from its own mover's side.

    Each game's tree lives in fixed-size arrays: node states [N+1], visits [N+1], returns
    [N+1, 2], children [N+1, A] (-1 = not expanded), parent [N+1]. Selection, expansion and
    rollout are written for one game and vmapped; the backup is written over the batch (a
    vmapped while-loop would copy every game's visits and returns at each step of the
    longest path).

    Returns:
      (action int32 [B], root child visit counts int32 [B, A]). The action is the most visited
      child (ties: the larger total return for the mover, then the lowest index); 0 when the
      root is finished.
    """
    new_tree = functools.partial(_new_tree, num_nodes=num_simulations + 1,
                                 num_actions=env.num_actions)
    one_game = functools.partial(_select_expand_evaluate, env, uct_c)

    def simulate(i, tree):
        tree, leaf, future = jax.vmap(one_game, (0, None, 0))(seeds, i, tree)
        return _backup(tree, leaf, future)

    tree = jax.lax.fori_loop(0, num_simulations, simulate, jax.vmap(new_tree)(states))
    return jax.vmap(_best_root_child)(tree, states)


def _new_tree(state: GameState, *, num_nodes: int, num_actions: int) -> dict[str, Any]:
    """One game's empty tree of `num_nodes` nodes, its root `state`."""
    return dict(
        states=jax.tree.map(lambda x: jnp.broadcast_to(x, (num_nodes, *x.shape)), state),
        visits=jnp.zeros(num_nodes, jnp.int32),
        returns=jnp.zeros((num_nodes, 2), jnp.float32),
        children=jnp.full((num_nodes, num_actions), -1, jnp.int32),
        parent=jnp.full(num_nodes, -1, jnp.int32),
        size=jnp.int32(1),
    )


def _node_state(tree: dict[str, Any], node: jax.Array) -> GameState:
    return jax.tree.map(lambda x: x[node], tree["states"])


def _uct_scores(uct_c: float, tree: dict[str, Any], node: jax.Array) -> jax.Array:
    """float32 [A]: UCT of each child of a fully expanded node (-inf for illegal)."""
    s = _node_state(tree, node)
    kids = tree["children"][node]
    safe_kids = jnp.maximum(kids, 0)
    kid_visits = jnp.maximum(tree["visits"][safe_kids], 1).astype(jnp.float32)
    q = tree["returns"][safe_kids, s.current_player] / kid_visits
    parent_visits = tree["visits"][node].astype(jnp.float32)
    u = uct_c * jnp.sqrt(jnp.log(parent_visits) / kid_visits)
    return jnp.where(s.legal_action_mask & (kids >= 0), q + u, -jnp.inf)


def _unexpanded(tree: dict[str, Any], node: jax.Array) -> jax.Array:
    """bool [A]: the legal children of a live node not expanded yet."""
    s = _node_state(tree, node)
    return s.legal_action_mask & (tree["children"][node] < 0) & ~_done(s)


def _rollout(env: Env, seed: jax.Array, s: GameState) -> jax.Array:
    """float32 [2]: the rewards per player id from `s` to the end of a random game."""

    def cond(carry):
        return ~_done(carry[1])

    def body(carry):
        t, s, total = carry
        s = env.step(s, hash_choice(seed, t, s.legal_action_mask))
        return t + 1, s, total + s.rewards

    init = (jnp.int32(1), s, jnp.zeros(2, jnp.float32))  # counter 0 is the expansion's
    return jax.lax.while_loop(cond, body, init)[2]


def _select_expand_evaluate(env: Env, uct_c: float, seed, i, tree):
    """One game's selection, expansion and rollout: (tree, leaf node, rollout rewards)."""
    sim_seed = hash32(seed, i)

    # Selection: descend while the node is live and fully expanded.
    def keep_going(node):
        return ~_done(_node_state(tree, node)) & ~jnp.any(_unexpanded(tree, node))

    def descend(node):
        return tree["children"][node, jnp.argmax(_uct_scores(uct_c, tree, node))]

    node = jax.lax.while_loop(keep_going, descend, jnp.int32(0))

    # Expansion: one random unvisited legal child of a live node.
    s = _node_state(tree, node)
    expand = ~_done(s)
    action = hash_choice(sim_seed, jnp.int32(0), _unexpanded(tree, node))
    child_state = env.step(s, action)
    new = tree["size"]  # <= simulation index + 1 <= N: always in range
    tree = dict(
        tree,
        states=jax.tree.map(lambda xs, x: xs.at[new].set(x), tree["states"], child_state),
        children=tree["children"]
        .at[node, action]
        .set(jnp.where(expand, new, tree["children"][node, action])),
        parent=tree["parent"].at[new].set(jnp.where(expand, node, -1)),
        size=tree["size"] + expand.astype(jnp.int32),
    )
    leaf = jnp.where(expand, new, node)

    # Evaluation: one random rollout (nothing to play from a terminal node).
    return tree, leaf, _rollout(env, sim_seed, tree_select(expand, child_state, s))


def _backup(tree, leaf, future):
    """Walks every game's parents to its root, adding each node's own step reward."""
    step_rewards = tree["states"].rewards  # [B, N+1, 2]
    batch = jnp.arange(leaf.shape[0])

    def live_path(carry):
        return jnp.any(carry[0] >= 0)

    def step(carry):
        node, total, visits, returns = carry
        live = node >= 0
        at = jnp.maximum(node, 0)  # games whose path has ended add zeros at their root
        total = jnp.where(live[:, None], total + step_rewards[batch, at], total)
        visits = visits.at[batch, at].add(live.astype(jnp.int32))
        returns = returns.at[batch, at].add(jnp.where(live[:, None], total, 0.0))
        return jnp.where(live, tree["parent"][batch, at], node), total, visits, returns

    _, _, visits, returns = jax.lax.while_loop(
        live_path, step, (leaf, future, tree["visits"], tree["returns"]))
    return dict(tree, visits=visits, returns=returns)


def _best_root_child(tree, state):
    """One game's move: the most visited root child, ties to the larger mover's return."""
    kids = tree["children"][0]
    safe_kids = jnp.maximum(kids, 0)
    visits = jnp.where(kids >= 0, tree["visits"][safe_kids], 0)
    best = visits == jnp.max(visits)
    mover_return = tree["returns"][safe_kids, state.current_player]
    action = jnp.argmax(jnp.where(best & (kids >= 0), mover_return, -jnp.inf))
    return action.astype(jnp.int32), visits


@functools.cache
def mcts_player(env: Env, num_simulations: int, *, uct_c: float = math.sqrt(2.0)) -> Player:
    """Plain UCT MCTS with one uniformly random rollout per simulation (see `uct_search`).

    No noise, no priors; the final move is the most visited root child. Compare with
    OpenSpiel's ``MCTSBot(uct_c=sqrt(2), max_simulations=N, solve=False)`` and
    ``RandomRolloutEvaluator(n_rollouts=1)``.

    Args:
      env: the game.
      num_simulations: N >= 1 simulations per move.
      uct_c: the exploration constant.

    Returns:
      ``act(key, states[B]) -> int32 [B]``.
    """
    if num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    def act(key: jax.Array, states: GameState) -> jax.Array:
        """key, states[B] -> int32 [B]."""
        seeds = hash_seeds(key, states.current_player.shape[0])
        return _uct_search(env, seeds, states, num_simulations=num_simulations,
                           uct_c=uct_c)[0]

    return act
