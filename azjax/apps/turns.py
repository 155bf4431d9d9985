"""Playing against an agent, shared by `azjax play` (terminal) and `azjax serve` (browser).

Host-side helpers around one game at a time (batch 1): load an agent for a game even before
its model is shipped, play the AI's whole turn (several actions only for a draughts
multi-jump), read a human move in the game's notation, and say who won.

Games without a shipped model (`azjax/models/<game>/` absent) are played by an *untrained*
network (a small MLP with seeded random weights) searching the real rules: it plays legal,
mostly weak moves, and everything that shows it says "untrained". A model directory that
appears later is picked up at the next start, with no code change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import envs
from azjax.agent import MODELS_DIR, Agent
from azjax.config import ExperimentConfig, NetworkConfig, SearchConfig
from azjax.core.network import init_network
from envs.core import Env, jitted_step

__all__ = [
    "UNTRAINED_NETWORK",
    "Turn",
    "ai_turn",
    "batch_of_one",
    "describe_turn",
    "format_actions",
    "has_shipped_model",
    "is_done",
    "load_play_agent",
    "parse_human_move",
    "top_moves",
    "untrained_agent",
    "winner_of",
]

# Small on purpose: an untrained network is a stand-in, and a small one compiles in seconds.
UNTRAINED_NETWORK = NetworkConfig(kind="mlp", hidden=(64, 64))


def has_shipped_model(game: str) -> bool:
    return (MODELS_DIR / game / "model.json").is_file()


def untrained_agent(game: str, *, network: NetworkConfig = UNTRAINED_NETWORK,
                    num_simulations: int = 64, seed: int = 0) -> Agent:
    """An agent with a randomly initialised network (fixed `seed`): a stand-in for games whose
    model is not shipped yet, and a cheap agent for tests. `agent.meta["untrained"]` is True."""
    env = envs.make(game)
    search = SearchConfig(num_simulations=num_simulations,
                          max_num_considered_actions=min(16, env.num_actions))
    config = ExperimentConfig(game=game, seed=seed, network=network, search=search)
    params = init_network(network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(seed))["params"]
    meta = {"untrained": True, "num_simulations": num_simulations}
    return Agent(env, config, params, meta)


def load_play_agent(spec: str | Path) -> Agent:
    """`Agent.load(spec)`, except that a game id without a shipped model gives an untrained
    agent (see the module docstring) instead of an error."""
    if str(spec) in envs.available() and not Path(spec).exists() and not has_shipped_model(
            str(spec)):
        return untrained_agent(str(spec))
    return Agent.load(spec)


def model_label(agent: Agent) -> str:
    """One line saying which network plays: shipped/run model and its iteration, or untrained."""
    if agent.meta.get("untrained"):
        return f"an UNTRAINED network (no model in azjax/models/{agent.env.name}/ yet)"
    iteration = agent.meta.get("iteration")
    where = "the shipped model" if agent.source and agent.source.parent == MODELS_DIR else \
        str(agent.source)
    return where + (f" (iteration {iteration})" if iteration is not None else "")


def batch_of_one(state: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x)[None], state)


def is_done(state: Any) -> bool:
    return bool(state.terminated | state.truncated)


def winner_of(state: Any) -> int | None:
    """The winning player of a finished game (from its last step's rewards), None for a draw
    or a game still running."""
    rewards = np.asarray(state.rewards)
    if not is_done(state) or not rewards.any():
        return None
    return int(np.argmax(rewards))


def format_actions(env: Env, actions: list[int]) -> str:
    """One player's turn in human notation: `5`, `4`, `9-13`, `9x18x27`."""
    if hasattr(env, "format_move"):
        return env.format_move(actions)
    return " ".join(env.action_to_str(a) for a in actions)


def parse_human_move(env: Env, state: Any, text: str) -> list[int]:
    """The action ids of one whole human turn typed in the game's notation.

    Raises:
      ValueError: saying why (malformed, occupied cell, full column, not legal here...).
    """
    if hasattr(env, "parse_move"):  # draughts: PDN, a multi-jump is several actions
        return env.parse_move(state, text)
    if is_done(state):
        raise ValueError("the game is over")
    legal = np.asarray(state.legal_action_mask)
    names = ", ".join(env.action_to_str(a) for a in np.flatnonzero(legal))
    try:
        action = env.str_to_action(text)
    except ValueError as error:
        raise ValueError(f"{error}; legal moves: {names}") from None
    if not legal[action]:
        why = {"tic_tac_toe": f"cell {env.action_to_str(action)} is already taken",
               "connect_four": f"column {env.action_to_str(action)} is full"}.get(
            env.name, f"{text.strip()!r} is not legal here")
        raise ValueError(f"{why}; legal moves: {names}")
    return [action]


@dataclasses.dataclass(frozen=True)
class Turn:
    """The AI's whole turn from one position."""

    actions: list[int]  # the actions played (more than one only for a multi-jump)
    state: Any  # the position after them
    value: float  # the AI's expected score in [-1, 1] (the first search's root value)
    policy: np.ndarray  # float32 [A]: the first search's policy
    visits: np.ndarray  # int32 [A]: the first search's root visit counts


def ai_turn(agent: Agent, state: Any, key: jax.Array, *, num_simulations: int) -> Turn:
    """Greedy search and play until the player to move changes or the game ends.

    state: one (unbatched) live state. The first search's value, policy and visits describe
    the turn; continuing a multi-jump searches again from each new position.
    """
    if is_done(state):
        raise ValueError("the game is over: the AI has no move to make")
    mover = int(state.current_player)
    step = jitted_step(agent.env)
    actions: list[int] = []
    first = None
    while not is_done(state) and int(state.current_player) == mover:
        key, search_key = jax.random.split(key)
        out = agent.search_output(search_key, batch_of_one(state),
                                  num_simulations=num_simulations)
        if first is None:
            first = out
        action = int(out.action[0])
        actions.append(action)
        state = step(state, jnp.int32(action))
    return Turn(actions=actions, state=state, value=float(first.value[0]),
                policy=np.asarray(first.policy[0], np.float32),
                visits=np.asarray(first.visit_counts[0], np.int32))


def top_moves(env: Env, visits: np.ndarray, k: int = 3) -> list[tuple[str, float]]:
    """The k most visited actions as (notation, share of the root's visits), most first."""
    total = max(int(visits.sum()), 1)
    order = np.argsort(-visits, kind="stable")[:k]
    return [(env.action_to_str(int(a)), float(visits[a]) / total) for a in order if visits[a]]


def describe_turn(env: Env, turn: Turn) -> str:
    """`AI plays 5   (expected score +0.12; top moves 5 62%, 1 20%, 9 10%)`."""
    tops = ", ".join(f"{name} {share:.0%}" for name, share in top_moves(env, turn.visits))
    return (f"AI plays {format_actions(env, turn.actions)}   (expected score "
            f"{turn.value:+.2f}; top moves {tops})")
