"""The alpha-beta search's transposition table and move order (`azjax.core.alphabeta`).

Each game of a batch has its own table of T slots, addressed by the low bits of a position's
hash and checked by its second word; an entry holds the value of a position searched to some
depth and what kind of bound it is, and the best move found there. An entry cuts the search
only at the same depth, so the table never changes a value. Move-order keys are int32: a rank
(the table's move, then two killers) above a tie-break of `TIE_BITS` bits. And the two row
writes the search's stacks and tables are updated with.
Shape legend: B games, A actions, T table slots.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from azjax.core.hashing import hash32, hash_seeds

__all__ = ["EMPTY", "EXACT", "LOWER", "TIE_BITS", "UPPER", "bound_flag", "empty_tables",
           "id_ties", "order_keys", "preference_ties", "probe", "put_rows", "seeded_ties",
           "select_rows", "settles", "slot_of", "table_slots"]

EXACT, LOWER, UPPER = 0, 1, 2  # what a table entry's value is: the value, a lower or upper bound
EMPTY = -(1 << 20)  # the depth of an unused table slot
TIE_BITS = 20  # move-order keys: rank * 2**20 + a tie-break in [0, 2**20)
# A batch's tables together hold at most 2**22 entries (80 MB), and each game's at least 2**6.
_BATCH_TABLE_BITS, _MIN_TABLE_BITS = 22, 6


def table_slots(num_games: int, table_bits: int) -> int:
    """T, the slots of each game's table: 2**table_bits, fewer in batches of more than 256
    games (2**22 over the batch), at least 2**6."""
    bits = min(table_bits, max(_MIN_TABLE_BITS,
                               _BATCH_TABLE_BITS - int(np.ceil(np.log2(num_games)))))
    return 1 << bits


def empty_tables(num_games: int, slots: int) -> dict:
    """B tables of T slots, every slot unused: check uint32, value float32, depth, flag and
    move int32, each [B, T]."""
    b, t = num_games, slots
    return dict(check=jnp.zeros((b, t), jnp.uint32), value=jnp.zeros((b, t), jnp.float32),
                depth=jnp.full((b, t), EMPTY, jnp.int32), flag=jnp.zeros((b, t), jnp.int32),
                move=jnp.full((b, t), -1, jnp.int32))


def slot_of(table: dict, position: jax.Array) -> jax.Array:
    """int32 [B]: the slot of `position` (uint32 [B, 2]) in each game's table."""
    slots = table["check"].shape[1]
    return (position[:, 0] & jnp.uint32(slots - 1)).astype(jnp.int32)


def probe(table: dict, position: jax.Array):
    """The table's entry for `position` (uint32 [B, 2]): (hit, value, depth, flag, move),
    each [B]."""
    slot, rows = slot_of(table, position), jnp.arange(position.shape[0])
    depth = table["depth"][rows, slot]
    hit = (table["check"][rows, slot] == position[:, 1]) & (depth != EMPTY)
    return hit, table["value"][rows, slot], depth, table["flag"][rows, slot], \
        table["move"][rows, slot]


def settles(hit: jax.Array, value: jax.Array, depth: jax.Array, flag: jax.Array,
            wanted_depth: jax.Array, alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """bool [B]: whether a probed entry gives the value of a search to `wanted_depth` in the
    window (alpha, beta): the same depth, and an exact value or a bound outside the window."""
    return hit & (depth == wanted_depth) & ((flag == EXACT) | ((flag == LOWER) & (value >= beta))
                                            | ((flag == UPPER) & (value <= alpha)))


def bound_flag(best: jax.Array, alpha0: jax.Array, beta: jax.Array) -> jax.Array:
    """int32 [B]: what a node's best value searched in the window (alpha0, beta) is: an upper
    bound (it failed low), a lower bound (it failed high) or exact."""
    return jnp.where(best <= alpha0, UPPER, jnp.where(best >= beta, LOWER, EXACT))


def order_keys(mask: jax.Array, table_move: jax.Array, killers: jax.Array,
               tie_break: jax.Array) -> jax.Array:
    """int32 [A]: each legal action's place in the move order (largest first; -1 illegal):
    the table's move, the two killers, then by `tie_break` (int32 [A] in [0, 2**20))."""
    ids = jnp.arange(mask.shape[-1], dtype=jnp.int32)
    rank = jnp.where(ids == table_move, 3,
                     jnp.where(ids == killers[0], 2, jnp.where(ids == killers[1], 1, 0)))
    return jnp.where(mask, rank * (1 << TIE_BITS) + tie_break, -1).astype(jnp.int32)


def id_ties(num_games: int, num_actions: int) -> jax.Array:
    """int32 [B, A]: tie-breaks that order moves by action id, lowest first."""
    return jnp.broadcast_to((1 << TIE_BITS) - 1 - jnp.arange(num_actions, dtype=jnp.int32),
                            (num_games, num_actions))


def seeded_ties(key: jax.Array, num_games: int, num_actions: int) -> jax.Array:
    """int32 [B, A]: tie-breaks in a random order seeded by `key`, one order per game."""
    ids = jnp.arange(num_actions, dtype=jnp.uint32)
    return (hash32(hash_seeds(key, num_games)[:, None], ids[None])
            >> (32 - TIE_BITS)).astype(jnp.int32)


def preference_ties(preference: jax.Array) -> jax.Array:
    """int32 [B, A] in [0, 2**20): the preference [B, A] mapped monotonically onto the
    tie-break range (a sort's ranks would cost two sorts per step; equal keys are harmless,
    as any order keeps the values)."""
    squashed = 0.5 + 0.5 * jnp.tanh(preference.astype(jnp.float32) / 8.0)
    return jnp.clip(squashed * (1 << TIE_BITS), 0, (1 << TIE_BITS) - 1).astype(jnp.int32)


def put_rows(x: jax.Array, index: jax.Array, value, active: jax.Array):
    """x [B, N, ...] with row b's entry `index[b]` set to value[b] where active[b] (a tree of
    such arrays: each leaf with its value's leaf)."""
    def one(x, v):
        rows = jnp.arange(x.shape[0])
        return x.at[rows, jnp.where(active, index, x.shape[1])].set(v, mode="drop")

    return jax.tree.map(one, x, value)


def select_rows(mask: jax.Array, on_true, on_false):
    """on_true's rows where mask [B], on_false's elsewhere (trees of [B, ...] arrays)."""
    return jax.tree.map(lambda t, f: jnp.where(mask.reshape((-1,) + (1,) * (t.ndim - 1)), t, f),
                        on_true, on_false)
