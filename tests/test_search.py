"""Search: immediate wins and blocks for both players, value signs, non-alternating turns."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy_games import RaceToThree

from azjax import envs
from azjax.config import NetworkConfig, SearchConfig
from azjax.core.network import init_network, make_network
from azjax.core.search import (
    draw_averse_value,
    make_recurrent_fn,
    make_root_fn,
    make_search,
)

TTT = envs.make("tic_tac_toe")
NET = NetworkConfig(kind="mlp", hidden=(8,))


def _uniform_variables(env):
    """A network with all-zero params: uniform prior, value 0 everywhere."""
    variables = init_network(NET, env.num_actions, env.observation_shape, jax.random.PRNGKey(0))
    return jax.tree.map(jnp.zeros_like, variables)


def _batch(env, move_lists):
    states = [envs.play_moves(env, moves) for moves in move_lists]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


@functools.cache
def _search(env, algorithm, simulations, contempt=0.0):
    config = SearchConfig(algorithm=algorithm, num_simulations=simulations, contempt=contempt,
                          max_num_considered_actions=env.num_actions,
                          qtransform="completed_by_mix_value" if algorithm == "gumbel"
                          else "by_parent_and_siblings")
    _, apply = make_network(NET, env.num_actions)
    search = make_search(env, apply, config)
    return jax.jit(functools.partial(search, noise=False))


# (moves, the move that wins or must block, who is to move). Cells 0-8 row-major.
WIN_POSITIONS = [
    ([0, 3, 1, 4], 2, 0),        # X: 0 1 _ -> 2 wins
    ([0, 3, 1, 4, 8], 5, 1),     # O: 3 4 _ -> 5 wins (X threatens 2 too)
    ([4, 0, 8, 2, 6], 1, 1),     # O: 0 _ 2 -> 1 wins
]
BLOCK_POSITIONS = [
    ([0, 4, 1], 2, 1),           # O must block X's 0 1 _ at 2
    ([4, 0, 6, 1], 2, 0),        # X must block O's 0 1 _ at 2 (X also has 2-4-6 -> wins there)
    ([0, 4, 8, 1], 7, 0),        # X must block O's 1 4 _ at 7
]


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_search_finds_immediate_wins_for_both_players(algorithm):
    moves, target, player = zip(*WIN_POSITIONS, strict=True)
    states = _batch(TTT, list(moves))
    np.testing.assert_array_equal(states.current_player, player)
    out = _search(TTT, algorithm, 64)(_uniform_variables(TTT), jax.random.PRNGKey(1), states)
    np.testing.assert_array_equal(out.action, target)
    assert np.all(np.asarray(out.value) > 0.1), out.value  # the mover is winning


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_search_blocks_immediate_losses_for_both_players(algorithm):
    moves, target, player = zip(*BLOCK_POSITIONS, strict=True)
    states = _batch(TTT, list(moves))
    np.testing.assert_array_equal(states.current_player, player)
    out = _search(TTT, algorithm, 128)(_uniform_variables(TTT), jax.random.PRNGKey(2), states)
    np.testing.assert_array_equal(out.action, target)


def test_search_value_is_negative_when_the_mover_is_lost():
    # X has a double threat (0-1-2 via 2, and 0-3-6 via 6); O to move cannot stop both.
    states = _batch(TTT, [[0, 4, 1, 8, 3]])
    out = _search(TTT, "puct", 256)(_uniform_variables(TTT), jax.random.PRNGKey(3), states)
    assert float(out.value[0]) < -0.3


def test_recurrent_fn_signs_follow_the_mover_not_alternation():
    race = RaceToThree()
    _, apply = make_network(NET, race.num_actions)
    recurrent = make_recurrent_fn(race, apply)
    variables = _uniform_variables(race)
    start = jax.tree.map(lambda x: x[None], race.init(jax.random.PRNGKey(0)))
    # Keep the move: same player, discount +1; pass: discount -1.
    out_keep, s_keep = recurrent(variables, None, jnp.array([1]), start)
    out_pass, _ = recurrent(variables, None, jnp.array([0]), start)
    assert float(out_keep.discount[0]) == 1.0 and int(s_keep.current_player[0]) == 0
    assert float(out_pass.discount[0]) == -1.0
    # From count 2, any move wins: reward +1 for the mover, discount 0, value 0.
    two = jax.tree.map(lambda x: x[None], envs.play_moves(race, [1, 1]))
    out_win, s_win = recurrent(variables, None, jnp.array([0]), two)
    assert bool(s_win.terminated[0])
    assert float(out_win.reward[0]) == 1.0 and float(out_win.discount[0]) == 0.0
    assert float(out_win.value[0]) == 0.0


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_search_keeps_the_move_when_that_wins(algorithm):
    race = RaceToThree()
    states = jax.tree.map(lambda x: x[None], envs.play_moves(race, [1]))  # count 1, player 0
    out = _search(race, algorithm, 32)(_uniform_variables(race), jax.random.PRNGKey(4), states)
    assert int(out.action[0]) == 1  # keeping the move wins; passing loses
    assert float(out.policy[0, 1]) > 0.5
    if algorithm == "puct":  # gumbel splits its visits evenly between two actions
        assert float(out.value[0]) > 0.3


def test_draw_averse_value_is_zero_sum_and_spares_decided_values():
    value = jnp.array([0.0, 0.5, -0.5, 1.0, -1.0])
    root, other = jnp.zeros(5, jnp.int32), jnp.ones(5, jnp.int32)
    mine = draw_averse_value(value, root, root, 0.2)
    np.testing.assert_allclose(mine, [-0.2, 0.4, -0.6, 1.0, -1.0], atol=1e-6)
    # The other player's value of the same position is the negation: still zero-sum.
    np.testing.assert_allclose(draw_averse_value(-value, other, root, 0.2), -mine, atol=1e-6)


# Tic-tac-toe positions every continuation of which is a draw: O to move with two empty cells
# (a finished draw two plies down), X to move with three.
DRAWN = [[0, 1, 2, 3, 5, 8, 7], [0, 1, 2, 6, 7, 8]]


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_contempt_scores_draws_against_the_root_player(algorithm):
    """With contempt c a certain draw is worth -c to whoever is to move at the root, through
    finished draws (rewards) and network values alike; without it, 0."""
    states = _batch(TTT, DRAWN)
    np.testing.assert_array_equal(states.current_player, [1, 0])
    variables = _uniform_variables(TTT)
    for contempt, expected in ((0.0, 0.0), (0.25, -0.25)):
        out = _search(TTT, algorithm, 32, contempt)(variables, jax.random.PRNGKey(6), states)
        np.testing.assert_allclose(out.value, [expected, expected], atol=1e-5)
        np.testing.assert_allclose(out.prior_value, [0.0, 0.0], atol=1e-6)  # the raw network


def test_gumbel_greedy_action_halving_plays_sequential_halvings_survivor():
    """"halving" plays mctx's own gumbel action (a most visited move); "policy" the argmax of
    the improved policy over every move. The tree is the same; on a random network the two
    rules pick different moves in some positions."""
    variables = init_network(NET, TTT.num_actions, TTT.observation_shape, jax.random.PRNGKey(3))
    _, apply = make_network(NET, TTT.num_actions)
    openings = [[a, b] for a in range(9) for b in range(9) if a != b]
    states = _batch(TTT, openings)
    outputs = {}
    for rule in ("policy", "halving"):
        config = SearchConfig(num_simulations=12, max_num_considered_actions=4,
                              greedy_action=rule)
        search = jax.jit(functools.partial(make_search(TTT, apply, config), noise=False))
        outputs[rule] = jax.tree.map(np.asarray, search(variables, jax.random.PRNGKey(0), states))
    by_policy, by_halving = outputs["policy"], outputs["halving"]
    np.testing.assert_array_equal(by_policy.visit_counts, by_halving.visit_counts)
    np.testing.assert_allclose(by_policy.policy, by_halving.policy)
    rows = np.arange(len(openings))
    np.testing.assert_array_equal(by_policy.action, by_policy.policy.argmax(-1))
    visits = by_halving.visit_counts
    assert (visits[rows, by_halving.action] == visits.max(-1)).all()
    assert (by_policy.action != by_halving.action).any()


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_prior_temperature_spreads_the_visits_of_a_peaked_prior(algorithm):
    """A prior all but certain of cell 0, values 0 everywhere: as trained (T = 1) the search's
    policy (puct: its visits; gumbel: prior logits + transformed Q) is nearly all on cell 0; at
    a high prior temperature the prior is about uniform and so is that policy."""

    def peaked(variables, obs, **kwargs):
        del variables, kwargs
        logits = jnp.zeros((obs.shape[0], TTT.num_actions)).at[:, 0].set(12.0)
        return logits, jnp.zeros(obs.shape[0])

    states = _batch(TTT, [[], [4]])
    shares = {}
    for temperature in (1.0, 100.0):
        config = SearchConfig(algorithm=algorithm, num_simulations=64,
                              prior_temperature=temperature,
                              max_num_considered_actions=TTT.num_actions)
        search = jax.jit(functools.partial(make_search(TTT, peaked, config), noise=False))
        shares[temperature] = np.asarray(search({}, jax.random.PRNGKey(0), states).policy)[:, 0]
    assert (shares[1.0] > 0.8).all(), shares
    assert (shares[100.0] < 0.3).all(), shares


def test_illegal_actions_get_no_search_weight():
    states = _batch(TTT, [[0, 4, 8, 2]])
    out = _search(TTT, "gumbel", 16)(_uniform_variables(TTT), jax.random.PRNGKey(5), states)
    policy = np.asarray(out.policy[0])
    assert np.all(policy[[0, 2, 4, 8]] == 0.0) and policy.sum() == pytest.approx(1.0, abs=1e-5)


def _stock_inputs(game, plies, num_games=16):
    """A random network, `num_games` random non-final positions after `plies` moves, and the
    search's root and recurrent function over them, for azjax's and mctx's policies alike."""
    env = envs.make(game)
    _, apply = make_network(NET, env.num_actions)
    variables = init_network(NET, env.num_actions, env.observation_shape, jax.random.PRNGKey(3))
    states = envs.random_positions(env, jax.random.PRNGKey(4), num_games, plies)
    states = jax.tree.map(lambda x: x[~(states.terminated | states.truncated)], states)
    root = make_root_fn(env, apply)(variables, states)
    return env, apply, variables, states, root, make_recurrent_fn(env, apply)


def _below_terminal(tree) -> tuple[np.ndarray, np.ndarray]:
    """Masks [B, N] of a tree's nodes: reached through a discount-0 edge, and under one."""
    parents = np.asarray(tree.parents)
    actions = np.asarray(tree.action_from_parent)
    discounts = np.asarray(tree.children_discounts)
    games = np.arange(parents.shape[0])
    terminal = np.zeros(parents.shape, bool)
    below = np.zeros(parents.shape, bool)
    for node in range(1, parents.shape[1]):  # parents always have smaller indices
        parent = np.maximum(parents[:, node], 0)
        used = parents[:, node] >= 0
        terminal[:, node] = used & (discounts[games, parent, actions[:, node]] == 0)
        below[:, node] = used & (terminal[games, parent] | below[games, parent])
    return terminal, below


def _assert_same(got, want, err_msg=""):
    """Integers and booleans equal exactly; floats to float32 rounding. The two programs compute
    the same floats but XLA may fuse them differently (the tests' compiler flags,
    `conftest.FAST_COMPILE`), which moves the last bit of a sum."""
    got, want = np.asarray(got), np.asarray(want)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


def _assert_same_root(got, want):
    """The root's statistics of two batched trees are equal (`_assert_same`)."""
    for name in ("node_visits", "node_values", "raw_values", "children_visits",
                 "children_values", "children_index", "children_rewards", "children_discounts"):
        _assert_same(np.asarray(getattr(got, name))[:, 0], np.asarray(getattr(want, name))[:, 0],
                     err_msg=name)


@pytest.mark.parametrize("game,plies,simulations,algorithm,options,has_chains", [
    # more simulations than the game has positions left: mctx grows chains under terminals
    ("tic_tac_toe", 3, 40, "gumbel", {}, True),
    ("tic_tac_toe", 2, 40, "puct", {}, True),  # puct's selection draws noise from its key
    ("tic_tac_toe", 4, 24, "puct", {"dirichlet_fraction": 0.0, "temperature": 0.5}, True),
    ("connect_four", 26, 48, "gumbel", {"gumbel_scale": 0.0}, None),  # late: wins nearby
    ("connect_four", 26, 48, "puct", {"dirichlet_alpha": 1.0}, None),
    ("draughts", 20, 24, "gumbel", {}, None),  # multi-jumps: the player to move stays
])
def test_azjax_policies_build_mctx_policies_trees_above_terminal_nodes(
        game, plies, simulations, algorithm, options, has_chains):
    """azjax's policies over its own loop against STOCK `mctx.gumbel_muzero_policy` /
    `mctx.muzero_policy` on the same inputs and key: the action, the action weights, the root
    and every node not under a terminal node match (integers exactly, floats to rounding);
    where mctx walked through a terminal node and grew a chain under it, azjax's walk stopped
    and grew none."""
    import mctx

    from azjax.core.policies import gumbel_muzero_search, muzero_search

    _, _, variables, states, root, recurrent_fn = _stock_inputs(game, plies)
    key = jax.random.PRNGKey(5)
    kwargs = dict(num_simulations=simulations, invalid_actions=~states.legal_action_mask,
                  **options)
    if algorithm == "gumbel":
        stock, ours = mctx.gumbel_muzero_policy, gumbel_muzero_search
        kwargs.update(max_num_considered_actions=4,
                      qtransform=mctx.qtransform_completed_by_mix_value)
    else:
        stock, ours = mctx.muzero_policy, muzero_search
        kwargs.update(qtransform=mctx.qtransform_by_parent_and_siblings)
    want = jax.jit(lambda: stock(variables, key, root, recurrent_fn, **kwargs))()
    got = jax.jit(lambda: ours(variables, key, root, recurrent_fn, **kwargs))()
    for name in ("action", "action_weights"):
        _assert_same(getattr(got, name), getattr(want, name), err_msg=name)
    _assert_same_root(got.search_tree, want.search_tree)
    terminal, below = _below_terminal(want.search_tree)
    if has_chains is not None:
        assert below.any() == has_chains
    assert not _below_terminal(got.search_tree)[1].any()
    keep = ~below
    for name in ("node_visits", "node_values", "raw_values", "parents", "action_from_parent"):
        _assert_same(np.asarray(getattr(got.search_tree, name))[keep],
                     np.asarray(getattr(want.search_tree, name))[keep], err_msg=name)
    inner = ~below & ~terminal  # a terminal node's own children are mctx's chain
    for name in ("children_index", "children_visits", "children_values", "children_rewards",
                 "children_discounts", "children_prior_logits"):
        _assert_same(np.asarray(getattr(got.search_tree, name))[inner],
                     np.asarray(getattr(want.search_tree, name))[inner], err_msg=name)
    assert int(want.search_tree.node_visits[:, 0].min()) == simulations + 1
    # Deep enough for the walk and the backup to matter: a non-root node visited repeatedly.
    assert int(want.search_tree.node_visits[:, 1:].max()) > 1


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
@pytest.mark.parametrize("noise", [True, False])
def test_make_search_returns_stock_mctx_policies_results(algorithm, noise):
    """`make_search`'s output against the stock mctx policy called with the same config's
    arguments, in late connect-four positions: action, policy, root value and visits equal."""
    import mctx

    from azjax.core.search import qtransform_from_name

    env, apply, variables, states, root, recurrent_fn = _stock_inputs("connect_four", 24)
    config = SearchConfig(algorithm=algorithm, num_simulations=32, max_num_considered_actions=5,
                          qtransform="completed_by_mix_value" if algorithm == "gumbel"
                          else "by_parent_and_siblings")
    key = jax.random.PRNGKey(7)
    got = jax.jit(functools.partial(make_search(env, apply, config), noise=noise))(
        variables, key, states)
    kwargs = dict(num_simulations=32, invalid_actions=~states.legal_action_mask,
                  qtransform=qtransform_from_name(config.qtransform))
    if algorithm == "gumbel":
        want = jax.jit(lambda: mctx.gumbel_muzero_policy(
            variables, key, root, recurrent_fn, max_num_considered_actions=5,
            gumbel_scale=config.gumbel_scale if noise else 0.0, **kwargs))()
    else:
        want = jax.jit(lambda: mctx.muzero_policy(
            variables, key, root, recurrent_fn, dirichlet_alpha=config.dirichlet_alpha,
            dirichlet_fraction=config.dirichlet_fraction if noise else 0.0,
            pb_c_init=config.pb_c_init, pb_c_base=config.pb_c_base, **kwargs))()
    summary = want.search_tree.summary()
    _assert_same(got.policy, want.action_weights)
    _assert_same(got.value, summary.value)
    _assert_same(got.visit_counts, summary.visit_counts)
    _assert_same(got.prior_value, root.value)
    action = want.action if noise else jnp.argmax(want.action_weights, axis=-1)
    np.testing.assert_array_equal(got.action, action)
    assert (np.asarray(got.visit_counts).sum(-1) == 32).all()


_DESCRIBE_MCTX = """
import json, sys, types
def describe(obj):
    code = getattr(obj, "__code__", None)
    wrapped = getattr(obj, "__wrapped__", None)
    inner = getattr(wrapped, "__code__", None)
    return [type(obj).__name__, getattr(obj, "__module__", None),
            getattr(obj, "__qualname__", None),
            code and f"{code.co_filename}:{code.co_firstlineno}",
            inner and f"{inner.co_filename}:{inner.co_firstlineno}"]
def snapshot():
    return {f"{name}.{attr}": (id(value), describe(value))
            for name, module in sorted(sys.modules.items())
            if name.split(".")[0] == "mctx" and isinstance(module, types.ModuleType)
            for attr, value in sorted(vars(module).items()) if not attr.startswith("__")}
import mctx, mctx._src.search, mctx._src.action_selection
before = snapshot()
if sys.argv[1] == "azjax":
    import jax, jax.numpy as jnp
    import azjax
    from azjax import envs
    from azjax.config import NetworkConfig, SearchConfig
    from azjax.core.network import init_network
    from azjax.core.search import make_network_search
    env, net = envs.make("tic_tac_toe"), NetworkConfig(kind="mlp", hidden=(4,))
    variables = init_network(net, 9, env.observation_shape, jax.random.PRNGKey(0))
    states = jax.tree.map(lambda x: x[None], env.init(jax.random.PRNGKey(0)))
    for algorithm in ("gumbel", "puct"):
        search = make_network_search(env, net, SearchConfig(algorithm=algorithm,
                                                            num_simulations=4))
        jax.block_until_ready(jax.jit(search)(variables, jax.random.PRNGKey(1), states))
after = snapshot()
print(json.dumps({"before": before, "after": after}))
"""


def test_azjax_leaves_mctx_as_installed():
    """`import azjax` and running its searches change no attribute of any mctx module: the
    same objects before and after in one process, and the same functions (module, name,
    code) as in an interpreter that never imported azjax."""
    import json
    import subprocess
    import sys

    def run(mode):
        done = subprocess.run([sys.executable, "-c", _DESCRIBE_MCTX, mode], check=True,
                              capture_output=True, text=True)
        return json.loads(done.stdout.splitlines()[-1])

    fresh, used = run("mctx"), run("azjax")
    assert "mctx._src.search.simulate" in fresh["before"]
    assert "mctx._src.action_selection.switching_action_selection_wrapper" in fresh["before"]
    # In one process: the very same objects (ids) before and after azjax ran.
    changed = sorted(name for name in set(used["before"]) | set(used["after"])
                     if used["before"].get(name, [None])[0] != used["after"].get(name, [None])[0])
    assert changed == [], changed
    # Against a fresh interpreter: the same functions and classes under every name.
    def described(snapshot):
        return {name: value[1] for name, value in snapshot.items()}

    fresh_names, used_names = described(fresh["after"]), described(used["after"])
    for name in ("mctx._src.search.simulate", "mctx._src.search.backward",
                 "mctx._src.action_selection.switching_action_selection_wrapper"):
        assert used_names[name] == fresh_names[name], name
        assert used_names[name][1].startswith("mctx"), used_names[name]
    assert used_names == fresh_names
