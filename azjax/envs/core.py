"""The environment contract and the step semantics every game shares.

A game is an `Env` object holding only static configuration. Its methods are pure functions of
ONE game; callers `jax.vmap` them over a batch. Shape legend: A actions, S symmetries.

Shared semantics (written once here, in `Env.step`):
- player 0 moves first; `current_player` says who moves, players need not alternate;
- `rewards[p]` is player p's reward for this step: +1 / -1 on the final step, else 0;
- stepping a finished game is a no-op with zero rewards;
- at a finished state `legal_action_mask` is all True, so masked softmaxes stay finite
  (`terminated` / `truncated` are the truth);
- an illegal action ends the game as a loss for the mover.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Protocol

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["BoardView", "Cell", "Env", "GameState", "jitted_step", "material_lead", "play_moves",
           "positions_along", "random_move_lists", "status_line", "tree_select", "whole_moves",
           "winner_of"]


class GameState(Protocol):
    """Fields every game's `State` carries (names match pgx on purpose)."""

    current_player: jax.Array  # int32 []
    legal_action_mask: jax.Array  # bool [A]
    rewards: jax.Array  # float32 [2]
    terminated: jax.Array  # bool []
    truncated: jax.Array  # bool []
    step_count: jax.Array  # int32 []

    def replace(self, **kwargs: Any) -> GameState:
        """A copy with the named fields replaced (flax `struct.dataclass`'s `replace`)."""


def tree_select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-leaf `jnp.where(pred, on_true, on_false)` for two pytrees of one structure.

    Args:
      pred: bool, broadcastable against every leaf (`[]` for one game, `[B]` under vmap).
      on_true: a pytree, chosen where `pred` holds.
      on_false: a pytree of the same structure and shapes.

    Returns:
      A pytree of that structure.
    """
    return jax.tree.map(lambda t, f: jnp.where(pred, t, f), on_true, on_false)


def material_lead(material: jax.Array, player: jax.Array) -> jax.Array:
    """One player's material lead over the other.

    Args:
      material: float32 [B, 2], by player id (`Env.material`).
      player: int32 [B], the player whose lead is wanted.

    Returns:
      float32 [B]: `player`'s material minus the other player's.
    """
    mine = jnp.take_along_axis(material, player[:, None], axis=1)[:, 0]
    theirs = jnp.take_along_axis(material, 1 - player[:, None], axis=1)[:, 0]
    return mine - theirs


@dataclasses.dataclass(frozen=True)
class Cell:
    """One square of a `BoardView`, as a page draws it.

    Attributes:
      player: the player id (0 or 1) whose piece stands here, or None for an empty square.
      label: text written on the piece (`X`, `K` for a king), or "".
      note: small text in the square's corner (its number in the game's notation), or "".
      shade: "light", "dark" or "" (a board of one colour).
    """

    player: int | None = None
    label: str = ""
    note: str = ""
    shade: str = ""


@dataclasses.dataclass(frozen=True)
class BoardView:
    """A game-independent picture of one position: a grid of `Cell`s, row-major from the top
    left, for pages and terminals that know no game (`Env.board_view`).

    Attributes:
      rows: R, the number of rows.
      cols: C, the number of columns.
      cells: R * C cells, row-major, row 0 on top.
      pieces: "disc" (round stones or men) or "mark" (a glyph such as X / O, drawn as text).
      colors: a CSS colour per player id, for the pieces.
      column_labels: C labels drawn above the columns (connect four's column numbers), or ().
    """

    rows: int
    cols: int
    cells: tuple[Cell, ...]
    pieces: str = "disc"
    colors: tuple[str, str] = ("#d33", "#2a6fb0")
    column_labels: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The view as plain JSON types (lists, dicts, strings, ints, None)."""
        return dataclasses.asdict(self)


class Env(abc.ABC):
    """A two-player, perfect-information board game as pure functions over a `State` pytree.

    Subclasses implement `_init`, `_apply_legal_action`, `observe` and `symmetries`. For people
    (`azjax play`, `azjax serve`) they may also override, each with a working default:
      - notation: `action_to_str` / `str_to_action` (default: action ids), `format_move` and
        `parse_move` for a whole turn of several actions, `legal_moves`, `describe_illegal`;
      - labels: `title`, `player_names`, `move_hint`;
      - drawing: `render` (text; default: a grid from `board_view`, else a status line),
        `board_view` (a `BoardView`, default None) and `action_clicks` (which cells a click
        plays each action from, default none); for pages that run no Python, `board_cells`
        and a jittable `board_codes` (the same view as codes, default none).

    Attributes:
      name: the game id (`envs.make(name)`).
      num_actions: A, the number of action ids.
      observation_shape: the shape of `observe`'s output.
      num_players: always 2.
      max_game_length: longest possible game in steps (0 = unbounded); self-play truncates
        longer games.
      player_names: how people call player 0 and player 1 (`X` / `O`, `Black (b)` ...).
      rules: names the variant of the rules this instance plays, for a game with several
        (draughts: "laws" or "openspiel"); "" for a game with one. Models and runs record it,
        and a model is refused under other rules than it was trained under.
      move_chain: for pages that run no Python, how `format_move` writes a turn of several
        actions: "" (the default) the actions' notations spaced; "x" (draughts) hops `9x18`,
        `18x27` chained into `9x18x27`.
    """

    name: ClassVar[str]
    num_actions: ClassVar[int]
    observation_shape: ClassVar[tuple[int, ...]]
    num_players: ClassVar[int] = 2
    max_game_length: ClassVar[int] = 0
    player_names: ClassVar[tuple[str, str]] = ("player 0", "player 1")
    rules: str = ""
    move_chain: ClassVar[str] = ""
    endgame_max_pieces: ClassVar[int] = 0  # the largest `endgame_adjudicator` table; 0: none

    # ---- the public, shared API -------------------------------------------------------------

    def init(self, key: jax.Array) -> GameState:
        """The initial position.

        Args:
          key: a PRNG key, accepted for API symmetry (our games start fixed; pgx's draw their
            first mover).

        Returns:
          The initial state, player 0 to move.
        """
        del key
        return self._init()

    def step(self, state: GameState, action: jax.Array) -> GameState:
        """Plays `action` for `state.current_player`; pure and branch-free (see the module
        docstring: illegal actions forfeit, finished games stay as they are).

        Args:
          state: one game's state (vmap for a batch).
          action: int32 [], an action id.

        Returns:
          The next state, `step_count` one higher (unless the game was over).
        """
        action = jnp.asarray(action, jnp.int32)
        in_range = (action >= 0) & (action < self.num_actions)
        safe_action = jnp.clip(action, 0, self.num_actions - 1)
        was_done = state.terminated | state.truncated
        is_legal = in_range & state.legal_action_mask[safe_action]

        played = self._apply_legal_action(state, safe_action)
        mover = state.current_player
        forfeit = state.replace(
            rewards=jnp.zeros(2, jnp.float32).at[mover].set(-1.0).at[1 - mover].set(1.0),
            terminated=jnp.bool_(True),
        )
        next_state = tree_select(is_legal, played, forfeit)
        next_state = next_state.replace(step_count=state.step_count + 1)
        # A finished game stays as it was, with zero rewards.
        next_state = tree_select(was_done, state.replace(rewards=jnp.zeros(2, jnp.float32)),
                                 next_state)
        done = next_state.terminated | next_state.truncated
        return next_state.replace(legal_action_mask=next_state.legal_action_mask | done)

    def random_start(self, key: jax.Array) -> GameState:
        """A random live position, for self-play to start some games from
        (`selfplay.random_start_prob`).

        Args:
          key: a PRNG key.

        Returns:
          One live state.

        Raises:
          NotImplementedError: for a game without such a distribution (the default).
        """
        del key
        raise NotImplementedError(f"{self.name} has no random start positions")

    def material(self, state: GameState) -> jax.Array:
        """Each player's material, scaled so a side's starting material is 1; the auxiliary
        training target `train.material_loss_weight` learns the game's final difference.

        Args:
          state: one game's state.

        Returns:
          float32 [2], by player id.

        Raises:
          NotImplementedError: for a game without such a count (the default).
        """
        del state
        raise NotImplementedError(f"{self.name} has no material count")

    # ---- the alpha-beta baseline's evaluation (`azjax.evaluation.alphabeta`) -----------------

    evaluation_version: ClassVar[str] = "terminal-only"
    """Names `heuristic_value`'s weights: a change of weights gets a new version, so the
    `alphabeta:D` anchor of a rating ladder means the same from release to release."""

    def endgame_adjudicator(self, max_pieces: int) -> Callable[[GameState], GameState]:
        """Exact results of the game's small endings, for a search to end its lines at them as
        engines end theirs at an endgame database (`search.endgame_table`).

        Args:
          max_pieces: the table's size: positions of at most this many pieces.

        Returns:
          A jit-able `adjudicate(state) -> state` of ONE state: a live position the table
          knows comes back finished (`terminated`) with its exact result in `rewards` (by
          player id, in [-1, 1], nearer +-1 the sooner it comes); any other comes back as it
          was. Draughts: `azjax.envs.draughts_endings`. The default raises
          NotImplementedError: the game has no table.
        """
        raise NotImplementedError(f"{self.name} has no endgame table")

    def heuristic_value(self, state: GameState) -> jax.Array:
        """A hand-made estimate of a live position for the player to move, which the alpha-beta
        baseline scores its leaves with (finished games score their result).

        Args:
          state: one live game's state.

        Returns:
          float32 [], strictly inside (-1, 1), so a won or lost game always outranks it.
          The default is 0 (a draw): alpha-beta then sees only results.
        """
        del state
        return jnp.float32(0.0)

    def forcing(self, state: GameState) -> jax.Array:
        """Whether a position is too sharp to score statically: the alpha-beta baseline
        searches on past its depth (quiescence) while this holds.

        Args:
          state: one live game's state.

        Returns:
          bool []. Draughts: a capture is pending. The default is False.
        """
        del state
        return jnp.bool_(False)

    def supports(self, optional: str) -> bool:
        """Whether this game implements an optional jit-able method; traced on abstract
        values, so nothing is computed.

        Args:
          optional: "random_start" or "material".

        Returns:
          False when the method raises NotImplementedError.
        """
        key = jax.random.PRNGKey(0)
        argument = key if optional == "random_start" else jax.eval_shape(self.init, key)
        try:
            jax.eval_shape(getattr(self, optional), argument)
        except NotImplementedError:
            return False
        return True

    @abc.abstractmethod
    def observe(self, state: GameState) -> jax.Array:
        """The network's input for one state, from the view of the player to move.

        Args:
          state: one game's state.

        Returns:
          float32 `observation_shape`.
        """

    @abc.abstractmethod
    def symmetries(self, obs: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
        """All symmetric copies of one (observation, policy) pair.

        Args:
          obs: float32 `observation_shape`.
          policy: [A], over the action ids.

        Returns:
          ([S, *observation_shape], [S, A]); copy 0 is the input, every policy copy a
          permutation of the input's entries.
        """

    # ---- for people: notation, labels and drawing (host side, one unbatched state) -----------

    @property
    def title(self) -> str:
        """The game's name for people (`Connect four`); default: its id."""
        return self.name

    @property
    def move_hint(self) -> str:
        """How to type a move, for a prompt (`a column 1-7 (1 = left)`)."""
        return f"an action id 0-{self.num_actions - 1}"

    def action_to_str(self, action: int) -> str:
        """Human notation for an action id (e.g. tic-tac-toe cell `5`); default: the id.

        Raises:
          ValueError: for an id outside 0..A-1.
        """
        if not 0 <= int(action) < self.num_actions:
            raise ValueError(f"{self.name} action ids are 0-{self.num_actions - 1}, got {action}")
        return str(int(action))

    def str_to_action(self, text: str) -> int:
        """Inverse of `action_to_str`.

        Raises:
          ValueError: naming what was wrong with `text`.
        """
        text = text.strip()
        if not (text.isascii() and text.isdigit()) or not 0 <= int(text) < self.num_actions:
            raise ValueError(f"a {self.name} move is an action id 0-{self.num_actions - 1}, "
                             f"got {text!r}")
        return int(text)

    def format_move(self, actions: Sequence[int]) -> str:
        """One player's whole turn (its successive action ids) in human notation; default:
        each action's notation, separated by spaces."""
        return " ".join(self.action_to_str(int(a)) for a in actions)

    def legal_moves(self, state: GameState) -> dict[str, list[int]]:
        """Every whole legal turn of the player to move: its notation -> its action ids;
        {} for a finished game. Default: one action per turn, in action order."""
        if bool(state.terminated | state.truncated):
            return {}
        legal = np.flatnonzero(np.asarray(state.legal_action_mask)).tolist()
        return {self.format_move([a]): [a] for a in legal}

    def describe_illegal(self, state: GameState, action: int) -> str:
        """Why a well-formed action is not legal in `state` (`column 4 is full`)."""
        del state
        return f"{self.action_to_str(action)!r} is not legal here"

    def parse_move(self, state: GameState, text: str) -> list[int]:
        """The action ids of one whole turn typed in the game's notation.

        Raises:
          ValueError: saying why (game over, malformed, not legal here), with the legal moves.
        """
        if bool(state.terminated | state.truncated):
            raise ValueError("the game is over")
        names = ", ".join(self.legal_moves(state))
        try:
            action = self.str_to_action(text)
        except ValueError as error:
            raise ValueError(f"{error}; legal moves: {names}") from None
        if not bool(np.asarray(state.legal_action_mask)[action]):
            raise ValueError(f"{self.describe_illegal(state, action)}; legal moves: {names}")
        return [action]

    def parse_position(self, text: str) -> GameState:
        """A position written in the game's notation (draughts: a FEN), for games to start from
        (`selfplay.start_positions`). Host side, not jit-able.

        Args:
          text: one position, as one line of a positions file.

        Returns:
          One state, with `step_count` 0.

        Raises:
          ValueError: saying what is wrong with `text`.
          NotImplementedError: for a game without a position notation (the default).
        """
        del text
        raise NotImplementedError(f"{self.name} has no notation for positions")

    def board_view(self, state: GameState) -> BoardView | None:
        """The position as a grid of cells for a page to draw; None (the default) when the
        game has no picture, so pages show `render`'s text and the legal moves instead."""
        del state
        return None

    def board_cells(self) -> tuple[Cell, ...]:
        """Every cell `board_view` can draw, for `board_codes` to index; () (the default) when
        the game gives no codes. With them a page that runs no Python draws the board
        (`azjax export --web`); the conformance suite checks them against `board_view`."""
        return ()

    def board_codes(self, state: GameState) -> jax.Array:
        """The board as codes: cell i of `board_view(state)` is `board_cells()[codes[i]]`.

        Pure and jittable (it is exported with the game's other functions). Only for a game
        whose `board_cells` is not empty.

        Args:
          state: one game's state.

        Returns:
          int32 [rows * cols], row-major as `board_view`'s cells.
        """
        del state
        raise NotImplementedError(f"{self.name} gives no board_codes (its board_cells is empty)")

    def action_clicks(self, action: int) -> tuple[tuple[int, ...], ...]:
        """The clicks that play `action` on `board_view`'s grid: one tuple of cell indices
        (row * cols + col) per click, any cell of a tuple will do. `((4,),)`: one click on cell
        4; `((8,), (12,))`: a piece on cell 8, then cell 12. Default `()`: not by clicking."""
        del action
        return ()

    def render(self, state: GameState) -> str:
        """A board a person can read, labelled in the game's notation, and who moves or how
        the game ended. Default: `board_view`'s grid (`.` empty, else the piece's label or
        player name's initial) when there is one, then the status line."""
        lines = [f"{self.title}, step {int(state.step_count)}"]
        view = self.board_view(state)
        if view is not None:
            glyphs = [c.label or ("." if c.player is None else self.player_names[c.player][0])
                      for c in view.cells]
            lines = [" ".join(glyphs[r * view.cols:(r + 1) * view.cols])
                     for r in range(view.rows)]
        return "\n".join([*lines, status_line(state, winner_of(state), self.player_names)])

    @property
    def num_symmetries(self) -> int:
        """S, the number of symmetric copies `symmetries` returns."""
        obs = jnp.zeros(self.observation_shape, jnp.float32)
        return int(self.symmetries(obs, jnp.zeros(self.num_actions))[1].shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # ---- what a game implements -------------------------------------------------------------

    @abc.abstractmethod
    def _init(self) -> GameState:
        """The initial state."""

    @abc.abstractmethod
    def _apply_legal_action(self, state: GameState, action: jax.Array) -> GameState:
        """The successor of a live state after a legal action: board, player, mask, rewards,
        `terminated`. `Env.step` handles illegal actions, finished games and `step_count`."""


def winner_of(state: GameState) -> int | None:
    """The winning player id of a finished game (from its last step's `rewards`), None for a
    draw or a game still running. Host side, one unbatched state."""
    rewards = np.asarray(state.rewards)
    if not bool(state.terminated | state.truncated) or not rewards.any():
        return None
    return int(np.argmax(rewards))


def status_line(state: GameState, winner: int | None, names: tuple[str, str]) -> str:
    """The line under a rendered board: who moves, or how the game ended.

    Args:
      state: one unbatched state.
      winner: the winning player id, None for a draw (read only when the game is over).
      names: how people call player 0 and player 1.

    Returns:
      `X to move.`, `Game over: X wins.` or `Game over: draw.`
    """
    if bool(state.terminated | state.truncated):
        return "Game over: draw." if winner is None else f"Game over: {names[winner]} wins."
    return f"{names[int(state.current_player)]} to move."


@functools.cache
def jitted_step(env: Env):
    """The env's single-game `step(state, action)`, jitted once per env (for host loops that
    play one game move by move: replays, play, serving).

    Args:
      env: a hashable `Env`.

    Returns:
      `jax.jit(env.step)`, the same object for every call with this env.
    """
    return jax.jit(env.step)


def positions_along(env: Env, actions) -> Iterator[GameState]:
    """The initial position, then the position after each move of a move list, each move
    checked before it is played.

    Args:
      env: the game.
      actions: an iterable of action ids.

    Yields:
      Unbatched states: len(actions) + 1 of them.

    Raises (when the iteration reaches the bad move):
      ValueError: naming the move index, the move and the legal moves, when a move is illegal
        or the game is already over.
    """
    step = jitted_step(env)
    state = env.init(jax.random.PRNGKey(0))
    yield state
    for index, action in enumerate(actions):
        action = int(action)
        if bool(state.terminated | state.truncated):
            raise ValueError(f"move {index} (action id {action}) comes after the game ended")
        legal = np.flatnonzero(np.asarray(state.legal_action_mask)).tolist()
        if action not in legal:
            raise ValueError(
                f"move {index} is illegal: action id {action} is not among the legal actions "
                f"{legal} (player {int(state.current_player)} to move)"
            )
        state = step(state, jnp.int32(action))
        yield state


def whole_moves(env: Env, actions, start: GameState | None = None,
                describe: Callable[[GameState], str] | None = None
                ) -> tuple[list[tuple[int, list[int]]], GameState]:
    """A list of actions grouped into whole moves: the actions a player plays before the other
    is to move (a draughts multi-jump's hops; one action in most games).

    Args:
      env: the game.
      actions: an iterable of action ids, played from `start`.
      start: the position they start from (one unbatched state; default: the initial one).
      describe: how an error names a position (e.g. `Draughts.to_fen`); default: none.

    Returns:
      ([(the mover, its actions), ...] in order, a last move cut short by the end of `actions`
      included as far as it goes; the position after them).

    Raises:
      ValueError: naming the action's index and the action, when it is not legal where it is
        played (or comes after the game ended).
    """
    step = jitted_step(env)
    state = env.init(jax.random.PRNGKey(0)) if start is None else start
    moves: list[tuple[int, list[int]]] = []
    hops: list[int] = []
    for index, action in enumerate(int(a) for a in actions):
        if bool(state.terminated | state.truncated) or not bool(state.legal_action_mask[action]):
            where = f" in {describe(state)}" if describe is not None else ""
            raise ValueError(f"action {index} ({env.action_to_str(action)}) is not legal{where}")
        mover = int(state.current_player)
        hops.append(action)
        state = step(state, jnp.int32(action))
        if bool(state.terminated | state.truncated) or int(state.current_player) != mover:
            moves.append((mover, hops))
            hops = []
    if hops:
        moves.append((int(state.current_player), hops))
    return moves, state


def random_positions(env: Env, key: jax.Array, num_games: int,
                     plies: int | tuple[int, ...]) -> GameState:
    """Positions after uniformly random legal moves; games that end early stay as they ended.
    Jit-able (`num_games` and `plies` static).

    Args:
      env: the game.
      key: a PRNG key.
      num_games: B, the number of games.
      plies: the number of random steps each game takes; or several counts (each >= 1), for
        the same games' positions after each of them, from one pass of play.

    Returns:
      A batch of states, leaves [B, ...]; for several counts, the batches one after another
      in the order of `plies`, leaves [len(plies) * B, ...].
    """
    several = not isinstance(plies, int)

    def play(states, k):
        actions = jax.random.categorical(k, jnp.where(states.legal_action_mask, 0.0, -jnp.inf))
        done = states.terminated | states.truncated
        states = jax.vmap(tree_select)(done, states, jax.vmap(env.step)(states, actions))
        return states, states if several else None

    k_init, k_play = jax.random.split(key)
    states = jax.vmap(env.init)(jax.random.split(k_init, num_games))
    steps = max(plies) if several else plies
    final, every = jax.lax.scan(play, states, jax.random.split(k_play, steps))
    if not several:
        return final
    taken = jnp.asarray(plies) - 1  # every[t]: the positions after t + 1 plies
    return jax.tree.map(lambda x: x[taken].reshape(-1, *x.shape[2:]), every)


def random_move_lists(env: Env, count: int, seed: int, plies: tuple[int, int] = (0, 12)
                      ) -> list[list[int]]:
    """Move lists (action ids) of `count` positions where the game is still on, each from
    uniformly random legal moves, as many as a draw from [plies[0], plies[1]) says; a game
    that ends sooner is drawn again. The same seed gives the same lists: fixed positions for
    tests and benchmarks that compare two players on them.

    Args:
      env: the game; count: how many lists; seed: numpy's seed.
      plies: the half-open range the number of moves is drawn from.

    Returns:
      `count` move lists, each playable by `play_moves`.
    """
    rng, step = np.random.default_rng(seed), jitted_step(env)
    found: list[list[int]] = []
    while len(found) < count:
        state, moves = env.init(jax.random.PRNGKey(0)), []
        for _ in range(int(rng.integers(*plies))):
            moves.append(int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask)))))
            state = step(state, moves[-1])
            if bool(state.terminated | state.truncated):
                break
        if not bool(state.terminated | state.truncated):
            found.append(moves)
    return found


def play_moves(env: Env, actions) -> GameState:
    """Plays a move list (action ids) from the initial position.

    Args:
      env: the game.
      actions: an iterable of action ids.

    Returns:
      The final position (one unbatched state).

    Raises:
      ValueError: as `positions_along`.
    """
    *_, state = positions_along(env, actions)
    return state
