"""Matmul GFLOP/s in float32 and bfloat16 on this machine's XLA:CPU, and one 3x3 conv.

    python benchmarks/bench_matmul_dtypes.py
    XLA_FLAGS=--xla_cpu_use_onednn=true python benchmarks/bench_matmul_dtypes.py

Checks whether bf16 (AMX / AVX512-BF16 on recent Xeons and Zen 4/5) is any faster than fp32
here (docs/benchmarks.md), both as plain bf16 (bf16 out) and as bf16 operands
accumulating in float32 (`preferred_element_type`, what `search.matmul_dtype: bfloat16` runs).
Median of 10 calls per shape.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp


def _median_seconds(fn, *args, rounds: int = 10) -> float:
    fn(*args).block_until_ready()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    matmul = jax.jit(lambda a, b: a @ b)
    mixed = jax.jit(lambda a, b: jax.lax.dot(a, b, preferred_element_type=jnp.float32))
    conv = jax.jit(lambda x, w: jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    print(f"{'dtype':<9} {'matmul n':>8} {'GFLOP/s':>8}")
    for dtype in (jnp.float32, jnp.bfloat16):
        for n in (512, 1024, 2048):
            a = jnp.ones((n, n), dtype)
            seconds = _median_seconds(matmul, a, a)
            print(f"{jnp.dtype(dtype).name:<9} {n:>8} {2 * n ** 3 / seconds / 1e9:8.1f}")
    # The search's shape: 512 games in lockstep through a dense layer of 256-512 units.
    print(f"{'operands':<9} {'m x k x n':>15} {'GFLOP/s':>8}  (bf16 accumulating in f32)")
    for m, k, n in ((512, 256, 256), (512, 512, 512), (4096, 512, 512)):
        a, b = jnp.ones((m, k), jnp.bfloat16), jnp.ones((k, n), jnp.bfloat16)
        seconds = _median_seconds(mixed, a, b)
        print(f"{'bf16>f32':<9} {f'{m}x{k}x{n}':>15} {2 * m * k * n / seconds / 1e9:8.1f}")
    for dtype in (jnp.float32, jnp.bfloat16):  # the connect-four trunk's conv at batch 512
        x, w = jnp.ones((512, 6, 7, 32), dtype), jnp.ones((3, 3, 32, 32), dtype)
        print(f"3x3 conv 512x6x7x32 {jnp.dtype(dtype).name}: "
              f"{1000 * _median_seconds(conv, x, w):.2f} ms")


if __name__ == "__main__":
    main()
