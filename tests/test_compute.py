"""Compute accounting: network evaluations counted exactly, FLOPs per part, totals over resume."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import TINY_RUN_CONFIG

from azjax import envs
from azjax.config import BudgetConfig
from azjax.core.network import init_network
from azjax.training.compute import (
    ComputeTotals,
    FlopCosts,
    costs_from_counts,
    flop_costs,
    forward_flops_per_evaluation,
)
from azjax.training.loop import train
from azjax.training.metrics import read_metrics
from azjax.training.trainer import Trainer

CONFIG = TINY_RUN_CONFIG  # tic-tac-toe: T = 9 steps per chunk, B = 8 games, 4 simulations
STEPS, GAMES, SIMS = 9, 8, 4


def _iterations(run_dir):
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if "positions_per_s" in r]


def _first(run_dir, event):
    return next(r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("event") == event)


def test_selfplay_counts_a_root_and_a_simulation_evaluation_per_game_and_step(tiny_run):
    run_dir, _ = tiny_run
    records = _iterations(run_dir)
    assert [r["selfplay/network_evaluations"] for r in records] == \
        [STEPS * GAMES * (SIMS + 1)] * len(records)
    costs = _first(run_dir, "start")
    assert records[-1]["flops/selfplay"] == pytest.approx(
        len(records) * STEPS * GAMES * (SIMS + 1) * costs["flops_per_evaluation"])


def test_training_flops_are_updates_times_batch_times_per_sample(tiny_run):
    run_dir, _ = tiny_run
    records, costs = _iterations(run_dir), _first(run_dir, "start")
    assert costs["flops_per_trained_sample_source"] == "cost_analysis"
    updates = len(records) * CONFIG.train.updates_per_iteration
    assert records[-1]["flops/train"] == pytest.approx(
        updates * CONFIG.train.batch_size * costs["flops_per_trained_sample"])
    # forward + backward + optimizer: a few forward passes' worth, not one, not dozens
    assert 2 < costs["flops_per_trained_sample"] / costs["flops_per_evaluation"] < 20
    for r in records:
        assert r["flops/total"] == pytest.approx(r["flops/selfplay"] + r["flops/train"])
        assert r["train_wall_s"] == pytest.approx(r["wall_s"] - r["eval_wall_s"])
    evaluated = [r["eval/seconds"] for r in records if "eval/seconds" in r]
    assert len(evaluated) == 2 and all(s > 0 for s in evaluated)
    assert records[-1]["eval_wall_s"] == pytest.approx(sum(evaluated))


def test_forward_flops_per_evaluation_match_a_hand_count_of_the_mlp():
    env = envs.make("tic_tac_toe")
    # the MLP [27] -> 32 -> heads; XLA counts a multiply-add as 2 FLOPs
    flops = forward_flops_per_evaluation(env, CONFIG)
    inputs = int(np.prod(env.observation_shape))
    variables = init_network(CONFIG.network, env.num_actions, env.observation_shape,
                             jax.random.PRNGKey(0))
    weights = sum(int(leaf.size) for leaf in jax.tree.leaves(variables) if leaf.ndim == 2)
    assert 2 * weights <= flops <= 2 * weights + 40 * (inputs + 64)


def test_an_update_counted_below_one_forward_pass_per_sample_is_counted_as_three():
    # XLA:GPU leaves an update's cuBLAS matmuls out of its count: a connect-four update step
    # on an H200 counted 0.11 forward passes per sample, the same step on a CPU 2.98
    low = costs_from_counts(3.3e6, 3.3e6, update_flops=0.36e6 * 4096, batch=4096)
    assert (low.trained_sample_source, low.per_trained_sample) == \
        ("3x forward (XLA undercounted)", pytest.approx(9.9e6))
    kept = costs_from_counts(3.3e6, 3.3e6, update_flops=9.95e6 * 4096, batch=4096)
    assert (kept.trained_sample_source, kept.per_trained_sample) == \
        ("cost_analysis", pytest.approx(9.95e6))
    missing = costs_from_counts(3.3e6, 3.3e6, update_flops=0.0, batch=4096)
    assert (missing.trained_sample_source, missing.per_trained_sample) == \
        ("3x forward", pytest.approx(9.9e6))


def test_a_symmetry_averaged_search_checks_the_update_against_one_plain_forward_pass():
    env = envs.make("tic_tac_toe")  # 8 symmetries: one evaluation is 8 forward passes
    config = dataclasses.replace(CONFIG, search=dataclasses.replace(
        CONFIG.search, symmetry_average=True))
    plain = forward_flops_per_evaluation(env, CONFIG)
    batch = config.train.batch_size
    costs = flop_costs(env, config, update_flops=2.5 * plain * batch)
    assert costs.per_evaluation == pytest.approx(8 * plain, rel=0.05)
    assert (costs.trained_sample_source, costs.per_trained_sample) == \
        ("cost_analysis", pytest.approx(2.5 * plain))
    assert flop_costs(env, config, update_flops=0.5 * plain * batch).per_trained_sample == \
        pytest.approx(3 * plain, rel=0.05)


def test_playout_cap_steps_count_their_fast_simulations():
    config = dataclasses.replace(CONFIG, selfplay=dataclasses.replace(
        CONFIG.selfplay, full_search_prob=0.5, fast_simulations=2))
    trainer = Trainer(envs.make(config.game), config)
    run = trainer.init_state(jax.random.PRNGKey(0))
    run, metrics = trainer.selfplay_step(run, jax.random.PRNGKey(3))
    # a fast step leaves no policy target: the full steps are those with one
    full = int(np.sum(np.asarray(run.selfplay.previous.policy).sum(axis=(1, 2)) > 0))
    assert 0 < full < STEPS
    assert int(metrics["selfplay/network_evaluations"]) == \
        GAMES * (full * (SIMS + 1) + (STEPS - full) * (2 + 1))


def test_any_part_with_network_evaluations_is_counted():
    costs = FlopCosts(per_evaluation=10.0, per_trained_sample=30.0,
                      trained_sample_source="cost_analysis", train_batch=4)
    totals = ComputeTotals()
    totals.add_iteration({"selfplay/network_evaluations": 5, "train/update_steps": 2}, costs)
    fields = totals.add_iteration({"selfplay/network_evaluations": 5, "train/update_steps": 2,
                                   "arena/network_evaluations": 7}, costs)
    assert fields["iteration_flops/arena"] == 70.0
    assert fields["flops/selfplay"] == 100.0 and fields["flops/train"] == 480.0
    assert fields["flops/total"] == 100.0 + 480.0 + 70.0


def test_a_resumed_run_continues_the_totals(tiny_run, tmp_path):
    straight_dir, _ = tiny_run
    run_dir = tmp_path / "run"
    train(dataclasses.replace(CONFIG, budget=BudgetConfig(max_iterations=2)), run_dir,
          show_progress=False)
    train(CONFIG, run_dir, show_progress=False)
    resumed, straight = _iterations(run_dir), _iterations(straight_dir)
    assert _first(run_dir, "resume")["flops_per_evaluation"] > 0
    assert [r["iteration"] for r in resumed] == [1, 2, 3, 4]
    for key in ("flops/selfplay", "flops/train", "flops/total"):
        assert resumed[-1][key] == pytest.approx(straight[-1][key])
    # the evaluation seconds go on from the first segment's
    first_segment = sum(r["eval/seconds"] for r in resumed[:2] if "eval/seconds" in r)
    assert resumed[-1]["eval_wall_s"] == pytest.approx(
        first_segment + resumed[-1]["eval/seconds"])


def test_totals_restore_from_the_log_when_the_checkpoint_has_none():
    records = [{"iteration": 1, "flops/selfplay": 5.0, "flops/train": 6.0, "flops/total": 11.0,
                "eval_wall_s": 2.0},
               {"iteration": 2, "flops/selfplay": 9.0, "flops/train": 9.0, "flops/total": 18.0,
                "eval_wall_s": 3.0},
               {"event": "end", "iteration": 1, "flops/total": 11.0}]
    totals = ComputeTotals.from_saved({}, records, 1)
    assert totals.flops == {"selfplay": 5.0, "train": 6.0} and totals.eval_wall_s == 2.0
    saved = ComputeTotals.from_saved({"compute": {"flops": {"selfplay": 1.0},
                                                  "eval_wall_s": 0.5}}, records, 2)
    assert saved.flops == {"selfplay": 1.0} and saved.eval_wall_s == 0.5

