"""`check_env(env)`: the API contract every game must pass (run by the tests over every game).

`check_env` runs the named checks below in turn; each can also be run on its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from azjax.envs.core import BoardView, Env, GameState

__all__ = ["check_env", "check_finished_games_stay", "check_human_interface",
           "check_initial_state", "check_random_play", "check_search_evaluation"]

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
    """Checks an env against the contract; raises AssertionError naming the first broken rule.

    In order: static attributes; the initial state's fields, observation and symmetries
    (`check_initial_state`); the notation and drawing for people (`check_human_interface`);
    an illegal action at the start as a loss for the mover; random play of `num_games` games to
    the end (`check_random_play`: rewards zero-sum and only on the final step, all-True mask at
    finished states, a no-op step after the end, jit == no-jit, one game == a vmapped batch,
    and the alpha-beta baseline's `heuristic_value` and `forcing`).

    Args:
      env: the game.
      num_games: how many random games to play at once.
      max_steps: the random games must end within this many steps.
      seed: seeds the initial key and the random moves.

    Raises:
      AssertionError: `"<env name>: <the broken rule>"`.
    """
    if not isinstance(env.name, str) or env.num_players != 2:
        raise _fail(env, "needs a string name and num_players == 2")
    key = jax.random.PRNGKey(seed)
    jitted_step = jax.jit(env.step)  # made once: each new jax.jit wrapper would compile again
    state = env.init(key)
    check_initial_state(env, state)
    check_human_interface(env, state)
    # An illegal action: masked at the start, else out of range.
    illegal = np.flatnonzero(~np.asarray(state.legal_action_mask))
    _check_forfeit(env, jitted_step, state, int(illegal[0]) if illegal.size else env.num_actions)
    check_random_play(env, key, jitted_step, num_games=num_games, max_steps=max_steps,
                      seed=seed)


def check_initial_state(env: Env, state: GameState) -> None:
    """The initial state: its fields, live with a legal action, no empty array (a run's
    checkpoint could not hold it); `observe`'s shape and dtype;
    `symmetries`' shapes, copy 0 the identity, each policy copy a permutation.

    Args:
      env: the game.
      state: `env.init(key)`.

    Raises:
      AssertionError: naming the broken rule.
    """
    _check_fields(env, state)
    if bool(state.terminated) or not bool(np.any(state.legal_action_mask)):
        raise _fail(env, "the initial state must be live with a legal move")
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if np.size(leaf) == 0:  # orbax cannot checkpoint it, so a training run could not save
            raise _fail(env, f"the state's {jax.tree_util.keystr(path).lstrip('.')} has no "
                        f"element (shape {list(np.shape(leaf))}); give it at least one")
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


def check_human_interface(env: Env, state: GameState) -> None:
    """What people see of one live state: labels, the notation round trip of every action,
    whole turns (`legal_moves` parse back and format back, and cover the legal actions),
    `render` a string, `board_view` / `action_clicks` on the grid they describe, and
    `board_codes` (where the game gives them) drawing the same cells as `board_view`.

    Args:
      env: the game.
      state: a live state.

    Raises:
      AssertionError: naming the broken rule.
    """
    names = env.player_names
    if len(names) != 2 or not all(isinstance(n, str) and n for n in names):
        raise _fail(env, "player_names must be two non-empty strings")
    if not (isinstance(env.title, str) and isinstance(env.move_hint, str)):
        raise _fail(env, "title and move_hint must be strings")
    for action in range(env.num_actions):
        if env.str_to_action(env.action_to_str(action)) != action:
            raise _fail(env, f"notation round trip fails for action {action}")
    moves = env.legal_moves(state)
    for text, actions in moves.items():
        try:
            parsed = env.parse_move(state, text)
        except ValueError as error:
            parsed = error
        if parsed != actions or env.format_move(actions) != text:
            raise _fail(env, f"the whole move {text!r} does not parse and format back "
                             f"(parsed: {parsed})")
    legal = set(np.flatnonzero(np.asarray(state.legal_action_mask)).tolist())
    if {actions[0] for actions in moves.values()} != legal:
        raise _fail(env, "legal_moves must start with exactly the legal actions")
    if not isinstance(env.render(state), str):
        raise _fail(env, "render must return a str")
    view = env.board_view(state)
    _check_board_view(env, view)
    _check_board_codes(env, state, view)


def _check_board_codes(env: Env, state: GameState, view: BoardView | None) -> None:
    cells = env.board_cells()
    if not cells:
        return
    if view is None:
        raise _fail(env, "board_cells needs a board_view to describe")
    codes = np.asarray(env.board_codes(state))
    if codes.shape != (len(view.cells),) or not np.issubdtype(codes.dtype, np.integer):
        raise _fail(env, f"board_codes must be int [{len(view.cells)}] (the view's cells), got "
                         f"{codes.dtype} {list(codes.shape)}")
    if codes.min() < 0 or codes.max() >= len(cells):
        raise _fail(env, f"board_codes must index board_cells (0 to {len(cells) - 1})")
    drawn = tuple(cells[code] for code in codes)
    if drawn != view.cells:
        cell = next(i for i, (a, b) in enumerate(zip(drawn, view.cells, strict=True)) if a != b)
        raise _fail(env, f"board_codes draws cell {cell} as {drawn[cell]}, board_view as "
                         f"{view.cells[cell]}")


def _check_board_view(env: Env, view: BoardView | None) -> None:
    if view is None:
        return
    if not isinstance(view, BoardView) or len(view.cells) != view.rows * view.cols:
        raise _fail(env, "board_view must be a BoardView with rows * cols cells")
    if any(cell.player not in (None, 0, 1) for cell in view.cells):
        raise _fail(env, "a board_view cell's player must be None, 0 or 1")
    if view.column_labels and len(view.column_labels) != view.cols:
        raise _fail(env, "board_view's column_labels must name every column")
    for action in range(env.num_actions):
        for click in env.action_clicks(action):
            if not click or not all(0 <= cell < len(view.cells) for cell in click):
                raise _fail(env, f"action_clicks({action}) must name cells of the board_view")


def check_random_play(env: Env, key: jax.Array, jitted_step, *, num_games: int = 16,
                      max_steps: int = 1000, seed: int = 0) -> None:
    """Random play of a batch of games to the end (one jitted vmapped step), every step's
    states checked (`_check_transition`); then an illegal action met in a live state, a step
    after the end, the notation of a position half way, and eager == jitted == vmapped along
    the first recorded steps.

    Args:
      env: the game.
      key: a PRNG key for the initial states.
      jitted_step: `jax.jit(env.step)`, shared with the caller so it compiles once.
      num_games: the batch size B.
      max_steps: the games must end within this many steps.
      seed: seeds the random legal moves.

    Raises:
      AssertionError: naming the broken rule.
    """
    rng = np.random.default_rng(seed)
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
        _check_transition(env, states, new_states, batch_observe, num_games)
        history.append((states, actions))
        if masked_probe is None:
            masked_probe = _masked_probe(states, masks, done_before)
        states = new_states
    else:
        raise _fail(env, f"random games did not end within {max_steps} steps")
    if masked_probe is not None:
        _check_forfeit(env, jitted_step, *masked_probe)
    check_finished_games_stay(env, batch_step, states)
    midgame = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[0]), history[len(history) // 2][0])
    if not bool(midgame.terminated | midgame.truncated):  # notation beyond the first move
        check_human_interface(env, midgame)
    for batch_states, actions in history[: min(len(history), 6)]:
        _check_single_matches_batch(env, jitted_step, batch_step, batch_observe, batch_states,
                                    actions)
    check_search_evaluation(env, history[len(history) // 2][0])


def check_search_evaluation(env: Env, states: GameState) -> None:
    """The alpha-beta baseline's members on a batch of states: `heuristic_value` one float32
    per game, finite and strictly inside (-1, 1) (so results outrank it); `forcing` one bool
    per game.

    Args:
      env: the game.
      states: a batch of states (finished games are skipped).

    Raises:
      AssertionError: naming the broken rule.
    """
    live = ~np.asarray(states.terminated | states.truncated)
    values = jax.eval_shape(jax.vmap(env.heuristic_value), states)
    forcing = jax.eval_shape(jax.vmap(env.forcing), states)
    if values.shape != live.shape or values.dtype != jnp.float32:
        raise _fail(env, f"heuristic_value gives {values.dtype}{list(values.shape[1:])}, "
                         "expected float32[]")
    if forcing.shape != live.shape or forcing.dtype != jnp.bool_:
        raise _fail(env, f"forcing gives {forcing.dtype}{list(forcing.shape[1:])}, "
                         "expected bool[]")
    values = np.asarray(jax.jit(jax.vmap(env.heuristic_value))(states))[live]
    if not np.all(np.isfinite(values) & (np.abs(values) < 1.0)):
        raise _fail(env, f"heuristic_value must lie strictly inside (-1, 1) on live "
                         f"positions; got {values[~(np.abs(values) < 1.0)][:3].tolist()}")


def _masked_probe(states, masks: np.ndarray, done_before: np.ndarray):
    """(one live state, an action its mask rules out), or None if no game has one."""
    live_masked = np.flatnonzero(~done_before & ~masks.all(-1))
    if not live_masked.size:
        return None
    game = int(live_masked[0])
    one_game = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[game]), states)
    return one_game, int(np.flatnonzero(~masks[game])[0])


def _check_transition(env: Env, states, new_states, batch_observe, num_games: int) -> None:
    """One batched step's rules: fields, zero-sum rewards only on the final step, the masks,
    `step_count`, the observations' shape."""
    _check_fields(env, new_states, (num_games,))
    done_before = np.asarray(states.terminated | states.truncated)
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


def check_finished_games_stay(env: Env, batch_step, states: GameState) -> None:
    """Stepping a finished game is a no-op with zero rewards.

    Args:
      env: the game.
      batch_step: `jax.jit(jax.vmap(env.step))`.
      states: a batch of finished games, leaves [B, ...].

    Raises:
      AssertionError: naming the broken rule.
    """
    num_games = states.current_player.shape[0]
    again = batch_step(states, jnp.zeros(num_games, jnp.int32))
    if np.any(np.asarray(again.rewards) != 0):
        raise _fail(env, "stepping a finished game must give zero rewards")
    _assert_trees_equal(env, again.replace(rewards=states.rewards), states,
                        "a finished game stepped again and the finished game")


def _check_single_matches_batch(env: Env, jitted_step, batch_step, batch_observe, batch_states,
                                actions: np.ndarray) -> None:
    """jit == no-jit, and game 0 alone == game 0 of the vmapped batch."""
    one = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[0]), batch_states)
    eager = env.step(one, jnp.int32(actions[0]))
    jitted = jitted_step(one, jnp.int32(actions[0]))
    from_batch = jax.tree.map(lambda x: np.asarray(x)[0],
                              batch_step(batch_states, jnp.asarray(actions)))
    _assert_trees_equal(env, eager, jitted, "eager and jitted steps")
    _assert_trees_equal(env, eager, from_batch, "a single step and the vmapped batch's")
    if not np.array_equal(env.observe(one), np.asarray(batch_observe(batch_states))[0]):
        raise _fail(env, "a single observation and the vmapped batch's differ")
