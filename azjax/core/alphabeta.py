"""Alpha-beta: a classical searcher, over a game's hand-made evaluation the fixed opponent that
ratings are anchored to (`alphabeta:D`, `azjax.evaluation.alphabeta`), over a network's value
a play-time search of its own (`search.algorithm: alphabeta`, `azjax.core.search_alphabeta`).

The search is negamax with alpha-beta pruning and iterative deepening to D *whole moves*: a
move that leaves the same player to move (a draughts multi-jump, played hop by hop as the env's
actions) does not count against the depth, so the engine plans whole captures. At the horizon it
searches on while `Env.forcing` holds (quiescence: a draughts capture is pending), up to
`quiescence` more moves. Leaves score `Env.heuristic_value`, or a `LeafFn` when one is given
(finished games score their result). Moves are ordered by the transposition table's move, two
killers per ply, then action id or the `LeafFn`'s preference (a policy's logits); at the root
by a seeded random tie-break, so equal moves are chosen at random and games differ
(`azjax.core.alphabeta_table`). Neither the pruning nor the table nor the order ever changes a
value: it equals plain minimax over the same evaluation (tests/test_alphabeta.py).

Why compiled: one jitted function over a batch of games in lockstep plays inside the compiled
arenas and ladders like every other player (`act(key, states[B])`), for every game that follows
the Env contract. The depth-first walk is a `lax.while_loop` over the batch, one step per
iteration; each game keeps its own stack, table and depth, so its search does not depend on its
batch. Each iteration first does the writes the previous one decided, then reads, so XLA updates
the stacks and tables in place (`_apply`). A search can stop after a budget of positions and go
on later (`alphabeta_run`), as a clock needs.

`ENGINE_VERSION` names this algorithm and its defaults; with the game's
`Env.evaluation_version` it names an anchor, so `alphabeta:6` means the same from release to
release. Shape legend: B batch, A actions, L stack levels, T table slots.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from azjax.core.alphabeta_table import (
    bound_flag,
    empty_tables,
    id_ties,
    order_keys,
    preference_ties,
    probe,
    put_rows,
    seeded_ties,
    select_rows,
    settles,
    slot_of,
    table_slots,
)
from azjax.core.hashing import position_hash
from azjax.envs.core import Env, GameState

__all__ = ["ENGINE_VERSION", "AlphaBetaConfig", "LeafFn", "SearchResult", "alphabeta_result",
           "alphabeta_run", "alphabeta_search", "alphabeta_searching", "alphabeta_start"]

ENGINE_VERSION = 1
INF = 2.0  # beyond every value: results are +-1, heuristic scores inside (-1, 1)

LeafFn = Callable[[GameState], tuple[jax.Array, jax.Array | None]]
"""``leaf(states[B]) -> (value float32 [B], preference float32 [B, A] or None)``: live
positions' values for their player to move, strictly inside (-1, 1) so that a result always
outranks them, and optionally how much each action is worth searching first (higher first)."""

@dataclasses.dataclass(frozen=True)
class AlphaBetaConfig:
    """One alpha-beta searcher.

    Attributes:
      depth: D >= 1, whole moves searched before the horizon.
      quiescence: how many moves past the horizon the search goes on while `Env.forcing`.
      table_bits: the transposition table holds up to 2**table_bits entries per game (fewer
        in batches of more than 256 games: 2**22 entries over the batch at most).
      count_actions: count the depth in env actions rather than whole moves (OpenSpiel's
        convention, for cross-checks); with `quiescence` 0 there is no quiescence either.
      max_iterations: a bound on the walk's steps (into a position or back from one, all
        depths together), for safety: a deepening step cut short keeps the previous depth's
        move (`alphabeta_search`'s `budget` bounds the positions searched instead).
    """

    depth: int
    quiescence: int = 8
    table_bits: int = 14
    count_actions: bool = False
    max_iterations: int = 4_000_000

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"alpha-beta depth must be >= 1, got {self.depth}")
        if self.quiescence < 0:
            raise ValueError(f"alpha-beta quiescence must be >= 0, got {self.quiescence}")

    @property
    def stack(self) -> int:
        """L, the deepest path in env actions the search holds: whole moves of up to four
        actions each (longer paths are scored statically where they reach it)."""
        return 4 * (self.depth + self.quiescence) + 4


class SearchResult(NamedTuple):
    """What `alphabeta_search` found for each game.

    Attributes:
      action: int32 [B], the move's first action (0 for a finished game).
      value: float32 [B], its value for the player to move (results are +-1).
      nodes: int32 [B], positions the search stepped into, all depths together.
      depth: int32 [B], the deepest step it finished, whose move it names (0: none, the
        first legal move; a finished game: its limit).
      complete: bool [B], whether it finished the deepest step asked for within its budget.
    """

    action: jax.Array
    value: jax.Array
    nodes: jax.Array
    depth: jax.Array
    complete: jax.Array


class _Layout(NamedTuple):
    """The static sizes of one search: B games, A actions, L stack levels, T table slots."""

    num_games: int
    num_actions: int
    levels: int
    slots: int

    @property
    def rows(self) -> jax.Array:
        return jnp.arange(self.num_games)


def _start(layout: _Layout, states: GameState, root_ties: jax.Array, limit: jax.Array) -> dict:
    """The search's carry: every level of every game's stack, its killers and its table, the
    roots' tie-breaks (int32 [B, A]) and the deepest step asked for (int32 [])."""
    b, t = layout.num_games, layout.slots

    def stacked(x):
        return jnp.broadcast_to(x[:, None], (b, layout.levels, *x.shape[1:]))

    zeros_f, zeros_i = jnp.zeros(b, jnp.float32), jnp.zeros(b, jnp.int32)
    carry = dict(
        states=jax.tree.map(stacked, states),
        keys=jnp.full((b, layout.levels, layout.num_actions), -1, jnp.int32),
        alpha=stacked(zeros_f), beta=stacked(zeros_f), alpha0=stacked(zeros_f),
        best=stacked(zeros_f), best_action=stacked(zeros_i), depth=stacked(zeros_i),
        player=stacked(zeros_i), via=stacked(zeros_i),
        hash=stacked(jax.vmap(position_hash)(states)),
        killers=jnp.full((b, layout.levels, 2), -1, jnp.int32),
        table=empty_tables(b, t),
        top=zeros_i, nodes=zeros_i, cap=jnp.int32(0), iterations=jnp.int32(0),
        root_ties=root_ties,
        limit=jnp.asarray(limit, jnp.int32),
        action=jnp.argmax(states.legal_action_mask, -1).astype(jnp.int32),
        value=zeros_f, reached=zeros_i)
    return dict(carry, pending=_no_writes(carry))


def _root_entry(layout: _Layout, c: dict, table_move: jax.Array, depth: jax.Array) -> dict:
    """Level 0 of every game's stack for a search of its root to `depth` (int32 [B]) whole
    moves with a full window, `table_move` (int32 [B], -1: none) first (a `_PUSHED` write)."""
    root = jax.tree.map(lambda x: x[:, 0], c["states"])
    keys = jax.vmap(order_keys)(root.legal_action_mask, table_move, c["killers"][:, 0],
                                 c["root_ties"])
    full, zeros = jnp.full(layout.num_games, INF), jnp.zeros(layout.num_games, jnp.int32)
    return dict(states=root, keys=keys, alpha=-full, beta=full, alpha0=-full, best=-full,
                best_action=zeros, depth=depth, player=root.current_player, via=zeros,
                hash=c["hash"][:, 0])


# Which carry fields each kind of pending write sets (`_body` decides them, `_apply` does).
_PUSHED = ("states", "keys", "alpha", "beta", "alpha0", "best", "best_action", "depth",
           "player", "via", "hash")
_UPDATED = ("alpha", "best", "best_action", "killers")


def _no_writes(c: dict) -> dict:
    """Pending writes that write nothing, shaped like the ones `_body` decides."""
    def group(source, names):
        return dict(index=jnp.zeros(c["top"].shape, jnp.int32),
                    active=jnp.zeros(c["top"].shape, bool),
                    values={n: jax.tree.map(lambda x: x[:, 0], source[n]) for n in names})

    return dict(push=group(c, _PUSHED), descend=group(c, ("keys",)),
                update=group(c, _UPDATED), store=group(c["table"], tuple(c["table"])))


def _apply(c: dict) -> dict:
    """The carry with its pending writes done (and none left pending).

    The walk's step decides its writes and the next step does them, before it reads anything:
    XLA:CPU updates a while loop's arrays in place only when, within one iteration, every
    write to an array comes before every read of it; otherwise it copies the whole carry
    (the stacks and the tables) at each step.
    """
    out, pending = dict(c), c["pending"]
    for group in ("descend", "update", "push"):
        w = pending[group]
        for name, value in w["values"].items():
            out[name] = put_rows(out[name], w["index"], value, w["active"])
    w = pending["store"]
    out["table"] = {name: put_rows(c["table"][name], w["index"], w["values"][name], w["active"])
                    for name in c["table"]}
    out["pending"] = {g: dict(w, active=jnp.zeros_like(w["active"])) for g, w in pending.items()}
    return out


def _live(c: dict) -> jax.Array:
    """bool [B]: the games still searching (a deepening step under way, nodes left)."""
    return (c["top"] >= 0) & (c["nodes"] < c["cap"])


def _child(env: Env, config: AlphaBetaConfig, layout: _Layout, leaf: LeafFn | None,
           plain_ties: jax.Array, c: dict) -> dict:
    """The next child of every game's top node, stepped into and scored at once if it is a
    leaf or the table settles it (see the module docstring), with its children's tie-breaks
    (int32 [B, A]: `plain_ties`, or the leaf function's preference, `preference_ties`)."""
    rows, top = layout.rows, jnp.maximum(c["top"], 0)
    keys_t = c["keys"][rows, top]  # [B, A]
    action = jnp.argmax(keys_t, -1).astype(jnp.int32)
    alpha_t, beta_t = c["alpha"][rows, top], c["beta"][rows, top]
    depth_t, player_t = c["depth"][rows, top], c["player"][rows, top]
    descend = _live(c) & (keys_t[rows, action] >= 0) & (alpha_t < beta_t)
    child = jax.vmap(env.step)(jax.tree.map(lambda x: x[rows, top], c["states"]), action)
    same = child.current_player == player_t
    depth = depth_t - (1 if config.count_actions else jnp.where(same, 0, 1))
    alpha, beta = jnp.where(same, alpha_t, -beta_t), jnp.where(same, beta_t, -alpha_t)
    terminal = child.terminated | child.truncated
    if leaf is None:
        heuristic, ties = jax.vmap(env.heuristic_value)(child), plain_ties
    else:
        heuristic, preference = leaf(child)
        ties = plain_ties if preference is None else preference_ties(preference)
    static = jnp.where(terminal, child.rewards[rows, child.current_player], heuristic)
    at_leaf = (terminal | ((depth <= 0) & ~jax.vmap(env.forcing)(child))
               | (depth <= -config.quiescence) | (top + 1 >= layout.levels))
    position = jax.vmap(position_hash)(child)
    hit, e_value, e_depth, e_flag, e_move = probe(c["table"], position)
    settled = settles(hit, e_value, e_depth, e_flag, depth, alpha, beta)
    value = jnp.where(at_leaf, static, e_value)
    return dict(top=top, keys_t=keys_t, action=action, descend=descend, child=child,
                same=same, depth=depth, alpha=alpha, beta=beta, position=position,
                scored=descend & (at_leaf | settled), push=descend & ~(at_leaf | settled),
                value=jnp.where(same, value, -value), table_move=jnp.where(hit, e_move, -1),
                ties=ties)


def _store(layout: _Layout, c: dict, top: jax.Array, ascend: jax.Array) -> dict:
    """The table write of each ascending game's finished node `top`: its value and bound."""
    rows = layout.rows
    best = c["best"][rows, top]
    return dict(index=slot_of(c["table"], c["hash"][rows, top]), active=ascend, values=dict(
        check=c["hash"][rows, top, 1], value=best, depth=c["depth"][rows, top],
        flag=bound_flag(best, c["alpha0"][rows, top], c["beta"][rows, top]),
        move=c["best_action"][rows, top]))


def _body(env: Env, config: AlphaBetaConfig, layout: _Layout, leaf: LeafFn | None,
          ties: jax.Array, c: dict) -> dict:
    """One step of every game's depth-first walk: the last step's writes done, then descend
    into a child (score it or push it), or finish the top node (store it, hand its value to
    its parent, pop it); this step's writes are left pending (`_apply`)."""
    c = _apply(c)
    rows = layout.rows
    d = _child(env, config, layout, leaf, ties, c)
    top, push, scored = d["top"], d["push"], d["scored"]
    ascend = _live(c) & ~d["descend"]
    parent = jnp.maximum(top - 1, 0)
    best_t = c["best"][rows, top]
    # One node takes a value: `top` from a scored child, or the parent from `top`.
    update = scored | (ascend & (top > 0))
    node = jnp.where(scored, top, parent)
    value = jnp.where(scored, d["value"], jnp.where(
        c["player"][rows, top] == c["player"][rows, parent], best_t, -best_t))
    played = jnp.where(scored, d["action"], c["via"][rows, top])
    best_n = c["best"][rows, node]
    new_alpha = jnp.maximum(c["alpha"][rows, node], value)
    killers = c["killers"][rows, node]
    cutoff = new_alpha >= c["beta"][rows, node]
    killers = jnp.where((cutoff & (played != killers[:, 0]))[:, None],
                        jnp.stack([played, killers[:, 0]], -1), killers)
    below = top + 1
    child_keys = jax.vmap(order_keys)(
        d["child"].legal_action_mask, d["table_move"],
        c["killers"][rows, jnp.minimum(below, layout.levels - 1)], d["ties"])
    # A root searched to its depth: its move is taken and, below the limit, it is searched
    # again one move deeper (iterative deepening game by game: a push to level 0).
    ended = ascend & (top == 0)
    again = ended & (c["depth"][:, 0] < c["limit"])
    pushed = select_rows(again, _root_entry(layout, c, c["best_action"][:, 0],
                                        c["depth"][:, 0] + 1), dict(
        states=d["child"], keys=child_keys, alpha=d["alpha"], beta=d["beta"],
        alpha0=d["alpha"], best=jnp.full(layout.num_games, -INF),
        best_action=jnp.zeros(layout.num_games, jnp.int32), depth=d["depth"],
        player=d["child"].current_player, via=d["action"], hash=d["position"]))
    pending = dict(
        push=dict(index=jnp.where(again, 0, below), active=push | again, values=pushed),
        descend=dict(index=top, active=d["descend"],
                     values=dict(keys=d["keys_t"].at[rows, d["action"]].set(-1))),
        update=dict(index=node, active=update, values=dict(
            alpha=new_alpha, best=jnp.maximum(best_n, value),
            best_action=jnp.where(value > best_n, played, c["best_action"][rows, node]),
            killers=killers)),
        store=_store(layout, c, top, ascend))
    return dict(c, pending=pending,
                top=jnp.where(push, below, jnp.where(again, 0, jnp.where(
                    ascend, c["top"] - 1, c["top"]))),
                nodes=c["nodes"] + d["descend"].astype(jnp.int32),
                iterations=c["iterations"] + 1,
                action=jnp.where(ended, c["best_action"][:, 0], c["action"]),
                value=jnp.where(ended, c["best"][:, 0], c["value"]),
                reached=jnp.where(ended, c["depth"][:, 0], c["reached"]))


def alphabeta_start(env: Env, key: jax.Array, states: GameState, config: AlphaBetaConfig,
                    depth: jax.Array | int | None = None) -> dict:
    """The search of every game of `states` [B] to `depth` whole moves (1 to `config.depth`;
    None: `config.depth`; traced: one program serves every depth), `key` seeding the root's
    tie-break among equal moves, not yet run: its carry, a pytree for `alphabeta_run`."""
    num_games = states.current_player.shape[0]
    layout = _Layout(num_games, env.num_actions, config.stack,
                     table_slots(num_games, config.table_bits))
    limit = config.depth if depth is None else jnp.clip(depth, 1, config.depth)
    c = _start(layout, states, seeded_ties(key, num_games, env.num_actions), limit)
    entry = _root_entry(layout, c, jnp.full(num_games, -1, jnp.int32),
                        jnp.ones(num_games, jnp.int32))
    at_root, zero = jnp.ones(num_games, bool), jnp.zeros(num_games, jnp.int32)
    c = dict(c, **{name: put_rows(c[name], zero, entry[name], at_root) for name in _PUSHED})
    return dict(c, top=jnp.where(states.terminated | states.truncated, -1, 0))


def alphabeta_run(env: Env, config: AlphaBetaConfig, carry: dict, leaf: LeafFn | None = None,
                  nodes: jax.Array | int | None = None) -> dict:
    """Searches every game on until it has finished its deepest step or stepped into `nodes`
    positions since `alphabeta_start` (int32 []: a budget; None: none), whichever is first.
    Each game steps once per iteration, so its search (and its move) does not depend on the
    games beside it. Run it again with more `nodes` to search on: the same search as one run
    to that count.

    Args:
      env: the game (as `alphabeta_start`'s).
      config: the searcher (static); its `max_iterations` bounds the loop, for safety.
      carry: `alphabeta_start`'s or an earlier run's.
      leaf: scores the leaves and orders the moves (`LeafFn`; a network's value and policy);
        None: `env.heuristic_value`, moves by action id.
      nodes: the positions after which a game's search stops.

    Returns:
      The carry, searched on (for `alphabeta_result`).
    """
    (b, levels, a), slots = carry["keys"].shape, carry["table"]["check"].shape[1]
    layout = _Layout(b, a, levels, slots)
    cap = jnp.iinfo(jnp.int32).max if nodes is None else nodes
    return jax.lax.while_loop(
        lambda c: jnp.any(_live(c)) & (c["iterations"] < config.max_iterations),
        functools.partial(_body, env, config, layout, leaf,
                          id_ties(layout.num_games, layout.num_actions)),
        dict(carry, cap=jnp.asarray(cap, jnp.int32)))


def alphabeta_searching(carry: dict) -> jax.Array:
    """bool []: whether some game of `carry` is in a deepening step (more nodes search on)."""
    return jnp.any(carry["top"] >= 0)


def alphabeta_result(carry: dict) -> SearchResult:
    """What the search in `carry` found: each game's move from its deepest finished step."""
    root = jax.tree.map(lambda x: x[:, 0], carry["states"])
    root_done = root.terminated | root.truncated
    reached = jnp.where(root_done, carry["limit"], carry["reached"])
    return SearchResult(action=jnp.where(root_done, 0, carry["action"]).astype(jnp.int32),
                        value=jnp.where(root_done, 0.0, carry["value"]),
                        nodes=carry["nodes"], depth=reached,
                        complete=reached >= carry["limit"])


def alphabeta_search(env: Env, key: jax.Array, states: GameState, config: AlphaBetaConfig,
                     depth: jax.Array | int | None = None, leaf: LeafFn | None = None,
                     budget: jax.Array | int | None = None) -> SearchResult:
    """Searches every game of a batch to `config.depth` whole moves (see the module docstring).

    Args:
      env: the game; its `forcing`, and its `heuristic_value` unless `leaf` is given, shape
        the search.
      key: PRNG key of the root's tie-break among equal moves.
      states: a batch of B states (finished games get action 0).
      config: the searcher (static).
      depth: int32 [], 1 to `config.depth`, to search less deep with the same compiled
        program (None: `config.depth`).
      leaf: scores the leaves and orders the moves (`LeafFn`; a network's value and policy);
        None: `env.heuristic_value`, moves by action id.
      budget: int32 [], the positions each game's search may step into (`alphabeta_run`'s
        `nodes`): a game that runs out plays its deepest finished step's move. None: none.

    Returns:
      A `SearchResult` of [B] arrays.
    """
    carry = alphabeta_start(env, key, states, config, depth)
    return alphabeta_result(alphabeta_run(env, config, carry, leaf, budget))
