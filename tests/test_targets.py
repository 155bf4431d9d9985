"""Value targets and chunk carry-over: hand-made trajectories, every position emitted once."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config

from azjax import envs
from azjax.core.network import init_network, make_network
from azjax.core.search import make_search
from azjax.core.selfplay import init_selfplay, make_selfplay
from azjax.core.targets import StepRecord, emit_positions, material_targets, value_targets


def _records(player, done, rewards0, *, truncated=None, in_opening=None, valid=None,
             search_value=None, material=None):
    """StepRecord [T, B] from [T, B] lists; rewards0 is player 0's reward at each step;
    material, if given, [T, B, 2] each player's material after the step."""
    player = jnp.array(player, jnp.int32)
    shape = player.shape
    r0 = jnp.array(rewards0, jnp.float32)
    return StepRecord(
        observation=jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(*shape, 1),
        policy=jnp.ones((*shape, 2), jnp.float32) / 2,
        search_value=(jnp.zeros(shape, jnp.float32) if search_value is None
                      else jnp.array(search_value, jnp.float32)),
        player=player,
        in_opening=jnp.zeros(shape, bool) if in_opening is None else jnp.array(in_opening),
        rewards=jnp.stack([r0, -r0], axis=-1),
        done=jnp.array(done, bool),
        truncated=jnp.zeros(shape, bool) if truncated is None else jnp.array(truncated),
        valid=jnp.ones(shape, bool) if valid is None else jnp.array(valid),
        material=None if material is None else jnp.array(material, jnp.float32),
    )


def test_value_targets_by_hand():
    # One game slot (B=1): game A = 3 steps won by player 0; game B = 2 steps, player 1 moves
    # twice in a row (no alternation) and wins; then a game still running.
    records = _records(
        player=[[0], [1], [0], [1], [1], [0]],
        done=[[False], [False], [True], [False], [True], [False]],
        rewards0=[[0], [0], [1], [0], [-1], [0]],
    )
    z, finished, known = value_targets(records)
    np.testing.assert_array_equal(z[:, 0], [1, -1, 1, 1, 1, 0])
    np.testing.assert_array_equal(finished[:, 0], [1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(known[:, 0], [1, 1, 1, 1, 1, 0])


def test_material_targets_by_hand():
    # The games of test_value_targets_by_hand, with each player's material after every step:
    # a position's target is its game's final (mine - theirs), whoever moves twice in a row.
    material = [[[1.0, 1.0]], [[1.0, 0.9]], [[1.0, 0.5]],  # game A ends at (1.0, 0.5)
                [[0.9, 1.0]], [[0.2, 1.0]],  # game B ends at (0.2, 1.0)
                [[1.0, 1.0]]]  # the running game: no target yet
    records = _records(
        player=[[0], [1], [0], [1], [1], [0]],
        done=[[False], [False], [True], [False], [True], [False]],
        rewards0=[[0], [0], [1], [0], [-1], [0]],
        material=material,
    )
    np.testing.assert_allclose(material_targets(records)[:, 0], [0.5, -0.5, 0.5, 0.8, 0.8, 0.0])
    z, _, _ = value_targets(records)  # recording material changes no value target
    np.testing.assert_array_equal(z[:, 0], [1, -1, 1, 1, 1, 0])
    # emit_positions hands them out under the value mask's positions, game by game.
    empty = _records(player=[[0]] * 6, done=[[False]] * 6, rewards0=[[0]] * 6,
                     valid=[[False]] * 6, material=[[[0.0, 0.0]]] * 6)
    positions, emit, _ = emit_positions(empty, jnp.zeros((6, 1), bool), records)
    np.testing.assert_allclose(np.asarray(positions.material)[6:][np.asarray(emit)[6:]],
                               [0.5, -0.5, 0.5, 0.8, 0.8])
    with pytest.raises(ValueError, match="carry no material"):
        material_targets(records.replace(material=None))


def test_truncated_games_have_no_value_target():
    records = _records(player=[[0], [1]], done=[[False], [True]], rewards0=[[0], [0]],
                       truncated=[[False], [True]])
    z, finished, known = value_targets(records)
    assert finished.all() and not known.any()


def test_a_game_spanning_two_chunks_is_emitted_once_with_its_result():
    # B=2 slots, T=3. Slot 0: a game starts in chunk 1 at t=1 and ends in chunk 2 at t=1
    # (player 1 wins). Slot 1: a game ends inside chunk 1 (emitted then), a new one ends
    # inside chunk 2 as a draw.
    empty = _records(player=[[0, 0]] * 3, done=[[False, False]] * 3, rewards0=[[0, 0]] * 3,
                     valid=[[False, False]] * 3)
    chunk1 = _records(
        player=[[1, 0], [0, 1], [1, 0]],
        done=[[True, False], [False, True], [False, False]],
        rewards0=[[1, 0], [0, -1], [0, 0]],
    )
    positions, emit, emitted1 = emit_positions(empty, jnp.zeros((3, 2), bool), chunk1)
    emit = np.asarray(emit).reshape(2, 6).T  # game by game
    # Window = [empty(3); chunk1(3)]: only finished games of chunk 1 are emitted.
    np.testing.assert_array_equal(emit[3:], [[1, 1], [0, 1], [0, 0]])
    assert not emit[:3].any()
    z = np.asarray(positions.value).reshape(2, 6).T
    assert z[3, 0] == -1  # player 1 to move, player 0 won
    np.testing.assert_array_equal(z[3:5, 1], [-1, 1])  # slot 1: player 1 won

    chunk2 = _records(
        player=[[1, 0], [0, 1], [1, 0]],
        done=[[False, False], [True, False], [False, True]],
        rewards0=[[0, 0], [-1, 0], [0, 0]],
    )
    positions, emit, emitted2 = emit_positions(chunk1, emitted1, chunk2)
    emit = np.asarray(emit).reshape(2, 6).T  # game by game
    z = np.asarray(positions.value).reshape(2, 6).T
    # Slot 0: chunk-1 steps 1-2 and chunk-2 steps 0-1 form one game won by player 1.
    np.testing.assert_array_equal(emit[:, 0], [0, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(z[1:5, 0], [-1, 1, 1, -1])
    # Slot 1: chunk-1 step 2 + chunk-2 steps 0-2 form a drawn game.
    np.testing.assert_array_equal(emit[:, 1], [0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(z[2:, 1], [0, 0, 0, 0])
    np.testing.assert_array_equal(emitted2, [[1, 1], [1, 1], [0, 1]])


def test_search_value_weight_mixes_outcome_and_search_value():
    # Player 0 wins; the search valued the three positions 0.5, -0.25 and 1 for their movers.
    records = _records(player=[[0], [1], [0]], done=[[False], [False], [True]],
                       rewards0=[[0], [0], [1]], search_value=[[0.5], [-0.25], [1.0]])
    empty = jax.tree.map(jnp.zeros_like, records)
    for weight, expected in [(0.0, [1, -1, 1]), (0.5, [0.75, -0.625, 1.0]),
                             (1.0, [0.5, -0.25, 1.0])]:
        positions, _, _ = emit_positions(empty, jnp.zeros((3, 1), bool), records, weight)
        np.testing.assert_allclose(np.asarray(positions.value)[3:], expected)


def test_opening_positions_have_no_value_loss():
    records = _records(player=[[0], [1], [0]], done=[[False], [False], [True]],
                       rewards0=[[0], [0], [1]], in_opening=[[True], [True], [False]])
    empty = jax.tree.map(jnp.zeros_like, records)
    positions, emit, _ = emit_positions(empty, jnp.zeros((3, 1), bool), records)
    np.testing.assert_array_equal(np.asarray(positions.value_mask)[3:], [False, False, True])


def test_selfplay_emits_every_position_exactly_once():
    """Each played position, named by (chunk, step, game) through the emit window's layout, is
    emitted once across many chunks, with the observation and policy recorded at that step."""
    config = tiny_config()
    env = envs.make(config.game)
    _, apply = make_network(config.network, env.num_actions)
    selfplay = jax.jit(make_selfplay(env, make_search(env, apply, config.search),
                                     config.selfplay))
    variables = init_network(config.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    state = init_selfplay(env, config.selfplay, jax.random.PRNGKey(1))
    played = emitted = 0
    seen = set()
    for chunk in range(6):
        previous = state
        state, positions, emit, stats = selfplay(variables, jax.random.PRNGKey(10 + chunk), state)
        played += state.previous.valid.size
        emit = np.asarray(emit)
        emitted += int(emit.sum())
        # Identify positions by (chunk, t, b) through the window layout: game by game, each
        # game's 2T window steps in a row.
        t_len, batch = state.previous.player.shape
        idx = np.flatnonzero(emit)
        b, window_t = np.divmod(idx, 2 * t_len)
        ids = {(chunk - 1, t, bb) if t < t_len else (chunk, t - t_len, bb)
               for t, bb in zip(window_t, b, strict=True)}
        assert not ids & seen, "a position was emitted twice"
        assert all(c >= 0 for c, _, _ in ids), "an empty window record was emitted"
        # What was emitted is what was recorded at that (chunk, step, game).
        window = jax.tree.map(lambda old, new: np.concatenate([old, new]),
                              previous.previous, state.previous)  # [2T, B]
        flat_obs = np.asarray(positions.observation).reshape(batch, 2 * t_len, -1)
        flat_policy = np.asarray(positions.policy).reshape(batch, 2 * t_len, -1)
        for t, bb in zip(window_t, b, strict=True):
            np.testing.assert_array_equal(flat_obs[bb, t],
                                          np.asarray(window.observation[t, bb]).reshape(-1))
            np.testing.assert_array_equal(flat_policy[bb, t], np.asarray(window.policy[t, bb]))
        seen |= ids
        del previous
    unfinished = int(np.sum(~np.asarray(state.previous_emitted)))
    assert emitted + unfinished == played


def test_playout_cap_randomisation_leaves_fast_steps_without_a_policy_target():
    """full_search_prob < 1: at each step the whole batch searches either fully (policy
    targets sum to 1) or fast (all-zero targets), and both kinds occur."""
    import dataclasses

    config = tiny_config()
    play = dataclasses.replace(config.selfplay, full_search_prob=0.5, fast_simulations=1)
    env = envs.make(config.game)
    _, apply = make_network(config.network, env.num_actions)
    selfplay = jax.jit(make_selfplay(env, make_search(env, apply, config.search), play))
    variables = init_network(config.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    state = init_selfplay(env, play, jax.random.PRNGKey(1))
    full_steps = fast_steps = 0
    for chunk in range(4):
        state, _, _, _ = selfplay(variables, jax.random.PRNGKey(20 + chunk), state)
        sums = np.asarray(state.previous.policy.sum(-1))  # [T, B]
        full = np.all(np.abs(sums - 1) < 1e-5, axis=1)
        fast = np.all(sums == 0, axis=1)
        assert np.all(full | fast), "a step mixed full and fast searches"
        full_steps += int(full.sum())
        fast_steps += int(fast.sum())
    assert full_steps > 0 and fast_steps > 0


def test_selfplay_with_kept_trees_counts_only_each_searchs_new_simulations():
    """selfplay.tree_reuse: searches start from the kept subtree of the move played (its root
    visits reported in `mean_kept_visits`), full and fast searches alike (playout cap: gumbel
    halves over a schedule of its own for each), and the network evaluations count each
    search's own root and simulations only."""
    import dataclasses

    from azjax.core.search import make_search_engine

    config = tiny_config()
    search = dataclasses.replace(config.search, num_simulations=8)
    play = dataclasses.replace(config.selfplay, tree_reuse=True, full_search_prob=0.5,
                               fast_simulations=2)
    env = envs.make(config.game)
    _, apply = make_network(config.network, env.num_actions)
    selfplay = jax.jit(make_selfplay(env, make_search(env, apply, search), play,
                                     engine=make_search_engine(env, apply, search)))
    variables = init_network(config.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    state = init_selfplay(env, play, jax.random.PRNGKey(1))
    kept = []
    for chunk in range(2):
        state, _, _, stats = selfplay(variables, jax.random.PRNGKey(30 + chunk), state)
        sums = np.asarray(state.previous.policy.sum(-1))  # [T, B]; fast steps: all zeros
        simulations = np.where(np.all(sums == 0, axis=1), play.fast_simulations,
                               search.num_simulations)
        assert int(stats.network_evaluations) == int(np.sum(play.batch_size * (1 + simulations)))
        np.testing.assert_allclose(sums[sums > 0], 1.0, atol=1e-5)
        kept.append(float(stats.mean_kept_visits))
    assert max(kept) > 0, "no search started from a kept tree"
    with pytest.raises(ValueError, match="tree_reuse needs a SearchEngine"):
        make_selfplay(env, make_search(env, apply, search), play)


@pytest.fixture(scope="module")
def draughts_endings_selfplay():
    """(env, play config, jitted self-play, variables): draughts self-play from random endings
    (a few pieces, so that games end, many by capture, inside short chunks), recording
    material; one compile for the tests below."""
    from azjax.config import SearchConfig, SelfPlayConfig

    env = envs.make("draughts")
    config = tiny_config(game="draughts", search=SearchConfig(num_simulations=2,
                                                              max_num_considered_actions=2))
    play = SelfPlayConfig(batch_size=8, chunk_length=16, max_game_length=16,
                          random_start_prob=1.0, random_opening_prob=0.0)
    _, apply = make_network(config.network, env.num_actions)
    selfplay = jax.jit(make_selfplay(env, make_search(env, apply, config.search), play))
    variables = init_network(config.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    return env, play, selfplay, variables


def test_random_starts_replace_the_initial_position_in_their_share_of_games(
        draughts_endings_selfplay):
    """random_start_prob: those games start from `env.random_start` (draughts: endings of at
    most 6 pieces a side) with no random opening moves, at the start and at every reset; a game
    without random starts is refused by name."""
    from azjax.config import SelfPlayConfig

    env = envs.make("draughts")
    play = SelfPlayConfig(batch_size=64, max_game_length=12, random_opening_prob=1.0,
                          random_opening_max_moves=3, random_start_prob=0.5)
    state = init_selfplay(env, play, jax.random.PRNGKey(2))
    pieces = np.array([[bin(int(w)).count("1") for w in g] for g in np.asarray(state.games.pieces)])
    ending = pieces.max(axis=1) <= 6
    opening = np.asarray(state.opening_moves)
    assert 10 < ending.sum() < 54
    assert np.all(opening[ending] == 0) and np.all(pieces[~ending] == 12)
    assert np.all((opening[~ending] >= 1) & (opening[~ending] <= 3))

    # Every game of a chunk that ends is replaced by a random ending (probability 1).
    env, play, selfplay, variables = draughts_endings_selfplay
    state = init_selfplay(env, play, jax.random.PRNGKey(3), material=True)
    state, _, _, _ = selfplay(variables, jax.random.PRNGKey(4), state)
    state, _, _, _ = selfplay(variables, jax.random.PRNGKey(5), state)
    records = state.previous
    pieces_on_board = np.asarray(records.observation[..., :4].sum(axis=(2, 3, 4)))  # [T, B]
    after_reset = np.asarray(records.done)[:-1]  # a game that ended at t starts anew at t + 1
    assert after_reset.sum() >= 4
    assert np.all(pieces_on_board[1:][after_reset] <= 12)
    assert np.all(np.asarray(records.in_opening)[1:][after_reset] == 0)

    with pytest.raises(ValueError, match="random_start_prob.*tic_tac_toe has no random start"):
        init_selfplay(envs.make("tic_tac_toe"), SelfPlayConfig(random_start_prob=0.1),
                      jax.random.PRNGKey(0))


def _material_from_observation(obs: np.ndarray) -> np.ndarray:
    """Each player's material (by player id) read off draughts planes [..., 8, 8, 7]: men and
    kings of the mover (planes 0, 1) and of the other side (2, 3), the mover's id in plane 5."""
    count = obs[..., :4].sum(axis=(-3, -2))  # [..., 4]
    mine = (count[..., 0] + 1.5 * count[..., 1]) / 12
    theirs = (count[..., 2] + 1.5 * count[..., 3]) / 12
    mover = obs[..., 0, 0, 5].round().astype(int)
    return np.where(mover[..., None] == 0, np.stack([mine, theirs], -1),
                    np.stack([theirs, mine], -1))


def test_selfplay_records_material_and_emits_each_games_final_difference(
        draughts_endings_selfplay):
    """material=True (a run with a material head): each step records both players' material
    after it, which is the board of the next position of the same game; each emitted position's
    target is its game's last recorded material, mine minus theirs."""
    env, play, selfplay, variables = draughts_endings_selfplay
    state = init_selfplay(env, play, jax.random.PRNGKey(6), material=True)
    checked = 0
    for chunk in range(3):
        previous = state.previous
        state, positions, emit, _ = selfplay(variables, jax.random.PRNGKey(30 + chunk), state)
        window = jax.tree.map(lambda old, new: np.concatenate([old, new]), previous,
                              state.previous)  # [2T, B]
        obs, done, player = (np.asarray(window.observation), np.asarray(window.done),
                             np.asarray(window.player))
        recorded = np.asarray(window.material)  # [2T, B, 2]
        valid = np.asarray(window.valid)
        # A step's material is the board of the next position in its game.
        follows = valid[:-1] & ~done[:-1]
        np.testing.assert_allclose(recorded[:-1][follows],
                                   _material_from_observation(obs[1:])[follows], atol=1e-6)
        # Each emitted position: its game's final material, from the mover's view.
        two_t, batch = player.shape
        targets = np.asarray(positions.material).reshape(batch, two_t)
        emitted = np.asarray(emit).reshape(batch, two_t)
        for b in range(batch):
            for t in np.flatnonzero(emitted[b]):
                end = t + np.argmax(done[t:, b])
                final = recorded[end, b]
                me = player[t, b]
                assert targets[b, t] == pytest.approx(final[me] - final[1 - me], abs=1e-6)
                checked += 1
    assert checked > 50
    assert np.abs(np.asarray(state.previous.material)).max() <= 1.5 + 1e-6


def test_a_learner_with_a_material_head_stores_and_trains_on_the_material_targets():
    """network.material_head end to end: the replay buffer holds a material target per
    position, the update reports its loss and moves the head's parameters."""

    from azjax.config import NetworkConfig, ReplayConfig, SearchConfig, SelfPlayConfig
    from azjax.training.trainer import Trainer

    config = tiny_config(
        game="draughts",
        network=NetworkConfig(kind="mlp", hidden=(16,), material_head=True),
        search=SearchConfig(num_simulations=2, max_num_considered_actions=2),
        selfplay=SelfPlayConfig(batch_size=8, chunk_length=16, max_game_length=16,
                                random_start_prob=1.0, random_opening_prob=0.0),
        replay=ReplayConfig(capacity=256),
    )
    trainer = Trainer(envs.make("draughts"), config)
    run = trainer.init_state(jax.random.PRNGKey(0))
    head = np.asarray(run.train.params["material_out"]["kernel"]).copy()
    for i in range(2):
        run, metrics = trainer.iteration(run, jax.random.PRNGKey(1 + i))
    stored = int(run.replay.size)
    material = np.asarray(run.replay.positions.material)[:stored]
    assert stored > 0 and np.abs(material).max() <= 1.5 + 1e-6 and np.any(material != 0)
    assert np.isfinite(metrics["loss/material"]) and metrics["loss/material"] > 0
    assert not np.array_equal(head, np.asarray(run.train.params["material_out"]["kernel"]))
