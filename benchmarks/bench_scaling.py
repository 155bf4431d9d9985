"""Self-play throughput on 1, 2 and 4 forced CPU devices and with two processes (one device each).

Each layout is a worker process (XLA_FLAGS must be set before JAX starts): it builds the
`Trainer` training uses, on a mesh over its devices (`azjax.core.layout`), compiles the self-play
step (a chunk of T steps x B games + the replay add) and warms it up, then waits. The driver
interleaves the layouts: every round times one chunk of each, in a rotating order, so that
load from other processes falls on all of them alike; the table shows medians and their ratio
to one device. The two-process layout is two workers joined by `jax.distributed` on
127.0.0.1 (gloo collectives), timed together.

    python benchmarks/bench_scaling.py                       # connect-four config, B = 128
    python benchmarks/bench_scaling.py --rounds 7 --set selfplay.batch_size=256
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "experiments" / "connect_four.yaml"
LAYOUTS = ("1 device", "2 devices", "4 devices", "2 processes")


# ---- worker ----------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    """One layout: compile, warm up, then time one self-play chunk per `go` read on stdin."""
    if args.coordinator:
        from azjax.core.layout import initialize_distributed

        initialize_distributed(args.coordinator, 2, args.process_id)
    import jax

    from azjax import envs
    from azjax.config import load_config
    from azjax.core.layout import make_mesh, mesh_description
    from azjax.training.trainer import Trainer

    config = load_config(args.config, args.set)
    trainer = Trainer(envs.make(config.game), config, mesh=make_mesh())
    run = trainer.init_state(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey
    start = time.perf_counter()
    trainer.compile(run)
    compile_s = time.perf_counter() - start
    run, _ = trainer.selfplay_step(run, key(1))  # warm-up
    jax.block_until_ready(run)
    positions = int(run.selfplay.previous.player.size)  # T x B, global
    print("READY " + json.dumps({**mesh_description(), "compile_s": compile_s,
                                 "positions": positions}), flush=True)
    for i, line in enumerate(sys.stdin, start=2):
        if line.strip() != "go":
            break
        start = time.perf_counter()
        run, _ = trainer.selfplay_step(run, key(i))
        jax.block_until_ready(run)
        print("RESULT " + json.dumps({"seconds": time.perf_counter() - start}), flush=True)


# ---- driver ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(args: argparse.Namespace, devices: int, extra: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}" if devices > 1
               else "")
    command = [sys.executable, __file__, "--worker", "--config", str(args.config)]
    command += [f"--set={s}" for s in args.set] + extra
    return subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _read(process: subprocess.Popen, tag: str) -> dict:
    for line in process.stdout:
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise RuntimeError(f"a worker exited before {tag} (exit status {process.wait()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--set", action="append", default=[],
                        help="config override, e.g. selfplay.batch_size=256")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--coordinator", help=argparse.SUPPRESS)
    parser.add_argument("--process-id", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not any(s.startswith("selfplay.batch_size=") for s in args.set):
        args.set.insert(0, "selfplay.batch_size=128")  # as bench_selfplay.py; divides by 4
    if args.worker:
        worker(args)
        return

    workers: dict[str, list[subprocess.Popen]] = {}
    ready: dict[str, dict] = {}
    for name, devices in (("1 device", 1), ("2 devices", 2), ("4 devices", 4)):
        workers[name] = [_spawn(args, devices, [])]  # compiled one at a time: 2 cores
        ready[name] = _read(workers[name][0], "READY")
    coordinator = f"127.0.0.1:{_free_port()}"
    workers["2 processes"] = [_spawn(args, 1, ["--coordinator", coordinator, "--process-id",
                                               str(i)]) for i in range(2)]
    ready["2 processes"] = [_read(p, "READY") for p in workers["2 processes"]][0]

    times: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    for round_ in range(args.rounds):
        order = LAYOUTS[round_ % len(LAYOUTS):] + LAYOUTS[:round_ % len(LAYOUTS)]
        for name in order:
            for p in workers[name]:
                p.stdin.write("go\n")
                p.stdin.flush()
            times[name].append(max(_read(p, "RESULT")["seconds"] for p in workers[name]))
    everyone = [p for group in workers.values() for p in group]
    for p in everyone:  # all at once: the two processes leave jax.distributed together
        p.stdin.close()
    for p in everyone:
        p.wait()

    from azjax.config import load_config
    from azjax.training.metrics import machine_description

    config = load_config(args.config, args.set)
    base = statistics.median(times["1 device"])
    print(f"{config.game}: {config.network.kind} {config.network.channels}x"
          f"{config.network.blocks}, {config.search.algorithm} {config.search.num_simulations} "
          f"simulations, B = {config.selfplay.batch_size} games, "
          f"{ready['1 device']['positions']} positions per chunk; median of {args.rounds} "
          f"interleaved rounds; {machine_description()}, load average "
          f"{os.getloadavg()[0]:.1f}")
    print()
    print("| layout | processes x devices | chunk s (median) | positions/s | vs 1 device |")
    print("|---|---|---:|---:|---:|")
    for name in LAYOUTS:
        info, seconds = ready[name], statistics.median(times[name])
        print(f"| {name} | {info['processes']} x {info['devices_per_process']} | {seconds:.2f} "
              f"| {info['positions'] / seconds:,.0f} | {base / seconds:.2f}x |")
    print()
    print("all rounds (s): " + "; ".join(
        f"{name}: {', '.join(f'{t:.2f}' for t in times[name])}" for name in LAYOUTS))


if __name__ == "__main__":
    main()
