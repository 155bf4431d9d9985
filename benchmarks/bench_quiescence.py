"""What quiescence costs a model's search: seconds per batched search, plain and with
`search.quiescence` / `search.quiescence_moves` settings.

    python benchmarks/bench_quiescence.py [--model experiments/models/draughts_openspiel]
        [--batch 100] [--plies 20]
        [--simulations 1024] [--rounds 2]
        [--variants "" "quiescence=1" "quiescence=2,quiescence_moves=2" ...]

Each variant is a comma-separated list of `search.` overrides (empty: the model's own search).
All search the same positions (after `--plies` uniformly random moves, forced moves played) at
the model's greedy setting (no noise); the table shows the median seconds of `--rounds`
interleaved rounds after one compiled warm-up, the ratio to the first variant, and the share of
positions whose move the variant changed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import jax
import numpy as np

from azjax.agent import Agent
from azjax.envs.core import random_positions
from azjax.envs.forced import forced_moves_played
from azjax.training.metrics import machine_description

REPO_ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Quiescence belongs to the tree search: by default, the draughts model that plays one.
    parser.add_argument("--model", default=str(REPO_ROOT / "experiments" / "models"
                                               / "draughts_openspiel"))
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--plies", type=int, default=20)
    parser.add_argument("--simulations", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", nargs="+", default=[
        "", "quiescence=1", "quiescence=2,quiescence_moves=2", "quiescence=2"])
    args = parser.parse_args()

    agent = Agent.load(args.model)
    states = random_positions(forced_moves_played(agent.env), jax.random.PRNGKey(0),
                              args.batch, args.plies)
    variables = {"params": agent.params}
    calls = {}
    for variant in args.variants:
        searched = agent.with_search([f"search.{o}" for o in variant.split(",") if o])
        calls[variant] = jax.jit(lambda key, s=searched: s.search_fn(
            variables, key, states, num_simulations=args.simulations, noise=False).action)
        jax.block_until_ready(calls[variant](jax.random.PRNGKey(0)))  # compile
    times = {variant: [] for variant in calls}
    actions = {}
    for r in range(args.rounds):
        for variant, call in calls.items():
            start = time.perf_counter()
            actions[variant] = np.asarray(jax.block_until_ready(call(jax.random.PRNGKey(r))))
            times[variant].append(time.perf_counter() - start)
    print(f"{args.model}: {args.batch} positions after {args.plies} plies, "
          f"{args.simulations} simulations, median of {args.rounds} rounds; "
          f"{machine_description()}")
    print(f"{'variant':<40} {'s per search':>13} {'x plain':>8} {'moves changed':>14}")
    first = args.variants[0]
    for variant in args.variants:
        seconds = statistics.median(times[variant])
        changed = np.mean(actions[variant] != actions[first])
        print(f"{variant or '(model default)':<40} {seconds:13.2f} "
              f"{seconds / statistics.median(times[first]):8.2f} {changed:14.2f}")


if __name__ == "__main__":
    main()
