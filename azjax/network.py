"""The two-headed policy/value network: an AlphaZero ResNet, a residual MLP, or a small MLP.

The residual MLP (`kind: resmlp`) exists for CPUs: its layers are plain matmuls, which XLA:CPU
runs near its peak forward and backward, where the ResNet's convolution backward pass runs at a
fraction of it (docs/tuning-connect-four.md section 1).

Normalisation policy: stateless LayerNorm (over channels) in place of BatchNorm. The network
then has no batch statistics, so search, training and multi-device runs see the same function
with nothing to sync or switch between train and eval modes. `apply(..., train=...)` is
accepted for API stability and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from azjax.config import NetworkConfig

__all__ = ["ApplyFn", "PolicyValueNet", "init_network", "make_network", "count_flops"]

# apply(variables, obs[B, *obs], *, train=False) -> (logits[B, A], value[B])
ApplyFn = Callable[..., tuple[jax.Array, jax.Array]]


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

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        x = _conv_norm_relu(cfg.channels, obs)
        for _ in range(cfg.blocks):
            x = _ResidualBlock(cfg.channels)(x)
        p = _head_features(cfg.policy_channels, cfg.head_norm, x)
        logits = nn.Dense(self.num_actions)(p.reshape(p.shape[0], -1))
        v = _head_features(cfg.value_channels, cfg.head_norm, x)
        v = nn.relu(nn.Dense(cfg.value_hidden)(v.reshape(v.shape[0], -1)))
        value = jnp.tanh(nn.Dense(1)(v))[:, 0]
        return logits, value


class _MLP(nn.Module):
    config: NetworkConfig
    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = obs.reshape(obs.shape[0], -1)
        for width in self.config.hidden:
            x = nn.relu(nn.Dense(width)(x))
        logits = nn.Dense(self.num_actions)(x)
        value = jnp.tanh(nn.Dense(1)(x))[:, 0]
        return logits, value


class _ResidualMLPBlock(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Pre-norm: x + W2 relu(LN(W1 relu(LN(x)))), [B, width] -> [B, width]."""
        y = nn.Dense(self.width)(nn.relu(nn.LayerNorm()(x)))
        y = nn.Dense(self.width)(nn.relu(nn.LayerNorm()(y)))
        return x + y


class _ResidualMLP(nn.Module):
    config: NetworkConfig
    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        x = obs
        for _ in range(cfg.stem_layers):
            x = _conv_norm_relu(cfg.stem_channels, x)
        x = nn.Dense(cfg.width)(x.reshape(x.shape[0], -1))
        for _ in range(cfg.blocks):
            x = _ResidualMLPBlock(cfg.width)(x)
        x = nn.relu(nn.LayerNorm()(x))
        logits = nn.Dense(self.num_actions)(x)
        v = nn.relu(nn.Dense(cfg.value_hidden)(x))
        value = jnp.tanh(nn.Dense(1)(v))[:, 0]
        return logits, value


_BODIES = {"resnet": _ResNet, "resmlp": _ResidualMLP, "mlp": _MLP}


class PolicyValueNet(nn.Module):
    """obs float32[B, *obs] -> (logits float32[B, A], value float32[B] in [-1, 1])."""

    config: NetworkConfig
    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array, *, train: bool = False) -> tuple[jax.Array, jax.Array]:
        del train  # stateless normalisation: train and eval are the same function
        body = _BODIES[self.config.kind]
        return body(self.config, self.num_actions, name=self.config.kind)(obs)


def make_network(config: NetworkConfig, num_actions: int) -> tuple[PolicyValueNet, ApplyFn]:
    """The module and its apply function `apply(variables, obs float32 [B, *obs], *,
    train=False) -> (logits float32 [B, A], value float32 [B])`."""
    module = PolicyValueNet(config, num_actions)

    def apply(variables, obs: jax.Array, *, train: bool = False):
        return module.apply(variables, obs, train=train)

    return module, apply


def init_network(config: NetworkConfig, num_actions: int, observation_shape: tuple[int, ...],
                 key: jax.Array) -> dict:
    """Fresh variables ({"params": ...}) for the network."""
    module = PolicyValueNet(config, num_actions)
    return module.init(key, jnp.zeros((1, *observation_shape), jnp.float32))


def count_flops(apply: ApplyFn, variables: dict, observation_shape: tuple[int, ...],
                batch_size: int = 1) -> float:
    """FLOPs of one forward pass for `batch_size` observations, from XLA's cost analysis."""
    obs = jnp.zeros((batch_size, *observation_shape), jnp.float32)
    compiled = jax.jit(apply).lower(variables, obs).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    return float(analysis.get("flops", 0.0))
