"""A fresh run started from a model's params (`train.init_params`) instead of a random network.

The model's network config must be the run's. Its game may differ from the run's only by
observation planes added at the end on the same board (a draughts model of OpenSpiel's rules,
7 planes, starting a run under the laws, 8): the first layer's weights for the added planes
start at zero, so the network computes exactly what the model did until training moves them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import envs
from azjax.config import ConfigError, ExperimentConfig
from azjax.envs.core import Env
from azjax.model_files import load_model

__all__ = ["warm_start_params", "widen_input"]


def widen_input(params: Any, template: Any, old_shape: tuple[int, ...],
                new_shape: tuple[int, ...]) -> Any:
    """`params` fitted to `template` (a network for `new_shape` observations): leaves of the
    template's shape are kept; a first layer that reads `old_shape` (a dense kernel over the
    flattened observation, [prod(old_shape), N], or a convolution kernel [kh, kw, C, N]) gets
    zero weights for the planes `new_shape` adds at the end.

    Args:
      params: the model's params.
      template: params of the same network for the new observation (shapes only are read).
      old_shape, new_shape: [..., C] and [..., C'] observation shapes, C' >= C, the rest equal.

    Returns:
      The fitted params (the template's structure).

    Raises:
      ValueError: one line, for a structure or shape that this does not fit.
    """
    if old_shape[:-1] != new_shape[:-1] or new_shape[-1] < old_shape[-1]:
        raise ValueError(f"the model reads observations {list(old_shape)} and this run's game "
                         f"{list(new_shape)}: only planes added at the end can be fitted")
    added = new_shape[-1] - old_shape[-1]
    old_flat, new_flat = int(np.prod(old_shape)), int(np.prod(new_shape))

    def fit(path, value, spec):
        value = jnp.asarray(value)
        if value.shape == spec.shape:
            return value
        where = jax.tree_util.keystr(path)
        if value.ndim == 2 and value.shape == (old_flat, spec.shape[1]) \
                and spec.shape[0] == new_flat:  # a dense layer over the flattened planes
            grid = value.reshape(*old_shape, value.shape[1])
            pad = [(0, 0)] * (len(old_shape) - 1) + [(0, added), (0, 0)]
            return jnp.pad(grid, pad).reshape(spec.shape)
        if value.ndim == 4 and value.shape[2] == old_shape[-1] \
                and spec.shape[2] == new_shape[-1]:  # a convolution over the planes
            return jnp.pad(value, [(0, 0), (0, 0), (0, added), (0, 0)])
        raise ValueError(f"the model's {where} is {list(value.shape)}, this run's network "
                         f"needs {list(spec.shape)}")

    if jax.tree.structure(params) != jax.tree.structure(template):
        raise ValueError("the model's network has other layers than this run's")
    return jax.tree_util.tree_map_with_path(fit, params, template)


def warm_start_params(config: ExperimentConfig, env: Env, template: Any) -> Any:
    """The params a fresh run of `config` starts from: those of `config.train.init_params`,
    fitted to `template` (the run's own initial params) by `widen_input`.

    Raises:
      ConfigError: one line, when the model cannot be read, its network config is not the
        run's, or its params do not fit the run's network.
    """
    source = config.train.init_params
    try:
        params, model_config, _ = load_model(source)
    except Exception as error:  # a CheckpointError, or its game's own error
        raise ConfigError(f"train.init_params: {error}") from None
    if model_config.network != config.network:
        raise ConfigError(f"train.init_params: {source} has another network config than this "
                          f"run's ({model_config.network} vs {config.network})")
    old_shape = envs.make(model_config.game).observation_shape
    try:
        return widen_input(params, template, tuple(old_shape), tuple(env.observation_shape))
    except ValueError as error:
        raise ConfigError(f"train.init_params: {source}: {error}") from None
