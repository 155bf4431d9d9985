"""Network shapes, value range, and the stateless-normalisation policy."""

from __future__ import annotations

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_optimised

from azjax.config import NetworkConfig
from azjax.core.network import (
    AUXILIARY_HEADS,
    BODIES,
    auxiliary_heads,
    count_flops,
    init_network,
    make_network,
)


@pytest.mark.parametrize("config", [NetworkConfig(kind="resnet", channels=8, blocks=2),
                                    NetworkConfig(kind="resmlp", width=16, blocks=2),
                                    NetworkConfig(kind="mlp", hidden=(16, 16))],
                         ids=["resnet", "resmlp", "mlp"])
def test_shapes_range_and_no_batch_statistics(config):
    shape = (6, 7, 2)
    variables = init_network(config, 7, shape, jax.random.PRNGKey(0))
    assert set(variables) == {"params"}  # stateless norm: nothing but params
    _, apply = make_network(config, 7)
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (5, *shape)).astype(jnp.float32)
    logits, value = apply(variables, obs)
    assert logits.shape == (5, 7) and value.shape == (5,)
    assert np.all(np.abs(np.asarray(value)) <= 1.0)
    # train and eval mode are the same function, and each example is independent of the batch.
    train_logits, _ = apply(variables, obs, train=True)
    np.testing.assert_allclose(train_logits, logits, rtol=1e-6)
    one_logits, _ = apply(variables, obs[:1])
    np.testing.assert_allclose(one_logits[0], logits[0], rtol=1e-5, atol=1e-6)


def test_flop_count_scales_with_batch():
    config = NetworkConfig(kind="resnet", channels=8, blocks=1)
    variables = init_network(config, 7, (6, 7, 2), jax.random.PRNGKey(0))
    _, apply = make_network(config, 7)
    one = count_flops(apply, variables, (6, 7, 2), 1)
    # Two 3x3 convs of 8 channels in the block alone: 2 * 42 * 9 * 8 * 8 * 2 FLOPs.
    assert one > 2 * 42 * 9 * 8 * 8 * 2
    assert count_flops(apply, variables, (6, 7, 2), 4) == pytest.approx(4 * one, rel=0.05)


@pytest.mark.parametrize("config", [NetworkConfig(kind="resnet", channels=8, blocks=1),
                                    NetworkConfig(kind="resmlp", width=32, blocks=1,
                                                  stem_layers=1, stem_channels=4),
                                    NetworkConfig(kind="mlp", hidden=(32, 32))],
                         ids=["resnet", "resmlp", "mlp"])
def test_both_heads_can_fit_arbitrary_targets(config):
    """Both heads depend on the board: a few hundred Adam steps fit random value and policy
    targets on 32 boards (a head that ignores its input cannot get below the targets' variance,
    e.g. a LayerNorm over a single channel, which outputs a constant)."""
    import optax

    shape, batch = (6, 7, 2), 32
    k_obs, k_value, k_policy = jax.random.split(jax.random.PRNGKey(2), 3)
    obs = jax.random.bernoulli(k_obs, 0.3, (batch, *shape)).astype(jnp.float32)
    value_target = jax.random.uniform(k_value, (batch,), minval=-0.9, maxval=0.9)
    policy_target = jax.nn.one_hot(jax.random.randint(k_policy, (batch,), 0, 7), 7)
    _, apply = make_network(config, 7)
    params = init_network(config, 7, shape, jax.random.PRNGKey(0))["params"]
    optimizer = optax.adam(3e-3)

    def losses(params):
        logits, value = apply({"params": params}, obs)
        value_loss = jnp.mean((value - value_target) ** 2)
        policy_loss = -jnp.mean(jnp.sum(policy_target * jax.nn.log_softmax(logits), -1))
        return value_loss, policy_loss

    def fit(params):
        def step(carry, _):
            params, opt_state = carry
            grads = jax.grad(lambda p: sum(losses(p)))(params)
            updates, opt_state = optimizer.update(grads, opt_state)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), None, length=300)
        return params

    value_before, policy_before = losses(params)
    value_after, policy_after = losses(run_optimised(fit, params))
    assert value_after < 0.1 * jnp.var(value_target) and value_after < 0.1 * value_before
    assert policy_after < 0.2 * policy_before


@pytest.mark.parametrize("head_norm", [True, False])
def test_a_head_whose_conv_is_negative_everywhere_stays_alive_only_with_head_norm(head_norm):
    """The failure behind `network.head_norm`: a value head whose 1x1 conv comes out negative
    on every cell passes nothing through its ReLU, so the value is one constant and no gradient
    reaches the head. Normalising each channel over the board keeps active cells in every
    position, whatever the weights."""
    config = NetworkConfig(kind="resnet", channels=4, blocks=1, head_norm=head_norm)
    shape = (6, 7, 2)
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (8, *shape)).astype(jnp.float32)
    _, apply = make_network(config, 7)
    params = init_network(config, 7, shape, jax.random.PRNGKey(0))["params"]
    # The trunk ends in a ReLU (inputs >= 0): a negative kernel makes the conv negative
    # everywhere (and a bias, where there is one, pushes it further down).
    head = dict(params["resnet"]["Conv_2"])
    head["kernel"] = -jnp.abs(head["kernel"]) - 0.1
    if "bias" in head:
        head["bias"] = jnp.full_like(head["bias"], -1.0)
    params = {**params, "resnet": {**params["resnet"], "Conv_2": head}}

    def total_value(p):
        value = apply({"params": p}, obs)[1]
        return jnp.sum(value), value

    (_, value), grads = jax.jit(jax.value_and_grad(total_value, has_aux=True))(params)
    grads = grads["resnet"]["Conv_2"]["kernel"]
    spread = float(jnp.std(value))
    if head_norm:
        assert spread > 1e-3 and float(jnp.max(jnp.abs(grads))) > 0
    else:
        assert spread < 1e-6 and float(jnp.max(jnp.abs(grads))) == 0


def test_a_config_saved_before_head_norm_loads_without_it():
    from azjax.config import config_from_dict, config_from_saved, config_to_dict

    saved = config_to_dict(config_from_dict({"game": "connect_four"}))
    del saved["network"]["head_norm"]
    assert config_from_saved(saved).network.head_norm is False
    assert config_from_dict(saved).network.head_norm is True  # a new config: today's default


@pytest.mark.parametrize("config", [NetworkConfig(kind="resmlp", width=64, blocks=2),
                                    NetworkConfig(kind="mlp", hidden=(64, 64))],
                         ids=["resmlp", "mlp"])
def test_bfloat16_matmuls_use_the_same_weights_and_stay_close_to_float32(config):
    """`matmul_dtype="bfloat16"` changes how the trunk's dense layers multiply, not the
    parameters: one float32 parameter tree serves both, the outputs stay float32, and they
    agree with float32's to bfloat16's precision (8 bits of mantissa per operand, sums in
    float32)."""
    shape = (6, 7, 2)
    variables = init_network(config, 7, shape, jax.random.PRNGKey(0))
    _, apply32 = make_network(config, 7)
    module16, apply16 = make_network(config, 7, matmul_dtype="bfloat16")
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (16, *shape)).astype(jnp.float32)
    shapes16 = jax.eval_shape(lambda: module16.init(jax.random.PRNGKey(0), obs[:1]))
    assert jax.tree.map(lambda x: (x.shape, x.dtype), shapes16) == jax.tree.map(
        lambda x: (x.shape, x.dtype), variables)
    logits32, value32 = apply32(variables, obs)
    logits16, value16 = apply16(variables, obs)
    assert logits16.dtype == value16.dtype == jnp.float32
    np.testing.assert_allclose(logits16, logits32, atol=0.05)
    np.testing.assert_allclose(value16, value32, atol=0.02)
    assert not np.array_equal(np.asarray(logits16), np.asarray(logits32))  # it did round
    # The compiled trunk multiplies bfloat16 operands; float32's program has no bfloat16 at all.
    hlo16 = jax.jit(apply16).lower(variables, obs).as_text()
    assert "bf16" in hlo16 and "bf16" not in jax.jit(apply32).lower(variables, obs).as_text()
    with pytest.raises(ValueError, match="matmul_dtype must be 'float32' or 'bfloat16'"):
        make_network(config, 7, matmul_dtype="float16")


def test_bfloat16_leaves_the_resnet_as_it_is():
    """The ResNet's convolutions and its heads (all of its dense layers) stay float32."""
    config = NetworkConfig(kind="resnet", channels=8, blocks=1)
    variables = init_network(config, 7, (6, 7, 2), jax.random.PRNGKey(0))
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (4, 6, 7, 2)).astype(jnp.float32)
    _, apply16 = make_network(config, 7, matmul_dtype="bfloat16")
    assert "bf16" not in jax.jit(apply16).lower(variables, obs).as_text()
    np.testing.assert_array_equal(np.asarray(apply16(variables, obs)[0]),
                                  np.asarray(make_network(config, 7)[1](variables, obs)[0]))


@pytest.mark.parametrize("kind", ["resnet", "resmlp", "mlp"])
def test_the_material_head_sits_beside_an_unchanged_body(kind):
    """`material_head` adds two dense layers outside the body's parameters (so models without it
    load as before), returns float32 [B] only when asked, and leaves logits and value alone."""
    import dataclasses

    plain = NetworkConfig(kind=kind, channels=8, blocks=1, width=16, hidden=(16,))
    with_head = dataclasses.replace(plain, material_head=True)
    shape = (6, 7, 2)
    variables = init_network(with_head, 7, shape, jax.random.PRNGKey(0))
    plain_variables = init_network(plain, 7, shape, jax.random.PRNGKey(0))
    assert set(variables["params"]) == set(plain_variables["params"]) | {
        "material_hidden", "material_out"}
    jax.tree.map(np.testing.assert_array_equal, variables["params"][kind],
                 plain_variables["params"][kind])
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (5, *shape)).astype(jnp.float32)
    _, apply = make_network(with_head, 7)
    _, plain_apply = make_network(plain, 7)
    logits, value, material = apply(variables, obs, material=True)
    assert material.shape == (5,) and material.dtype == jnp.float32
    np.testing.assert_array_equal(apply(variables, obs)[0], logits)
    np.testing.assert_allclose(plain_apply(plain_variables, obs)[1], value, rtol=1e-6)
    with pytest.raises(ValueError, match="material=True needs network.material_head"):
        plain_apply(plain_variables, obs, material=True)


@pytest.mark.parametrize("kind", ["resnet", "resmlp", "mlp"])
def test_auxiliary_heads_shapes_and_the_plain_call_never_runs_them(kind):
    """`auxiliary=True` returns every auxiliary head's output (`AUXILIARY_HEADS`); the plain
    call (the search's) runs without their parameters, so it never computes them."""
    config = NetworkConfig(kind=kind, channels=4, blocks=1, width=16, hidden=(16,),
                           material_head=True)
    shape = (6, 7, 2)
    variables = init_network(config, 7, shape, jax.random.PRNGKey(0))
    _, apply = make_network(config, 7)
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (5, *shape)).astype(jnp.float32)
    logits, value, heads = apply(variables, obs, auxiliary=True)
    assert set(heads) == set(auxiliary_heads(config)) == set(AUXILIARY_HEADS) == {"material"}
    assert heads["material"].shape == (5,)
    bare = {"params": {k: v for k, v in variables["params"].items()
                       if not k.startswith("material_")}}
    plain_logits, plain_value = apply(bare, obs)
    np.testing.assert_array_equal(plain_logits, logits)
    np.testing.assert_array_equal(plain_value, value)
    np.testing.assert_array_equal(apply(variables, obs, material=True)[2], heads["material"])
    with pytest.raises(ValueError, match="not both"):
        apply(variables, obs, material=True, auxiliary=True)
    plain_config = NetworkConfig(kind=kind, channels=4, blocks=1, width=16, hidden=(16,))
    _, plain_apply = make_network(plain_config, 7)
    plain_variables = init_network(plain_config, 7, shape, jax.random.PRNGKey(0))
    assert auxiliary_heads(plain_config) == ()
    assert plain_apply(plain_variables, obs, auxiliary=True)[2] == {}


def test_the_network_kinds_are_the_bodies_table():
    """`NetworkConfig.kind` accepts exactly the kinds `BODIES` builds: adding a kind is a body
    and its entry there, and its name among the config's choices."""
    choices = typing.get_args(typing.get_type_hints(NetworkConfig)["kind"])
    assert sorted(choices) == sorted(BODIES)
    for kind in BODIES:
        config = NetworkConfig(kind=kind, channels=4, blocks=1, width=8, hidden=(8,))
        variables = init_network(config, 3, (3, 3, 2), jax.random.PRNGKey(0))
        assert kind in variables["params"]  # the body is named after its kind
