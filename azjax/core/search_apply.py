"""The network as the search evaluates positions with it: the value with a material utility,
the prior tempered, evaluations averaged over the game's symmetries (`SearchConfig`'s
`material_utility`, `prior_temperature`, `symmetry_average`). Each takes and gives an
`ApplyFn`, `(variables, obs [B, ...]) -> (logits [B, A], value [B], ...)`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.config import SearchConfig
from azjax.core.network import ApplyFn
from azjax.envs.core import Env

__all__ = ["material_utility_apply", "prior_tempered_apply", "search_apply_fn",
           "symmetry_averaged_apply", "symmetry_permutations"]


def material_utility_apply(apply_fn: ApplyFn, weight: float) -> ApplyFn:
    """`apply_fn` whose value is the network's value + `weight` x its material head's
    prediction of the final material difference (both for the player to move): obs [B, ...] ->
    (logits [B, A], utility float32 [B])."""

    def apply(variables: Any, obs: jax.Array):
        logits, value, material = apply_fn(variables, obs, material=True)
        return logits, value + weight * material

    return apply


def prior_tempered_apply(apply_fn: ApplyFn, temperature: float) -> ApplyFn:
    """`apply_fn` with its policy logits [B, A] divided by `temperature` (the prior p^(1/T));
    the value and any other outputs pass through."""

    def apply(variables: Any, obs: jax.Array, **kwargs):
        logits, *rest = apply_fn(variables, obs, **kwargs)
        return (logits / temperature, *rest)

    return apply


def symmetry_permutations(env: Env) -> np.ndarray:
    """int32 [S, A]: copy k's action j is the input position's action `[k, j]`.

    Read off `env.symmetries` applied to the action ids themselves, so it holds for any game
    whose symmetries permute the policy (every game here; the conformance suite checks it).
    """
    obs = jnp.zeros(env.observation_shape, jnp.float32)
    ids = jnp.arange(env.num_actions, dtype=jnp.float32)  # exact: A is far below 2**24
    return np.asarray(env.symmetries(obs, ids)[1]).round().astype(np.int32)


def symmetry_averaged_apply(env: Env, apply_fn: ApplyFn) -> ApplyFn:
    """`apply_fn` averaged over the game's S symmetries: obs [B, ...] -> (logits [B, A],
    value [B], ...), the same outputs as `apply_fn` (material [B] too when asked for).

    Each position is evaluated in all S copies in one batch of B x S. The value (and material)
    is the mean over the copies; the policy is the mean of the copies' probabilities, each
    mapped back onto the position's own actions, returned as log-probabilities.
    """
    permutations = symmetry_permutations(env)  # [S, A]
    to_input = np.argsort(permutations, axis=1)  # [S, A]: input action a is copy k's [k, a]
    num_copies, num_actions = permutations.shape
    blank_policy = jnp.zeros(num_actions, jnp.float32)

    def apply(variables: Any, obs: jax.Array, **kwargs):
        copies = jax.vmap(lambda o: env.symmetries(o, blank_policy)[0])(obs)  # [B, S, *obs]
        batch = obs.shape[0]
        logits, *rest = apply_fn(variables, copies.reshape(batch * num_copies, *obs.shape[1:]),
                                 **kwargs)
        probs = jax.nn.softmax(logits.reshape(batch, num_copies, num_actions), axis=-1)
        probs = jnp.take_along_axis(probs, jnp.asarray(to_input)[None], axis=2)
        mean = jnp.maximum(probs.mean(axis=1), jnp.finfo(jnp.float32).tiny)  # log stays finite
        return (jnp.log(mean), *(x.reshape(batch, num_copies).mean(axis=1) for x in rest))

    return apply


def search_apply_fn(env: Env, apply_fn: ApplyFn, config: SearchConfig) -> ApplyFn:
    """The network as `config`'s search evaluates positions with it: `apply_fn` averaged over
    the game's symmetries (`symmetry_average`) and its prior tempered (`prior_temperature`),
    where the config asks; the same signature as `apply_fn`."""
    if config.symmetry_average:
        apply_fn = symmetry_averaged_apply(env, apply_fn)
    if config.prior_temperature != 1.0:
        apply_fn = prior_tempered_apply(apply_fn, config.prior_temperature)
    return apply_fn
