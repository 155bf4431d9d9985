"""Teach a model's value what its own alpha-beta search finds (an experiment, made for draughts).

Alpha-beta over the network (`search.algorithm: alphabeta`) scores its leaves with the
network's value; the search's value at the root sees further than the network's own value
there (in draughts, through the middle game's exchanges). This tool fits the value head to
those root values, as TD-leaf did for hand-made evaluations:

1. positions: G games of the model's raw policy, sampled (temperature 1) after 0 to 8
   uniformly random plies, every live position kept, P of them drawn at random;
2. labels: each position searched by alpha-beta over the model to `--label-nodes`
   positions; a root value that is a game's result (a win or loss inside the horizon, or
   the endgame table's) becomes +-1, else the network value it came from (the search scores
   leaves `LEAF_SCALE` x value);
3. fitting: Adam on value MSE to the labels plus cross-entropy to the model's own policy (so
   the policy stays where it was), a tenth of the positions held out; the held-out value
   loss before and after is printed;
4. the result is written as a model (`--to`), its config and search the input model's.

Judge the result as any model (`tools/draughts_engine_judge.py`), against the input model.
What it did for the laws model of draughts: docs/results.md ("The value taught by its own
search").

    python tools/search_value_distill.py runs/draughts_starts_seed1_model \
        --to runs/distill_n500_model --positions 48000 --games 1024 --label-nodes 500 \
        --label-batch 256 --steps 600 --set search.endgame_table=4
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from azjax import Agent
from azjax.core.losses import alphazero_loss
from azjax.core.search import masked_logits
from azjax.core.search_alphabeta import LEAF_SCALE
from azjax.core.types import Positions
from azjax.envs.core import tree_select
from azjax.model_files import save_model

OPENING_PLIES = 8
MAX_PLIES = 300


def sample_positions(agent: Agent, key: jax.Array, games: int, count: int):
    """`count` live positions [count] of `games` games of the raw policy (see the module)."""
    env = agent.env

    def ply(carry, t):
        states, key, opening = carry
        key, pick = jax.random.split(key)
        obs = jax.vmap(env.observe)(states)
        logits, _ = agent.apply_fn({"params": agent.params}, obs)
        random_move = t < opening
        logits = jnp.where(random_move[:, None], 0.0, logits)
        logits = masked_logits(logits, states.legal_action_mask)
        action = jax.random.categorical(pick, logits).astype(jnp.int32)
        live = ~(states.terminated | states.truncated)
        nxt = jax.vmap(tree_select)(live, jax.vmap(env.step)(states, action), states)
        return (nxt, key, opening), (states, live & ~random_move)

    @jax.jit
    def play(key):
        init_key, open_key, key = jax.random.split(key, 3)
        states = jax.vmap(env.init)(jax.random.split(init_key, games))
        opening = jax.random.randint(open_key, (games,), 0, OPENING_PLIES + 1)
        _, (seen, keep) = jax.lax.scan(ply, (states, key, opening), jnp.arange(MAX_PLIES))
        return seen, keep

    play_key, draw_key = jax.random.split(key)
    seen, keep = play(play_key)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), seen)
    index = np.flatnonzero(np.asarray(keep).reshape(-1))
    if index.size < count:
        raise ValueError(f"{games} games gave {index.size} positions, fewer than {count}")
    chosen = np.random.default_rng(np.asarray(draw_key)[-1]).choice(index, count, replace=False)
    return jax.tree.map(lambda x: x[chosen], flat)


def value_targets(root: np.ndarray) -> np.ndarray:
    """The network-scale value targets float32 [P] of alpha-beta root values [P]: a game's
    result (beyond `LEAF_SCALE`: a win or loss found, or the endgame table's win in d moves)
    becomes +-1, a leaf's scaled network value is scaled back."""
    decided = np.abs(root) > LEAF_SCALE + 1e-6
    return np.where(decided, np.sign(root), root / LEAF_SCALE).astype(np.float32)


def label(agent: Agent, key: jax.Array, states, batch: int):
    """(value targets float32 [P], the model's policy float32 [P, A]) of `states` [P]."""
    count = states.current_player.shape[0]
    values, policies = [], []
    began = time.time()
    for start in range(0, count, batch):
        size = min(batch, count - start)
        # One compiled shape: the last batch is padded with repeats of its positions.
        index = start + np.resize(np.arange(size), batch)
        part = jax.tree.map(lambda x, index=index: x[index], states)
        out = agent.search_output(jax.random.fold_in(key, start), part)
        values.append(value_targets(np.asarray(out.value)[:size]))
        policies.append(np.asarray(agent.evaluate(part)[0])[:size])
        done = start + size
        print(f"labelled {done}/{count}, {done / (time.time() - began):.1f} positions/s",
              flush=True)
    return np.concatenate(values), np.concatenate(policies)


def fit(agent: Agent, key: jax.Array, observations, values, policies, *, steps: int,
        batch: int, learning_rate: float):
    """The params after `steps` Adam steps; prints the held-out value loss before and after."""
    count = values.shape[0]
    order = np.asarray(jax.random.permutation(key, count))
    held, train = order[: count // 10], order[count // 10:]

    def positions(index):
        return Positions(observation=jnp.asarray(observations[index]),
                         policy=jnp.asarray(policies[index]), value=jnp.asarray(values[index]),
                         value_mask=jnp.ones(index.size, bool))

    def loss(params, batch_positions):
        return alphazero_loss(params, agent.apply_fn, batch_positions)

    optimizer = optax.adam(learning_rate)

    @jax.jit
    def update(params, opt_state, batch_positions):
        (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params, batch_positions)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, metrics

    held_loss = jax.jit(lambda p: loss(p, positions(held))[1])
    params = agent.params
    print(f"held-out before: {_losses(held_loss(params))}", flush=True)
    opt_state = optimizer.init(params)
    rng = np.random.default_rng(0)
    for step in range(steps):
        params, opt_state, metrics = update(params, opt_state,
                                            positions(rng.choice(train, batch)))
        if (step + 1) % max(steps // 10, 1) == 0:
            print(f"step {step + 1}: train {_losses(metrics)}; held-out "
                  f"{_losses(held_loss(params))}", flush=True)
    return params


def _losses(metrics) -> str:
    return ", ".join(f"{k} {float(v):.4f}" for k, v in metrics.items()
                     if k in ("loss/value", "loss/policy"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model dir, run dir or game id")
    parser.add_argument("--to", required=True, help="write the fitted model here")
    parser.add_argument("--positions", type=int, default=40_000)
    parser.add_argument("--games", type=int, default=512, help="raw-policy games to draw from")
    parser.add_argument("--label-nodes", type=int, default=500,
                        help="alpha-beta's positions per labelled position")
    parser.add_argument("--label-batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="search.KEY=VALUE for the labelling search")
    args = parser.parse_args(argv)

    agent = Agent.load(args.model)
    labeller = agent.with_search(args.overrides + [
        "search.algorithm=alphabeta", "search.alphabeta_depth=12",
        f"search.alphabeta_nodes={args.label_nodes}"])
    key = jax.random.PRNGKey(args.seed)
    draw_key, label_key, fit_key = jax.random.split(key, 3)
    states = sample_positions(agent, draw_key, args.games, args.positions)
    values, policies = label(labeller, label_key, states, args.label_batch)
    observations = np.asarray(jax.vmap(agent.env.observe)(states))
    print(f"labels: mean {values.mean():+.3f}, decided {np.mean(np.abs(values) == 1):.1%}",
          flush=True)
    params = fit(agent, fit_key, observations, values, policies, steps=args.steps,
                 batch=args.batch, learning_rate=args.learning_rate)
    # The input's default search effort carries over; its measured figures do not.
    extra = {k: agent.meta[k] for k in ("num_simulations",) if k in agent.meta}
    extra["distilled"] = {"from": str(agent.source), "positions": args.positions,
                          "label_nodes": args.label_nodes, "steps": args.steps,
                          "learning_rate": args.learning_rate, "seed": args.seed}
    save_model(args.to, params, agent.config, extra)
    print(f"wrote {args.to}")


if __name__ == "__main__":
    main()
