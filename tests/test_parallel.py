"""Data parallelism: 4 forced CPU devices and 2 CPU processes, each in subprocesses (the rest
of the suite keeps its one device)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import yaml
from conftest import REPO_ROOT, tiny_config

from azjax.config import (
    BudgetConfig,
    CheckpointConfig,
    ConfigError,
    EvalConfig,
    config_to_dict,
)
from azjax.core.layout import check_divisible, mesh_description

FOUR_DEVICES = "--xla_force_host_platform_device_count=4"

# Runs in a 4-device process: one iteration on the 4-device mesh and the same iteration, from
# the same seed, without a mesh on device 0. Prints what the tests check as JSON.
_FOUR_DEVICE_SCRIPT = textwrap.dedent("""
    import dataclasses, json, sys
    sys.path.insert(0, "tests")
    import jax, numpy as np
    from conftest import tiny_config
    from azjax import envs
    from azjax.config import ConfigError
    from azjax.core.layout import make_mesh
    from azjax.training.trainer import Trainer

    config = tiny_config()
    config = dataclasses.replace(config, selfplay=dataclasses.replace(
        config.selfplay, per_game_randomness=True))
    env = envs.make(config.game)
    plain, sharded = Trainer(env, config), Trainer(env, config, mesh=make_mesh())
    start = plain.init_state(jax.random.PRNGKey(0))
    mesh_run = sharded.init_state(jax.random.PRNGKey(0))
    close = lambda a, b: all(np.allclose(np.asarray(x), np.asarray(y), atol=1e-6)
                             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
    max_diff = lambda a, b: max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
    out = {"devices": jax.device_count(), "same_start": close(start, mesh_run)}
    key = jax.random.PRNGKey(1)
    mesh_run, metrics = sharded.iteration(mesh_run, key)
    reference, plain_metrics = plain.iteration(start, key)
    out["losses"] = [float(plain_metrics["loss"]), float(metrics["loss"])]
    out["same_games"] = close(reference.selfplay, mesh_run.selfplay)
    out["games_finished"] = [int(plain_metrics["selfplay/games_finished"]),
                             int(metrics["selfplay/games_finished"])]
    out["network_evaluations"] = [int(plain_metrics["selfplay/network_evaluations"]),
                                  int(metrics["selfplay/network_evaluations"])]
    out["same_replay"] = close(reference.replay, mesh_run.replay)
    out["replay_size"] = [int(reference.replay.size), int(mesh_run.replay.size)]
    out["max_param_diff"] = max_diff(reference.train.params, mesh_run.train.params)
    mesh = mesh_run

    def layout(x):
        return {"spec": [str(p) for p in x.sharding.spec], "shape": list(x.shape),
                "shards": sorted({tuple(s.data.shape) for s in x.addressable_shards}),
                "devices": len({s.device for s in x.addressable_shards})}

    out["games"] = layout(mesh.selfplay.games.current_player)
    out["records"] = layout(mesh.selfplay.previous.observation)
    out["replay"] = layout(mesh.replay.positions.observation)
    out["params"] = layout(jax.tree.leaves(mesh.train.params)[0])

    # The split layout (a CPU mesh in one process): games over the 4 devices, replay and
    # updates on the first. Two iterations, the second past `compile()`'s executables.
    split = Trainer(env, config, mesh=make_mesh(), updates_on_one_device=True)
    split_run = split.init_state(jax.random.PRNGKey(0))
    out["split_same_start"] = close(plain.init_state(jax.random.PRNGKey(0)), split_run)
    split_run, split_metrics = split.iteration(split_run, key)
    out["split_same_games"] = close(reference.selfplay, split_run.selfplay)
    out["split_same_replay"] = close(reference.replay, split_run.replay)
    out["split_losses"] = [float(plain_metrics["loss"]), float(split_metrics["loss"])]
    out["split_network_evaluations"] = int(split_metrics["selfplay/network_evaluations"])
    out["split_max_param_diff"] = max_diff(reference.train.params, split_run.train.params)
    split.compile(split_run)
    reference, _ = plain.iteration(reference, jax.random.PRNGKey(3))
    split_run, _ = split.iteration(split_run, jax.random.PRNGKey(3))
    out["split_second_same_replay"] = close(reference.replay, split_run.replay)
    out["split_second_iteration"] = int(split_run.iteration)
    out["split_games"] = layout(split_run.selfplay.games.current_player)
    out["split_replay_devices"] = len(split_run.replay.positions.observation.devices())
    out["split_params_devices"] = len(jax.tree.leaves(split_run.train.params)[0].devices())
    try:
        Trainer(env, dataclasses.replace(config, train=dataclasses.replace(
            config.train, batch_size=10)), mesh=make_mesh(), updates_on_one_device=True)
        out["split_unsplit_batch"] = "accepted"
    except ConfigError as error:
        out["split_unsplit_batch"] = str(error)
    for key, value in (("selfplay.batch_size", 6), ("train.batch_size", 10)):
        section = key.split(".")[0]
        bad = dataclasses.replace(config, **{section: dataclasses.replace(
            getattr(config, section), batch_size=value)})
        try:
            Trainer(env, bad, mesh=make_mesh())
            out["error:" + key] = None
        except ConfigError as error:
            out["error:" + key] = str(error)

    # Arenas split their games over the 4 devices (8 and 400 games), or not (6 games).
    import jax.numpy as jnp
    from azjax.evaluation.baselines import random_player
    from azjax.evaluation.arena import play_arena
    ttt = envs.make("tic_tac_toe")
    lowest = lambda key, s: jnp.argmax(s.legal_action_mask, axis=1).astype(jnp.int32)
    highest = lambda key, s: (8 - jnp.argmax(s.legal_action_mask[:, ::-1], axis=1)).astype(
        jnp.int32)
    counts = lambda r: [r.wins, r.draws, r.losses, r.illegal_moves_a, r.illegal_moves_b]
    arena_key = jax.random.PRNGKey(2)
    for games in (8, 6):
        out[f"arena_{games}"] = [counts(play_arena(ttt, lowest, highest, key=arena_key,
                                                   num_games=games, devices=devices))
                                 for devices in (jax.devices()[:1], None)]
    # Paired random openings follow the game's index, not its place on a device.
    out["arena_openings"] = [counts(play_arena(ttt, lowest, lowest, key=arena_key, num_games=40,
                                               devices=devices, opening_plies=2))
                             for devices in (jax.devices()[:1], None)]
    rand = random_player(ttt)
    out["arena_random"] = counts(play_arena(ttt, rand, rand, key=arena_key, num_games=400))
    ticks = []
    watched = play_arena(ttt, rand, rand, key=arena_key, num_games=400,
                         progress=lambda finished, plies: ticks.append(finished))
    out["arena_progress"] = [counts(watched), max(ticks), len(ticks)]
    print("RESULT " + json.dumps(out))
""")


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(REPO_ROOT / ".jax_cache"),
               PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO_ROOT))
    # Device-count flags join the suite's own XLA flags (conftest) rather than replace them.
    if "XLA_FLAGS" in extra:
        extra["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                    extra["XLA_FLAGS"]]))
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def four_devices():
    out = subprocess.run([sys.executable, "-c", _FOUR_DEVICE_SCRIPT], cwd=REPO_ROOT,
                         env=_env(XLA_FLAGS=FOUR_DEVICES), capture_output=True, text=True,
                         timeout=900, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_a_sharded_iteration_equals_the_unsharded_one_from_the_same_seed(four_devices):
    """With selfplay.per_game_randomness, 4 devices play the very games one device plays (each
    game's randomness comes from its own index), fill the same replay buffer and reach the same
    parameters (float tolerance)."""
    assert four_devices["devices"] == 4
    assert four_devices["same_start"]  # init: the same run state as on one device
    assert four_devices["same_games"]  # games, step records and what was emitted
    assert four_devices["games_finished"][0] == four_devices["games_finished"][1] > 0
    # every device's searches counted: T = 9 steps x B games x (1 root + the simulations)
    config = tiny_config()
    evaluations = 9 * config.selfplay.batch_size * (config.search.num_simulations + 1)
    assert four_devices["network_evaluations"] == [evaluations, evaluations]
    assert four_devices["split_network_evaluations"] == evaluations
    assert four_devices["replay_size"][0] == four_devices["replay_size"][1] > 0
    assert four_devices["same_replay"]
    assert abs(four_devices["losses"][0] - four_devices["losses"][1]) < 1e-5
    assert four_devices["max_param_diff"] < 1e-5
    assert np.isfinite(four_devices["losses"]).all()


def test_the_split_layout_plays_over_the_mesh_and_trains_on_one_device(four_devices):
    """`updates_on_one_device`: the same games and buffer as one device, the same update
    program on the first device, so the same parameters; only the games are split."""
    assert four_devices["split_same_start"]
    assert four_devices["split_same_games"] and four_devices["split_same_replay"]
    assert abs(four_devices["split_losses"][0] - four_devices["split_losses"][1]) < 1e-6
    assert four_devices["split_max_param_diff"] < 1e-6
    assert four_devices["split_second_same_replay"]  # ahead-of-time executables, same result
    assert four_devices["split_second_iteration"] == 2
    batch = tiny_config().selfplay.batch_size
    games = four_devices["split_games"]
    assert games["spec"] == ["batch"] and games["shards"] == [[batch // 4]]
    assert games["devices"] == 4
    assert four_devices["split_replay_devices"] == four_devices["split_params_devices"] == 1
    # Only the games must split: the training batch stays whole on the first device.
    assert four_devices["split_unsplit_batch"] == "accepted"


def test_games_records_and_replay_are_split_on_the_batch_axis(four_devices):
    batch, capacity = tiny_config().selfplay.batch_size, tiny_config().replay.capacity
    games, records, replay = (four_devices[k] for k in ("games", "records", "replay"))
    assert games["spec"] == ["batch"] and games["shape"] == [batch]
    assert games["shards"] == [[batch // 4]] and games["devices"] == 4
    chunk = records["shape"][0]
    assert records["spec"] == ["None", "batch"]
    assert records["shards"] == [[chunk, batch // 4, 3, 3, 2]] and records["devices"] == 4
    assert replay["spec"] == ["batch"]
    assert replay["shards"] == [[capacity // 4, 3, 3, 2]] and replay["devices"] == 4
    params = four_devices["params"]  # replicated: every device holds the whole array
    assert params["spec"] == [] and params["shards"] == [params["shape"]]


def test_a_batch_that_does_not_split_over_the_devices_is_refused_naming_the_key(four_devices):
    assert four_devices["error:selfplay.batch_size"] == (
        "selfplay.batch_size (6) must be divisible by the device count (4): it is a global "
        "size, split over the devices")
    assert "train.batch_size (10)" in four_devices["error:train.batch_size"]
    with pytest.raises(ConfigError, match=r"replay.capacity \(510\).*device count \(4\)"):
        config = tiny_config(replay=dataclasses.replace(tiny_config().replay, capacity=510))
        check_divisible(config.selfplay, config.train, config.replay, 4)
    config = tiny_config()
    check_divisible(config.selfplay, config.train, config.replay, 1)  # one device: anything


def test_an_arena_splits_its_games_over_the_devices(four_devices):
    # Deterministic players: the split arena plays exactly the one-device games (same starts,
    # same colours per game index), whether it splits (8 games) or cannot (6 games).
    one, four = four_devices["arena_8"]
    assert one == four and sum(one[:3]) == 8 and one[3:] == [0, 0]
    assert one[0] > 0 and one[2] > 0  # each player wins with one colour: both colours played
    one, four = four_devices["arena_6"]
    assert one == four and sum(one[:3]) == 6
    # Paired openings too: the same 40 games on 4 devices as on one; a player against itself
    # scores exactly half (each pair is one game from both seats).
    one, four = four_devices["arena_openings"]
    assert one == four and one[0] == one[2] and sum(one[:3]) == 40
    # Random against random over 400 split games: every game counted, colours balanced
    # (tic-tac-toe's first mover wins 58.5%, so an unbalanced split would show).
    wins, draws, losses, bad_a, bad_b = four_devices["arena_random"]
    assert wins + draws + losses == 400 and bad_a == bad_b == 0
    assert abs((wins + draws / 2) / 400 - 0.5) < 0.08
    # Watched, the same games, and the four blocks' ticks add up to all 400 games finished.
    counts, most_finished, num_ticks = four_devices["arena_progress"]
    assert counts == four_devices["arena_random"] and most_finished == 400
    assert 4 * 5 <= num_ticks <= 4 * 9  # a tick per ply per device


def test_cli_refuses_an_indivisible_batch_before_touching_the_run_dir(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(config_to_dict(tiny_config())))
    out = subprocess.run(
        [sys.executable, "-m", "azjax", "train", str(config), "--run-dir",
         str(tmp_path / "run"), "--set", "selfplay.batch_size=6"], cwd=REPO_ROOT,
        env=_env(XLA_FLAGS=FOUR_DEVICES), capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: selfplay.batch_size (6) must be divisible by the "
                                  "device count (4): it is a global size, split over the devices")
    assert not (tmp_path / "run").exists()


def _one_iteration_run(tmp_path):
    """A tiny config of one iteration with a checkpoint and no evaluation (nothing but training
    to compile), written to tmp_path: (config, its yaml path, a run dir)."""
    config = dataclasses.replace(
        tiny_config(eval=EvalConfig(every_iterations=100, oracle=False, opponents=())),
        budget=BudgetConfig(max_iterations=1),
        checkpoint=CheckpointConfig(every_iterations=1, keep=2))
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    return config, path, tmp_path / "run"


def test_cli_trains_and_resumes_on_two_forced_cpu_devices_in_the_split_layout(tmp_path):
    """`azjax train` on 2 forced CPU devices: games split, replay and updates on the first
    device; the checkpoint it writes resumes in a second process with the same layout."""
    _, path, run_dir = _one_iteration_run(tmp_path)
    outputs = []
    for iterations in (1, 2):
        out = subprocess.run(
            [sys.executable, "-m", "azjax", "train", str(path), "--run-dir", str(run_dir),
             "--no-progress", "--set", f"budget.max_iterations={iterations}"], cwd=REPO_ROOT,
            env=_env(XLA_FLAGS="--xla_force_host_platform_device_count=2"), capture_output=True,
            text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr[-3000:]
        outputs.append(out.stdout)
    assert ("mesh: 1 process(es) x 2 cpu device(s); games split 2 way(s); replay and updates "
            "on the first device") in outputs[0]
    assert "done: 2 iterations" in outputs[1]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    starts = [r for r in records if r.get("event") in ("start", "resume")]
    assert [(r["event"], r["iteration"], r["devices"], r["updates_on_one_device"])
            for r in starts] == [("start", 0, 2, True), ("resume", 1, 2, True)]
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 2 and np.isfinite(losses).all()


def test_mesh_description_of_this_process():
    assert mesh_description() == {"processes": 1, "devices": jax.device_count(),
                                  "devices_per_process": jax.device_count(),
                                  "platform": jax.devices()[0].platform}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_one_iteration_and_one_process_resumes(tmp_path):
    """Two CPU processes (one device each) on localhost, joined by jax.distributed, run one
    iteration and write one checkpoint; a plain single-process run then resumes from it."""
    from azjax.training.loop import train

    config, path, run_dir = _one_iteration_run(tmp_path)
    port = _free_port()
    processes = [subprocess.Popen(
        [sys.executable, "-m", "azjax", "train", str(path), "--run-dir", str(run_dir),
         "--no-progress", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
         "--process-id", str(i)], cwd=REPO_ROOT, env=_env(XLA_FLAGS=""),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        for i in range(2)]
    outputs = [p.communicate(timeout=900) for p in processes]
    for p, (_, stderr) in zip(processes, outputs, strict=True):
        assert p.returncode == 0, stderr[-3000:]
    assert "mesh: 2 process(es) x 1 cpu device(s)" in outputs[0][0]
    assert "done: 1 iterations" in outputs[0][0]
    assert "mesh:" not in outputs[1][0] and "done:" not in outputs[1][0]  # process 0 prints
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[0] == {**records[0], "event": "start", "processes": 2, "devices": 2,
                          "devices_per_process": 1, "platform": "cpu"}
    assert [r["iteration"] for r in records if "loss" in r] == [1]  # logged once, by process 0
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["1"]

    result = train(dataclasses.replace(config, budget=BudgetConfig(max_iterations=2)), run_dir,
                   show_progress=False)
    assert result.iterations == 2 and np.isfinite(result.final_metrics["loss"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    resume = next(r for r in records if r.get("event") == "resume")
    assert resume["iteration"] == 1 and resume["processes"] == 1
