"""Auxiliary targets and heads: the next position's policy and the short-horizon value, from
hand-made step records against a plain-Python reference; symmetry augmentation; nothing
changes with the heads off; a tiny run whose new losses fall."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from azjax import envs
from azjax.config import ConfigError, NetworkConfig, ReplayConfig, SelfPlayConfig, TrainConfig
from azjax.core.learner import Learner, _augment
from azjax.core.losses import alphazero_loss
from azjax.core.targets import (
    AuxiliaryTargets,
    StepRecord,
    emit_positions,
    reply_policy_targets,
    short_value_targets,
)
from azjax.core.types import Positions

ACTIONS = 3


def _chunk(player, done, rewards0, policy, search_value, *, truncated=None, valid=True):
    """StepRecord [T, B] from [T, B] lists (policy [T, B, A]); rewards0 is player 0's reward."""
    player = np.array(player, np.int32)
    r0 = np.array(rewards0, np.float32)
    return StepRecord(
        observation=jnp.zeros((*player.shape, 1), jnp.float32),
        policy=jnp.array(policy, jnp.float32),
        search_value=jnp.array(search_value, jnp.float32),
        player=jnp.array(player),
        in_opening=jnp.zeros(player.shape, bool),
        rewards=jnp.stack([r0, -r0], axis=-1),
        done=jnp.array(done, bool),
        truncated=jnp.zeros(player.shape, bool) if truncated is None else jnp.array(truncated),
        valid=jnp.full(player.shape, valid),
    )


def _two_chunks():
    """Two chunks of T = 4 steps, B = 2 slots, random policies and search values.

    Slot 0: game A (t 0-1, player 0 wins), then game B from chunk 1's t 2 to chunk 2's t 1
    across the boundary, in which player 1 moves twice in a row (t 3 and chunk 2's t 0) and
    wins, its chunk-2 t 0 searched fast (no policy target); then game C, still running.
    Slot 1: game D from chunk 1's t 0, truncated at chunk 2's t 0; game E (t 1-3, player 0
    wins, starting with player 1 to move).
    """
    rng = np.random.default_rng(0)
    policy = rng.dirichlet(np.ones(ACTIONS), size=(8, 2)).astype(np.float32)
    policy[4, 0] = 0.0  # a fast search: no policy target
    q = rng.uniform(-1, 1, size=(8, 2)).astype(np.float32)
    player = [[0, 0], [1, 1], [0, 0], [1, 1],  # chunk 1
              [1, 0], [0, 1], [0, 0], [1, 1]]  # chunk 2
    done = [[0, 0], [1, 0], [0, 0], [0, 0],
            [0, 1], [1, 0], [0, 0], [0, 1]]
    rewards0 = [[0, 0], [1, 0], [0, 0], [0, 0],
                [0, 0], [-1, 0], [0, 0], [0, 1]]
    truncated = np.zeros((8, 2), bool)
    truncated[4, 1] = True
    first = _chunk(player[:4], done[:4], rewards0[:4], policy[:4], q[:4],
                   truncated=truncated[:4])
    second = _chunk(player[4:], done[4:], rewards0[4:], policy[4:], q[4:],
                    truncated=truncated[4:])
    return first, second


def _reference(window: StepRecord, horizon: float):
    """Plain-Python targets over a window [2T, B]: for each (t, b) whose game ends in the
    window, (the next position's policy or zeros, the short value as an explicit weighted
    sum over the game's remaining positions and its result)."""
    player, done = np.asarray(window.player), np.asarray(window.done)
    policy, q = np.asarray(window.policy), np.asarray(window.search_value)
    reward0 = np.asarray(window.rewards)[..., 0]
    steps, batch = player.shape
    keep = 1.0 - 1.0 / horizon
    out = {}
    for b in range(batch):
        for t in range(steps):
            ends = [e for e in range(t, steps) if done[e, b]]
            if not ends:
                continue
            end = ends[0]
            reply = np.zeros(ACTIONS) if done[t, b] else policy[t + 1, b]
            me = player[t, b]
            short = 0.0
            for k in range(end - t + 1):
                sign = 1.0 if player[t + k, b] == me else -1.0
                short += (1.0 / horizon) * keep ** k * sign * q[t + k, b]
            z = reward0[end, b] if me == 0 else -reward0[end, b]
            short += keep ** (end - t + 1) * z
            out[t, b] = (reply, short)
    return out


@pytest.mark.parametrize("horizon", [1.0, 2.5, 6.0])
def test_targets_match_a_plain_python_reference_across_two_chunks(horizon):
    first, second = _two_chunks()
    empty = jax.tree.map(jnp.zeros_like, first)
    targets = AuxiliaryTargets(reply_policy=True, short_value_horizon=horizon)
    checked = set()
    emitted = jnp.zeros((4, 2), bool)
    for chunk, (previous, current) in enumerate([(empty, first), (first, second)]):
        positions, emit, emitted = emit_positions(previous, emitted, current, auxiliary=targets)
        window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), previous, current)
        reference = _reference(window, horizon)
        emit = np.asarray(emit).reshape(2, 8)  # game by game
        reply = np.asarray(positions.reply_policy).reshape(2, 8, ACTIONS)
        short = np.asarray(positions.short_value).reshape(2, 8)
        mask = np.asarray(positions.value_mask).reshape(2, 8)
        for b, t in zip(*np.nonzero(emit), strict=True):
            expected_reply, expected_short = reference[t, b]
            np.testing.assert_allclose(reply[b, t], expected_reply, atol=1e-6)
            if mask[b, t]:
                assert short[b, t] == pytest.approx(expected_short, abs=1e-5)
            checked.add((chunk, int(b), int(t)))
    # Slot 0: game A in chunk 1; game B, chunk 1's t 2-3 (window 2-3) and chunk 2's t 0-1
    # (window 4-5), in chunk 2. Slot 1: game D (chunk 1's t 0-3, chunk 2's t 0) and game E.
    assert checked == {(0, 0, 4), (0, 0, 5), (1, 0, 2), (1, 0, 3), (1, 0, 4), (1, 0, 5),
                       (1, 1, 0), (1, 1, 1), (1, 1, 2), (1, 1, 3), (1, 1, 4),
                       (1, 1, 5), (1, 1, 6), (1, 1, 7)}
    # The game ending at a position, and a fast search next, leave no reply target; the
    # truncated game D has no value (nor short-value) target.
    window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), first, second)
    reply = np.asarray(reply_policy_targets(window))
    assert not reply[1, 0].any() and not reply[3, 0].any() and not reply[5, 0].any()
    assert np.allclose(reply[2, 0].sum(), 1.0)
    assert not np.asarray(positions.value_mask).reshape(2, 8)[1, :5].any()


def test_the_short_value_follows_whose_move_it_is_without_assuming_alternation():
    # One game: player 0, 1, 1 to move, player 1 wins. Horizon 2: weights 1/2, 1/4, 1/8 and
    # 1/8 on the result; player 1's positions count against player 0 at t 0.
    records = _chunk([[0], [1], [1]], [[0], [0], [1]], [[0], [0], [-1]],
                     np.full((3, 1, ACTIONS), 1 / ACTIONS), [[0.2], [0.4], [0.8]])
    short = np.asarray(short_value_targets(records, 2.0))[:, 0]
    expected_t2 = 0.8 / 2 + 1.0 / 2  # its own value, then player 1's win
    expected_t1 = 0.4 / 2 + expected_t2 / 2  # the same player moves next: no sign change
    expected_t0 = 0.2 / 2 - expected_t1 / 2
    np.testing.assert_allclose(short, [expected_t0, expected_t1, expected_t2], atol=1e-6)


def test_augmentation_turns_the_reply_policy_with_its_positions_symmetry():
    """Each sample's observation, policy and reply policy come out of the same one of the
    game's symmetries; with no reply policy the same draws give the same observation and
    policy."""
    env = envs.make("tic_tac_toe")
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    obs = jax.random.uniform(keys[0], (32, *env.observation_shape))  # no symmetric copies
    policy = jax.random.dirichlet(keys[1], jnp.ones(env.num_actions), (32,))
    reply = jax.random.dirichlet(keys[2], jnp.ones(env.num_actions), (32,))
    batch = Positions(observation=obs, policy=policy, value=jnp.zeros(32),
                      value_mask=jnp.ones(32, bool), reply_policy=reply)
    out = _augment(env, jax.random.PRNGKey(1), batch)
    used = set()
    for i in range(32):
        copies, policies = env.symmetries(obs[i], policy[i])
        _, replies = env.symmetries(obs[i], reply[i])
        k = [j for j in range(len(copies)) if np.array_equal(copies[j], out.observation[i])]
        assert len(k) == 1
        np.testing.assert_array_equal(out.policy[i], policies[k[0]])
        np.testing.assert_array_equal(out.reply_policy[i], replies[k[0]])
        used.add(k[0])
    assert len(used) > 3
    plain = _augment(env, jax.random.PRNGKey(1), batch.replace(reply_policy=None))
    np.testing.assert_array_equal(plain.observation, out.observation)
    np.testing.assert_array_equal(plain.policy, out.policy)


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", "draughts"])
def test_a_symmetry_permutes_the_next_positions_moves_as_this_ones(game):
    """What `_augment` relies on: the action permutation of each symmetry is the same at a
    position and at the next one, so the reply policy, a policy over the next position's
    moves, turns with the current position's symmetry."""
    env = envs.make(game)
    state = env.init(jax.random.PRNGKey(0))
    ids = jnp.arange(env.num_actions, dtype=jnp.float32)
    for _ in range(3):
        action = jnp.argmax(state.legal_action_mask)
        after = env.step(state, action)
        here = env.symmetries(env.observe(state), ids)[1]
        there = env.symmetries(env.observe(after), ids)[1]
        np.testing.assert_array_equal(here, there)
        state = after


def test_heads_add_parameters_beside_an_unchanged_tree_and_leave_the_loss_alone():
    env = envs.make("tic_tac_toe")
    plain = NetworkConfig(kind="resnet", channels=4, blocks=1)
    both = dataclasses.replace(plain, reply_policy_head=True, short_value_head=True)
    key = jax.random.PRNGKey(0)
    params = Learner(env, tiny_config(network=plain)).initial_params(key)
    with_heads = Learner(env, tiny_config(network=both)).initial_params(key)
    assert set(with_heads) == set(params) | {"reply_policy_head", "short_value_head"}
    jax.tree.map(np.testing.assert_array_equal, params,
                 {name: with_heads[name] for name in params})

    from azjax.core.network import make_network

    k_obs, k_pol = jax.random.split(jax.random.PRNGKey(1))
    obs = jax.random.bernoulli(k_obs, 0.3, (6, *env.observation_shape)).astype(jnp.float32)
    policy = jax.random.dirichlet(k_pol, jnp.ones(env.num_actions), (6,))
    batch = Positions(observation=obs, policy=policy, value=jnp.linspace(-1, 1, 6),
                      value_mask=jnp.array([1, 1, 0, 1, 1, 1], bool))
    _, apply_plain = make_network(plain, env.num_actions)
    _, apply_both = make_network(both, env.num_actions)
    grad = jax.jit(jax.value_and_grad(alphazero_loss, has_aux=True), static_argnums=1)
    (loss, metrics), grads = grad(params, apply_plain, batch)
    (loss_both, metrics_both), grads_both = grad(with_heads, apply_both, batch)
    assert float(loss) == float(loss_both) and metrics.keys() == metrics_both.keys()
    jax.tree.map(np.testing.assert_array_equal, grads,
                 {name: grads_both[name] for name in grads})
    # With targets the terms join the metrics; weighted 0 they leave the loss as it was.
    aux = batch.replace(reply_policy=jnp.roll(policy, 1, axis=0), short_value=batch.value / 2)
    (loss_zero, metrics_aux), _ = grad(with_heads, apply_both, aux)
    assert float(loss_zero) == float(loss)
    assert metrics_aux["loss/reply_policy"] > 0 and metrics_aux["loss/short_value"] > 0


def test_heads_off_the_run_state_has_no_auxiliary_leaves_and_heads_on_play_the_same_games():
    """The auxiliary targets are read off the records: self-play with the heads draws and
    plays exactly as without them, and its buffer holds the same positions besides."""
    off = tiny_config()
    on = tiny_config(network=dataclasses.replace(off.network, reply_policy_head=True,
                                                 short_value_head=True))
    env = envs.make(off.game)
    plain, aux = Learner(env, off), Learner(env, on)
    run_plain, run_aux = (learner.init_state(jax.random.PRNGKey(0)) for learner in (plain, aux))
    assert run_plain.replay.positions.reply_policy is None
    assert run_plain.replay.positions.short_value is None
    key = jax.random.PRNGKey(3)
    run_plain, _ = plain.selfplay_step(run_plain, key)
    run_aux, _ = aux.selfplay_step(run_aux, key)
    jax.tree.map(np.testing.assert_array_equal, run_plain.selfplay, run_aux.selfplay)
    jax.tree.map(np.testing.assert_array_equal, run_plain.replay.positions,
                 run_aux.replay.positions.replace(reply_policy=None, short_value=None))
    size = int(run_aux.replay.size)
    reply_sums = np.asarray(run_aux.replay.positions.reply_policy.sum(-1))[:size]
    assert size > 0 and np.all((np.abs(reply_sums - 1) < 1e-5) | (reply_sums == 0))
    assert 0 < np.sum(reply_sums == 0) < size  # each finished game's last position has none
    assert np.abs(np.asarray(run_aux.replay.positions.short_value)).max() <= 1.0 + 1e-6


def test_a_tiny_run_with_both_heads_lowers_their_losses():
    config = tiny_config(
        network=NetworkConfig(kind="mlp", hidden=(64,), reply_policy_head=True,
                              short_value_head=True),
        selfplay=SelfPlayConfig(batch_size=16, temperature_moves=9, short_value_horizon=3.0),
        replay=ReplayConfig(capacity=1024),
        train=TrainConfig(batch_size=64, updates_per_iteration=32, learning_rate=3e-3))
    learner = Learner(envs.make(config.game), config)
    run = learner.init_state(jax.random.PRNGKey(0))
    start = jax.device_get(run.train.params)  # the state is donated to each step
    for i in range(8):
        run, metrics = learner.iteration(run, jax.random.PRNGKey(10 + i))
        assert np.isfinite([metrics["loss/reply_policy"], metrics["loss/short_value"]]).all()
    size = int(run.replay.size)
    stored = jax.tree.map(lambda x: x[:size], run.replay.positions)

    def losses(params):
        _, metrics = alphazero_loss(params, learner.apply_fn, stored)
        return float(metrics["loss/reply_policy"]), float(metrics["loss/short_value"])

    (reply_before, short_before), (reply_after, short_after) = losses(start), losses(
        run.train.params)
    # The reply's floor is well above 0 (the move in between is sampled: the target mixes the
    # replies to every move the search may play), the short value's near it.
    assert reply_after < 0.85 * reply_before
    assert short_after < 0.5 * short_before


def test_config_refuses_an_untrained_head_and_a_horizon_below_one():
    with pytest.raises(ConfigError, match="train.reply_policy_loss_weight"):
        tiny_config(network=NetworkConfig(kind="mlp", reply_policy_head=True),
                    train=TrainConfig(reply_policy_loss_weight=0.0))
    with pytest.raises(ConfigError, match="train.short_value_loss_weight"):
        tiny_config(network=NetworkConfig(kind="mlp", short_value_head=True),
                    train=TrainConfig(short_value_loss_weight=0.0))
    with pytest.raises(ConfigError, match="selfplay.short_value_horizon"):
        tiny_config(selfplay=SelfPlayConfig(short_value_horizon=0.5))
    targets = AuxiliaryTargets.from_config(tiny_config(
        network=NetworkConfig(kind="mlp", short_value_head=True),
        selfplay=SelfPlayConfig(short_value_horizon=4.0)))
    assert targets == AuxiliaryTargets(reply_policy=False, short_value_horizon=4.0)
    assert AuxiliaryTargets.from_config(tiny_config()) == AuxiliaryTargets()
