"""FLOPs per network evaluation and per trained sample, and parameters, of each config's network:
what a run's compute accounting counts (`azjax.training.compute`). An evaluation is the search's
forward pass (its matmul dtype, symmetry averaging if on; search never runs the material head, so
it is left out of the FLOPs but counted in the parameters), measured at batch 256 and divided by
it; a trained sample is one compiled update step (forward, backward, optimizer) / the batch.

    python benchmarks/count_flops.py experiments/connect_four.yaml experiments/draughts.yaml
"""

from __future__ import annotations

import argparse

import jax

from azjax import envs
from azjax.config import load_config
from azjax.core.network import init_network
from azjax.training.compute import flop_costs, update_flops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", help="experiment YAML files")
    args = parser.parse_args()
    print("| config | game | observation | FLOPs / evaluation | FLOPs / trained sample | "
          "parameters |")
    print("|---|---|---|---:|---:|---:|")
    for path in args.configs:
        config = load_config(path)
        env = envs.make(config.game)
        variables = init_network(config.network, env.num_actions, env.observation_shape,
                                 jax.random.PRNGKey(0))
        costs = flop_costs(env, config, update_flops(env, config))
        params = sum(int(leaf.size) for leaf in jax.tree.leaves(variables))
        trained = f"{costs.per_trained_sample:,.0f}" + (
            "" if costs.trained_sample_source == "cost_analysis" else " (3x forward)")
        print(f"| {path} | {config.game} | {list(env.observation_shape)} | "
              f"{costs.per_evaluation:,.0f} | {trained} | {params:,} |")


if __name__ == "__main__":
    main()
