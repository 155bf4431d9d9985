"""Speed of alpha-beta: the baseline `alphabeta:D` over the game's evaluation, or with `--model`
the model's network at the leaves (`search.algorithm: alphabeta`): seconds per move and nodes
per second.

Positions: draughts middle games, reached by 14-24 plies of `alphabeta:1` against itself after
6 random opening plies (live, with at least 6 pieces a side). Per depth, one game at a time
(the latency a person playing it sees: median and 90th percentile over the positions) and a
batch of games in lockstep (what an arena pays per move: median over 3 batches). Every
configuration is compiled and warmed up first.

    python benchmarks/bench_alphabeta.py                      # draughts, depths 2 4 6 8
    python benchmarks/bench_alphabeta.py --game connect_four --depths 4 6 8 --batch 64
    python benchmarks/bench_alphabeta.py --model draughts --depths 2 4 6  # the shipped network
    python benchmarks/bench_alphabeta.py --model draughts --depths 12 --cores 1  # on one core

`--cores N` runs the whole benchmark on N of the cores the process may use, chosen before
JAX starts (`azjax.apps.cores.on_cores`, as `azjax play --cores` does; 0: all of them).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.agent import Agent
from azjax.apps.cores import on_cores
from azjax.core.alphabeta import AlphaBetaConfig, alphabeta_search
from azjax.evaluation.alphabeta import alphabeta_player
from azjax.evaluation.baselines import random_player
from azjax.training.metrics import machine_description


def middle_games(env, num: int, seed: int) -> list:
    """`num` live positions: 6 random plies, then `alphabeta:1` for both sides, 14-24 plies."""
    rand, searcher = random_player(env), alphabeta_player(env, 1)
    rng = np.random.default_rng(seed)

    @jax.jit
    def play(key, plies):
        states = jax.vmap(env.init)(jax.random.split(key, 4 * num))

        def turn(i, carry):
            states, key = carry
            key, k = jax.random.split(key)
            actions = jnp.where(i < 6, rand(k, states), searcher(k, states))
            return jax.vmap(env.step)(states, actions), key

        return jax.lax.fori_loop(0, plies, turn, (states, key))[0]

    states = play(jax.random.PRNGKey(seed), int(rng.integers(20, 31)))
    live = ~np.asarray(states.terminated)
    if hasattr(states, "pieces"):  # draughts: a middle game still has pieces on the board
        counts = np.array([[bin(int(w)).count("1") for w in row] for row in
                           np.asarray(states.pieces)])
        live &= counts.min(axis=1) >= 6
    chosen = np.flatnonzero(live)[:num]
    return [jax.tree.map(lambda x, i=i: x[i], states) for i in chosen]


def searcher(env, depth: int, agent: Agent | None):
    """jit `(key, states [B]) -> nodes int32 [B]`, the positions each game's search stepped
    into: the baseline's search, or the agent's network searched by alpha-beta to `depth`."""
    if agent is None:
        config = AlphaBetaConfig(depth=depth)
        return jax.jit(lambda key, states: alphabeta_search(env, key, states, config).nodes)
    deep = agent.with_search(["search.algorithm=alphabeta", f"search.alphabeta_depth={depth}"])
    variables = {"params": deep.params}
    return jax.jit(lambda key, states: deep.search_fn(variables, key, states).visit_counts.sum(-1))


def time_search(env, depth: int, positions: list, batch: int, rounds: int,
                agent: Agent | None = None):
    """(seconds of each call, mean nodes per game, compile s): `rounds` calls on batches of
    `batch` positions, round r starting at position r."""
    search = searcher(env, depth, agent)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *positions)

    def batch_at(r):
        rows = (r + np.arange(batch)) % len(positions)
        return jax.tree.map(lambda x: jnp.asarray(x[rows]), stacked)

    start = time.perf_counter()
    jax.block_until_ready(search(jax.random.PRNGKey(0), batch_at(0)))
    compile_s = time.perf_counter() - start
    times, nodes = [], []
    for r in range(rounds):
        states = batch_at(r)
        tic = time.perf_counter()
        found = jax.block_until_ready(search(jax.random.PRNGKey(r + 1), states))
        times.append(time.perf_counter() - tic)
        nodes.append(float(np.mean(np.asarray(found))))
    return times, statistics.mean(nodes), compile_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="draughts")
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 6, 8])
    parser.add_argument("--batch", type=int, default=32, help="games in lockstep")
    parser.add_argument("--positions", type=int, default=100,
                        help="middle-game positions, each timed once as a single game")
    parser.add_argument("--model", default=None,
                        help="a model (game id, run dir or model dir): time its network searched "
                             "by alpha-beta instead of the baseline")
    parser.add_argument("--cores", type=int, default=0,
                        help="run on this many of the process's cores (0: all)")
    args = parser.parse_args()
    with on_cores(args.cores) as cores:  # before JAX starts: it sizes its threads by them
        run(args, cores)


def run(args: argparse.Namespace, cores: int) -> None:
    """The benchmark's table for `args`, on `cores` cores."""
    agent = None if args.model is None else Agent.load(args.model)
    env = envs.make(args.game) if agent is None else agent.env
    positions = middle_games(env, args.positions, seed=0)
    print(f"{machine_description()}; searching on {cores} of them")
    searched = "alphabeta:D" if agent is None else f"{args.model}'s network by alpha-beta"
    print(f"{env.name}: {len(positions)} middle-game positions, {searched}")
    print(f"{'depth':>5} {'s/move median':>14} {'s/move p90':>11} {'nodes/move':>11} "
          f"{'nodes/s':>10} {'s/move (' + str(args.batch) + ' games)':>20} {'moves/s':>8} "
          f"{'compile s':>10}")
    for depth in args.depths:
        singles, nodes, compile_s = time_search(env, depth, positions, 1, len(positions), agent)
        batched = statistics.median(time_search(env, depth, positions, args.batch, 3, agent)[0])
        median, p90 = np.percentile(singles, [50, 90])
        print(f"{depth:>5} {median:>14.3f} {p90:>11.3f} {nodes:>11.0f} "
              f"{nodes / statistics.mean(singles):>10.0f} {batched:>20.3f} "
              f"{args.batch / batched:>8.1f} {compile_s:>10.1f}")


if __name__ == "__main__":
    main()
