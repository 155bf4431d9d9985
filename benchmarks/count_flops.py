"""FLOPs per network evaluation and parameters of each config's network (search never runs the
material head, so it is left out of the FLOPs but counted in the parameters).

    python benchmarks/count_flops.py experiments/connect_four.yaml experiments/draughts.yaml
"""

from __future__ import annotations

import argparse

import jax

import envs
from azjax.config import load_config
from azjax.core.network import count_flops, init_network, make_network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", help="experiment YAML files")
    args = parser.parse_args()
    print("| config | game | observation | FLOPs / evaluation | parameters |")
    print("|---|---|---|---:|---:|")
    for path in args.configs:
        config = load_config(path)
        env = envs.make(config.game)
        variables = init_network(config.network, env.num_actions, env.observation_shape,
                                 jax.random.PRNGKey(0))
        _, apply_fn = make_network(config.network, env.num_actions)
        flops = count_flops(apply_fn, variables, env.observation_shape)
        params = sum(int(leaf.size) for leaf in jax.tree.leaves(variables))
        print(f"| {path} | {config.game} | {list(env.observation_shape)} | {flops:,.0f} | "
              f"{params:,} |")


if __name__ == "__main__":
    main()
