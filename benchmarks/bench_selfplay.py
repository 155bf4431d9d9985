"""Self-play throughput of azjax's connect-four config against a plain pgx + mctx loop.

azjax side: the pieces training builds (`envs.make`, `make_network` / `init_network`,
`make_search`, `make_selfplay` + `init_selfplay`), one jitted self-play chunk of T steps x B
games, the state donated and carried from call to call as in training.

Reference side: ONE `jax.jit` over a `lax.scan` of T steps; each step runs the same stock mctx
policy call (same algorithm, simulations, considered actions, qtransform: mctx's own loop, walk
and backup, as installed) with root_fn/recurrent_fn over
`pgx.make("connect_four")` states and the SAME flax apply function and params, samples the
search's action, steps the games and resets finished ones in place. A throughput reference:
no trajectory records, no value targets, no random openings, no temperature schedule.

A third row times the network alone (the same apply and params on random boards, batch B, in a
jitted scan of dependent calls): the ceiling for (num_simulations + 1) evaluations per position.

Both sides are compiled and warmed up first; then every round times each side once (the order
alternates between rounds), and the table shows medians.

    python benchmarks/bench_selfplay.py                      # config's search, B = 128, T = 42
    python benchmarks/bench_selfplay.py --batch 256 --rounds 7 --simulations 32
    python benchmarks/bench_selfplay.py --set selfplay.tree_reuse=true   # azjax keeps its trees
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import mctx
import pgx

from azjax import envs
from azjax.config import ExperimentConfig, load_config
from azjax.core.network import count_flops, init_network, make_network
from azjax.core.search import make_search, make_search_engine, qtransform_from_name
from azjax.core.selfplay import init_selfplay, make_selfplay, resolve_lengths
from azjax.training.metrics import machine_description

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "connect_four.yaml"
PEAK_SIZE = 2048  # the square float32 matmul whose speed here is the "peak" column's 100%
_ILLEGAL = -1e9


# ---- configuration ---------------------------------------------------------------------------


def build_config(args: argparse.Namespace) -> tuple[ExperimentConfig, str]:
    """The experiment config (file or defaults) with the benchmark's flags applied."""
    path = Path(args.config)
    if path.is_file():
        inside = path.resolve().is_relative_to(Path.cwd())
        config, source = (load_config(path, args.overrides),
                          os.path.relpath(path) if inside else str(path))
    else:
        if args.overrides:
            raise SystemExit("--set needs a config file (--config)")
        config, source = ExperimentConfig(game="connect_four"), "ExperimentConfig defaults"
    if config.game != "connect_four":
        raise SystemExit(f"{source}: game is {config.game!r}; this benchmark is connect_four")
    search = config.search
    if args.simulations:
        search = dataclasses.replace(search, num_simulations=args.simulations)
    selfplay = dataclasses.replace(config.selfplay, batch_size=args.batch or
                                   config.selfplay.batch_size, chunk_length=args.steps)
    return dataclasses.replace(config, search=search, selfplay=selfplay), source


qtransform_for = qtransform_from_name  # the same mapping training uses


# ---- azjax side ------------------------------------------------------------------------------


def make_azjax(config: ExperimentConfig, apply_fn, key: jax.Array):
    """(jitted chunk(variables, key, state) -> state, its initial state)."""
    env = envs.make(config.game)
    search_fn = make_search(env, apply_fn, config.search)
    engine = (make_search_engine(env, apply_fn, config.search) if config.selfplay.tree_reuse
              else None)
    selfplay = make_selfplay(env, search_fn, config.selfplay, engine=engine)

    state = init_selfplay(env, config.selfplay, key)
    state = jax.tree.map(lambda x: jnp.array(x, copy=True), state)  # distinct donated buffers
    # Returns (state, positions, emit, stats), all kept live as training consumes them.
    return jax.jit(selfplay, donate_argnums=(2,)), state


# ---- reference side: plain pgx + mctx -------------------------------------------------------


def make_reference(config: ExperimentConfig, apply_fn, key: jax.Array):
    """(jitted run(variables, key, states) -> (states, mean root value), initial states)."""
    env = pgx.make("connect_four")
    batch, steps = config.selfplay.batch_size, config.selfplay.chunk_length
    search = config.search
    qtransform = qtransform_for(search.qtransform)
    step = jax.vmap(env.step)
    init = jax.vmap(env.init)

    def evaluate(variables, states):
        logits, value = apply_fn(variables, states.observation.astype(jnp.float32))
        return jnp.where(states.legal_action_mask, logits, _ILLEGAL), value

    def root_fn(variables, states):
        logits, value = evaluate(variables, states)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)

    def recurrent_fn(variables, key, action, states):
        del key
        mover = states.current_player
        states = step(states, action)
        logits, value = evaluate(variables, states)
        reward = jnp.take_along_axis(states.rewards, mover[:, None], axis=1)[:, 0]
        done = states.terminated | states.truncated
        out = mctx.RecurrentFnOutput(
            reward=reward, discount=jnp.where(done, 0.0, -1.0),
            prior_logits=logits, value=jnp.where(done, 0.0, value))
        return out, states

    def policy(variables, key, states):
        root = root_fn(variables, states)
        invalid = ~states.legal_action_mask
        if search.algorithm == "gumbel":
            return mctx.gumbel_muzero_policy(
                variables, key, root, recurrent_fn, num_simulations=search.num_simulations,
                invalid_actions=invalid, qtransform=qtransform,
                max_num_considered_actions=search.max_num_considered_actions,
                gumbel_scale=search.gumbel_scale)
        return mctx.muzero_policy(
            variables, key, root, recurrent_fn, num_simulations=search.num_simulations,
            invalid_actions=invalid, qtransform=qtransform,
            dirichlet_fraction=search.dirichlet_fraction,
            dirichlet_alpha=search.dirichlet_alpha,
            pb_c_init=search.pb_c_init, pb_c_base=search.pb_c_base)

    def play_step(variables, states, key):
        k_search, k_reset = jax.random.split(key)
        out = policy(variables, k_search, states)
        states = step(states, out.action)
        done = states.terminated | states.truncated
        fresh = init(jax.random.split(k_reset, batch))
        states = jax.tree.map(
            lambda f, s: jnp.where(done.reshape(-1, *[1] * (s.ndim - 1)), f, s), fresh, states)
        return states, jnp.mean(out.search_tree.summary().value)

    def run(variables, key, states):
        states, root_values = jax.lax.scan(
            functools.partial(play_step, variables), states, jax.random.split(key, steps))
        return states, jnp.mean(root_values)

    states = init(jax.random.split(key, batch))
    states = jax.tree.map(lambda x: jnp.array(x, copy=True), states)
    return jax.jit(run, donate_argnums=(2,)), states


# ---- the network alone -----------------------------------------------------------------------


def make_network_only(apply_fn, batch: int, calls: int, observation_shape):
    """jitted run(variables, key) -> checksum: `calls` dependent applies on [B, *obs]."""

    def run(variables, key):
        obs = jax.random.bernoulli(key, 0.3, (batch, *observation_shape)).astype(jnp.float32)

        def body(x, _):
            logits, value = apply_fn(variables, x)
            # a cheap data dependency so XLA cannot hoist or merge the calls
            x = x * (1.0 + 1e-6 * (value + logits[:, 0])).reshape(-1, 1, 1, 1)
            return x, None

        x, _ = jax.lax.scan(body, obs, None, length=calls)
        return jnp.sum(x)

    return jax.jit(run)


def matmul_gflops(size: int = PEAK_SIZE, repeats: int = 5) -> float:
    """GFLOP/s of the fastest of `repeats` jitted [size, size] @ [size, size] float32 products
    (2 size**3 FLOPs each) on the default device, after one warm-up: the dense-algebra ceiling
    this machine reaches, measured in the same run rather than taken from a spec sheet (a
    2-core VM's cores differ from machine to machine)."""
    a, b = (jax.random.normal(k, (size, size), jnp.float32)
            for k in jax.random.split(jax.random.PRNGKey(0)))
    product = jax.jit(jnp.matmul)
    jax.block_until_ready(product(a, b))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(product(a, b))
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


# ---- host ------------------------------------------------------------------------------------


def machine() -> str:
    return f"{machine_description()}, mctx {mctx.__version__}, pgx {pgx.__version__}"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG),
                        help="experiment YAML (missing: ExperimentConfig(game='connect_four'))")
    parser.add_argument("--batch", type=int, default=128,
                        help="games in lockstep (0 = the config's selfplay.batch_size)")
    parser.add_argument("--steps", type=int, default=42,
                        help="steps per chunk; azjax needs >= the longest game (42 here)")
    parser.add_argument("--simulations", type=int, default=0,
                        help="search simulations (0 = the config's search.num_simulations)")
    parser.add_argument("--rounds", type=int, default=5, help="timed interleaved rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a config override for azjax's side, e.g. "
                        "selfplay.tree_reuse=true or search.solver=true (repeatable)")
    args = parser.parse_args()
    config, source = build_config(args)
    env = envs.make(config.game)
    try:
        resolve_lengths(env, config.selfplay)
    except ValueError as error:
        parser.error(f"--steps: {error}")
    batch, steps = config.selfplay.batch_size, config.selfplay.chunk_length
    sims = config.search.num_simulations
    positions = batch * steps
    evals = sims + 1  # one root evaluation + one per simulation

    key = jax.random.PRNGKey(args.seed)
    k_net, k_az, k_ref, k_run = jax.random.split(key, 4)
    _, apply_fn = make_network(config.network, env.num_actions)
    variables = init_network(config.network, env.num_actions, env.observation_shape, k_net)
    flops = count_flops(apply_fn, variables, env.observation_shape, batch_size=1)
    params_count = sum(x.size for x in jax.tree.leaves(variables))

    azjax_chunk, az_state = make_azjax(config, apply_fn, k_az)
    ref_run, ref_states = make_reference(config, apply_fn, k_ref)
    net_calls = max(1, steps * evals // 8)  # an eighth of a chunk's evaluations
    net_run = make_network_only(apply_fn, batch, net_calls, env.observation_shape)

    # Compile ahead of time (timed), then one warm-up call each. Each side keeps its games
    # running from call to call, as training does; the state argument is donated.
    state = {"azjax": az_state, "pgx": ref_states, "network": None}
    jitted = {"azjax": azjax_chunk, "pgx": ref_run, "network": net_run}
    compiled, compile_s = {}, {}
    for name, fn in jitted.items():
        args_ = (variables, k_run) if name == "network" else (variables, k_run, state[name])
        start = time.perf_counter()
        compiled[name] = fn.lower(*args_).compile()
        compile_s[name] = time.perf_counter() - start

    def call(name: str, key: jax.Array) -> tuple[float, float]:
        """(wall s, this process's CPU s) of one call."""
        wall, cpu = time.perf_counter(), time.process_time()
        if name == "network":
            jax.block_until_ready(compiled[name](variables, key))
        else:
            out = compiled[name](variables, key, state[name])
            jax.block_until_ready(out)
            state[name] = out[0]
        return time.perf_counter() - wall, time.process_time() - cpu

    names = tuple(jitted)
    for name in names:
        call(name, jax.random.fold_in(k_run, 10_000))
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    load_before = load_average()
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else tuple(reversed(names)):
            w, c = call(name, jax.random.fold_in(k_run, r))
            wall[name].append(w)
            cpu[name].append(c)
    load_after = load_average()
    peak = matmul_gflops()

    search = config.search
    algo = "gumbel_muzero_policy" if search.algorithm == "gumbel" else "muzero_policy"
    extra = (f", max_num_considered_actions={search.max_num_considered_actions}"
             if search.algorithm == "gumbel" else "")
    net = config.network
    print(f"machine: {machine()}")
    print(f"load average (1/5/15 min): before the timed rounds {load_before}; after {load_after}")
    size = net.width if net.kind == "resmlp" else net.channels
    print(f"config: {source}; network {net.kind} {size}x{net.blocks} "
          f"({params_count:,} parameters, {flops / 1e6:.2f} MFLOP per evaluation)")
    changed = f"; azjax's config with {', '.join(args.overrides)}" if args.overrides else ""
    print(f"search: {algo}, num_simulations={sims}{extra}, qtransform={search.qtransform}"
          f"{changed}")
    print(f"chunk: {steps} steps x {batch} games = {positions:,} positions, {evals} network "
          f"evaluations per position; medians of {args.rounds} interleaved rounds")
    print()
    print_table(wall, cpu, compile_s, positions=positions, evals=evals, flops=flops,
                net_evals=batch * net_calls, peak=peak, net_label=f"network alone (B={batch}, "
                f"{net_calls} calls)")
    print()
    ratio = statistics.median(wall["pgx"]) / statistics.median(wall["azjax"])
    ratio_cpu = statistics.median(cpu["pgx"]) / statistics.median(cpu["azjax"])
    per_round = ", ".join(f"{p / a:.2f}" for a, p in zip(wall["azjax"], wall["pgx"], strict=True))
    print(f"azjax/pgx throughput ratio: {ratio:.2f}x by wall time (per round: {per_round}); "
          f"{ratio_cpu:.2f}x by CPU time")
    print("round wall times (s): " + "; ".join(
        f"{name} {min(t):.2f}-{max(t):.2f}" for name, t in wall.items()))


def print_table(wall, cpu, compile_s, *, positions, evals, flops, net_evals, peak, net_label):
    """The markdown table: one row per side, and the network alone scaled to one chunk; "of
    peak" is GFLOP/s over `peak`, this machine's float32 matmul GFLOP/s."""
    med = {name: statistics.median(t) for name, t in wall.items()}
    med_cpu = {name: statistics.median(t) for name, t in cpu.items()}
    net_rate = net_evals / med["network"]  # evaluations/s of the network alone
    header = (f"| {'side':<34} | {'wall s':>6} | {'CPU s':>6} | {'positions/s':>11} | "
              f"{'net evals/s':>11} | {'GFLOP/s':>7} | {'of peak':>7} | "
              f"{'compile s':>9} |")
    print(header)
    print("|" + "|".join("-" * (len(c) - 1) + ":" if i else "-" * len(c)
                         for i, c in enumerate(header.split("|")[1:-1])) + "|")
    rows = [("azjax", "azjax make_selfplay (one chunk)"),
            ("pgx", "pgx + mctx reference (one chunk)")]
    for name, label in rows:
        pos_s = positions / med[name]
        ev_s = pos_s * evals
        gflops = ev_s * flops / 1e9
        print(f"| {label:<34} | {med[name]:>6.2f} | {med_cpu[name]:>6.2f} | {pos_s:>11,.0f} | "
              f"{ev_s:>11,.0f} | {gflops:>7.2f} | {100 * gflops / peak:>6.1f}% | "
              f"{compile_s[name]:>9.1f} |")
    scale = positions * evals / net_evals  # network calls per chunk / calls timed
    gflops = net_rate * flops / 1e9
    print(f"| {net_label:<34} | {med['network'] * scale:>6.2f} | "
          f"{med_cpu['network'] * scale:>6.2f} | {'':>11} | {net_rate:>11,.0f} | "
          f"{gflops:>7.2f} | {100 * gflops / peak:>6.1f}% | "
          f"{compile_s['network']:>9.1f} |")
    print(f"(network row: times scaled to one chunk's {positions * evals:,} evaluations; "
          f"peak = a {PEAK_SIZE}x{PEAK_SIZE} float32 matmul here, {peak:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
