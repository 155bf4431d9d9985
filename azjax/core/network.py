"""The two-headed policy/value network: an AlphaZero ResNet, a residual MLP, or a small MLP.

The residual MLP (`kind: resmlp`) exists for CPUs: its layers are plain matmuls, which XLA:CPU
runs near its peak forward and backward, where the ResNet's convolution backward pass runs at a
fraction of it (docs/results.md).

An optional head trained only as an auxiliary target, the game's final material, branches
from the value head's input (`PolicyValueNet`).

Normalisation policy: stateless LayerNorm (over channels) in place of BatchNorm. The network
then has no batch statistics, so search, training and multi-device runs see the same function
with nothing to sync or switch between train and eval modes. `apply(..., train=...)` is
accepted for API stability and changes nothing.

Matmul precision: `make_network(..., matmul_dtype="bfloat16")` multiplies the trunk's dense
layers' inputs and weights in bfloat16 and accumulates in float32 (weights stay float32
parameters, and everything between the matmuls stays float32). The heads stay float32, where
bfloat16 weakened the searching player (docs/results.md). The parameters are the same either
way, so one set of weights serves a float32 training step and a bfloat16 search
(`SearchConfig.matmul_dtype`), faster on CPUs with bfloat16 matmul instructions. Convolutions
stay float32 (bfloat16 gained nothing there), so the ResNet, whose dense layers are all in its
heads, is the same in both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

from azjax.config import NetworkConfig

__all__ = ["AUXILIARY_HEADS", "BODIES", "ApplyFn", "PolicyValueNet", "auxiliary_heads",
           "count_flops", "init_network", "make_network"]

# apply(variables, obs[B, *obs], *, train=False, material=False, auxiliary=False)
#   -> (logits[B, A], value[B]); + material[B] with material=True (NetworkConfig.material_head);
#   + the auxiliary heads' {name: output} with auxiliary=True (`AUXILIARY_HEADS`)
ApplyFn = Callable[..., tuple[jax.Array, ...]]
MatmulDtype = Literal["float32", "bfloat16"]


def _dense(matmul_dtype: MatmulDtype) -> Callable[..., nn.Dense]:
    """nn.Dense, or one whose matmul takes bfloat16 operands and accumulates (and returns) in
    float32: plain bfloat16 output gains nothing on XLA:CPU, and it would round the sums."""
    if matmul_dtype == "float32":
        return nn.Dense
    return functools.partial(nn.Dense, dtype=jnp.bfloat16, dot_general=functools.partial(
        jax.lax.dot_general, preferred_element_type=jnp.float32))


class _ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(x)
        y = nn.relu(nn.LayerNorm()(y))
        y = nn.Conv(self.channels, (3, 3), use_bias=False)(y)
        y = nn.LayerNorm()(y)
        return nn.relu(x + y)


def _conv_norm_relu(channels: int, x: jax.Array) -> jax.Array:
    """A 3x3 conv (no bias), LayerNorm over channels, ReLU: [B, H, W, C] -> [B, H, W, channels]."""
    return nn.relu(nn.LayerNorm()(nn.Conv(channels, (3, 3), use_bias=False)(x)))


def _head_features(channels: int, normalise: bool, x: jax.Array) -> jax.Array:
    """A head's 1x1 conv to 1-2 channels and its ReLU: [B, H, W, C] -> [B, H, W, channels].

    A LayerNorm over so few channels would erase them (over one it outputs a constant), so the
    norm, when on, runs over the board for each channel (the stateless stand-in for AlphaZero's
    BatchNorm here): every position then keeps active cells whatever the conv's weights, where a
    plain conv + ReLU can go negative on every cell and stop learning for good.
    """
    y = nn.Conv(channels, (1, 1), use_bias=not normalise)(x)
    if normalise:
        y = nn.LayerNorm(reduction_axes=(-3, -2), feature_axes=-1)(y)
    return nn.relu(y)


class _ResNet(nn.Module):
    config: NetworkConfig
    num_actions: int
    matmul_dtype: MatmulDtype = "float32"  # no effect: convs and heads stay float32

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, ...]:
        cfg = self.config
        x = _conv_norm_relu(cfg.channels, obs)
        for _ in range(cfg.blocks):
            x = _ResidualBlock(cfg.channels)(x)
        p = _head_features(cfg.policy_channels, cfg.head_norm, x)
        logits = nn.Dense(self.num_actions)(p.reshape(p.shape[0], -1))
        features = _head_features(cfg.value_channels, cfg.head_norm, x)
        features = features.reshape(features.shape[0], -1)
        v = nn.relu(nn.Dense(cfg.value_hidden)(features))
        value = jnp.tanh(nn.Dense(1)(v))[:, 0]
        return logits, value, features


class _MLP(nn.Module):
    config: NetworkConfig
    num_actions: int
    matmul_dtype: MatmulDtype = "float32"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, ...]:
        dense = _dense(self.matmul_dtype)
        x = obs.reshape(obs.shape[0], -1)
        for width in self.config.hidden:
            x = nn.relu(dense(width)(x))
        logits = nn.Dense(self.num_actions)(x)  # heads in float32 (module docstring)
        value = jnp.tanh(nn.Dense(1)(x))[:, 0]
        return logits, value, x


class _ResidualMLPBlock(nn.Module):
    width: int
    matmul_dtype: MatmulDtype = "float32"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Pre-norm: x + W2 relu(LN(W1 relu(LN(x)))), [B, width] -> [B, width]."""
        dense = _dense(self.matmul_dtype)
        y = dense(self.width)(nn.relu(nn.LayerNorm()(x)))
        y = dense(self.width)(nn.relu(nn.LayerNorm()(y)))
        return x + y


class _ResidualMLP(nn.Module):
    config: NetworkConfig
    num_actions: int
    matmul_dtype: MatmulDtype = "float32"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, ...]:
        cfg = self.config
        dense = _dense(self.matmul_dtype)
        x = obs
        for _ in range(cfg.stem_layers):
            x = _conv_norm_relu(cfg.stem_channels, x)
        x = dense(cfg.width)(x.reshape(x.shape[0], -1))
        for _ in range(cfg.blocks):
            x = _ResidualMLPBlock(cfg.width, self.matmul_dtype)(x)
        x = nn.relu(nn.LayerNorm()(x))
        logits = nn.Dense(self.num_actions)(x)  # heads in float32 (module docstring)
        v = nn.relu(nn.Dense(cfg.value_hidden)(x))
        value = jnp.tanh(nn.Dense(1)(v))[:, 0]
        return logits, value, x


# The network kinds (`NetworkConfig.kind`) and their bodies: adding a kind is a Flax module
# here and its entry, plus its name in `NetworkConfig.kind`'s choices (tests/test_network.py
# checks the two agree). A body is `Body(config, num_actions, matmul_dtype)`, mapping obs
# float32 [B, *obs] to (logits float32 [B, A], value float32 [B] in [-1, 1], the value head's
# input float32 [B, F], which the auxiliary heads read).
BODIES: dict[str, type[nn.Module]] = {"resnet": _ResNet, "resmlp": _ResidualMLP, "mlp": _MLP}

# The auxiliary heads' outputs by name (`apply(..., auxiliary=True)`), each with the
# `NetworkConfig` switch that adds it: material float32 [B].
AUXILIARY_HEADS = {"material": "material_head"}


def auxiliary_heads(config: NetworkConfig) -> tuple[str, ...]:
    """The names of the auxiliary outputs a network of `config` has (`AUXILIARY_HEADS`)."""
    return tuple(name for name, switch in AUXILIARY_HEADS.items() if getattr(config, switch))


class PolicyValueNet(nn.Module):
    """obs float32[B, *obs] -> (logits float32[B, A], value float32[B] in [-1, 1]); with
    `material=True` also the material head's float32[B] (`NetworkConfig.material_head`), with
    `auxiliary=True` also a dict of every auxiliary head's output (`AUXILIARY_HEADS`).

    The auxiliary heads sit beside the body's parameters, so a network without them has the
    same tree, and they run only when asked for (and at `init`, which makes their
    parameters): the search's evaluations compute the material head only for
    `SearchConfig.material_utility`.
    """

    config: NetworkConfig
    num_actions: int
    matmul_dtype: MatmulDtype = "float32"

    @nn.compact
    def __call__(self, obs: jax.Array, *, train: bool = False, material: bool = False,
                 auxiliary: bool = False):
        del train  # stateless normalisation: train and eval are the same function
        cfg = self.config
        if material and not cfg.material_head:
            raise ValueError("material=True needs network.material_head")
        if material and auxiliary:
            raise ValueError("ask for material=True or auxiliary=True, not both")
        body = BODIES[cfg.kind]
        logits, value, features = body(cfg, self.num_actions, self.matmul_dtype,
                                       name=cfg.kind)(obs)
        wanted = auxiliary or self.is_initializing()
        heads = {}
        if cfg.material_head and (material or wanted):
            # Reads the value head's input; linear output (the target is not bounded by 1).
            m = nn.relu(nn.Dense(cfg.value_hidden, name="material_hidden")(features))
            heads["material"] = nn.Dense(1, name="material_out")(m)[:, 0]
        if material:
            return logits, value, heads["material"]
        return (logits, value, heads) if auxiliary else (logits, value)


def make_network(config: NetworkConfig, num_actions: int, *,
                 matmul_dtype: MatmulDtype = "float32") -> tuple[PolicyValueNet, ApplyFn]:
    """The network's module and its apply function.

    Args:
      config: the network's architecture.
      num_actions: A, the policy head's outputs.
      matmul_dtype: the trunk's dense layers' operand precision (module docstring); the
        parameters do not depend on it.

    Returns:
      (module, apply) with `apply(variables, obs float32 [B, *obs], *, train=False,
      material=False, auxiliary=False) -> (logits float32 [B, A], value float32 [B])`, plus
      the material head's float32 [B] when `material=True`, or the dict of the auxiliary
      heads' outputs (`AUXILIARY_HEADS`; {} for a network without any) when `auxiliary=True`.

    Raises:
      ValueError: for an unknown `matmul_dtype`.
    """
    if matmul_dtype not in ("float32", "bfloat16"):
        raise ValueError(f"matmul_dtype must be 'float32' or 'bfloat16', got {matmul_dtype!r}")
    module = PolicyValueNet(config, num_actions, matmul_dtype)

    def apply(variables, obs: jax.Array, *, train: bool = False, material: bool = False,
              auxiliary: bool = False):
        outputs = module.apply(variables, obs, train=train, material=material,
                               auxiliary=auxiliary)
        batch = obs.shape[0]
        chex.assert_shape(outputs[0], (batch, num_actions))
        if auxiliary:
            chex.assert_shape(outputs[1], (batch,))
            for head in outputs[2].values():
                chex.assert_shape(head, (batch,))
        else:
            chex.assert_shape(outputs[1:], (batch,))
        return outputs

    return module, apply


def init_network(config: NetworkConfig, num_actions: int, observation_shape: tuple[int, ...],
                 key: jax.Array) -> dict:
    """Fresh variables for the network.

    Args:
      config: the network's architecture; num_actions: A.
      observation_shape: `*obs`, one observation's shape.
      key: PRNG key for the initial weights.

    Returns:
      {"params": ...}, float32 parameters (the same for every `matmul_dtype`).
    """
    module = PolicyValueNet(config, num_actions)
    return module.init(key, jnp.zeros((1, *observation_shape), jnp.float32))


def count_flops(apply: ApplyFn, variables: dict, observation_shape: tuple[int, ...],
                batch_size: int = 1) -> float:
    """FLOPs of one forward pass, from XLA's cost analysis of the compiled apply.

    Args:
      apply: the network's apply function (`make_network`); variables: its variables.
      observation_shape: `*obs`; batch_size: B, observations per pass.

    Returns:
      The pass's floating-point operations (0.0 if XLA reports none).
    """
    obs = jnp.zeros((batch_size, *observation_shape), jnp.float32)
    compiled = jax.jit(apply).lower(variables, obs).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    return float(analysis.get("flops", 0.0))
