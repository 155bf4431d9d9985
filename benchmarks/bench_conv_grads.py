"""The 3x3 conv's forward pass and both gradients on XLA:CPU, against hand-written versions.

    python benchmarks/bench_conv_grads.py

Input gradient: XLA's own vs a forward conv of the output gradient with the flipped,
transposed kernel. Kernel gradient: XLA's own vs a row-Toeplitz matmul
([N H, 3 W C]^T @ [N H, W O], then the band summed into 3x3) vs im2col patches
([N H W, 9 C]^T @ [N H W, O]). Each is checked against XLA's gradient, then timed: median of
7 interleaved rounds (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
from jax import lax

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=_DIMENSIONS)


def input_grad_xla(x, dy, w):
    return jax.vjp(lambda x: conv(x, w), x)[1](dy)[0]


def input_grad_flipped(x, dy, w):
    del x
    return conv(dy, jnp.transpose(w[::-1, ::-1], (0, 1, 3, 2)))


def kernel_grad_xla(x, dy, w):
    return jax.vjp(lambda w: conv(x, w), w)[1](dy)[0]


def kernel_grad_toeplitz(x, dy, w):
    del w
    n, h, width, c = x.shape
    o = dy.shape[-1]
    padded = jnp.pad(x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    rows = jnp.stack([padded[:, k:k + h] for k in range(3)], axis=2).reshape(n * h, -1)
    band = (rows.T @ dy.reshape(n * h, width * o)).reshape(3, width, c, width, o)
    return jnp.stack([jnp.diagonal(band, offset=1 - kw, axis1=1, axis2=3).sum(-1)
                      for kw in range(3)], axis=1)


def kernel_grad_patches(x, dy, w):
    del w
    n, h, width, c = x.shape
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    patches = jnp.concatenate([padded[:, i:i + h, j:j + width]
                               for i in range(3) for j in range(3)], -1).reshape(-1, 9 * c)
    return (patches.T @ dy.reshape(-1, dy.shape[-1])).reshape(3, 3, c, -1)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    methods = {"forward (XLA)": lambda x, dy, w: conv(x, w),
               "input grad XLA": input_grad_xla, "input grad flipped": input_grad_flipped,
               "kernel grad XLA": kernel_grad_xla, "kernel grad Toeplitz": kernel_grad_toeplitz,
               "kernel grad patches": kernel_grad_patches}
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    for shape in ((512, 6, 7, 32), (512, 8, 8, 32), (512, 6, 7, 64)):
        c = shape[-1]
        x, dy = jax.random.normal(keys[0], shape), jax.random.normal(keys[1], shape)
        w = jax.random.normal(keys[2], (3, 3, c, c))
        compiled = {name: jax.jit(fn) for name, fn in methods.items()}
        for name, fn in compiled.items():
            reference = compiled["input grad XLA" if "input" in name else "kernel grad XLA"]
            if "grad" in name:
                error = float(jnp.max(jnp.abs(fn(x, dy, w) - reference(x, dy, w))))
                assert error < 1e-2, (name, error)
        times = {name: [] for name in compiled}
        for _ in range(7):
            for name, fn in compiled.items():
                start = time.perf_counter()
                fn(x, dy, w).block_until_ready()
                times[name].append(time.perf_counter() - start)
        print(f"batch x H x W x C = {' x '.join(map(str, shape))}")
        for name, values in times.items():
            print(f"  {name:<22} {1000 * statistics.median(values):7.1f} ms")


if __name__ == "__main__":
    main()
