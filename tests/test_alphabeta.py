"""Alpha-beta, the baseline and the search over a network: its values equal plain minimax over
the same evaluation whatever the move order, agree with OpenSpiel's alpha-beta on checkers, it
finds hand-built shots, never plays an illegal move, and is refused where it cannot serve.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from conftest import REPO_ROOT, run_optimised
from open_spiel.python.algorithms import minimax as spiel_minimax
from typer.testing import CliRunner

from azjax import envs
from azjax.agent import Agent
from azjax.apps.cli import app
from azjax.config import ConfigError, ExperimentConfig, NetworkConfig, SearchConfig
from azjax.core.alphabeta import (
    AlphaBetaConfig,
    alphabeta_result,
    alphabeta_run,
    alphabeta_search,
    alphabeta_start,
)
from azjax.core.hashing import position_hash
from azjax.core.network import make_network
from azjax.core.search import make_search, make_search_engine
from azjax.core.steps import make_steps
from azjax.envs.core import jitted_step, play_moves
from azjax.envs.draughts import Draughts, openspiel_to_action
from azjax.evaluation.alphabeta import alphabeta_player, anchor_name
from azjax.evaluation.arena import ArenaResult, run_arena
from azjax.evaluation.baselines import random_player
from azjax.evaluation.players import is_baseline, make_opponent

RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})
DRAUGHTS = envs.make("draughts")
C4 = envs.make("connect_four")
TTT = envs.make("tic_tac_toe")


@functools.cache
def _node(env):
    """jit: (state, action) -> (child, child's heuristic value, whether it is forcing)."""

    def node(state, action):
        child = env.step(state, action)
        return child, env.heuristic_value(child), env.forcing(child)

    return jax.jit(node)


def minimax(env, state, depth: int, quiescence: int, count_actions: bool = False) -> float:
    """Plain negamax over the engine's rules (no pruning, no table), written from its spec:
    the value of live `state` for its player to move."""
    return max(move_value(env, state, action, depth, quiescence, count_actions)
               for action in np.flatnonzero(np.asarray(state.legal_action_mask)))


def move_value(env, state, action: int, depth: int, quiescence: int,
               count_actions: bool = False) -> float:
    """The minimax value of playing `action` in `state`, for `state`'s player to move: a
    finished game scores its result; a move that leaves the same player to move keeps the
    depth (unless `count_actions`); past the depth the search goes on while `env.forcing`,
    at most `quiescence` moves."""
    child, heuristic, forcing = jax.device_get(_node(env)(state, jnp.int32(action)))
    same = int(child.current_player) == int(state.current_player)
    child_depth = depth - (1 if count_actions or not same else 0)
    if child.terminated or child.truncated:
        value = float(child.rewards[int(child.current_player)])
    elif (child_depth <= 0 and not forcing) or child_depth <= -quiescence:
        value = float(heuristic)
    else:
        value = minimax(env, child, child_depth, quiescence, count_actions)
    return value if same else -value


@functools.cache
def _random_play(env, num_games: int, plies: int):
    """jit: key -> the states of `num_games` random games after 0..plies plies [plies + 1, B]."""

    def run(key):
        start = jax.vmap(env.init)(jax.random.split(key, num_games))

        def ply(states, k):
            actions = random_player(env)(k, states)
            return jax.vmap(env.step)(states, actions), states

        last, seen = jax.lax.scan(ply, start, jax.random.split(key, plies))
        return jax.tree.map(lambda s, x: jnp.concatenate([s, x[None]]), seen, last)

    return jax.jit(run)


def _live(env, seed: int, num: int, plies: tuple[int, ...]):
    """`num` live positions after each number of random plies, as single states (one
    compiled random play per game)."""
    trajectory = _random_play(env, 64, 32)(jax.random.PRNGKey(seed))
    out = []
    for count in plies:
        at = jax.tree.map(lambda x, c=count: np.asarray(x[c]), trajectory)
        live = np.flatnonzero(~at.terminated)[:num]
        out += [jax.tree.map(lambda x, i=i: x[i], at) for i in live]
    return out


SEARCH_BATCH = 4  # every search in this file runs on batches of this size: one compile each


def _batch(states):
    """Single states stacked, repeated cyclically to SEARCH_BATCH games."""
    rows = np.arange(max(SEARCH_BATCH, len(states))) % len(states)
    return jax.tree.map(lambda *xs: jnp.stack(xs)[rows], *states)


@functools.cache
def _search(env, config):
    return jax.jit(functools.partial(alphabeta_search, env, config=config))


@pytest.mark.parametrize("env, plies, depths", [
    (DRAUGHTS, (12, 30), (1, 2, 3, 4)),
    (C4, (6, 14), (1, 2, 3, 4)),
], ids=["draughts", "connect_four"])
def test_values_equal_plain_minimax(env, plies, depths):
    positions = _live(env, 3, 2, plies)
    config = AlphaBetaConfig(depth=max(depths), quiescence=3)
    for depth in depths:
        found = _search(env, config)(jax.random.PRNGKey(depth), _batch(positions), depth=depth)
        assert np.all(np.asarray(found.complete))
        want = [minimax(env, p, depth, config.quiescence) for p in positions]
        np.testing.assert_allclose(np.asarray(found.value)[:len(want)], want, atol=1e-6,
                                   err_msg=f"depth {depth}")
        # The move it names is worth that value.
        for p, action, value in zip(positions, np.asarray(found.action), want, strict=False):
            assert move_value(env, p, int(action), depth, config.quiescence) == pytest.approx(
                value, abs=1e-6)


def test_a_node_budget_plays_the_deepest_step_finished_within_it():
    """Iterative deepening under a budget of positions: each game plays the move (and value)
    of the deepest step it finished with fewer positions, all steps together, than the
    budget, which is the search to that depth alone; it never steps into more."""
    positions = _live(DRAUGHTS, 5, 2, (12, 30))
    config, key = AlphaBetaConfig(depth=4, quiescence=3), jax.random.PRNGKey(7)
    search = _search(DRAUGHTS, config)
    full = [search(key, _batch(positions), depth=d) for d in (1, 2, 3, 4)]
    nodes = np.stack([np.asarray(f.nodes) for f in full])  # [depth, B], cumulative
    budget = int(np.median(nodes[2]))  # some games finish depth 3 within it, some do not
    cut = search(key, _batch(positions), budget=budget)
    reached = np.asarray(cut.depth)
    np.testing.assert_array_equal(reached, (nodes < budget).sum(axis=0))
    assert len(set(reached.tolist())) > 1
    assert np.all(np.asarray(cut.nodes) <= budget)
    np.testing.assert_array_equal(np.asarray(cut.complete), reached == config.depth)
    for g, d in enumerate(reached):
        assert int(cut.action[g]) == int(full[d - 1].action[g])
        assert float(cut.value[g]) == float(full[d - 1].value[g])


def test_a_search_run_in_chunks_is_the_search_run_at_once_whatever_its_batch():
    """`alphabeta_run` to 40 positions then to 90 is the run to 90, and a game's search is
    the same beside other games: what a clock's chunks need."""
    config, key = AlphaBetaConfig(depth=5, quiescence=2), jax.random.PRNGKey(2)
    start = jax.jit(functools.partial(alphabeta_start, C4, config=config))
    run = jax.jit(functools.partial(alphabeta_run, C4, config))
    positions = _live(C4, 1, 4, (6,))
    whole = alphabeta_result(run(start(key, _batch(positions)), nodes=90))
    chunked = alphabeta_result(run(run(start(key, _batch(positions)), nodes=40), nodes=90))
    jax.tree.map(np.testing.assert_array_equal, chunked, whole)
    # The same games in reverse order: each game's search is its own.
    backwards = alphabeta_result(run(start(key, _batch(positions[::-1])), nodes=90))
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(x[::-1], y), backwards, whole)


def test_values_agree_with_openspiel_alpha_beta_on_checkers():
    """OpenSpiel counts depth in actions and has no quiescence: the engine's `count_actions`
    mode with quiescence 0 searches the same tree; leaves score our heuristic of the same
    position, reached by replaying OpenSpiel's actions in our env."""
    game = pyspiel.load_game("checkers")
    step = jitted_step(DRAUGHTS)
    rng = np.random.default_rng(7)
    roots = []
    while len(roots) < 4:
        spiel, ours = game.new_initial_state(), DRAUGHTS.init(jax.random.PRNGKey(0))
        for _ in range(rng.integers(8, 40)):
            if spiel.is_terminal():
                break
            action = int(rng.choice(spiel.legal_actions()))
            spiel.apply_action(action)
            ours = step(ours, jnp.int32(openspiel_to_action(action)))
        if not spiel.is_terminal():
            assert not bool(ours.terminated)
            roots.append((spiel, ours))

    config = AlphaBetaConfig(depth=3, quiescence=0, count_actions=True)
    for depth in (1, 2, 3):
        found = _search(DRAUGHTS, config)(jax.random.PRNGKey(0), _batch([o for _, o in roots]),
                                          depth=depth)
        for (spiel, ours), value in zip(roots, np.asarray(found.value), strict=False):
            start = len(spiel.history())
            me = spiel.current_player()

            def value_function(node, ours=ours, start=start, me=me):
                state = ours
                for action in node.history()[start:]:
                    state = step(state, jnp.int32(openspiel_to_action(action)))
                h = float(DRAUGHTS.heuristic_value(state))
                return h if int(state.current_player) == me else -h

            theirs, _ = spiel_minimax.alpha_beta_search(
                game, state=spiel.clone(), value_function=value_function, maximum_depth=depth,
                maximizing_player_id=me)
            assert value == pytest.approx(theirs, abs=1e-6), f"depth {depth}"


# Hand-built shots, Black to move (PDN FEN). The two-for-one: 16-19 gives a man, White must take
# 23x16, and 12x19x28 takes two. Into a king: 15-19 gives a man, White must take 23x16, and
# 14x23x32 takes two and crowns (9 guards 18x9, 22 blocks 15x22).
SHOTS = {
    "two_for_one": ("B:W23,24,29,30:B1,2,12,15,16", "16-19", ["23x16"], "12x19x28"),
    "multi_jump_into_a_king": ("B:W18,22,23,27,29,30:B1,2,9,14,15", "15-19", ["23x16"],
                               "14x23x32"),
}


@pytest.mark.parametrize("depth", [2, 4, 6])
def test_finds_the_winning_shot(depth):
    starts = [DRAUGHTS.from_fen(fen) for fen, *_ in SHOTS.values()]
    found = _search(DRAUGHTS, AlphaBetaConfig(depth=6))(jax.random.PRNGKey(1), _batch(starts),
                                                         depth=depth)
    for k, (name, (_, shot, replies, answer)) in enumerate(SHOTS.items()):
        start = starts[k]
        assert DRAUGHTS.action_to_str(int(found.action[k])) == shot, name
        assert float(found.value[k]) > 0
        # The line is forced as written and ends a man up for Black.
        assert sorted(DRAUGHTS.legal_moves(_replay(start, [shot]))) == replies
        assert sorted(DRAUGHTS.legal_moves(_replay(start, [shot, *replies]))) == [answer]
        before = np.asarray(DRAUGHTS.material(start))
        after = np.asarray(DRAUGHTS.material(_replay(start, [shot, *replies, answer])))
        assert after[0] - after[1] > before[0] - before[1]


def _replay(start, moves):
    """The state after whole moves in PDN from `start`."""
    step = jitted_step(DRAUGHTS)
    state = start
    for move in moves:
        for action in DRAUGHTS.parse_move(state, move):
            state = step(state, jnp.int32(action))
    return state


def test_solves_tic_tac_toe_with_results_alone():
    """Tic-tac-toe has no heuristic (the default scores 0): at depth 9 the search sees every
    game to its end, so it values the empty board a draw and takes a win in one."""
    config = AlphaBetaConfig(depth=9)
    empty = TTT.init(jax.random.PRNGKey(0))
    # X on 0 and 1, O on 3 and 4, X to move: 2 wins at once.
    threat = play_moves(TTT, [0, 3, 1, 4])
    found = _search(TTT, config)(jax.random.PRNGKey(0), _batch([empty, threat]))
    np.testing.assert_allclose(np.asarray(found.value)[:2], [0.0, 1.0])
    assert int(found.action[1]) == 2


@pytest.mark.parametrize("env, games", [(DRAUGHTS, 256), (C4, 1024)],
                         ids=["draughts", "connect_four"])
def test_never_plays_an_illegal_move_against_random(env, games):
    """Through the arena every evaluation plays (`run_arena`): half the games with each
    colour, 200 plies at most."""
    arena = functools.partial(run_arena, env=env, player_a=alphabeta_player(env, 1),
                              player_b=random_player(env), num_games=games, max_steps=200)
    result = ArenaResult.from_outcomes(*run_optimised(arena, jax.random.PRNGKey(5)))
    assert result.illegal_moves_a == 0
    assert result.wins >= 0.9 * games and result.losses <= 0.02 * games, result


def test_opponent_names():
    assert is_baseline("alphabeta:6")
    act = make_opponent(DRAUGHTS, "alphabeta:3")
    assert act is make_opponent(DRAUGHTS, "alphabeta:3")
    for bad in ("alphabeta:0", "alphabeta:x", "alphabeta:"):
        with pytest.raises(ValueError, match="alphabeta opponent needs a depth"):
            make_opponent(DRAUGHTS, bad)
    assert anchor_name(DRAUGHTS, 6) == "alphabeta:6 (engine 1, draughts-laws-1)"
    openspiel_rules = Draughts(draw_rule="openspiel")  # the shipped model's: its anchors'
    assert anchor_name(openspiel_rules, 6) == "alphabeta:6 (engine 1, draughts-1)"
    assert anchor_name(TTT, 2).endswith("terminal-only)")


def test_heuristics_are_inside_the_results_and_see_both_sides():
    for env in (DRAUGHTS, C4):
        states = _batch(_live(env, 11, 32, (10, 24)))
        values = np.asarray(jax.vmap(env.heuristic_value)(states))
        assert values.dtype == np.float32 and np.all(np.abs(values) < 0.95)
        assert np.std(values) > 0.01  # it tells positions apart
    # Draughts: a man more is good for its side, whoever moves; the colours' turn negates it.
    up = DRAUGHTS.from_fen("B:W29,30:B1,2,3")
    assert float(DRAUGHTS.heuristic_value(up)) > 0.1
    assert float(DRAUGHTS.heuristic_value(DRAUGHTS.from_fen("W:W29,30:B1,2,3"))) < -0.1
    mirrored = DRAUGHTS.from_fen("W:W30,31,32:B3,4")  # the same, turned and colours swapped
    assert float(DRAUGHTS.heuristic_value(mirrored)) == pytest.approx(
        float(DRAUGHTS.heuristic_value(up)), abs=1e-6)
    # Connect four: three in a row with the fourth cell open is a threat.
    threat = play_moves(C4, [0, 6, 1, 6, 2])  # X on 0, 1, 2; O to move
    assert float(C4.heuristic_value(threat)) < -0.1
    # Draughts forcing: a capture pending.
    assert bool(DRAUGHTS.forcing(DRAUGHTS.from_fen("B:W18:B14")))
    assert not bool(DRAUGHTS.forcing(DRAUGHTS.from_fen("B:W28:B1")))


def test_position_hash_ignores_the_move_count_only():
    a = DRAUGHTS.from_fen("B:W21,22:B1,2")
    b = a.replace(step_count=jnp.int32(7))
    assert np.array_equal(position_hash(a), position_hash(b))
    for other in (DRAUGHTS.from_fen("W:W21,22:B1,2"), DRAUGHTS.from_fen("B:W21,22:B1,3"),
                  DRAUGHTS.from_fen("B:W21,22:B1,2", counter=3),
                  DRAUGHTS.from_fen("B:W21,22:B1,K2")):
        assert not np.array_equal(position_hash(a), position_hash(other))


def test_config_refuses_a_bad_depth():
    with pytest.raises(ValueError, match="depth must be >= 1"):
        AlphaBetaConfig(depth=0)
    assert isinstance(DRAUGHTS, Draughts)


@pytest.mark.parametrize("doc, weights", [
    ("docs/games/draughts.md", "azjax.envs.draughts"), ("docs/envs.md", "azjax.envs.connect_four")])
def test_documented_weights_are_the_code(doc, weights):
    """The evaluation's weights define the anchor: the docs' table is the code's."""
    import dataclasses
    import importlib
    import re
    from pathlib import Path

    module = importlib.import_module(weights)
    text = (Path(__file__).resolve().parents[1] / doc).read_text()
    section = text[text.index("alpha-beta evaluation"):]
    rows = dict(re.findall(r"^\| (\w+) \| ([\d.]+) \|", section, re.MULTILINE))
    fields = {f.name: getattr(module.EVAL_WEIGHTS, f.name)
              for f in dataclasses.fields(module.EVAL_WEIGHTS) if f.name != "scale"}
    assert {k: float(v) for k, v in rows.items() if k in fields} == fields
    assert module.EVAL_WEIGHTS.scale == 4.0 and module.SQUASH == 0.9


class _BadHeuristic(type(TTT)):
    """Tic-tac-toe whose heuristic breaks the contract: 1.5 outranks a win."""

    def heuristic_value(self, state):
        return jnp.float32(1.5)


def test_check_env_refuses_a_heuristic_outside_the_results():
    from azjax.envs.conformance import check_env

    with pytest.raises(AssertionError, match="heuristic_value must lie strictly inside"):
        check_env(_BadHeuristic())


def test_a_leaf_function_scores_the_leaves_and_its_order_never_changes_a_value():
    """With `leaf`, the leaves score its values (here the game's own heuristic, so the values
    are plain minimax's) and the moves are tried in the order its preference asks for (here
    scores hashed from the position): a different walk, the same values."""
    positions = _live(DRAUGHTS, 5, 2, (12, 30))
    config = AlphaBetaConfig(depth=3, quiescence=3)

    def leaf(states):
        salt = jax.vmap(position_hash)(states)[:, :1].astype(jnp.float32)
        return (jax.vmap(DRAUGHTS.heuristic_value)(states),
                jnp.sin(1e-3 * salt + 1.7 * jnp.arange(DRAUGHTS.num_actions)))

    search = jax.jit(functools.partial(alphabeta_search, DRAUGHTS, config=config, leaf=leaf))
    found = search(jax.random.PRNGKey(0), _batch(positions))
    plain = _search(DRAUGHTS, config)(jax.random.PRNGKey(0), _batch(positions))
    want = [minimax(DRAUGHTS, p, config.depth, config.quiescence) for p in positions]
    np.testing.assert_allclose(np.asarray(found.value)[:len(want)], want, atol=1e-6)
    assert np.all(np.asarray(found.complete))
    assert np.any(np.asarray(found.nodes) != np.asarray(plain.nodes))  # another order


@functools.cache
def _tiny_network_search(env, **search):
    """(search_fn, variables) of `make_search` over a small random MLP with `search`."""
    network = NetworkConfig(kind="mlp", hidden=(16,))
    module, apply_fn = make_network(network, env.num_actions)
    obs = jnp.zeros((1, *env.observation_shape), jnp.float32)
    variables = module.init(jax.random.PRNGKey(0), obs)
    config = SearchConfig(algorithm="alphabeta", **search)
    return jax.jit(make_search(env, apply_fn, config)), variables


def test_network_alphabeta_solves_tic_tac_toe_whatever_the_network():
    """`search.algorithm: alphabeta` at depth 9 sees every tic-tac-toe game to its end: its
    values are the exact results (plain minimax over results alone), not the random
    network's, and the move it plays is worth that value."""
    search, variables = _tiny_network_search(TTT, alphabeta_depth=9)
    positions = _live(TTT, 2, 2, (3, 5))
    out = search(variables, jax.random.PRNGKey(3), _batch(positions))
    want = [minimax(TTT, p, 9, 8) for p in positions]
    np.testing.assert_allclose(np.asarray(out.value)[:len(want)], want, atol=1e-6)
    for p, action, value in zip(positions, np.asarray(out.action), want, strict=False):
        assert move_value(TTT, p, int(action), 9, 8) == pytest.approx(value, abs=1e-6)
    policy = np.asarray(out.policy)
    np.testing.assert_array_equal(policy.argmax(-1), np.asarray(out.action))
    np.testing.assert_allclose(policy.sum(-1), 1.0)


def test_the_shipped_draughts_model_searched_by_alphabeta_finds_the_shots():
    """The shipped model's value at the leaves of two whole moves (and the captures after
    them): both hand-built shots give a man to take two, which the search sees to the end."""
    agent = Agent.load("draughts").with_search(["search.alphabeta_depth=2",
                                                "search.endgame_table=0"])
    starts = [DRAUGHTS.from_fen(fen) for fen, *_ in SHOTS.values()]
    actions, policy, value = agent.search(jax.random.PRNGKey(1), _batch(starts))
    for k, (name, (_, shot, *_)) in enumerate(SHOTS.items()):
        assert DRAUGHTS.action_to_str(int(actions[k])) == shot, name
        assert float(value[k]) > 0, name
        assert float(policy[k, int(actions[k])]) == 1.0


def test_alphabeta_is_refused_where_it_cannot_serve():
    """Self-play needs a policy target, a clock or kept tree a search in steps, and options
    alphabeta does not read are refused rather than ignored: one line each."""
    config = ExperimentConfig(game="tic_tac_toe", search=SearchConfig(algorithm="alphabeta"))
    with pytest.raises(ConfigError, match="search.algorithm: alphabeta is a play-time search"):
        make_steps(TTT, config.network, config.search, config.selfplay, config.train,
                   config.replay)
    _, apply_fn = make_network(config.network, TTT.num_actions)
    with pytest.raises(ConfigError, match="alphabeta has no tree to keep or prove"):
        make_search_engine(TTT, apply_fn, config.search)
    with pytest.raises(ConfigError, match=r"alphabeta does not read search\.solver, "
                                          r"search\.contempt: turn them off"):
        ExperimentConfig(game="tic_tac_toe", search=SearchConfig(
            algorithm="alphabeta", solver=True, contempt=0.1))
    with pytest.raises(ConfigError, match=r"search.alphabeta_depth: must be in \[1, 16\]"):
        ExperimentConfig(game="tic_tac_toe", search=SearchConfig(
            algorithm="alphabeta", alphabeta_depth=0))
    with pytest.raises(ConfigError, match=r"search.alphabeta_nodes: must be >= 0"):
        ExperimentConfig(game="tic_tac_toe", search=SearchConfig(
            algorithm="alphabeta", alphabeta_nodes=-1))


def test_eval_plays_the_alphabeta_search_from_the_command_line():
    out = RUNNER.invoke(app, ["eval", "draughts", "--against", "random", "--games", "2",
                              "--set", "search.algorithm=alphabeta",
                              "--set", "search.alphabeta_depth=1",
                              "--set", "search.endgame_table=0"])
    assert out.exit_code == 0, out.output
    assert "evaluated with alpha-beta to depth 1 (whole moves)" in out.output
    assert "+2 =0 -0" in out.output, out.output
