"""`azjax play`: a game against an agent in the terminal, in the game's human notation.

The loop reads one line per human turn, parsed by the env (`Env.parse_move`: tic-tac-toe cell
`5`, connect-four column `4`, draughts PDN `9-13` or a whole multi-jump `9x18x27`, any other
game's action ids), re-prompts with the reason when a line is malformed or illegal, prints
the AI's move with its expected score and its most visited moves, and asks
"again?" at the end. `?` lists the legal moves, `q` quits; so does the end of input.

`watch_engine` (`azjax play draughts --against cb:PATH[@SECONDS]`) has an external checkers
engine take the human's seat for one game, printed move by move.
"""

from __future__ import annotations

import datetime
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent, search_effort
from azjax.apps.turns import ai_turn, batch_of_one, describe_turn, is_done, model_label
from azjax.envs.core import jitted_step, winner_of

__all__ = ["parse_start", "play_terminal", "watch_engine"]

_QUIT = {"q", "quit", "exit"}
_LIST = {"?", "help", "moves"}

Read = Callable[[str], "str | None"]
Write = Callable[[str], None]


def _stdin_read(prompt: str) -> str | None:
    """The next line of standard input after `prompt`; None at the end of input.

    Raises:
      EOFError: standard input is closed (no file at all, or one closed), so no move can
        ever be read.
    """
    if sys.stdin is None or sys.stdin.closed:
        raise EOFError("azjax play: standard input is closed; it reads the human's moves "
                       "from there (run it in a terminal or pipe the moves in)")
    if sys.stdout is not None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
    try:
        line = sys.stdin.readline()
    except UnicodeDecodeError as error:
        raise ValueError(f"azjax play: standard input is not text ({error})") from None
    return None if line == "" else line  # "" only at the end of input


def _stdout_write(text: str) -> None:
    print(text, flush=True)


def parse_start(env, text: str, position: str = ""):
    """The position after `text`, whole turns in human notation separated by spaces or commas
    (e.g. `5 1 9` or `11-15 23-19`), played from `position` in the game's notation
    (`Env.parse_position`; draughts: a FEN) or, when it is empty, from the game's start.
    Raises ValueError naming the position or the turn that failed."""
    state = _start_position(env, position) if position else env.init(jax.random.PRNGKey(0))
    for index, move in enumerate(t for t in re.split(r"[\s,]+", text.strip()) if t):
        try:
            actions = env.parse_move(state, move)
        except ValueError as error:
            raise ValueError(f"--moves: turn {index + 1} ({move!r}): {error}") from None
        for action in actions:
            state = jitted_step(env)(state, jnp.int32(action))
    return state


def _start_position(env, position: str):
    """`position` read by `Env.parse_position`; a bad one, or a game with no notation for
    positions, is a ValueError naming `--position`."""
    try:
        return env.parse_position(position)
    except (ValueError, NotImplementedError) as error:
        raise ValueError(f"--position: {error}") from None


def seat_of(state, first: str) -> int:
    """The player (0 or 1) of whoever `first` names ("human" or "ai") when that one is to
    move in `state`, the start of a game: from a game's start, "human" is player 0."""
    if first not in ("human", "ai"):
        raise ValueError(f"--first must be 'human' or 'ai', got {first!r}")
    mover = int(state.current_player)
    return mover if first == "human" else 1 - mover


def _engine(agent: Agent, simulations: int, movetime: float | None) -> Any:
    """The `Agent.player` the AI searches with, or None for its plain search: a clock, a kept
    tree and alpha-beta (whose player reports its depth and line) need one."""
    search = agent.config.search
    if movetime is not None or search.tree_reuse or search.algorithm == "alphabeta":
        return agent.player(num_simulations=simulations, movetime=movetime)
    return None


def _one_game(agent: Agent, *, human: int, simulations: int, start: Any, key: jax.Array,
              read: Read, write: Write, movetime: float | None = None,
              record: list[int] | None = None) -> bool:
    """Plays one game; False when the human quit or the input ended. With `movetime`, a
    model that keeps its tree (`search.tree_reuse`) or one that searches by alpha-beta (its
    depth and line are shown), the AI is an `Agent.player`. `record` gets every action
    played, in order."""
    record = [] if record is None else record
    env = agent.env
    names = env.player_names
    state = start
    player = _engine(agent, simulations, movetime)
    thinking = (f"thinking {movetime:g} s a move" if movetime is not None
                else f"with {search_effort(agent.config.search, simulations)}")
    write(f"You play {names[human]}, the AI plays {names[1 - human]} {thinking}. "
          f"Type {env.move_hint}; '?' lists the legal moves, 'q' quits.")
    ply, shown = 0, None
    while not is_done(state):
        if shown is not state:  # after a re-prompt the board has not changed
            write("")
            write(env.render(state))
            shown = state
        if int(state.current_player) != human:
            turn = ai_turn(agent, state, jax.random.fold_in(key, ply),
                           num_simulations=simulations, player=player)
            write(describe_turn(env, turn, state))
            record.extend(turn.actions)
            state, ply = turn.state, ply + 1
            continue
        line = read("Your move: ")
        if line is None or line.strip().lower() in _QUIT:
            write("" if line is None else "Bye.")
            return False
        text = line.strip()
        if not text:
            continue
        if text.lower() in _LIST:
            write(f"Legal moves: {', '.join(env.legal_moves(state))}")
            continue
        try:
            actions = env.parse_move(state, text)
        except ValueError as error:
            write(f"Illegal move: {error}. Try again.")
            continue
        write(f"You play {env.format_move(actions)}")
        record.extend(actions)
        for action in actions:
            state = jitted_step(env)(state, jnp.int32(action))
            if player is not None:
                player.played(jnp.asarray([action], jnp.int32))
        ply += 1
    write("")
    write(env.render(state))
    winner = winner_of(state)
    write("Result: " + ("draw." if winner is None else
                        "you win!" if winner == human else "the AI wins."))
    return True


def play_terminal(agent: Agent, *, simulations: int | None = None, first: str = "human",
                  start: str = "", position: str = "", seed: int = 0,
                  read: Read | None = None, write: Write | None = None,
                  movetime: float | None = None, pdn: str | Path | None = None) -> int:
    """Plays games until the human declines another one, quits, or the input ends.

    first: who is to move when the game begins, "human" or "ai" (from the game's start,
    "human" plays player 0). start: opening moves in human notation played before the game
    begins, from `position` (the game's notation, `Env.parse_position`; draughts: a FEN) or
    from the game's start. movetime: the AI thinks this many seconds a move instead of
    searching `simulations`. pdn: a file each finished game is appended to, in PDN
    (draughts; `azjax.envs.pdn`). Returns the number of games finished.

    Raises:
      ValueError: a bad `first`, `position` or `start`, or `pdn` for another game than
        draughts (before the first prompt).
    """
    _check_pdn(agent.env, pdn)
    begin = parse_start(agent.env, start, position)
    human = seat_of(begin, first)
    read, write = read or _stdin_read, write or _stdout_write
    simulations = agent.search_simulations(simulations)
    write(f"{agent.env.name}: playing against {model_label(agent)}.")
    root = jax.random.PRNGKey(seed)
    finished = 0
    players = {human: "human", 1 - human: agent.record_name}
    for game in _games():
        record: list[int] = []
        if not _one_game(agent, human=human, simulations=simulations, start=begin,
                         key=jax.random.fold_in(root, game), read=read, write=write,
                         movetime=movetime, record=record):
            break
        finished += 1
        _save_pdn(pdn, agent.env, record, begin, players, "azjax play", game + 1, write)
        again = read("Again? [y/N] ")
        if again is None or again.strip().lower() not in ("y", "yes"):
            write("Bye.")
            break
    return finished


def _games() -> Iterable[int]:
    game = 0
    while True:
        yield game
        game += 1


def watch_engine(agent: Agent, engine: str, *, simulations: int | None = None,
                 first: str = "human", start: str = "", position: str = "", seed: int = 0,
                 write: Write | None = None, movetime: float | None = None,
                 pdn: str | Path | None = None) -> int | None:
    """One game of the agent against an external engine (``cb:PATH[@SECONDS]``, draughts),
    printed move by move: the engine takes the human's seat (`first` "human": the engine
    moves first; "ai": the agent does), from `start` and `position` as in `play_terminal`,
    appended to the file `pdn` in PDN when one is named.

    Returns:
      The winner (0 or 1, `Env.player_names`' order), None for a draw. A game the engine
      forfeits (a crash, a hang, an illegal move: one line) is the agent's.

    Raises:
      ValueError: a bad `first`, `position` or `start`, another game than draughts, or an
        engine that cannot be started.
    """
    from azjax.evaluation.checkerboard import engine_player

    write = write or _stdout_write
    env, names = agent.env, agent.env.player_names
    _check_pdn(env, pdn)
    state = parse_start(env, start, position)
    begin, record = state, []
    seat = seat_of(state, first)
    simulations = agent.search_simulations(simulations)
    with engine_player(env, engine, report=write) as opponent:
        opponent.start(1)
        label = f"{opponent.engine_name!r} ({engine})" if opponent.engine_name else engine
        thinking = (f"thinking {movetime:g} s a move" if movetime is not None
                    else f"with {search_effort(agent.config.search, simulations)}")
        write(f"{env.name}: {model_label(agent)} plays {names[1 - seat]} {thinking}; the "
              f"engine {label} plays {names[seat]}, {opponent.seconds:g} s a move.")
        player = _engine(agent, simulations, movetime)
        ply, key = 0, jax.random.PRNGKey(seed)
        while not is_done(state):
            write("")
            write(env.render(state))
            if int(state.current_player) != seat:
                turn = ai_turn(agent, state, jax.random.fold_in(key, ply),
                               num_simulations=simulations, player=player)
                write(describe_turn(env, turn, state))
                record.extend(turn.actions)
                state = turn.state
            else:
                state = _engine_turn(env, opponent, state, player, write, record)
            ply += 1
    write("")
    write(env.render(state))
    winner = winner_of(state)
    write("Result: " + ("draw." if winner is None else "the engine wins." if winner == seat
                        else "the AI wins."))
    from azjax.envs.pdn import pdn_result

    _save_pdn(pdn, env, record, begin, {seat: label, 1 - seat: agent.record_name},
              "azjax play --against", 1, write, result=pdn_result(state))
    return winner


def _engine_turn(env, opponent, state, player, write: Write, record: list[int]):
    """The engine's whole turn (every hop of a multi-jump) from `state`: the state after it,
    its actions added to `record`; a forfeit (action -1) ends the game."""
    mover, actions = int(state.current_player), []
    while not is_done(state) and int(state.current_player) == mover:
        action = int(opponent.move(batch_of_one(state), np.array([True]))[0][0])
        actions.append(action)
        state = jitted_step(env)(state, jnp.int32(action))
        if player is not None and action >= 0:
            player.played(jnp.asarray([action], jnp.int32))
    if actions[-1] >= 0:
        write(f"Engine plays {env.format_move(actions)}")
    record.extend(a for a in actions if a >= 0)
    return state


def _check_pdn(env, pdn: str | Path | None) -> None:
    """Refuses `--pdn` for a game PDN does not record (`azjax.envs.pdn.check_recordable`)."""
    if pdn is not None:
        from azjax.envs.pdn import check_recordable

        check_recordable(env)


def _save_pdn(pdn: str | Path | None, env, actions: list[int], start: Any,
              players: dict[int, str], event: str, game: int, write: Write,
              result: str | None = None) -> None:
    """Appends one finished game to the file `pdn` (if named), `players` by player id."""
    if pdn is None:
        return
    from azjax.envs.pdn import pdn_game

    text = pdn_game(env, actions, start=start, black=players[0], white=players[1],
                    event=event, date=datetime.date.today().strftime("%Y.%m.%d"),
                    round_=str(game), result=result)
    with open(pdn, "a", encoding="utf-8") as file:
        file.write(text)
    write(f"The game is saved in {pdn} (PDN).")
