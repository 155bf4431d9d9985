"""Random draughts games, step by step: our env against OpenSpiel's `checkers` and against the
plain-Python reference (`reference_draughts.py`).

5,000 random games (uniform over the legal hops) are chosen by the reference under each draw
rule. Our env replays them all in one jitted `lax.scan` of a vmapped step over 1,000 lanes,
each lane playing its games back to back, recording each state compactly (the legal mask and
the observation's piece planes as packed bits); then at every state of every game:
- the reference and ours agree on the legal actions, the player to move, `terminated`, the
  rewards and the observation (all 7 planes, and the repetitions plane under "laws");
- OpenSpiel (one game at a time, through `action_to_openspiel`) agrees with ours on the legal
  actions, the player to move, the end and the returns, and with the reference on the board,
  under OpenSpiel's draw rule.
Under the laws' rules (not in OpenSpiel) the 5,000 games include forty-move draws and
threefold repetitions, which the reference counts over the whole game, position by position.
"""

from __future__ import annotations

import functools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from reference_draughts import SQUARE_OF, RefDraughts

from azjax import envs
from azjax.envs.draughts import Draughts, action_to_openspiel, openspiel_to_action

NUM_GAMES = 5000
LANES = 1000  # games played back to back in each of 1,000 lockstep lanes
NUM_ACTIONS = 170
MASK_BYTES = (NUM_ACTIONS + 7) // 8
ENVS = {"openspiel": Draughts(draw_rule="openspiel"), "laws": envs.make("draughts")}
# The square of each 8x8 cell by the reference's numbering (0 = light cell); the dark cells
# in square order.
CELL_SQUARE = np.array([SQUARE_OF.get((r, c), 0) for r in range(8) for c in range(8)])
DARK = np.argsort(np.where(CELL_SQUARE > 0, CELL_SQUARE, 99))[:32]


@functools.cache
def reference_games(draw_rule: str, num_games: int, seed: int = 0):
    """The reference's random games. Returns (actions per game, records): records are flat over
    every state of every game (the initial state, then one per hop), with `start[g]` the index
    of game g's first state; a state's mask as packed bits of our action ids."""
    env = ENVS[draw_rule]
    hop_id = {env.action_to_str(a): a for a in range(NUM_ACTIONS)}
    bit = {hop: 1 << (8 * MASK_BYTES - 1 - a) for hop, a in hop_id.items()}
    all_true = sum(bit.values())
    rng = random.Random(seed)
    games, masks, players, over, rewards, grids, jumpers, counts, repeats, repeated = (
        [] for _ in range(10))
    start = []
    for _ in range(num_games):
        game = RefDraughts(draw_rule)
        start.append(len(masks))
        actions = []
        step_rewards = (0.0, 0.0)
        while True:
            hops = game.hops()
            masks.append(sum(bit[h] for h in hops) if not game.over else all_true)
            players.append(game.to_move)
            over.append(game.over)
            rewards.append(step_rewards)
            grids.append("".join([cell or "." for row in game.grid for cell in row]))
            jumpers.append(game.jumper() or 0)
            counts.append(game.count)
            # times this turn's position stood before (none counted in the middle of a capture)
            repeats.append(0 if game.path else
                           game.seen[(tuple(map(tuple, game.grid)), game.to_move)] - 1)
            repeated.append(game.repeated)
            if game.over:
                break
            hop = rng.choice(sorted(hops))
            actions.append(hop_id[hop])
            step_rewards = game.play(hop)
        games.append(actions)
    records = {
        "mask": np.frombuffer(b"".join(m.to_bytes(MASK_BYTES, "big") for m in masks),
                              np.uint8).reshape(-1, MASK_BYTES),
        "player": np.array(players), "terminated": np.array(over),
        "rewards": np.array(rewards, np.float32), "jumper": np.array(jumpers),
        "count": np.array(counts), "repeats": np.array(repeats),
        "repeated": np.array(repeated),
        "grid": np.frombuffer("".join(grids).encode(), np.uint8).reshape(-1, 64)[:, DARK],
        "start": np.array(start),
    }
    return games, records


def _expected_observations(rec: dict, env: Draughts) -> tuple[np.ndarray, np.ndarray]:
    """From the reference's boards: the piece planes 0-4 as packed bits [N, 40] and the
    constant planes [N, C]: 5-6, and the repetitions plane under "laws"."""
    grid = rec["grid"][:, np.maximum(CELL_SQUARE - 1, 0)]  # [N, 64] letters by cell
    dark = CELL_SQUARE > 0
    black = rec["player"][:, None] == 0
    mine_man = np.where(black, grid == ord("b"), grid == ord("w"))
    mine_king = np.where(black, grid == ord("B"), grid == ord("W"))
    their_man = np.where(black, grid == ord("w"), grid == ord("b"))
    their_king = np.where(black, grid == ord("W"), grid == ord("B"))
    jumper = (CELL_SQUARE[None] == rec["jumper"][:, None]) & (rec["jumper"][:, None] > 0)
    planes = np.stack([mine_man, mine_king, their_man, their_king, jumper], -1) & dark[:, None]
    constant = [rec["player"].astype(np.float32),
                rec["count"].astype(np.float32) / np.float32(env.draw_limit)]
    if env.laws:
        constant.append(rec["repeats"].astype(np.float32) / 2)
    constant = np.stack(constant, -1)
    return np.packbits(planes.reshape(len(grid), -1), axis=1), constant


@functools.cache
def _recorder(env: Draughts):
    """jitted: streams int32 [B, L] -> compact records [B, L, ...] of the state after each
    entry. Each of the B lanes plays games back to back: an entry -1 starts a new game (the
    record is then the initial state), any other entry is the next action."""
    step, observe = jax.vmap(env.step), jax.vmap(env.observe)

    def record(state):
        obs = observe(state)
        pieces = obs[..., :5].reshape(obs.shape[0], -1) > 0.5
        constant = obs[..., 5:].reshape(obs.shape[0], 64, -1)
        return {
            "mask": jnp.packbits(state.legal_action_mask, axis=1),
            "player": state.current_player,
            "terminated": state.terminated,
            "rewards": state.rewards,
            "obs_bits": jnp.packbits(pieces, axis=1),
            "constant": constant[:, 0],
            "constant_ok": jnp.all(constant == constant[:, :1], axis=(1, 2)),
        }

    def run(streams):
        start = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), streams.shape[0]))

        def body(state, entry):
            stepped = step(state, jnp.maximum(entry, 0))
            new_game = (entry < 0)[:, None]
            state = jax.tree.map(
                lambda s, i: jnp.where(new_game.reshape(-1, *[1] * (s.ndim - 1)), i, s),
                stepped, start)
            return state, record(state)

        _, records = jax.lax.scan(body, start, streams.T)
        return jax.tree.map(lambda x: x.swapaxes(0, 1), records)

    return jax.jit(run)


@functools.cache
def our_records(draw_rule: str, num_games: int, lanes: int):
    """Our env's records of the reference's games, flat in the reference's order."""
    games, _ = reference_games(draw_rule, num_games)
    # Longest games first, each to the least loaded lane.
    load = [0] * lanes
    where = [None] * len(games)
    for g in sorted(range(len(games)), key=lambda g: -len(games[g])):
        lane = min(range(lanes), key=load.__getitem__)
        where[g] = (lane, load[lane])
        load[lane] += len(games[g]) + 1
    streams = np.full((lanes, -(-max(load) // 64) * 64), -1, np.int32)  # -1 pads too
    for g, (lane, offset) in enumerate(where):
        streams[lane, offset + 1 : offset + 1 + len(games[g])] = games[g]
    out = {k: np.asarray(v) for k, v in _recorder(ENVS[draw_rule])(streams).items()}
    rows = np.concatenate([np.full(len(games[g]) + 1, where[g][0]) for g in range(len(games))])
    cols = np.concatenate([where[g][1] + np.arange(len(games[g]) + 1)
                           for g in range(len(games))])
    return {k: v[rows, cols] for k, v in out.items()}


def _assert_equal(what: str, ours: np.ndarray, theirs: np.ndarray, start: np.ndarray) -> None:
    if not np.array_equal(ours, theirs):
        index = int(np.argwhere(ours != theirs)[0][0])
        game = int(np.searchsorted(start, index, side="right") - 1)
        raise AssertionError(f"{what} differ first at game {game}, step {index - start[game]}: "
                             f"ours {ours[index]}, reference {theirs[index]}")


def _check_against_reference(draw_rule: str, num_games: int, lanes: int) -> dict:
    _, ref = reference_games(draw_rule, num_games)
    ours = our_records(draw_rule, num_games, lanes)
    start = ref["start"]
    live = ~ref["terminated"]
    _assert_equal("legal masks", ours["mask"], ref["mask"], start)
    _assert_equal("terminated flags", ours["terminated"], ref["terminated"], start)
    _assert_equal("rewards", ours["rewards"], ref["rewards"], start)
    _assert_equal("players to move", np.where(live, ours["player"], -1),
                  np.where(live, ref["player"], -1), start)
    bits, constant = _expected_observations(ref, ENVS[draw_rule])
    _assert_equal("observation piece planes", ours["obs_bits"], bits, start)
    assert ours["constant_ok"].all()
    # The counter plane is counter / limit: XLA may divide by multiplying by 1 / limit.
    _assert_equal("observation constant planes", np.round(ours["constant"] * 1e5),
                  np.round(constant * 1e5), start)
    return ref


def test_random_games_cover_every_ending():
    games, ref = reference_games("openspiel", NUM_GAMES)
    final = ref["terminated"]
    outcome = ref["rewards"][final][:, 0]
    assert final.sum() == NUM_GAMES
    assert (outcome == 1).sum() > 1000 and (outcome == -1).sum() > 1000
    assert (outcome == 0).sum() > 200 and (ref["count"][final] == 40).sum() > 200  # draws
    assert (ref["jumper"] > 0).sum() > 1000  # states in the middle of a multi-jump
    assert (ref["grid"] == ord("B")).any() and (ref["grid"] == ord("W")).any()
    assert sum(len(g) for g in games) > 250_000


def test_ours_matches_reference():
    _check_against_reference("openspiel", NUM_GAMES, LANES)


def test_ours_matches_reference_under_the_laws():
    ref = _check_against_reference("laws", NUM_GAMES, LANES)
    final = ref["terminated"]
    assert (ref["count"][final] == 80).sum() >= 10  # games ending by the forty-move rule
    assert ref["repeated"][final].sum() >= 100  # and by threefold repetition
    assert (ref["repeats"] == 1).sum() > 1000  # positions standing for the second time


def _openspiel_dark_squares() -> list[int]:
    """Where each of our squares 1-32 sits in OpenSpiel's text board (its board is ours turned
    by 180 degrees; each text row is the rank digit then 8 cells, then a newline)."""
    positions = []
    for square in range(1, 33):
        r, c = next(rc for rc, s in SQUARE_OF.items() if s == square)
        positions.append((7 - r) * 10 + 1 + (7 - c))
    return positions


def test_openspiel_matches_ours():
    games, ref = reference_games("openspiel", NUM_GAMES)
    ours = our_records("openspiel", NUM_GAMES, LANES)
    game = pyspiel.load_game("checkers")
    to_ours = {spiel_id: 1 << (8 * MASK_BYTES - 1 - openspiel_to_action(spiel_id))
               for spiel_id in range(512) if _maps(spiel_id)}
    to_spiel = [action_to_openspiel(a) for a in range(NUM_ACTIONS)]
    letters = str.maketrans("o8+*", "bBwW")  # OpenSpiel's men/kings of its players 0 and 1
    cells = _openspiel_dark_squares()
    # Plain Python values: indexing NumPy arrays one scalar at a time is slow.
    masks = [int.from_bytes(m.tobytes(), "big") for m in ours["mask"]]
    players, terminated = ours["player"].tolist(), ours["terminated"].tolist()
    rewards = [tuple(r) for r in ours["rewards"].tolist()]
    grids = [g.tobytes().decode() for g in ref["grid"]]
    compared = 0
    for g, actions in enumerate(games):
        state = game.new_initial_state()
        i = int(ref["start"][g])
        for t in range(len(actions) + 1):
            board = str(state).translate(letters)
            assert "".join([board[p] for p in cells]) == grids[i + t], (g, t)
            if state.is_terminal():
                assert terminated[i + t] and tuple(state.returns()) == rewards[i + t], (g, t)
                break
            assert not terminated[i + t] and state.current_player() == players[i + t], (g, t)
            assert sum([to_ours[a] for a in state.legal_actions()]) == masks[i + t], (g, t)
            state.apply_action(to_spiel[actions[t]])
            compared += 1
        assert state.is_terminal(), f"game {g} goes on in OpenSpiel"
    assert compared == sum(len(g) for g in games)


def _maps(spiel_id: int) -> bool:
    try:
        openspiel_to_action(spiel_id)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("draw_rule", ["openspiel", "laws"])
def test_no_game_outlives_max_game_length(draw_rule):
    games, _ = reference_games(draw_rule, NUM_GAMES)
    assert max(len(g) for g in games) <= ENVS[draw_rule].max_game_length
