"""What a network costs on this machine: FLOPs per evaluation, inference and training rates.

    python benchmarks/bench_networks.py [--game connect_four] [--nets resnet:32x4 resmlp:512x3]
                                         [--infer-batch 256] [--train-batch 512] [--rounds 5]
                                         [--matmul-dtypes float32 bfloat16]

A net is `resnet:CHANNELSxBLOCKS`, `resmlp:WIDTHxBLOCKS` (with a conv stem:
`resmlp:WIDTHxBLOCKS+LAYERSxCHANNELS`) or `mlp:W1-W2-...`. For each it prints
parameters, forward FLOPs per evaluation (XLA's cost analysis), network evaluations/s at the
inference batch (what one search step asks for) and training samples/s at the train batch (one
value-and-grad of the AlphaZero loss plus an Adam update, ~3x the forward FLOPs), each with the
GFLOP/s it reaches. Medians over interleaved rounds; compare nets within one run. Each
`--matmul-dtypes` entry is a row per net: "bfloat16" multiplies the trunk's dense layers in
bfloat16, accumulating in float32 (`search.matmul_dtype`; the parameters stay float32).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import optax

from azjax import envs
from azjax.config import NetworkConfig
from azjax.core.network import count_flops, init_network, make_network


def parse_net(spec: str) -> NetworkConfig:
    kind, _, shape = spec.partition(":")
    if kind == "resnet":
        channels, blocks = shape.split("x")
        return NetworkConfig(kind="resnet", channels=int(channels), blocks=int(blocks))
    if kind == "resmlp":  # WIDTHxBLOCKS, or WIDTHxBLOCKS+LAYERSxCHANNELS with a conv stem
        mlp, _, stem = shape.partition("+")
        width, blocks = mlp.split("x")
        layers, channels = stem.split("x") if stem else (0, 32)
        return NetworkConfig(kind="resmlp", width=int(width), blocks=int(blocks),
                             stem_layers=int(layers), stem_channels=int(channels))
    if kind == "mlp":
        return NetworkConfig(kind="mlp", hidden=tuple(int(w) for w in shape.split("-")))
    raise SystemExit(f"--nets: cannot read {spec!r} (resnet:32x4, resmlp:512x3 or mlp:256-256)")


def build(config: NetworkConfig, env, infer_batch: int, train_batch: int,
          matmul_dtype: str = "float32"):
    """Jitted (infer(params, obs), train(params, opt_state, batch)) and their inputs."""
    shape = env.observation_shape
    _, apply = make_network(config, env.num_actions, matmul_dtype=matmul_dtype)
    variables = init_network(config, env.num_actions, shape, jax.random.PRNGKey(0))
    params = variables["params"]
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(params)
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    infer_obs = jax.random.bernoulli(keys[0], 0.3, (infer_batch, *shape)).astype(jnp.float32)
    batch = (jax.random.bernoulli(keys[1], 0.3, (train_batch, *shape)).astype(jnp.float32),
             jax.nn.softmax(jax.random.normal(keys[2], (train_batch, env.num_actions))),
             jax.random.uniform(keys[3], (train_batch,), minval=-1.0, maxval=1.0))

    @jax.jit
    def infer(params, obs):
        return apply({"params": params}, obs)

    def loss(params, batch):
        obs, policy, value = batch
        logits, v = apply({"params": params}, obs, train=True)
        return jnp.mean((v - value) ** 2) - jnp.mean(
            jnp.sum(policy * jax.nn.log_softmax(logits), -1))

    @jax.jit
    def train(params, opt_state, batch):
        grads = jax.grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    flops = count_flops(apply, variables, shape, infer_batch) / infer_batch
    n_params = sum(x.size for x in jax.tree.leaves(params))
    return infer, train, params, opt_state, infer_obs, batch, flops, n_params


def seconds(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile and warm up
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--nets", nargs="+", default=["resnet:32x4", "resnet:64x4",
                                                      "resmlp:256x3", "resmlp:512x3",
                                                      "resmlp:1024x3"])
    parser.add_argument("--infer-batch", type=int, default=256)
    parser.add_argument("--train-batch", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10, help="calls timed per round")
    parser.add_argument("--matmul-dtypes", nargs="+", default=["float32"],
                        choices=["float32", "bfloat16"])
    args = parser.parse_args()

    env = envs.make(args.game)
    nets = {spec + ("" if dtype == "float32" else " bf16"):
            build(parse_net(spec), env, args.infer_batch, args.train_batch, dtype)
            for spec in args.nets for dtype in args.matmul_dtypes}
    infer_s = {spec: [] for spec in nets}
    train_s = {spec: [] for spec in nets}
    for _ in range(args.rounds):
        for spec, (infer, train, params, opt_state, obs, batch, _, _) in nets.items():
            infer_s[spec].append(seconds(infer, params, obs, repeats=args.repeats))
            train_s[spec].append(seconds(train, params, opt_state, batch, repeats=args.repeats))

    print(f"{args.game}, {jax.devices()[0].platform}, inference batch {args.infer_batch}, "
          f"train batch {args.train_batch}, median of {args.rounds} interleaved rounds")
    print(f"{'net':>20} {'params':>9} {'MFLOP/eval':>10} {'evals/s':>10} {'GFLOP/s':>8} "
          f"{'samples/s':>10} {'GFLOP/s*':>9}")
    for spec, (*_, flops, n_params) in nets.items():
        infer_rate = args.infer_batch / statistics.median(infer_s[spec])
        train_rate = args.train_batch / statistics.median(train_s[spec])
        print(f"{spec:>20} {n_params:>9,} {flops / 1e6:>10.2f} {infer_rate:>10,.0f} "
              f"{infer_rate * flops / 1e9:>8.1f} {train_rate:>10,.0f} "
              f"{3 * train_rate * flops / 1e9:>9.1f}")
    print("* training GFLOP/s counted as 3x the forward FLOPs per sample")


if __name__ == "__main__":
    main()
