"""Playing against an agent, shared by `azjax play` (terminal) and `azjax serve` (browser).

Host-side helpers around one game at a time (batch 1): load an agent for a game even before
its model is shipped, play the AI's whole turn (several actions only for a draughts
multi-jump) and describe it. What a game looks like to people (notation, names, boards) is the
env's own (`azjax.envs.core.Env`), so a new game needs nothing here.

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

from azjax import envs
from azjax.agent import MODELS_DIR, Agent
from azjax.config import ExperimentConfig, NetworkConfig, SearchConfig
from azjax.core.network import init_network
from azjax.envs.core import Env, jitted_step, whole_moves

__all__ = [
    "UNTRAINED_NETWORK",
    "Turn",
    "ai_turn",
    "batch_of_one",
    "describe_turn",
    "has_shipped_model",
    "is_done",
    "line_moves",
    "load_play_agent",
    "names_a_game",
    "top_moves",
    "untrained_agent",
]

# Small on purpose: an untrained network is a stand-in, and a small one compiles in seconds.
UNTRAINED_NETWORK = NetworkConfig(kind="mlp", hidden=(64, 64))


def has_shipped_model(game: str) -> bool:
    return game in envs.available() and (MODELS_DIR / game / "model.json").is_file()


def untrained_agent(game: str | Env, *, network: NetworkConfig = UNTRAINED_NETWORK,
                    num_simulations: int = 64, seed: int = 0) -> Agent:
    """An agent with a randomly initialised network (fixed `seed`): a stand-in for games whose
    model is not shipped yet, and a cheap agent for tests. `game` is a registered game id or
    an `Env` itself (a game not registered). `agent.meta["untrained"]` is True.

    `game` may be any spec `envs.make` resolves, a game of your own (`module:Class`)
    included: the agent's config names it by that spec."""
    env = envs.make(game) if isinstance(game, str) else game
    search = SearchConfig(num_simulations=num_simulations,
                          max_num_considered_actions=min(16, env.num_actions))
    spec = game if isinstance(game, str) else env.name
    config = ExperimentConfig(game=spec, game_dir=envs.game_dir(spec), seed=seed,
                              network=network, search=search)
    params = init_network(network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(seed))["params"]
    meta = {"untrained": True, "num_simulations": num_simulations}
    return Agent(env, config, params, meta)


def names_a_game(spec: str | Path) -> bool:
    """Whether `spec` names a game rather than a model: a registered id, `pgx:<id>`, an import
    path `module:Class` or an `azjax.games` entry point, and no file or directory here."""
    from importlib.metadata import entry_points

    text = str(spec)
    if Path(text).exists():
        return False
    return text in envs.available() or ":" in text or bool(
        entry_points(group=envs.ENTRY_POINT_GROUP, name=text.partition("(")[0]))


def load_play_agent(spec: str | Path) -> Agent:
    """`Agent.load(spec)`, except that a game without a shipped model (a registered id, or a
    game of your own as `module:Class`) gives an untrained agent (see the module docstring)
    instead of an error."""
    if names_a_game(spec) and not has_shipped_model(str(spec)):
        return untrained_agent(str(spec))
    return Agent.load(spec)


def model_label(agent: Agent) -> str:
    """One line saying which network plays: shipped/run model and its iteration, or untrained."""
    if agent.meta.get("untrained"):
        if agent.config.game not in envs.available():
            return "an UNTRAINED network (name a run dir or model dir to play a trained one)"
        return f"an UNTRAINED network (no model in azjax/models/{agent.env.name}/ yet)"
    iteration = agent.meta.get("iteration")
    where = "the shipped model" if agent.source and agent.source.parent == MODELS_DIR else \
        str(agent.source)
    return where + (f" (iteration {iteration})" if iteration is not None else "")


def batch_of_one(state: Any) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(x)[None], state)


def is_done(state: Any) -> bool:
    return bool(state.terminated | state.truncated)


@dataclasses.dataclass(frozen=True)
class Turn:
    """The AI's whole turn from one position."""

    actions: list[int]  # the actions played (more than one only for a multi-jump)
    state: Any  # the position after them
    value: float  # the AI's expected score in [-1, 1] (the first search's root value)
    policy: np.ndarray  # float32 [A]: the first search's policy
    visits: np.ndarray  # int32 [A]: the first search's root visit counts
    # An alpha-beta search's (None for a tree search): the deepest step it finished (whole
    # moves), the positions it searched and the line of actions it expects, its move first.
    depth: int | None = None
    positions: int | None = None
    line: list[int] | None = None


def ai_turn(agent: Agent, state: Any, key: jax.Array, *, num_simulations: int,
            player: Any = None) -> Turn:
    """Greedy search and play until the player to move changes or the game ends.

    state: one (unbatched) live state. The first search's value, policy and visits describe
    the turn; continuing a multi-jump searches again from each new position. player: an
    `EnginePlayer` over a batch of one (`Agent.player`: a clock, a kept tree) to search
    with instead of `num_simulations`; its kept tree follows the moves played.
    """
    if is_done(state):
        raise ValueError("the game is over: the AI has no move to make")
    mover = int(state.current_player)
    step = jitted_step(agent.env)
    actions: list[int] = []
    first, searched = None, None  # the first search's output, and its `Move` from a player
    while not is_done(state) and int(state.current_player) == mover:
        key, search_key = jax.random.split(key)
        if player is None:
            move, out = None, agent.search_output(search_key, batch_of_one(state),
                                                  num_simulations=num_simulations)
        else:
            move = player.move(search_key, batch_of_one(state))
            out = move.output
        if first is None:
            first, searched = out, move
        action = int(out.action[0])
        actions.append(action)
        if player is not None:
            player.played(jnp.asarray([action], jnp.int32))
        state = step(state, jnp.int32(action))
    extra = {}
    if searched is not None and searched.line is not None:  # an alpha-beta search
        line = np.asarray(searched.line[0])
        extra = dict(depth=int(searched.depth[0]), positions=int(searched.simulations[0]),
                     line=[int(a) for a in line[line >= 0]])
    return Turn(actions=actions, state=state, value=float(first.value[0]),
                policy=np.asarray(first.policy[0], np.float32),
                visits=np.asarray(first.visit_counts[0], np.int32), **extra)


def top_moves(env: Env, visits: np.ndarray, k: int = 3) -> list[tuple[str, float]]:
    """The k most visited actions as (notation, share of the root's visits), most first."""
    total = max(int(visits.sum()), 1)
    order = np.argsort(-visits, kind="stable")[:k]
    return [(env.action_to_str(int(a)), float(visits[a]) / total) for a in order if visits[a]]


def describe_turn(env: Env, turn: Turn, start: Any = None) -> str:
    """`AI plays 5   (expected score +0.12; top moves 5 62%, 1 20%, 9 10%)`; an alpha-beta
    turn: `AI plays 11-15   (score +0.12 at depth 7, 8000 positions; line 11-15 23-19 8-11)`,
    its line written move by move from `start` (the position the AI moved from; without it,
    action by action)."""
    if turn.line is not None:
        line = " ".join(line_moves(env, start, turn.line)) if start is not None else \
            " ".join(env.action_to_str(a) for a in turn.line)
        return (f"AI plays {env.format_move(turn.actions)}   (score {turn.value:+.2f} at depth "
                f"{turn.depth}, {turn.positions} positions; line {line})")
    tops = ", ".join(f"{name} {share:.0%}" for name, share in top_moves(env, turn.visits))
    return (f"AI plays {env.format_move(turn.actions)}   (expected score "
            f"{turn.value:+.2f}; top moves {tops})")


def line_moves(env: Env, state: Any, line: list[int]) -> list[str]:
    """A line of actions from `state` in the game's notation, whole move by whole move (a
    draughts multi-jump's hops as one capture); a last move cut short is written as far as
    it goes."""
    moves, _ = whole_moves(env, line, state)
    return [env.format_move(hops) for _, hops in moves]
