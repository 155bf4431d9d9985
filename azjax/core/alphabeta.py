"""Alpha-beta: a classical searcher, over a game's hand-made evaluation the fixed opponent that
ratings are anchored to (`alphabeta:D`, `azjax.evaluation.alphabeta`), over a network's value
a play-time search of its own (`search.algorithm: alphabeta`, `azjax.core.search_alphabeta`).

The search is negamax with alpha-beta pruning and iterative deepening to D *whole moves*: a
move that leaves the same player to move (a draughts multi-jump, played hop by hop as the env's
actions) does not count against the depth, so the engine plans whole captures. At the horizon it
searches on while `Env.forcing` holds (quiescence: a draughts capture is pending), up to
`quiescence` more moves. Leaves score `Env.heuristic_value`, or a `LeafFn` when one is given
(finished games score their result). Move order: the transposition table's move, then two
killer moves per ply, then the rest by action id, or by the `LeafFn`'s preference (a policy's
logits) where it gives one; at the root the rest in a seeded random order, so equal moves are
chosen at random and games differ. (Draughts captures are compulsory, so "captures first" is
the rule itself.) The table is keyed by a hash of the position and only cuts the search with
entries of the same depth, so neither the pruning nor the table nor the move order ever changes
a value: it equals plain minimax over the same evaluation (tests/test_alphabeta.py).

Why a compiled search and not a host engine: it runs as one jitted function over a batch of
games in lockstep, so it plays inside the compiled arenas and ladders like every other player
(`act(key, states[B])`), for every game that follows the Env contract, with no host-side copy of
any game's rules. The depth-first walk is a `lax.while_loop` written over the batch, one env
step per iteration; each game keeps its own stack of positions, move orders and bounds, and its
own table. Each iteration first does the writes the previous one decided, then reads: that
order lets XLA update the stacks and tables in place rather than copy them at every step
(`_apply`). Games of a batch that finish their search early idle until the last one does.

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
import numpy as np

from azjax.core.hashing import hash32, hash_seeds, position_hash
from azjax.envs.core import Env, GameState

__all__ = ["ENGINE_VERSION", "AlphaBetaConfig", "LeafFn", "SearchResult", "alphabeta_search"]

ENGINE_VERSION = 1
INF = 2.0  # beyond every value: results are +-1, heuristic scores inside (-1, 1)
EXACT, LOWER, UPPER = 0, 1, 2  # what a table entry's value is: the value, a lower or upper bound
_EMPTY = -(1 << 20)  # the depth of an unused table slot
_TIE_BITS = 20  # move-order keys: rank * 2**20 + a tie-break in [0, 2**20)

LeafFn = Callable[[GameState], tuple[jax.Array, jax.Array | None]]
"""``leaf(states[B]) -> (value float32 [B], preference float32 [B, A] or None)``: live
positions' values for their player to move, strictly inside (-1, 1) so that a result always
outranks them, and optionally how much each action is worth searching first (higher first)."""

# A batch's tables together hold at most 2**22 entries (80 MB), and each game's at least 2**6.
_BATCH_TABLE_BITS, _MIN_TABLE_BITS = 22, 6


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
      max_iterations: a bound on the loop's iterations per deepening step, for safety; a step
        cut short keeps the previous depth's move.
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
      complete: bool [B], whether the deepest step finished within `max_iterations`.
    """

    action: jax.Array
    value: jax.Array
    nodes: jax.Array
    complete: jax.Array


def _order_keys(mask: jax.Array, table_move: jax.Array, killers: jax.Array,
                tie_break: jax.Array) -> jax.Array:
    """int32 [A]: each legal action's place in the move order (largest first; -1 illegal):
    the table's move, the two killers, then by `tie_break` (int32 [A] in [0, 2**20))."""
    ids = jnp.arange(mask.shape[-1], dtype=jnp.int32)
    rank = jnp.where(ids == table_move, 3,
                     jnp.where(ids == killers[0], 2, jnp.where(ids == killers[1], 1, 0)))
    return jnp.where(mask, rank * (1 << _TIE_BITS) + tie_break, -1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class _Layout:
    """The static sizes of one search: B games, A actions, L stack levels, T table slots."""

    num_games: int
    num_actions: int
    levels: int
    slots: int

    @property
    def rows(self) -> jax.Array:
        return jnp.arange(self.num_games)


def _put(x: jax.Array, index: jax.Array, value, active: jax.Array):
    """x [B, N, ...] with row b's entry `index[b]` set to value[b] where active[b] (a tree of
    such arrays: each leaf with its value's leaf)."""
    def one(x, v):
        rows = jnp.arange(x.shape[0])
        return x.at[rows, jnp.where(active, index, x.shape[1])].set(v, mode="drop")

    return jax.tree.map(one, x, value)


def _probe(layout: _Layout, table: dict, position: jax.Array):
    """The table's entry for `position` (uint32 [B, 2]): (hit, value, depth, flag, move)."""
    slot = (position[:, 0] & jnp.uint32(layout.slots - 1)).astype(jnp.int32)
    rows = layout.rows
    depth = table["depth"][rows, slot]
    hit = (table["check"][rows, slot] == position[:, 1]) & (depth != _EMPTY)
    return hit, table["value"][rows, slot], depth, table["flag"][rows, slot], \
        table["move"][rows, slot]


def _start(layout: _Layout, states: GameState) -> dict:
    """The search's carry: every level of every game's stack, its killers and its table."""
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
        table=dict(check=jnp.zeros((b, t), jnp.uint32), value=jnp.zeros((b, t), jnp.float32),
                   depth=jnp.full((b, t), _EMPTY, jnp.int32),
                   flag=jnp.zeros((b, t), jnp.int32), move=jnp.full((b, t), -1, jnp.int32)),
        top=zeros_i, nodes=zeros_i, iterations=jnp.int32(0),
        action=jnp.argmax(states.legal_action_mask, -1).astype(jnp.int32),
        value=zeros_f, complete=jnp.ones(b, bool))
    return dict(carry, pending=_no_writes(carry))


# Which carry fields each kind of write sets (see `_writes`).
_PUSHED = ("states", "keys", "alpha", "beta", "alpha0", "best", "best_action", "depth",
           "player", "via", "hash")
_UPDATED = ("alpha", "best", "best_action", "killers")


def _no_writes(c: dict) -> dict:
    """Pending writes that write nothing, shaped like the ones `_writes` decides."""
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
            out[name] = _put(out[name], w["index"], value, w["active"])
    w = pending["store"]
    out["table"] = {name: _put(c["table"][name], w["index"], w["values"][name], w["active"])
                    for name in c["table"]}
    out["pending"] = {g: dict(w, active=jnp.zeros_like(w["active"])) for g, w in pending.items()}
    return out


def _preference_ties(preference: jax.Array) -> jax.Array:
    """int32 [B, A] in [0, 2**20): the preference [B, A] mapped monotonically onto the
    tie-break range (a sort's ranks would cost two sorts per step; equal keys are harmless,
    as any order keeps the values)."""
    squashed = 0.5 + 0.5 * jnp.tanh(preference.astype(jnp.float32) / 8.0)
    return jnp.clip(squashed * (1 << _TIE_BITS), 0, (1 << _TIE_BITS) - 1).astype(jnp.int32)


def _child(env: Env, config: AlphaBetaConfig, layout: _Layout, leaf: LeafFn | None,
           plain_ties: jax.Array, c: dict) -> dict:
    """The next child of every game's top node, stepped into and scored at once if it is a
    leaf or the table settles it (see the module docstring), with its children's tie-breaks
    (int32 [B, A]: `plain_ties`, or the leaf function's preference, `_preference_ties`)."""
    rows, top = layout.rows, jnp.maximum(c["top"], 0)
    keys_t = c["keys"][rows, top]  # [B, A]
    action = jnp.argmax(keys_t, -1).astype(jnp.int32)
    alpha_t, beta_t = c["alpha"][rows, top], c["beta"][rows, top]
    depth_t, player_t = c["depth"][rows, top], c["player"][rows, top]
    descend = (c["top"] >= 0) & (keys_t[rows, action] >= 0) & (alpha_t < beta_t)
    child = jax.vmap(env.step)(jax.tree.map(lambda x: x[rows, top], c["states"]), action)
    same = child.current_player == player_t
    depth = depth_t - (1 if config.count_actions else jnp.where(same, 0, 1))
    alpha, beta = jnp.where(same, alpha_t, -beta_t), jnp.where(same, beta_t, -alpha_t)
    terminal = child.terminated | child.truncated
    if leaf is None:
        heuristic, ties = jax.vmap(env.heuristic_value)(child), plain_ties
    else:
        heuristic, preference = leaf(child)
        ties = plain_ties if preference is None else _preference_ties(preference)
    static = jnp.where(terminal, child.rewards[rows, child.current_player], heuristic)
    at_leaf = (terminal | ((depth <= 0) & ~jax.vmap(env.forcing)(child))
               | (depth <= -config.quiescence) | (top + 1 >= layout.levels))
    position = jax.vmap(position_hash)(child)
    hit, e_value, e_depth, e_flag, e_move = _probe(layout, c["table"], position)
    settled = hit & (e_depth == depth) & (
        (e_flag == EXACT) | ((e_flag == LOWER) & (e_value >= beta))
        | ((e_flag == UPPER) & (e_value <= alpha)))
    value = jnp.where(at_leaf, static, e_value)
    return dict(top=top, keys_t=keys_t, action=action, descend=descend, child=child,
                same=same, depth=depth, alpha=alpha, beta=beta, position=position,
                scored=descend & (at_leaf | settled), push=descend & ~(at_leaf | settled),
                value=jnp.where(same, value, -value), table_move=jnp.where(hit, e_move, -1),
                ties=ties)


def _store(layout: _Layout, c: dict, top: jax.Array, ascend: jax.Array) -> dict:
    """The table write of each ascending game's finished node `top`: its value and bound."""
    rows = layout.rows
    best, beta = c["best"][rows, top], c["beta"][rows, top]
    flag = jnp.where(best <= c["alpha0"][rows, top], UPPER, jnp.where(best >= beta, LOWER,
                                                                       EXACT))
    slot = (c["hash"][rows, top, 0] & jnp.uint32(layout.slots - 1)).astype(jnp.int32)
    return dict(index=slot, active=ascend, values=dict(
        check=c["hash"][rows, top, 1], value=best, depth=c["depth"][rows, top], flag=flag,
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
    ascend = (c["top"] >= 0) & ~d["descend"]
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
    child_keys = jax.vmap(_order_keys)(
        d["child"].legal_action_mask, d["table_move"],
        c["killers"][rows, jnp.minimum(below, layout.levels - 1)], d["ties"])
    pending = dict(
        push=dict(index=below, active=push, values=dict(
            states=d["child"], keys=child_keys, alpha=d["alpha"], beta=d["beta"],
            alpha0=d["alpha"], best=jnp.full(layout.num_games, -INF),
            best_action=jnp.zeros(layout.num_games, jnp.int32), depth=d["depth"],
            player=d["child"].current_player, via=d["action"], hash=d["position"])),
        descend=dict(index=top, active=d["descend"],
                     values=dict(keys=d["keys_t"].at[rows, d["action"]].set(-1))),
        update=dict(index=node, active=update, values=dict(
            alpha=new_alpha, best=jnp.maximum(best_n, value),
            best_action=jnp.where(value > best_n, played, c["best_action"][rows, node]),
            killers=killers)),
        store=_store(layout, c, top, ascend))
    return dict(c, pending=pending,
                top=jnp.where(push, below, jnp.where(ascend, c["top"] - 1, c["top"])),
                nodes=c["nodes"] + d["descend"].astype(jnp.int32),
                iterations=c["iterations"] + 1)


def _deepen(env: Env, config: AlphaBetaConfig, layout: _Layout, leaf: LeafFn | None,
            states: GameState, root_ties: jax.Array, depth: jax.Array, c: dict) -> dict:
    """One iterative-deepening step: every root searched to `depth` with a full window; a
    game whose step finished takes its move and value."""
    b = layout.num_games
    root_done = states.terminated | states.truncated
    hit, _, _, _, move = _probe(layout, c["table"], c["hash"][:, 0])
    root_keys = jax.vmap(_order_keys)(states.legal_action_mask, jnp.where(hit, move, -1),
                                      c["killers"][:, 0], root_ties)
    at_root, zero = jnp.ones(b, bool), jnp.zeros(b, jnp.int32)
    full = jnp.full(b, INF, jnp.float32)
    c = dict(c, keys=_put(c["keys"], zero, root_keys, at_root),
             alpha=_put(c["alpha"], zero, -full, at_root), beta=_put(c["beta"], zero, full,
                                                                   at_root),
             alpha0=_put(c["alpha0"], zero, -full, at_root),
             best=_put(c["best"], zero, -full, at_root),
             depth=_put(c["depth"], zero, jnp.full(b, depth, jnp.int32), at_root),
             player=_put(c["player"], zero, states.current_player, at_root),
             top=jnp.where(root_done, -1, 0), iterations=jnp.int32(0))
    plain_ties = jnp.broadcast_to((1 << _TIE_BITS) - 1 - jnp.arange(layout.num_actions),
                                  (b, layout.num_actions))
    c = jax.lax.while_loop(
        lambda c: jnp.any(c["top"] >= 0) & (c["iterations"] < config.max_iterations),
        functools.partial(_body, env, config, layout, leaf, plain_ties), c)
    c = _apply(c)
    finished = (c["top"] < 0) & ~root_done
    return dict(c, action=jnp.where(finished, c["best_action"][:, 0], c["action"]),
                value=jnp.where(finished, c["best"][:, 0], c["value"]),
                complete=finished | root_done)


def alphabeta_search(env: Env, key: jax.Array, states: GameState, config: AlphaBetaConfig,
                     depth: jax.Array | int | None = None,
                     leaf: LeafFn | None = None) -> SearchResult:
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

    Returns:
      A `SearchResult` of [B] arrays.
    """
    num_games = states.current_player.shape[0]
    bits = min(config.table_bits,
               max(_MIN_TABLE_BITS, _BATCH_TABLE_BITS - int(np.ceil(np.log2(num_games)))))
    layout = _Layout(num_games, env.num_actions, config.stack, 1 << bits)
    ids = jnp.arange(env.num_actions, dtype=jnp.uint32)
    root_ties = (hash32(hash_seeds(key, num_games)[:, None], ids[None])
                 >> (32 - _TIE_BITS)).astype(jnp.int32)  # [B, A]
    limit = config.depth if depth is None else jnp.clip(depth, 1, config.depth)
    end = jax.lax.fori_loop(
        1, limit + 1, functools.partial(_deepen, env, config, layout, leaf, states, root_ties),
        _start(layout, states))
    root_done = states.terminated | states.truncated
    return SearchResult(action=jnp.where(root_done, 0, end["action"]).astype(jnp.int32),
                        value=jnp.where(root_done, 0.0, end["value"]),
                        nodes=end["nodes"], complete=end["complete"])
