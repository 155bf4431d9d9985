"""Random-play throughput of our envs against pgx's: steps per second of step + observe.

One harness for both: ONE jitted `lax.scan` of T steps over B games in lockstep; each step draws
one uniformly random legal action per game in-graph
(`azjax.evaluation.baselines.random_legal_actions`: a hash per action, the largest legal one
wins), steps, observes, folds the observation into a
checksum (so nothing is dead code) and resets finished games in place. pgx's `step` already
computes the observation into `state.observation`, so its observe is that field.

Every configuration is compiled and warmed up first; then the timed calls run interleaved
(round r times every configuration once), and the table shows the median over rounds.

    python benchmarks/bench_envs.py                       # every game, B = 1, 64, 1024
    python benchmarks/bench_envs.py --games connect_four --batches 1024 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import pgx

from azjax import envs
from azjax.evaluation.baselines import random_legal_actions
from azjax.training.metrics import machine_description


@dataclass(frozen=True)
class Impl:
    """An env as the harness sees it: batched init from keys, single-game step and observe."""

    init: Callable  # keys [B] -> State [B]
    step: Callable  # (State, int32 []) -> State
    observe: Callable  # State -> obs


def ours(game_id: str) -> Impl:
    env = envs.make(game_id)
    return Impl(jax.vmap(env.init), env.step, env.observe)


def theirs(game_id: str) -> Impl:
    env = pgx.make(game_id)
    return Impl(jax.vmap(env.init), lambda s, a: env.step(s, a), lambda s: s.observation)


def make_runner(impl: Impl, batch: int, length: int):
    """A jitted `run(key) -> checksum [B]` playing `length` lockstep steps of `batch` games."""
    step = jax.vmap(impl.step)
    observe = jax.vmap(impl.observe)

    def run(key):
        init_key, play_key = jax.random.split(key)
        start = impl.init(jax.random.split(init_key, batch))

        def body(carry, key):
            state, checksum = carry
            state = step(state, random_legal_actions(key, state.legal_action_mask))
            obs = observe(state)
            checksum = checksum + jnp.sum(obs, axis=tuple(range(1, obs.ndim)), dtype=jnp.float32)
            done = state.terminated | state.truncated
            state = jax.tree.map(
                lambda s, i: jnp.where(done.reshape(-1, *[1] * (s.ndim - 1)), i, s), state, start
            )
            return (state, checksum), None

        carry = (start, jnp.zeros(batch, jnp.float32))
        (_, checksum), _ = jax.lax.scan(body, carry, jax.random.split(play_key, length))
        return checksum

    return jax.jit(run)


def steps_per_call(batch: int) -> int:
    """Scan length: enough steps that one call takes a good fraction of a second."""
    return max(256, min(16384, 2**18 // batch))


def machine() -> str:
    return f"{machine_description()}, pgx {pgx.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", nargs="+",
                        default=["tic_tac_toe", "connect_four", "draughts"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64, 1024])
    parser.add_argument("--rounds", type=int, default=5, help="timed interleaved rounds (>= 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    configs = [(g, b, name, maker) for g in args.games for b in args.batches
               for name, maker in (("ours", ours), ("pgx", theirs))
               if name == "ours" or g in pgx.available_envs()]  # pgx has no draughts
    runners, times = {}, {}
    key = jax.random.PRNGKey(args.seed)
    for game_id, batch, name, maker in configs:
        runner = make_runner(maker(game_id), batch, steps_per_call(batch))
        runner(key).block_until_ready()  # compile and warm up
        runners[game_id, batch, name] = runner
        times[game_id, batch, name] = []
    for r in range(args.rounds):
        for cfg, runner in runners.items():
            run_key = jax.random.fold_in(key, r)
            start = time.perf_counter()
            runner(run_key).block_until_ready()
            times[cfg].append(time.perf_counter() - start)

    print(f"machine: {machine()}")
    print(f"random-play steps/s (step + observe, auto-reset), median of {args.rounds} "
          "interleaved rounds")
    header = f"| {'game':<13}| {'batch':>6} | {'ours':>12} | {'pgx':>12} | {'ours/pgx':>8} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for game_id in args.games:
        for batch in args.batches:
            rate = {name: batch * steps_per_call(batch) / statistics.median(times[game_id,
                                                                                   batch, name])
                    for name in ("ours", "pgx") if (game_id, batch, name) in times}
            if "pgx" not in rate:
                print(f"| {game_id:<13}| {batch:>6} | {rate['ours']:>12,.0f} | {'-':>12} | "
                      f"{'-':>8} |")
                continue
            print(f"| {game_id:<13}| {batch:>6} | {rate['ours']:>12,.0f} | {rate['pgx']:>12,.0f}"
                  f" | {rate['ours'] / rate['pgx']:>7.2f}x |")


if __name__ == "__main__":
    main()
