"""`check_env(env)`: the API contract every game must pass (run by the tests over every game)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.core import Env

__all__ = ["check_env"]

_BASE_FIELDS = {
    "current_player": ((), jnp.int32),
    "rewards": ((2,), jnp.float32),
    "terminated": ((), jnp.bool_),
    "truncated": ((), jnp.bool_),
    "step_count": ((), jnp.int32),
}


def _fail(env: Env, message: str) -> AssertionError:
    return AssertionError(f"{env.name}: {message}")


def _check_fields(env: Env, state, batch_shape: tuple[int, ...] = ()) -> None:
    expected = dict(_BASE_FIELDS, legal_action_mask=((env.num_actions,), jnp.bool_))
    for field, (shape, dtype) in expected.items():
        value = getattr(state, field, None)
        if value is None:
            raise _fail(env, f"State has no field {field!r}")
        if value.shape != batch_shape + shape or value.dtype != dtype:
            raise _fail(env, f"{field} is {value.dtype}{list(value.shape)}, "
                             f"expected {jnp.dtype(dtype)}{list(batch_shape + shape)}")


def _assert_trees_equal(env: Env, a, b, what: str) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if not np.array_equal(np.asarray(x), np.asarray(y)):
            raise _fail(env, f"{what} differ")


def _check_forfeit(env: Env, step, state, action: int) -> None:
    lost = step(state, jnp.int32(action))
    mover = int(state.current_player)
    rewards = np.asarray(lost.rewards)
    if not (bool(lost.terminated) and rewards[mover] == -1.0 and rewards[1 - mover] == 1.0):
        raise _fail(env, f"an illegal action ({action}) must end the game as a loss for the "
                         "mover")


def check_env(env: Env, *, num_games: int = 16, max_steps: int = 1000, seed: int = 0) -> None:
    """Raises AssertionError naming the first broken rule of the contract.

    Checks static attributes, field dtypes and shapes, observation shape and dtype, symmetries'
    shapes (each copy's policy a permutation of the actions), random play of `num_games` games
    to the end (rewards zero-sum and only on the final step, all-True mask at terminal states,
    a no-op step after the end), illegal moves as a loss for the mover, jit == no-jit, one game
    == a vmapped batch, and the notation round trip.
    """
    if not isinstance(env.name, str) or env.num_players != 2:
        raise _fail(env, "needs a string name and num_players == 2")
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    jitted_step = jax.jit(env.step)  # made once: each new jax.jit wrapper would compile again

    state = env.init(key)
    _check_fields(env, state)
    if bool(state.terminated) or not bool(np.any(state.legal_action_mask)):
        raise _fail(env, "the initial state must be live with a legal move")
    obs = env.observe(state)
    if obs.shape != tuple(env.observation_shape) or obs.dtype != jnp.float32:
        raise _fail(env, f"observe gives {obs.dtype}{list(obs.shape)}, "
                         f"expected float32{list(env.observation_shape)}")
    sym_obs, sym_pol = env.symmetries(obs, jnp.arange(env.num_actions, dtype=jnp.float32))
    if sym_obs.shape[1:] != obs.shape or sym_pol.shape[1:] != (env.num_actions,):
        raise _fail(env, "symmetries must return ([S, *obs], [S, A])")
    sym_obs, sym_pol = np.asarray(sym_obs), np.asarray(sym_pol)  # host indexing: no compiles
    identity = np.arange(env.num_actions)
    if not (np.array_equal(sym_obs[0], obs) and np.array_equal(sym_pol[0], identity)):
        raise _fail(env, "symmetry 0 must be the identity")
    if not all(np.array_equal(np.sort(copy), identity) for copy in sym_pol):
        raise _fail(env, "symmetries must permute the policy's actions")
    if not isinstance(env.render(state), str):
        raise _fail(env, "render must return a str")
    for action in range(env.num_actions):
        if env.str_to_action(env.action_to_str(action)) != action:
            raise _fail(env, f"notation round trip fails for action {action}")

    # Illegal action: the mover loses (here out of range or masked at the start; below, the
    # first masked-out action met in a live state during random play).
    illegal = np.flatnonzero(~np.asarray(state.legal_action_mask))
    bad_action = int(illegal[0]) if illegal.size else env.num_actions  # out of range otherwise
    _check_forfeit(env, jitted_step, state, bad_action)

    # Random play of a batch to the end, one jitted vmapped step.
    batch_step = jax.jit(jax.vmap(env.step))
    batch_observe = jax.jit(jax.vmap(env.observe))
    states = jax.vmap(env.init)(jax.random.split(key, num_games))
    _check_fields(env, states, (num_games,))
    history = []
    masked_probe = None  # (a live state, an action its mask rules out)
    for _ in range(max_steps):
        done_before = np.asarray(states.terminated | states.truncated)
        if done_before.all():
            break
        masks = np.asarray(states.legal_action_mask)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks], dtype=np.int32)
        new_states = batch_step(states, jnp.asarray(actions))
        _check_fields(env, new_states, (num_games,))
        history.append((states, actions))
        if masked_probe is None:
            live_masked = np.flatnonzero(~done_before & ~masks.all(-1))
            if live_masked.size:
                game = int(live_masked[0])
                one_game = jax.tree.map(lambda x, g=game: jnp.asarray(np.asarray(x)[g]), states)
                masked_probe = (one_game, int(np.flatnonzero(~masks[game])[0]))
        rewards = np.asarray(new_states.rewards)
        done = np.asarray(new_states.terminated | new_states.truncated)
        if not np.allclose(rewards.sum(-1), 0.0):
            raise _fail(env, "rewards must be zero-sum")
        if np.any(rewards[~done | done_before] != 0):
            raise _fail(env, "rewards must be zero except on the final step")
        if not np.asarray(new_states.legal_action_mask)[done].all():
            raise _fail(env, "legal_action_mask must be all True at a finished state")
        live = ~done
        if live.any() and not np.asarray(new_states.legal_action_mask)[live].any(-1).all():
            raise _fail(env, "a live state must have a legal action")
        if not np.array_equal(np.asarray(new_states.step_count)[~done_before],
                              np.asarray(states.step_count)[~done_before] + 1):
            raise _fail(env, "step_count must grow by one per step")
        obs = batch_observe(new_states)
        if obs.shape != (num_games, *env.observation_shape) or obs.dtype != jnp.float32:
            raise _fail(env, "observe is not vmappable to the right shape")
        states = new_states
    else:
        raise _fail(env, f"random games did not end within {max_steps} steps")

    if masked_probe is not None:
        _check_forfeit(env, jitted_step, *masked_probe)

    # Stepping a finished game is a no-op with zero rewards.
    again = batch_step(states, jnp.zeros(num_games, jnp.int32))
    if np.any(np.asarray(again.rewards) != 0):
        raise _fail(env, "stepping a finished game must give zero rewards")
    _assert_trees_equal(env, again.replace(rewards=states.rewards), states,
                        "a finished game stepped again and the finished game")

    # jit == no-jit, and one game == the vmapped batch, along the recorded history.
    for batch_states, actions in history[: min(len(history), 6)]:
        one = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[0]), batch_states)
        eager = env.step(one, jnp.int32(actions[0]))
        jitted = jitted_step(one, jnp.int32(actions[0]))
        from_batch = jax.tree.map(lambda x: np.asarray(x)[0],
                                  batch_step(batch_states, jnp.asarray(actions)))
        _assert_trees_equal(env, eager, jitted, "eager and jitted steps")
        _assert_trees_equal(env, eager, from_batch, "a single step and the vmapped batch's")
        if not np.array_equal(env.observe(one), np.asarray(batch_observe(batch_states))[0]):
            raise _fail(env, "a single observation and the vmapped batch's differ")
