"""A model's oracle error under other play-time searches than the one it ships with.

    python tools/oracle_search_variants.py MODEL [--sets Test_L3_R1 ...]
        [--simulations 512] [--variants gumbel puct:by_parent_and_siblings puct:by_min_max]
        [--positions N] [--details N]

MODEL is anything `azjax.Agent.load` takes (a game id, an exported model dir). A variant is
`ALGORITHM[:QTRANSFORM]`: the model's search config with `search.algorithm` (and
`search.qtransform`) replaced, everything else kept. Prints one row per set and variant: the
error rate (greedy search, the move outside the value-preserving ones) and which positions
(0-based lines of the set's file) it got wrong, so that variants can be compared position by
position. `--details N` then shows the first N wrong positions of each row: the exact score of
every move (connect four's oracle files), the network's prior and value, and the search's
visit counts and value.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np

from azjax.agent import Agent
from azjax.evaluation.oracle import (
    DEFAULT_ORACLE_ROOT,
    load_oracle,
    oracle_files,
    read_oracle_file,
    wrong_moves,
)

_BATCH = 250  # positions per search call: keeps a 512-simulation tree of 7 actions small


def _agent_with_search(base: Agent, variant: str) -> Agent:
    algorithm, _, qtransform = variant.partition(":")
    changes = {"algorithm": algorithm} | ({"qtransform": qtransform} if qtransform else {})
    search = dataclasses.replace(base.config.search, **changes)
    return Agent(base.env, dataclasses.replace(base.config, search=search), base.params,
                 base.meta, base.source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--sets", nargs="+", default=["Test_L3_R1", "Test_L2_R2"])
    parser.add_argument("--simulations", type=int, default=512)
    parser.add_argument("--variants", nargs="+",
                        default=["gumbel", "puct:by_parent_and_siblings", "puct:by_min_max"])
    parser.add_argument("--positions", type=int, default=0, help="first N of each set (0: all)")
    parser.add_argument("--details", type=int, default=0, help="wrong positions shown per row")
    args = parser.parse_args()

    base = Agent.load(args.model)
    oracle = load_oracle(base.env)
    unknown = sorted(set(args.sets) - set(oracle))
    if unknown:
        parser.error(f"unknown oracle sets {unknown}; {base.env.name} has {sorted(oracle)}")
    print(f"{base!r}, {args.simulations} simulations")
    print(f"{'set':<16} | {'variant':<28} | {'error':>6} | {'time':>6} | wrong positions")
    for name in args.sets:
        oracle_set = oracle[name]
        count = args.positions or oracle_set.num_positions
        for variant in args.variants:
            agent = _agent_with_search(base, variant)
            start = time.perf_counter()
            outputs = []  # the greedy search's output per batch: its action is the move played
            for first in range(0, count, _BATCH):
                stop = min(first + _BATCH, count)
                states = jax.tree.map(lambda x, a=first, b=stop: x[a:b], oracle_set.states)
                outputs.append(jax.device_get(agent.search_output(
                    jax.random.PRNGKey(0), states, num_simulations=args.simulations)))
            out = jax.tree.map(lambda *x: np.concatenate(x), *outputs)
            wrong = np.asarray(wrong_moves(oracle_set.preserving[:count], out.action))
            seconds = time.perf_counter() - start
            print(f"{oracle_set.title:<16} | {variant:<28} | {100 * wrong.mean():5.1f}% | "
                  f"{seconds:5.0f}s | {np.flatnonzero(wrong).tolist()}", flush=True)
            if args.details:
                _show(agent, oracle_set, out, np.flatnonzero(wrong)[:args.details])


def _show(agent: Agent, oracle_set, out, positions: np.ndarray) -> None:
    """Per wrong position: exact move scores, prior, network value, and the search's visits
    and value (`out`: the set's `SearchOutput`, [P] leading axis)."""
    if positions.size == 0:
        return
    (path,) = [f for f in oracle_files(agent.env, DEFAULT_ORACLE_ROOT) if f.stem == oracle_set.name]
    records = read_oracle_file(path, num_actions=agent.env.num_actions, first_digit=1)
    prior, value = agent.evaluate(jax.tree.map(lambda x: x[positions], oracle_set.states))
    for row, position in enumerate(positions.tolist()):
        print(f"    #{position}: played {int(out.action[position])}, "
              f"exact move scores {list(records[position].child_scores)}")
        print(f"      prior {[round(float(p), 2) for p in prior[row]]}, "
              f"value {float(value[row]):+.2f}")
        print(f"      visits {out.visit_counts[position].tolist()}, "
              f"search value {float(out.value[position]):+.2f}")


if __name__ == "__main__":
    main()
