"""Random playouts: our envs against a plain-Python reference, pgx and OpenSpiel, step by step.

2,048 random games per game id, chosen by the reference (`reference_games.py`, no jax). A few
games end with a deliberate illegal move (a loss for the mover). Our env replays all games at
once (one jitted `lax.scan` of a vmapped step), then each state is compared: legal mask,
terminated, rewards (float32[2] by player id), player to move, observation.

Conventions a comparison must respect:
- the player to move is compared at live states only (who "moves" at a finished game is a
  convention: after an illegal move our env leaves the forfeiting mover, pgx flips);
- pgx draws the first player at random: its player ids are ours XOR its initial
  `current_player`, so its rewards and players are translated before comparing;
- OpenSpiel rejects illegal moves, so its comparison of a forfeited game stops before that move.
"""

from __future__ import annotations

import functools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pyspiel
import pytest
from env_batch import longest_game, record_trajectories
from reference_games import make_reference

from azjax import envs

GAMES = ("tic_tac_toe", "connect_four")
NUM_GAMES = 2048
FORFEIT_PROBABILITY = 0.01  # per move: play an illegal action instead, when one exists


@functools.cache
def reference_playouts(game_id: str, num_games: int = NUM_GAMES, seed: int = 0):
    """The reference's random games: actions [G, T] (finished games padded with 0), the state
    records [G, T + 1, ...] and the step at which each game forfeited (-1 if it did not)."""
    rng = random.Random(seed)
    env = envs.make(game_id)
    length = longest_game(env)
    actions = np.zeros((num_games, length), np.int32)
    board_shape = env.observation_shape[:2]
    rec = {
        "mask": np.ones((num_games, length + 1, env.num_actions), bool),
        "terminated": np.zeros((num_games, length + 1), bool),
        "rewards": np.zeros((num_games, length + 1, 2), np.float32),
        "player": np.zeros((num_games, length + 1), np.int32),
        "board": np.zeros((num_games, length + 1, *board_shape), np.int8),
    }
    forfeit_at = np.full(num_games, -1)
    for g in range(num_games):
        game = make_reference(game_id)
        for t in range(length + 1):
            rec["mask"][g, t] = game.legal_mask()
            rec["terminated"][g, t] = game.over
            rec["player"][g, t] = game.to_move
            rec["board"][g, t] = game.board_rows()
            if game.over:  # the rest of the game: the same state, zero rewards
                for key in ("mask", "terminated", "player", "board"):
                    rec[key][g, t + 1 :] = rec[key][g, t]
                break
            legal = game.legal_actions()
            illegal = [a for a in range(env.num_actions) if a not in legal]
            if illegal and rng.random() < FORFEIT_PROBABILITY:
                action = rng.choice(illegal)
                forfeit_at[g] = t
            else:
                action = rng.choice(legal)
            actions[g, t] = action
            rec["rewards"][g, t + 1] = game.play(action)
    return actions, rec, forfeit_at


@functools.cache
def our_playouts(game_id: str):
    actions, _, _ = reference_playouts(game_id)
    return record_trajectories(envs.make(game_id), actions)


def _planes(board: np.ndarray, player: np.ndarray) -> np.ndarray:
    """Observation planes from a reference board [..., H, W] seen by `player` [...]."""
    me = player[..., None, None]
    return np.stack([board == me, board == 1 - me], axis=-1)


def _assert_equal(what: str, ours: np.ndarray, theirs: np.ndarray) -> None:
    if not np.array_equal(ours, theirs):
        bad = np.argwhere(ours != theirs)[0]
        raise AssertionError(f"{what} differ first at (game, step, ...) = {tuple(bad)}: "
                             f"ours {ours[tuple(bad[:2])]}, theirs {theirs[tuple(bad[:2])]}")


@pytest.mark.parametrize("game_id", GAMES)
def test_playouts_cover_every_outcome(game_id):
    _, rec, forfeit_at = reference_playouts(game_id)
    final = rec["rewards"].sum(axis=1)[:, 0]
    assert (final == 1).sum() > 100 and (final == -1).sum() > 100
    assert (final == 0).sum() > (10 if game_id == "tic_tac_toe" else 0)  # draws
    assert 10 < (forfeit_at >= 0).sum() < NUM_GAMES // 4
    assert rec["terminated"][:, -1].all()


@pytest.mark.parametrize("game_id", GAMES)
def test_ours_matches_reference(game_id):
    _, ref, _ = reference_playouts(game_id)
    ours = our_playouts(game_id)
    live = ~ref["terminated"]
    assert ours["rewards"].dtype == np.float32 and ours["rewards"].shape[-1] == 2
    _assert_equal("legal masks", ours["mask"], ref["mask"])
    _assert_equal("terminated flags", ours["terminated"], ref["terminated"])
    _assert_equal("rewards", ours["rewards"], ref["rewards"])
    _assert_equal("players to move", np.where(live, ours["player"], -1),
                  np.where(live, ref["player"], -1))
    # Observations: the reference board seen by our player to move (at finished states too).
    _assert_equal("observations", ours["obs"], _planes(ref["board"], ours["player"]))
    # Rewards: +1/-1 once, on the final step only.
    nonzero = np.abs(ours["rewards"]).sum(-1) > 0
    final_step = np.argmax(ours["terminated"], axis=1)[:, None]
    assert not (nonzero & (np.arange(nonzero.shape[1])[None] != final_step)).any()
    assert np.isin(ours["rewards"], (-1.0, 0.0, 1.0)).all()


@functools.cache
def _pgx_trajectory_fn(game_id: str):
    env = pgx.make(game_id)

    def record(state):
        return {
            "mask": state.legal_action_mask,
            "terminated": state.terminated,
            "rewards": state.rewards,
            "player": state.current_player,
            "obs": state.observation,
        }

    def run(keys, actions):
        start = jax.vmap(env.init)(keys)

        def body(state, action):
            state = jax.vmap(env.step)(state, action)
            return state, record(state)

        _, steps = jax.lax.scan(body, start, actions.T)
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]).swapaxes(0, 1),
                            record(start), steps)

    return jax.jit(run)


@pytest.mark.parametrize("game_id", GAMES)
def test_pgx_matches_ours(game_id):
    actions, _, forfeit_at = reference_playouts(game_id)
    ours = our_playouts(game_id)
    keys = jax.random.split(jax.random.PRNGKey(1), NUM_GAMES)
    theirs = {k: np.asarray(v) for k, v in
              _pgx_trajectory_fn(game_id)(keys, jnp.asarray(actions)).items()}
    first = theirs["player"][:, 0]  # pgx's id of the player who moves first
    assert 0 < first.sum() < NUM_GAMES  # both of pgx's first players occur
    live = ~ours["terminated"]
    _assert_equal("legal masks", ours["mask"], theirs["mask"])
    _assert_equal("terminated flags", ours["terminated"], theirs["terminated"])
    swap = first[:, None, None] == 1
    _assert_equal("rewards", ours["rewards"],
                  np.where(swap, theirs["rewards"][..., ::-1], theirs["rewards"]))
    _assert_equal("players to move", np.where(live, ours["player"], -1),
                  np.where(live, theirs["player"] ^ first[:, None], -1))
    # pgx alters the board on an illegal move; compare observations of every other state.
    steps = np.arange(actions.shape[1] + 1)[None, :]
    fair = (forfeit_at[:, None] < 0) | (steps <= forfeit_at[:, None])
    _assert_equal("observations", np.where(fair[..., None, None, None], ours["obs"], False),
                  np.where(fair[..., None, None, None], theirs["obs"], False))


def _our_board(obs: np.ndarray, player: int) -> np.ndarray:
    """Player ids (-1 empty) from our observation planes seen by `player`."""
    return np.where(obs[..., 0], player, np.where(obs[..., 1], 1 - player, -1)).astype(np.int8)


def _openspiel_board(state, game_id: str) -> np.ndarray:
    """Player ids (-1 empty) from OpenSpiel's text board, top row first (x = player 0)."""
    rows = str(state).split("\n")[: 3 if game_id == "tic_tac_toe" else 6]
    table = {"x": 0, "o": 1, ".": -1}
    return np.array([[table[ch] for ch in row] for row in rows], np.int8)


@pytest.mark.parametrize("game_id", GAMES)
def test_openspiel_matches_ours(game_id):
    actions, _, forfeit_at = reference_playouts(game_id)
    ours = our_playouts(game_id)
    game = pyspiel.load_game(game_id)
    num_actions = envs.make(game_id).num_actions
    compared = 0
    for g in range(NUM_GAMES):
        state = game.new_initial_state()
        t = 0
        while True:
            where = f"game {g}, step {t}"
            assert state.is_terminal() == ours["terminated"][g, t], where
            assert np.array_equal(_openspiel_board(state, game_id),
                                  _our_board(ours["obs"][g, t], ours["player"][g, t])), where
            if state.is_terminal():
                assert tuple(state.returns()) == tuple(ours["rewards"][g, t]), where
                break
            mask = np.zeros(num_actions, bool)
            mask[state.legal_actions()] = True
            assert np.array_equal(mask, ours["mask"][g, t]), where
            assert state.current_player() == ours["player"][g, t], where
            if t == forfeit_at[g]:
                break
            state.apply_action(int(actions[g, t]))
            t += 1
            assert tuple(state.rewards()) == tuple(ours["rewards"][g, t]), where
            compared += 1
    assert compared > NUM_GAMES * 5
