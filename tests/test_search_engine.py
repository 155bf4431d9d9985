"""The search in steps (`azjax.core.search_engine`): chunks of simulations equal one shot and
`make_search`, bit for bit; tree reuse keeps each game's subtree; the tree's capacity holds."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import envs
from azjax.config import NetworkConfig, SearchConfig
from azjax.core.network import init_network, make_network
from azjax.core.policies import muzero_search
from azjax.core.search import (
    make_recurrent_fn,
    make_root_fn,
    make_search,
    make_search_engine,
    qtransform_from_name,
)

NET = NetworkConfig(kind="mlp", hidden=(8,))
KEY = jax.random.PRNGKey(7)
# Tic-tac-toe tests share their shapes and settings, so their compiled steps too.
GAMES, CAPACITY, PLAN, HALF = 6, 25, 24, 12


@functools.cache
def _network(game):
    env = envs.make(game)
    _, apply = make_network(NET, env.num_actions)
    variables = init_network(NET, env.num_actions, env.observation_shape, jax.random.PRNGKey(3))
    return env, apply, variables


def _positions(env, num_games, plies, seed=4):
    """Random unfinished positions after `plies` moves, [B <= num_games]."""
    states = envs.random_positions(env, jax.random.PRNGKey(seed), num_games, plies)
    return jax.tree.map(lambda x: x[~(states.terminated | states.truncated)], states)


def _config(algorithm, simulations=PLAN, **options):
    return SearchConfig(algorithm=algorithm, num_simulations=simulations,
                        max_num_considered_actions=4, greedy_action="halving"
                        if algorithm == "gumbel" else "policy",
                        qtransform="completed_by_mix_value" if algorithm == "gumbel"
                        else "by_parent_and_siblings", **options)


GUMBEL, PUCT = _config("gumbel"), _config("puct")
NOISE = {"gumbel": False, "puct": True}  # the tic-tac-toe searches' root noise


@functools.cache
def steps(game, config, apply=None):
    """The engine of `config` over `game`'s random network (or `apply`), its steps jitted."""
    env, network_apply, _ = _network(game)
    engine = make_search_engine(env, apply or network_apply, config)
    start = jax.jit(engine.start, static_argnames=("capacity", "planned_simulations", "noise"))
    return (engine, start, jax.jit(engine.simulate, static_argnums=2), jax.jit(engine.finish),
            jax.jit(engine.advance))


def _searched(algorithm, plies=2, simulations=PLAN):
    """A tic-tac-toe search of `simulations` (12 or 24) from GAMES random positions."""
    env, _, variables = _network("tic_tac_toe")
    states = _positions(env, GAMES, plies)
    _, start, simulate, _, _ = steps("tic_tac_toe", _config(algorithm))
    state = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=PLAN,
                  noise=NOISE[algorithm])
    return states, simulate(variables, state, simulations)


def _assert_same(got, want, names=None):
    got, want = jax.tree.map(np.asarray, (got, want))
    for name in names or ("action", "policy", "value", "prior_value", "visit_counts"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


TREE_FIELDS = ("node_visits", "raw_values", "node_values", "parents", "action_from_parent",
               "children_index", "children_prior_logits", "children_visits", "children_values",
               "children_rewards", "children_discounts")


@pytest.mark.parametrize("game,plies,algorithm,noise", [
    ("tic_tac_toe", 2, "gumbel", NOISE["gumbel"]),
    ("tic_tac_toe", 2, "puct", NOISE["puct"]),
    ("connect_four", 20, "gumbel", True),
    ("connect_four", 20, "puct", False),
])
def test_chunked_search_is_the_one_shot_search_bit_for_bit(game, plies, algorithm, noise):
    """start + simulate(n) + simulate(n) + finish == start + simulate(2n) + finish, every leaf
    of the state; and both == `make_search`'s search of 2n simulations, and (puct) the tree
    `muzero_search` builds in one call, node for node."""
    env, apply, variables = _network(game)
    states = _positions(env, GAMES, plies)
    config = _config(algorithm)
    engine, start, simulate, finish, _ = steps(game, config)
    state = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=PLAN,
                  noise=noise)
    chunked = simulate(variables, simulate(variables, state, HALF), HALF)
    whole = simulate(variables, state, PLAN)
    for got, want in zip(jax.tree.leaves(chunked), jax.tree.leaves(whole), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(engine.simulations_done(chunked), PLAN)
    out = finish(chunked)
    _assert_same(out, finish(whole))
    want = jax.jit(functools.partial(make_search(env, apply, config), noise=noise))(
        variables, KEY, states)
    # The same arithmetic in the same order and the same keys; but XLA may fuse the float
    # work of differently compiled programs differently (the root's network evaluation
    # above all), a last bit apart: floats are compared to that.
    _assert_same(out, want, ("action", "visit_counts"))
    for name in ("policy", "value", "prior_value"):
        np.testing.assert_allclose(getattr(out, name), getattr(want, name), rtol=1e-6,
                                   atol=1e-7, err_msg=name)
    if (game, algorithm) != ("tic_tac_toe", "puct"):  # once is enough (compile time)
        return
    policy = functools.partial(muzero_search, num_simulations=PLAN,
                               invalid_actions=~states.legal_action_mask,
                               qtransform=qtransform_from_name(config.qtransform),
                               dirichlet_fraction=0.25 if noise else 0.0)
    tree = jax.jit(lambda: policy(variables, KEY, make_root_fn(env, apply)(variables, states),
                                  make_recurrent_fn(env, apply)).search_tree)()
    for name in TREE_FIELDS:
        got, want = np.asarray(getattr(chunked.tree, name)), getattr(tree, name)
        if got.dtype == np.int32:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


def _reference_subtree(tree, game, child):
    """numpy: game `game`'s subtree under node `child`, as `advance` should leave it."""
    children = tree["children_index"][game]
    nodes, frontier = [], [child]
    while frontier:
        node = frontier.pop()
        nodes.append(node)
        frontier += [int(c) for c in children[node] if c >= 0]
    nodes = sorted(nodes)
    new = {old: i for i, old in enumerate(nodes)}
    want = {name: tree[name][game][nodes] for name in TREE_FIELDS}
    want["children_index"] = np.vectorize(lambda c: new.get(c, -1))(want["children_index"])
    want["parents"] = np.array([new.get(int(p), -1) for p in want["parents"]])
    want["action_from_parent"][0] = -1
    want["board"] = tree["board"][game][nodes]
    return want


def _tree_arrays(state):
    arrays = {name: np.asarray(getattr(state.tree, name)) for name in TREE_FIELDS}
    arrays["board"] = np.asarray(state.tree.embeddings.board)
    return arrays


def _assert_kept(kept, before, games_and_children):
    after = _tree_arrays(kept)
    for game, child in games_and_children:
        count = int(kept.next_node[game])
        if child < 0:  # never expanded: an empty tree
            assert count == 0 and (after["node_visits"][game] == 0).all()
            continue
        want = _reference_subtree(before, game, child)
        assert count == len(want["node_visits"])
        for name, values in want.items():
            np.testing.assert_array_equal(after[name][game][:count], values,
                                          err_msg=f"{name}, game {game}")
        assert (after["node_visits"][game][count:] == 0).all()
        assert (after["children_index"][game][count:] == -1).all()


def test_advance_keeps_each_games_subtree_with_its_statistics():
    """Different actions per game: the most and the least visited root child, one never
    expanded; then the kept tree advanced again (two plies). Every node's statistics move
    with it, re-indexed."""
    states, state = _searched("gumbel")  # 4 considered: some root children never expanded
    advance = steps("tic_tac_toe", GUMBEL)[4]
    before = _tree_arrays(state)
    visits = before["children_visits"][:, 0]
    legal = np.asarray(states.legal_action_mask)
    least = np.where(visits > 0, visits, PLAN + 1).argmin(-1)
    unexpanded = (legal & (before["children_index"][:, 0] < 0)).argmax(-1)
    actions = np.where(np.arange(GAMES) % 3 == 0, visits.argmax(-1),
                       np.where(np.arange(GAMES) % 3 == 1, least, unexpanded))
    assert (before["children_index"][np.arange(GAMES), 0, unexpanded] < 0).all()
    kept = advance(state, jnp.asarray(actions, jnp.int32))
    _assert_kept(kept, before, [(g, int(before["children_index"][g, 0, a]))
                                for g, a in enumerate(actions)])
    first = _tree_arrays(kept)
    again = first["children_visits"][:, 0].argmax(-1)
    twice = advance(kept, jnp.asarray(again, jnp.int32))
    _assert_kept(twice, first, [(g, int(first["children_index"][g, 0, a]))
                                for g, a in enumerate(again) if int(kept.next_node[g]) > 0])


def _played(env, states, actions):
    return jax.vmap(env.step)(states, jnp.asarray(actions, jnp.int32))


def _kept(algorithm):
    """A search of HALF simulations advanced by each game's most visited action: the
    positions after it, the search and the kept trees."""
    states, state = _searched(algorithm, simulations=HALF)
    actions = np.asarray(state.tree.children_visits[:, 0]).argmax(-1)
    kept = steps("tic_tac_toe", _config(algorithm))[4](state, jnp.asarray(actions, jnp.int32))
    return _played(_network("tic_tac_toe")[0], states, actions), kept


def test_a_kept_puct_root_keeps_its_visits_and_adds_the_new_ones():
    env, _, variables = _network("tic_tac_toe")
    engine, start, simulate, finish, _ = steps("tic_tac_toe", PUCT)
    states, kept = _kept("puct")
    kept_visits = np.asarray(kept.tree.children_visits[:, 0])
    root_visits = np.asarray(kept.tree.node_visits[:, 0])
    assert (root_visits > 1).all()
    resumed = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=HALF,
                    noise=True, kept=kept)
    np.testing.assert_array_equal(resumed.next_node, kept.next_node)
    resumed = simulate(variables, resumed, HALF)
    np.testing.assert_array_equal(engine.simulations_done(resumed), HALF)
    np.testing.assert_array_equal(resumed.tree.node_visits[:, 0], root_visits + HALF)
    assert (np.asarray(resumed.tree.children_visits[:, 0]) >= kept_visits).all()
    out = finish(resumed)
    np.testing.assert_array_equal(out.visit_counts.sum(-1), root_visits - 1 + HALF)
    assert np.asarray(states.legal_action_mask)[np.arange(GAMES), out.action].all()
    # Too little room for the kept tree and the plan: those games start afresh.
    fresh = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=PLAN,
                  noise=True, kept=kept)
    np.testing.assert_array_equal(fresh.next_node, 1)
    np.testing.assert_array_equal(fresh.tree.node_visits[:, 0], 1)
    # Not the kept root's position (the one before the move): afresh.
    np.testing.assert_array_equal(start(variables, KEY, _positions(env, GAMES, 2),
                                        capacity=CAPACITY, planned_simulations=PLAN,
                                        noise=True, kept=kept).next_node, 1)
    # A tree of another capacity is padded to it, its root kept.
    bigger = start(variables, KEY, states, capacity=2 * CAPACITY, planned_simulations=PLAN,
                   noise=True, kept=kept)
    np.testing.assert_array_equal(bigger.next_node, kept.next_node)
    np.testing.assert_array_equal(bigger.tree.children_visits[:, 0], kept_visits)


def _halving_visits(considered, simulations):
    """The visits sequential halving gives its `considered` actions in `simulations`
    (mctx's schedule, counted here), most first."""
    visits, done, alive = [0] * considered, 0, considered
    while done < simulations:
        extra = max(1, int(simulations / (int(np.ceil(np.log2(considered))) * alive)))
        for _ in range(extra):
            for i in range(alive):
                if done < simulations:
                    visits[i] += 1
                    done += 1
        alive = max(2, alive // 2)
    return sorted(visits, reverse=True)


def test_a_kept_gumbel_root_halves_over_the_new_visits_only():
    """With inherited visits, sequential halving still spreads this search's simulations as
    its schedule says (for 4 considered in 12: two at 5, two at 1), and its survivor is a
    legal action among this search's most visited; stopped at once, it still plays a legal
    move."""
    env, _, variables = _network("tic_tac_toe")
    engine, start, simulate, finish, _ = steps("tic_tac_toe", GUMBEL)
    states, kept = _kept("gumbel")
    assert (np.asarray(kept.tree.node_visits[:, 0]) > 1).all()
    begun = start(variables, jax.random.PRNGKey(1), states, capacity=CAPACITY,
                  planned_simulations=HALF, kept=kept)
    rows, legal = np.arange(GAMES), np.asarray(states.legal_action_mask)
    assert legal[rows, finish(begun).action].all()
    resumed = simulate(variables, begun, HALF)
    new_visits = np.asarray(resumed.tree.children_visits[:, 0] - kept.tree.children_visits[:, 0])
    for game in rows:
        np.testing.assert_array_equal(np.sort(new_visits[game])[::-1][:4],
                                      _halving_visits(4, HALF), err_msg=f"game {game}")
    out = finish(resumed)
    assert legal[rows, out.action].all()
    assert (new_visits[rows, out.action] == new_visits.max(-1)).all()
    np.testing.assert_array_equal(engine.simulations_done(resumed), HALF)


def test_a_gumbel_search_stopped_early_still_plays_a_legal_move():
    env, _, variables = _network("tic_tac_toe")
    engine, start, _, finish, _ = steps("tic_tac_toe", GUMBEL)
    states, half = _searched("gumbel", simulations=HALF)  # half its plan
    begun = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=PLAN)
    legal = np.asarray(states.legal_action_mask)
    for state, done in ((begun, 0), (half, HALF)):
        np.testing.assert_array_equal(engine.simulations_done(state), done)
        assert legal[np.arange(GAMES), finish(state).action].all()


def test_a_full_tree_stops_its_game_and_writes_nothing_out_of_bounds():
    """More simulations than the tree has nodes: each game stops at capacity - 1, with the
    tree a roomier search builds in as many simulations."""
    env, _, variables = _network("tic_tac_toe")
    engine, start, simulate, finish, _ = steps("tic_tac_toe", PUCT)
    states = _positions(env, GAMES, 2)
    small = start(variables, KEY, states, capacity=6, planned_simulations=PLAN, noise=True)
    small = simulate(variables, simulate(variables, small, HALF), HALF)
    np.testing.assert_array_equal(engine.simulations_done(small), 5)
    np.testing.assert_array_equal(small.next_node, 6)
    np.testing.assert_array_equal(small.tree.node_visits[:, 0], 6)
    assert (np.asarray(small.tree.children_index) < 6).all()
    roomy = start(variables, KEY, states, capacity=CAPACITY, planned_simulations=5,
                  noise=True)
    roomy = simulate(variables, roomy, HALF)  # stops at its plan
    for name in TREE_FIELDS:
        got, want = np.asarray(getattr(small.tree, name)), np.asarray(getattr(roomy.tree, name))
        np.testing.assert_allclose(got, want[:, :6], rtol=1e-6, err_msg=name)
        assert (want[:, 6:] == (-1 if name in ("parents", "action_from_parent",
                                               "children_index") else 0)).all(), name
    tree = jax.tree.map(np.asarray, small.tree)
    for game in range(GAMES):  # every node its parent's child, with the visits its edge counts
        for node in range(1, 6):
            parent, action = tree.parents[game, node], tree.action_from_parent[game, node]
            assert tree.children_index[game, parent, action] == node
            assert tree.children_visits[game, parent, action] == tree.node_visits[game, node]
    assert np.asarray(states.legal_action_mask)[np.arange(GAMES), finish(small).action].all()


def test_the_engine_checks_its_static_arguments():
    env, apply, variables = _network("tic_tac_toe")
    engine = make_search_engine(env, apply, PUCT)
    with pytest.raises(ValueError, match="capacity"):
        engine.start(variables, KEY, _positions(env, GAMES, 2), capacity=1,
                     planned_simulations=4)
