"""What XLA compiler options cost and save on the test suite's kind of program: seconds to
compile and to run small searches, the options interleaved round by round.

    python benchmarks/bench_compile.py [--rounds 4] [--batch 4]

The programs are what the tests compile most: a search over a tiny network (an 8-unit MLP,
8 simulations, `--batch` positions) of connect four by PUCT, draughts by Gumbel and draughts
by alpha-beta two whole moves deep. Each round lowers them afresh and compiles them under
every option set in turn (JAX's persistent cache off), so a machine whose speed drifts during
the run moves every column alike; the table shows the medians over `--rounds` and the ratio to
XLA's defaults. `tests/conftest.py` compiles the suite with the last row's options
(`FAST_COMPILE`); users' runs and the benchmarks compile with the defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"  # every compile is a real one

import jax  # noqa: E402

from azjax import envs  # noqa: E402
from azjax.config import NetworkConfig, SearchConfig  # noqa: E402
from azjax.core.network import init_network, make_network  # noqa: E402
from azjax.core.search import make_search  # noqa: E402
from azjax.training.metrics import machine_description  # noqa: E402

OPTIONS = {
    "XLA's defaults": {},
    "no LLVM optimisation passes": {"xla_backend_optimization_level": 0},
    "both, the suite's": {"xla_backend_optimization_level": 0,
                          "xla_cpu_use_fusion_emitters": False},
}
PROGRAMS = [("connect_four", "puct"), ("draughts", "gumbel"), ("draughts", "alphabeta")]


def _searches(batch: int):
    """[(search function, its arguments)] for `PROGRAMS` over a random 8-unit network."""
    net = NetworkConfig(kind="mlp", hidden=(8,))
    out = []
    for game, algorithm in PROGRAMS:
        env = envs.make(game)
        _, apply = make_network(net, env.num_actions)
        variables = init_network(net, env.num_actions, env.observation_shape,
                                 jax.random.PRNGKey(0))
        config = SearchConfig(algorithm=algorithm, num_simulations=8, alphabeta_depth=2)
        search = make_search(env, apply, config)
        states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(1), batch))
        out.append((search, (variables, jax.random.PRNGKey(2), states)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    searches = _searches(args.batch)
    compile_s = {name: [] for name in OPTIONS}
    run_s = {name: [] for name in OPTIONS}
    for _ in range(args.rounds):
        for name, options in OPTIONS.items():
            # A fresh jit per round: a lowered program keeps its compiled executable.
            lowered = [(jax.jit(lambda v, k, s, search=search: search(v, k, s, noise=False))
                        .lower(*arguments), arguments) for search, arguments in searches]
            start = time.perf_counter()
            compiled = [(low.compile(compiler_options=options), arguments)
                        for low, arguments in lowered]
            compile_s[name].append(time.perf_counter() - start)
            jax.block_until_ready([fn(*arguments) for fn, arguments in compiled])  # warm-up
            start = time.perf_counter()
            jax.block_until_ready([fn(*arguments) for fn, arguments in compiled])
            run_s[name].append(time.perf_counter() - start)
    base_compile = statistics.median(compile_s["XLA's defaults"])
    base_run = statistics.median(run_s["XLA's defaults"])
    print(f"{machine_description()}; {len(PROGRAMS)} programs, median of {args.rounds} rounds")
    print("| options | compile s | ratio | run ms | ratio |\n|---|---:|---:|---:|---:|")
    for name in OPTIONS:
        c, r = statistics.median(compile_s[name]), statistics.median(run_s[name])
        print(f"| {name} | {c:.2f} | {c / base_compile:.2f} | {1e3 * r:.1f} | "
              f"{r / base_run:.2f} |")


if __name__ == "__main__":
    main()
