"""English draughts: each rule on hand-built positions (checked against the plain-Python
reference too), the action encoding and its map to OpenSpiel, PDN notation and moves, FEN,
render, the colour-swap symmetry and the observation planes."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from reference_draughts import COORDS_OF, SQUARE_OF, RefDraughts

from azjax import envs
from azjax.envs.core import random_positions
from azjax.envs.draughts import Draughts, action_to_openspiel, openspiel_to_action

ENV = envs.make("draughts")  # the laws' rules
OPENSPIEL = Draughts(draw_rule="openspiel")
DIRECTIONS = ((-1, -1), (-1, 1), (1, -1), (1, 1))  # up-left, up-right, down-left, down-right


@functools.cache
def _step(env: Draughts):
    return jax.jit(env.step)


def _legal(env: Draughts, state) -> set[str]:
    if bool(state.terminated):
        return set()
    return {env.action_to_str(a) for a in np.flatnonzero(np.asarray(state.legal_action_mask))}


def _reference(fen: str, draw_rule: str, counter: int) -> RefDraughts:
    """The reference game at a FEN (no ranges), written with the reference's own letters."""
    side, *parts = fen.split(":")
    pieces = {}
    for part in parts:
        for item in filter(None, part[1:].split(",")):
            letter = part[0].lower()
            pieces[int(item.lstrip("K"))] = letter.upper() if item.startswith("K") else letter
    return RefDraughts.from_position(pieces, "BW".index(side), draw_rule, counter)


def play(fen: str, hops: list[str], *, env: Draughts = ENV, counter: int = 0):
    """Plays `hops` from `fen` on our env and on the reference, checking at every state that
    both agree on the legal hops, the player to move, the end and the rewards. Returns our
    states (the first is the FEN's)."""
    states = [env.from_fen(fen, counter=counter)]
    ref = _reference(fen, env.draw_rule, counter)
    for hop in [*hops, None]:
        state = states[-1]
        assert _legal(env, state) == ref.hops(), (fen, hop)
        assert bool(state.terminated) == ref.over
        if not ref.over:
            assert int(state.current_player) == ref.to_move
        if hop is None:
            return states
        rewards = ref.play(hop)
        states.append(_step(env)(state, jnp.int32(env.str_to_action(hop))))
        assert tuple(np.asarray(states[-1].rewards)) == rewards, (fen, hop)


# ---- the rules, one by one ------------------------------------------------------------------

def test_initial_position():
    state = ENV.init(jax.random.PRNGKey(0))
    assert ENV.to_fen(state) == "B:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,11,12"
    assert _legal(ENV, state) == {"9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"}
    assert int(state.current_player) == 0 and int(state.counter) == 0
    assert _legal(ENV, state) == RefDraughts().hops()


def test_capture_is_mandatory():
    # Black could step 1-5, 1-6 or 14-17, but 14 can jump 18.
    states = play("B:W18:B1,14", ["14x23"])
    assert _legal(ENV, states[0]) == {"14x23"}
    # White lost its last piece: Black wins.
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [1.0, -1.0]


def test_multi_jump_branches_keep_the_player_and_only_the_jumper_moves():
    fen = "B:W9,10,18,19,30:B5,6"
    start = ENV.from_fen(fen)
    # No majority rule: the single capture 6x13 is as legal as the doubles.
    assert _legal(ENV, start) == {"5x14", "6x13", "6x15"}
    assert set(ENV.legal_moves(start)) == {"5x14x23", "6x13", "6x15x22", "6x15x24"}
    for last in ("15x22", "15x24"):
        states = play(fen, ["6x15", last])
        mid = states[1]
        assert int(mid.current_player) == 0 and int(mid.jumper) == 14  # square 15, 0-based
        assert _legal(ENV, mid) == {"15x22", "15x24"}  # 5x14 no longer: only the jumper
        assert int(states[2].current_player) == 1 and int(states[2].jumper) == -1
    # A hop by another piece in the middle of the capture is illegal: a loss for the mover.
    lost = _step(ENV)(play(fen, ["6x15"])[1], jnp.int32(ENV.str_to_action("5x14")))
    assert bool(lost.terminated) and lost.rewards.tolist() == [-1.0, 1.0]


def test_a_man_crowned_by_a_capture_stops_there():
    # 22x31 crowns the man; as a king it could take 27 (31x24), but the move is over.
    states = play("B:W26,27:B22", ["22x31", "27-23"])
    crowned = states[1]
    assert ENV.board(crowned)[30] == 2 and int(crowned.current_player) == 1
    assert int(crowned.jumper) == -1 and _legal(ENV, crowned) == {"27-23", "27-24"}
    # A king that was a king already goes on capturing from the far row.
    states = play("B:W26,27:BK22", ["22x31", "31x24"])
    assert int(states[1].current_player) == 0 and _legal(ENV, states[1]) == {"31x24"}


def test_kings_capture_backwards_and_men_do_not():
    assert _legal(ENV, play("B:W14:BK18", [])[0]) == {"18x9"}
    assert _legal(ENV, play("B:W14:B18", [])[0]) == {"18-22", "18-23"}
    assert _legal(ENV, play("W:B18:W14", [])[0]) == {"14-9", "14-10"}
    assert _legal(ENV, play("W:B18:WK14", [])[0]) == {"14x23"}


def test_a_player_with_no_legal_move_loses():
    # 21-25 leaves White's man on 29 blocked (25 taken, and 22 behind it too).
    states = play("B:W29:B21,22", ["21-25"])
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [1.0, -1.0]
    # White takes Black's last piece.
    states = play("W:B10:W14", ["14x7"])
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [-1.0, 1.0]
    # A position with the player to move already stuck is over (rewards were paid before).
    stuck = ENV.from_fen("W:W29:B25,22")
    assert bool(stuck.terminated) and stuck.rewards.tolist() == [0.0, 0.0]
    assert np.asarray(stuck.legal_action_mask).all()
    assert "Black (b) wins" in ENV.render(stuck)


def test_openspiel_draw_rule_counts_actions_without_a_capture():
    env = OPENSPIEL
    assert int(play("B:WK32:B1", ["1-5"], env=env, counter=5)[1].counter) == 6  # a man's too
    states = play("B:WK32:BK1", ["1-5"], env=env, counter=38)
    assert not bool(states[1].terminated) and int(states[1].counter) == 39
    states = play("B:WK32:BK1", ["1-5"], env=env, counter=39)
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [0.0, 0.0]
    assert "draw" in env.render(states[1])
    # A capture resets the counter.
    states = play("B:WK6,K32:BK1", ["1x10"], env=env, counter=39)
    assert not bool(states[1].terminated) and int(states[1].counter) == 0
    # The draw comes first, even when the next player could not move.
    states = play("B:W29:B21,22", ["21-25"], env=env, counter=39)
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [0.0, 0.0]
    # No repetition rule: the same position a fourth time goes on.
    shuffle = ["1-5", "32-28", "5-1", "28-32"] * 3
    states = play("B:WK32:BK1", shuffle, env=env)
    assert not bool(states[-1].terminated)
    assert all(np.all(np.asarray(s.history) == 0xFFFFFFFF) for s in states)  # never written


def test_forty_move_rule_counts_king_moves_without_a_capture():
    states = play("B:WK32:BK1", ["1-5"], counter=79)
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [0.0, 0.0]
    assert "draw" in ENV.render(states[1])
    states = play("B:WK32:BK1", ["1-5"], counter=39)
    assert not bool(states[1].terminated) and int(states[1].counter) == 40
    states = play("B:WK32:B1,K2", ["1-5"], counter=79)  # a man's move resets
    assert not bool(states[1].terminated) and int(states[1].counter) == 0
    states = play("B:WK6,K32:BK1", ["1x10"], counter=79)  # so does a capture
    assert not bool(states[1].terminated) and int(states[1].counter) == 0
    # The draw comes first, even when the next player could not move.
    states = play("B:W29:B21,K22", ["22-18"], counter=79)
    assert bool(states[1].terminated) and states[1].rewards.tolist() == [0.0, 0.0]
    assert (OPENSPIEL.max_game_length, ENV.max_game_length) == (960, 15360)
    with pytest.raises(ValueError, match="draw_rule"):
        Draughts(draw_rule="fifty_move")


def test_threefold_repetition_draws():
    # Black's king and White's go to and fro: the start stands again after 4 moves and 8.
    shuffle = ["1-5", "32-28", "5-1", "28-32"]
    states = play("B:WK32:BK1", shuffle * 2)
    assert [int(s.repeats) for s in states] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert [bool(s.terminated) for s in states] == [False] * 8 + [True]
    assert states[-1].rewards.tolist() == [0.0, 0.0] and int(states[-1].counter) == 8
    assert "draw" in ENV.render(states[-1]) and "stood 3 times" in ENV.render(states[-1])
    # Not necessarily in a row: a detour between the second and third time still draws.
    detour = shuffle + ["1-6", "32-27", "6-1", "27-32"]
    states = play("B:WK32:BK1", detour)
    assert int(states[-1].repeats) == 2 and bool(states[-1].terminated)
    # A man's move starts a new count: the positions after it stand once, twice, then draw.
    white_shuffle = ["32-28", "1-5", "28-32", "5-1"]
    states = play("B:WK32:BK1,12", shuffle + ["12-16"] + white_shuffle * 2)
    assert [int(states[i].repeats) for i in (4, 5, 9, 13)] == [1, 0, 1, 2]
    assert [bool(s.terminated) for s in states].index(True) == len(states) - 1
    # A position set up from a FEN has no earlier positions.
    assert int(ENV.from_fen("B:WK32:BK1").repeats) == 0


# ---- action encoding, OpenSpiel and notation -----------------------------------------------

def _expected_encoding() -> list[str]:
    """The documented order, rebuilt from coordinates: simple moves then jumps, each sorted by
    (from, to) square."""
    moves, jumps = [], []
    for square in range(1, 33):
        r, c = COORDS_OF[square]
        for dr, dc in DIRECTIONS:
            for k, out in ((1, moves), (2, jumps)):
                target = SQUARE_OF.get((r + k * dr, c + k * dc))
                if target is not None:
                    out.append((square, target))
    return [f"{a}-{b}" for a, b in sorted(moves)] + [f"{a}x{b}" for a, b in sorted(jumps)]


def test_action_encoding_is_the_documented_one():
    names = _expected_encoding()
    assert ENV.num_actions == len(names) == 170 and names[97] == "32-28"
    assert [ENV.action_to_str(a) for a in range(170)] == names
    assert [ENV.str_to_action(f" {name} ") for name in names] == list(range(170))
    examples = {0: "1-5", 1: "1-6", 2: "2-6", 23: "9-13", 97: "32-28", 98: "1x10", 111: "9x18",
                169: "32x23"}
    assert {a: ENV.action_to_str(a) for a in examples} == examples


def _openspiel_to_pdn(text: str) -> str:
    """OpenSpiel's `a3b4` (files a-h left to right, ranks 1-8 bottom up, its player 0 at the
    bottom) as our PDN: its board is ours turned by 180 degrees."""
    (f1, r1), (f2, r2) = (text[0], text[1]), (text[2], text[3])
    ours = [(7 - (8 - int(r)), 7 - (ord(f) - ord("a"))) for f, r in ((f1, r1), (f2, r2))]
    a, b = (SQUARE_OF[rc] for rc in ours)
    return f"{a}{'x' if abs(ours[0][0] - ours[1][0]) == 2 else '-'}{b}"


def test_openspiel_action_map_both_ways():
    game = pyspiel.load_game("checkers")
    state = game.new_initial_state()
    images = [action_to_openspiel(a) for a in range(170)]
    assert len(set(images)) == 170 and all(0 <= i < game.num_distinct_actions() for i in images)
    for action, spiel_id in enumerate(images):
        assert openspiel_to_action(spiel_id) == action
        assert _openspiel_to_pdn(state.action_to_string(0, spiel_id)) == ENV.action_to_str(action)
        assert (spiel_id % 2 == 1) == ("x" in ENV.action_to_str(action))  # its move type bit
    never = sorted(set(range(game.num_distinct_actions())) - set(images))
    assert len(never) == 512 - 170
    for spiel_id in never[:: 17]:
        with pytest.raises(ValueError, match="never a legal move"):
            openspiel_to_action(spiel_id)
    # OpenSpiel's first moves are ours: its a3b4 is our 12-16.
    ours = {openspiel_to_action(a) for a in state.legal_actions()}
    assert ours == set(np.flatnonzero(np.asarray(ENV.init(None).legal_action_mask)).tolist())
    assert state.action_to_string(0, action_to_openspiel(ENV.str_to_action("12-16"))) == "a3b4"


@pytest.mark.parametrize("text", ["", "9", "9-", "-13", "9-13-17", "9x18x27", "0-4", "33-29",
                                  "9x13", "9-18", "9 - 13", "9X18", "\u0669-\u0661\u0663",
                                  "9\u201313", "1.5", "nine-thirteen"])
def test_str_to_action_rejects_garbage(text):
    with pytest.raises(ValueError, match=re.escape(repr(text.strip()))):
        ENV.str_to_action(text)


def test_action_to_str_rejects_bad_ids():
    for bad in (-1, 170):
        with pytest.raises(ValueError, match="action id"):
            ENV.action_to_str(bad)
        with pytest.raises(ValueError, match="action id"):
            action_to_openspiel(bad)


# ---- whole PDN moves, FEN, render ----------------------------------------------------------

def test_parse_and_format_whole_moves():
    start = ENV.init(None)
    assert ENV.parse_move(start, "11-15") == [ENV.str_to_action("11-15")]
    branching = ENV.from_fen("B:W9,10,18,19,30:B5,6")
    ids = ENV.parse_move(branching, " 6x15x24 ")
    assert [ENV.action_to_str(a) for a in ids] == ["6x15", "15x24"]
    assert ENV.parse_move(branching, "6x24") == ids  # the short form, when unambiguous
    assert ENV.format_move(ids) == "6x15x24" and ENV.format_move(ids[:1]) == "6x15"
    # Two routes from 10 to 26: the short form is ambiguous, the full ones are fine.
    two_ways = ENV.from_fen("B:W14,15,22,23:B10")
    assert set(ENV.legal_moves(two_ways)) == {"10x17x26", "10x19x26"}
    with pytest.raises(ValueError, match=r"ambiguous \(10x17x26, 10x19x26\)"):
        ENV.parse_move(two_ways, "10x26")
    with pytest.raises(ValueError, match="'21-17' is not legal here; legal moves: 9-13, 9-14, "
                                         "10-14, 10-15, 11-15, 11-16, 12-16$"):
        ENV.parse_move(start, "21-17")
    with pytest.raises(ValueError, match="looks like"):
        ENV.parse_move(start, "9x")
    with pytest.raises(ValueError, match="do not chain"):
        ENV.format_move([ENV.str_to_action("6x15"), ENV.str_to_action("14x23")])
    with pytest.raises(ValueError, match="do not chain"):
        ENV.format_move([ENV.str_to_action("9-13"), ENV.str_to_action("13-17")])
    # From the middle of a capture, the rest of it.
    mid = _step(ENV)(branching, jnp.int32(ENV.str_to_action("6x15")))
    assert set(ENV.legal_moves(mid)) == {"15x22", "15x24"}
    assert ENV.legal_moves(ENV.from_fen("W:W29:B25,22")) == {}
    with pytest.raises(ValueError, match="over"):
        ENV.parse_move(ENV.from_fen("W:W29:B25,22"), "29-25")


def test_fen_round_trip_and_errors():
    fen = "W:W18,24,K27:B12,16,K2"
    state = ENV.from_fen(fen, counter=7)
    assert ENV.to_fen(state) == "W:W18,24,K27:BK2,12,16" and int(state.counter) == 7
    assert ENV.to_fen(ENV.from_fen("B:W21-32:B1-12")) == ENV.to_fen(ENV.init(None))
    for bad in ("", "X:W1:B2", "B:W1", "B:W1:B1", "B:W1:Bx", "B:W1:B33", "B:W1:Q2"):
        with pytest.raises(ValueError):
            ENV.from_fen(bad)
    with pytest.raises(ValueError, match="no piece"):
        ENV.from_fen(fen, jumper=12)
    with pytest.raises(ValueError, match="no capture"):
        ENV.from_fen(fen, jumper=18)


def test_render_shows_pdn_squares_pieces_and_status():
    text = ENV.render(ENV.init(None))
    lines = text.splitlines()
    assert lines[0].split() == ["b"] * 4 + ["1", "2", "3", "4"]
    assert lines[3].split() == ["."] * 4 + ["13", "14", "15", "16"]
    assert lines[7].split() == ["w"] * 4 + ["29", "30", "31", "32"]
    assert "Black (b) to move." in text and "Draw counter: 0/80 (laws)" in text
    mid = _step(ENV)(ENV.from_fen("B:W9,10,18,19,30:B5,6"),
                     jnp.int32(ENV.str_to_action("6x15")))
    assert "goes on with the piece on 15" in ENV.render(mid)
    lost = play("W:B10:W14", ["14x7"])[1]
    assert "Game over: White (w) wins." in ENV.render(lost)
    assert "W" in ENV.render(ENV.from_fen("B:WK30:B1")).splitlines()[7]


def test_material_counts_men_and_kings_per_player():
    """`material` (the material head's target): (men + 1.5 kings) / 12 by player id, Black
    (player 0) first; checked on random positions against counts read off their FEN text."""
    from azjax.envs.core import random_positions
    from azjax.envs.forced import forced_moves_played

    np.testing.assert_allclose(ENV.material(ENV.init(None)), [1.0, 1.0])
    np.testing.assert_allclose(ENV.material(ENV.from_fen("B:W18,K24,K27:B12")), [1 / 12, 4 / 12])
    states = random_positions(ENV, jax.random.PRNGKey(3), 16, 60)
    material = np.asarray(jax.vmap(ENV.material)(states))
    for i in range(16):
        state = jax.tree.map(lambda x, i=i: x[i], states)
        sides = {part[0]: part[1:] for part in ENV.to_fen(state).split(":")[1:]}  # "W": "K3,11"
        for player, colour in enumerate("BW"):
            items = [item for item in sides[colour].split(",") if item]
            kings = sum(item.startswith("K") for item in items)
            assert material[i, player] == pytest.approx((len(items) - kings + 1.5 * kings) / 12)
        np.testing.assert_array_equal(forced_moves_played(ENV).material(state), material[i])
    assert len({tuple(row) for row in material}) > 4  # the positions differ


# ---- observation and symmetry -------------------------------------------------------------

def test_observation_planes_from_the_movers_view():
    mid = _step(ENV)(ENV.from_fen("W:B9,10,K30:W23,24,K31", counter=3),
                     jnp.int32(ENV.str_to_action("31-27")))
    obs = np.asarray(ENV.observe(mid))
    assert obs.shape == (8, 8, 8) and obs.dtype == np.float32

    def cells(plane):
        return sorted(SQUARE_OF[(int(r), int(c))] for r, c in np.argwhere(obs[..., plane]))

    # Black to move: "mine" = Black's.
    assert (cells(0), cells(1), cells(2), cells(3)) == ([9, 10], [30], [23, 24], [27])
    assert cells(4) == [] and (obs[..., 5] == 0).all() and np.allclose(obs[..., 6], 4 / 80)
    assert (obs[..., 7] == 0).all()  # the repetitions: the position stood never before
    shuffled = play("B:WK32:BK1", ["1-5", "32-28", "5-1", "28-32"])[-1]
    assert (np.asarray(ENV.observe(shuffled))[..., 7] == 0.5).all()  # once before
    assert OPENSPIEL.observation_shape == (8, 8, 7)
    obs = np.asarray(ENV.observe(ENV.from_fen("W:B9,10,K30:W23,24,K31")))  # White to move
    assert (cells(0), cells(1), cells(2), cells(3)) == ([23, 24], [31], [9, 10], [30])
    assert (obs[..., 5] == 1).all() and (obs[..., 6] == 0).all()
    jumping = _step(ENV)(ENV.from_fen("B:W9,10,18,19,30:B5,6"),
                         jnp.int32(ENV.str_to_action("6x15")))
    obs = np.asarray(ENV.observe(jumping))
    assert cells(4) == [15] and cells(0) == [5, 15]


def _turned_fen(fen: str) -> str:
    """The position turned by 180 degrees with the colours swapped (square s -> 33 - s)."""
    side, white, black = fen.split(":")

    def turn(part, colour):
        items = [("K" if i.startswith("K") else "") + str(33 - int(i.lstrip("K")))
                 for i in filter(None, part[1:].split(","))]
        return colour + ",".join(items)

    return f"{'W' if side == 'B' else 'B'}:{turn(black, 'W')}:{turn(white, 'B')}"


def test_symmetry_is_the_turn_with_colours_swapped():
    perm = np.asarray(ENV.symmetries(jnp.zeros((8, 8, 8)), jnp.arange(170.0))[1]).astype(int)
    assert perm[0].tolist() == list(range(170))
    for action in range(170):  # the policy of copy 1 at a = the input's at turn(a)
        f, sep, t = re.split("([-x])", ENV.action_to_str(perm[1, action]))
        assert ENV.action_to_str(action) == f"{33 - int(f)}{sep}{33 - int(t)}"
    rng = np.random.default_rng(0)
    step, observe, symmetries = _step(ENV), jax.jit(ENV.observe), jax.jit(ENV.symmetries)
    checked = 0
    for _ in range(12):
        state = ENV.init(None)
        while not bool(state.terminated) and checked < 150:
            jumper = int(state.jumper)
            turned = ENV.from_fen(_turned_fen(ENV.to_fen(state)), counter=int(state.counter),
                                  jumper=None if jumper < 0 else 32 - jumper)
            sym_obs, sym_mask = symmetries(observe(state),
                                           state.legal_action_mask.astype(jnp.float32))
            np.testing.assert_array_equal(np.asarray(observe(turned)), np.asarray(sym_obs[1]))
            np.testing.assert_array_equal(np.asarray(turned.legal_action_mask),
                                          np.asarray(sym_mask[1]) > 0.5)
            checked += 1
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            state = step(state, jnp.int32(rng.choice(legal)))
            for _ in range(int(rng.integers(0, 8))):  # skip ahead a little
                if bool(state.terminated):
                    break
                legal = np.flatnonzero(np.asarray(state.legal_action_mask))
                state = step(state, jnp.int32(rng.choice(legal)))
    assert checked >= 100


# ---- random endings (self-play's `random_start_prob`) -----------------------------------------


def test_random_starts_are_live_endings_the_reference_agrees_on():
    """`random_start`: 1-6 pieces a side on distinct squares, no man on its crowning row, kings
    and men both drawn, either player to move, a counter below half the draw limit, no capture
    in progress, a live position whose legal hops the plain-Python reference derives too."""
    from azjax.envs.draughts import RANDOM_START_MAX_PIECES

    starts = jax.jit(jax.vmap(ENV.random_start))(jax.random.split(jax.random.PRNGKey(3), 200))
    movers, kings, men = set(), 0, 0
    for i in range(200):
        state = jax.tree.map(lambda x, i=i: x[i], starts)
        board = ENV.board(state)
        for colour, crown_row in ((1, range(28, 32)), (-1, range(4))):
            assert 1 <= np.sum(board * colour > 0) <= RANDOM_START_MAX_PIECES
            assert not np.any(board[list(crown_row)] == colour), "a man on its crowning row"
        kings += int(np.sum(np.abs(board) == 2))
        men += int(np.sum(np.abs(board) == 1))
        assert not bool(state.terminated) and int(state.jumper) == -1
        assert 0 <= int(state.counter) < ENV.draw_limit // 2
        assert int(state.step_count) == 0
        movers.add(int(state.current_player))
        fen = ENV.to_fen(state)
        ref = _reference(fen, ENV.draw_rule, int(state.counter))
        assert not ref.over and ref.to_move == int(state.current_player), fen
        assert _legal(ENV, state) == ref.hops(), fen
    assert movers == {0, 1} and kings > 100 and men > 100
    again = jax.jit(jax.vmap(ENV.random_start))(jax.random.split(jax.random.PRNGKey(3), 200))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), starts, again))


# ---- the "tactics" plane set (`draughts_tactics`) -----------------------------------------------

TACTICS = envs.make("draughts_tactics")


def _first_hops(fen: str, side: int) -> tuple[set[int], set[int]]:
    """(squares of `side`'s pieces with a capture, squares of the pieces they could take), read
    off the reference's whole moves with `side` to move (captures are mandatory, so when one
    exists every whole move is a capture)."""
    _, *parts = fen.split(":")
    ref = _reference(f"{'BW'[side]}:{':'.join(parts)}", "openspiel", 0)
    capturers, victims = set(), set()
    for path in ref._whole_moves():
        (r0, c0), (r1, c1) = path[0], path[1]
        if abs(r1 - r0) == 2:
            capturers.add(SQUARE_OF[(r0, c0)])
            victims.add(SQUARE_OF[((r0 + r1) // 2, (c0 + c1) // 2)])
    return capturers, victims


def _plane_squares(obs: np.ndarray, plane: int) -> set[int]:
    return {SQUARE_OF[(int(r), int(c))] for r, c in np.argwhere(obs[..., plane])}


def test_tactics_planes_on_a_hand_built_position():
    # White's man on 18 blocks Black's 9x14 and White's king's 27x23; Black's king takes 27.
    obs = np.asarray(TACTICS.observe(TACTICS.from_fen("B:W14,15,18,K27:B9,10,K23")))
    assert obs.shape == (8, 8, 12) and TACTICS.observation_shape == (8, 8, 12)
    assert [_plane_squares(obs, p) for p in range(7, 11)] == [{10, 23}, {14, 15, 27}, {14, 15},
                                                             {9, 10}]
    obs = np.asarray(TACTICS.observe(TACTICS.from_fen("W:W14,15,18,K27:B9,10,K23")))
    assert [_plane_squares(obs, p) for p in range(7, 11)] == [{14, 15}, {9, 10}, {10, 23},
                                                             {14, 15, 27}]


def test_tactics_planes_are_each_sides_first_capture_hops_per_the_reference():
    """On random endings and random-game positions, with either side to move: planes 0-6 are
    the basic observation, and 7-10 each side's capturers and their victims as the plain-Python
    reference finds them."""
    keys = jax.random.split(jax.random.PRNGKey(11), 32)
    endings = jax.jit(jax.vmap(TACTICS.random_start))(keys)
    games = random_positions(TACTICS, jax.random.PRNGKey(12), 32, 24)
    observe_tactics, observe_basic = jax.jit(TACTICS.observe), jax.jit(ENV.observe)
    checked, with_captures = 0, 0
    for batch in (endings, games):
        for i in range(32):
            state = jax.tree.map(lambda x, i=i: x[i], batch)
            if bool(state.terminated):
                continue
            obs = np.asarray(observe_tactics(state))
            basic = np.asarray(observe_basic(state))
            np.testing.assert_array_equal(obs[..., :7], basic[..., :7])
            np.testing.assert_array_equal(obs[..., 11], basic[..., 7])  # the repetitions
            fen, me = TACTICS.to_fen(state), int(state.current_player)
            mine, theirs = _first_hops(fen, me), _first_hops(fen, 1 - me)
            got = [_plane_squares(obs, p) for p in range(7, 11)]
            assert got == [mine[0], mine[1], theirs[0], theirs[1]], fen
            checked += 1
            with_captures += bool(mine[0] or theirs[0])
    assert checked >= 48 and with_captures >= 16


def test_tactics_symmetry_is_the_turn_with_colours_swapped():
    states = random_positions(TACTICS, jax.random.PRNGKey(13), 24, 30)
    for i in range(24):
        state = jax.tree.map(lambda x, i=i: x[i], states)
        jumper = int(state.jumper)
        turned = TACTICS.from_fen(_turned_fen(TACTICS.to_fen(state)), counter=int(state.counter),
                                  jumper=None if jumper < 0 else 32 - jumper)
        sym_obs, _ = TACTICS.symmetries(TACTICS.observe(state), jnp.zeros(170))
        np.testing.assert_array_equal(np.asarray(TACTICS.observe(turned)), np.asarray(sym_obs[1]))


def test_draughts_refuses_an_unknown_plane_set():
    with pytest.raises(ValueError, match="planes must be one of"):
        Draughts(planes="everything")
