"""A model against itself under another play-time search: does the variant play better?

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \
    python tools/search_variant_arena.py draughts --set search.play_forced_moves=true \
        --simulations 256 --games 100

MODEL is anything `azjax.Agent.load` takes. Player A is the model with the `--set` overrides
applied to its config (search keys; the network and its weights stay as they are), player B the
model as saved; both search with the same `--simulations`. The arena is `azjax eval`'s for two
agents: both colours, paired random openings of `PAIRED_OPENING_PLIES`, split over the local
devices. Prints A's result and the Elo difference.
"""

from __future__ import annotations

import argparse
import time

import jax

from azjax.agent import Agent
from azjax.config import ConfigError
from azjax.evaluation.arena import PAIRED_OPENING_PLIES, elo_difference, play_arena
from azjax.evaluation.players import search_player


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--set", dest="overrides", action="append", required=True,
                        help="a config override for player A, e.g. search.play_forced_moves=true")
    parser.add_argument("--simulations", type=int, default=None,
                        help="both players' simulations (default: the model's)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    base = Agent.load(args.model)
    try:
        variant = base.with_search(args.overrides)
    except ConfigError as error:  # a bad key or a network change: one line, not a traceback
        raise SystemExit(f"error: {error}") from None
    sims = base.search_simulations(args.simulations)
    start = time.time()
    result = play_arena(
        base.env,
        search_player(variant.search_fn, variant.params, sims),
        search_player(base.search_fn, base.params, sims),
        key=jax.random.PRNGKey(args.seed), num_games=args.games,
        opening_plies=PAIRED_OPENING_PLIES)
    print(f"{base!r} with {' '.join(args.overrides)} against itself, {sims} simulations each")
    print(f"{result}  (Elo difference {elo_difference(result.score):+.0f}; "
          f"{time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
