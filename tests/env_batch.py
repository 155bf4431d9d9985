"""Batched, jitted helpers the env tests share: replay move lists, record trajectories, BFS.

Each helper compiles once per (game, shape) and is cached at module level, so every test file
reuses the same compiled functions. Shape legend: B games, T moves, A actions.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from azjax.envs.core import Env

__all__ = [
    "NO_MOVE", "bfs_layers", "longest_game", "pad_moves", "record_trajectories", "replay",
]

NO_MOVE = -1  # padding in a move list: leave the state as it is


def longest_game(env: Env) -> int:
    """Moves in the longest game of our placement games: one per board cell."""
    return int(np.prod(env.observation_shape[:2]))


def _initial_batch(env: Env, batch: int):
    state = env.init(jax.random.PRNGKey(0))
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (batch, *x.shape)), state)


@functools.cache
def _replay_fn(env: Env):
    def replay_one(moves):
        """moves int32 [T] (NO_MOVE-padded) -> (final State, first bad move index or -1)."""

        def body(carry, inputs):
            state, bad = carry
            index, move = inputs
            real = move != NO_MOVE
            ok = state.legal_action_mask[jnp.clip(move, 0)] & ~state.terminated
            bad = jnp.where((bad < 0) & real & ~ok, index, bad)
            stepped = env.step(state, jnp.clip(move, 0))
            state = jax.tree.map(lambda new, old: jnp.where(real, new, old), stepped, state)
            return (state, bad), None

        start = (env.init(jax.random.PRNGKey(0)), jnp.int32(-1))
        (state, bad), _ = jax.lax.scan(body, start, (jnp.arange(moves.shape[0]), moves))
        return state, bad

    return jax.jit(jax.vmap(replay_one))


def pad_moves(move_lists, length: int) -> np.ndarray:
    """int32 [B, length]: the move lists, padded with NO_MOVE."""
    out = np.full((len(move_lists), length), NO_MOVE, np.int32)
    for row, moves in enumerate(move_lists):
        out[row, : len(moves)] = moves
    return out


def replay(env: Env, moves: np.ndarray):
    """Plays B padded move lists [B, T] at once: (final States [B], first bad index int32 [B]).

    A move is bad when it is illegal or comes after the game ended; -1 means none was.
    """
    return _replay_fn(env)(jnp.asarray(moves, jnp.int32))


def _record(state, observation):
    return {
        "mask": state.legal_action_mask,
        "terminated": state.terminated,
        "rewards": state.rewards,
        "player": state.current_player,
        "obs": observation.astype(jnp.bool_),
    }


@functools.cache
def _trajectory_fn(env: Env):
    def run(actions):
        """actions int32 [B, T] -> dict of [B, T + 1, ...]: the states before and after each."""
        start = _initial_batch(env, actions.shape[0])

        def body(state, action):
            state = jax.vmap(env.step)(state, action)
            return state, _record(state, jax.vmap(env.observe)(state))

        _, steps = jax.lax.scan(body, start, actions.T)
        first = _record(start, jax.vmap(env.observe)(start))
        return jax.tree.map(
            lambda a, b: jnp.concatenate([a[None], b]).swapaxes(0, 1), first, steps
        )

    return jax.jit(run)


def record_trajectories(env: Env, actions: np.ndarray) -> dict[str, np.ndarray]:
    """Steps B games through `actions` [B, T] (a finished game ignores its remaining actions)
    and returns every state's mask, terminated, rewards, player and observation, [B, T + 1, ...]."""
    out = _trajectory_fn(env)(jnp.asarray(actions, jnp.int32))
    return {k: np.asarray(v) for k, v in out.items()}


@functools.cache
def _expand_fn(env: Env):
    actions = jnp.arange(env.num_actions, dtype=jnp.int32)
    by_action = jax.vmap(env.step, in_axes=(None, 0))
    return jax.jit(jax.vmap(lambda state: by_action(state, actions)))  # [N] -> [N, A] children


def _take(tree, index):
    return jax.tree.map(lambda x: x[index], tree)


def bfs_layers(env: Env, max_ply: int, *, chunk: int = 4096):
    """Yields, for ply 0..max_ply, every distinct position (deduplicated by board) reached after
    that many legal moves, as a host (NumPy) State batch. Finished games are not expanded.

    Children are made by one jitted, doubly vmapped `env.step` over fixed-size chunks of parents
    (so it compiles once), and deduplicated with NumPy on the board's bytes.
    """
    expand = _expand_fn(env)
    num_actions = env.num_actions
    layer = jax.tree.map(np.asarray, _initial_batch(env, 1))
    for ply in range(max_ply + 1):
        yield layer
        if ply == max_ply:
            return
        parents = _take(layer, ~layer.terminated)
        count = parents.terminated.shape[0]
        children, keep = [], []
        for start in range(0, count, chunk):
            part = _take(parents, slice(start, start + chunk))
            size = part.terminated.shape[0]
            padded = jax.tree.map(
                lambda x, size=size: np.concatenate(
                    [x, np.repeat(x[:1], chunk - size, axis=0)]) if size < chunk else x,
                part,
            )
            kids = jax.tree.map(np.asarray, expand(padded))
            kids = jax.tree.map(
                lambda x, size=size: x[:size].reshape(size * num_actions, *x.shape[2:]), kids)
            children.append(kids)
            keep.append(part.legal_action_mask.reshape(-1))
        children = jax.tree.map(lambda *xs: np.concatenate(xs), *children)
        children = _take(children, np.concatenate(keep))
        boards = np.ascontiguousarray(children.board.reshape(children.board.shape[0], -1))
        _, first = np.unique(boards.view(np.dtype((np.void, boards.shape[1]))).ravel(),
                             return_index=True)
        layer = _take(children, np.sort(first))
