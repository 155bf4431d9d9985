"""Positions from a draughts agent's games against an opponent, for self-play to start from
(`selfplay.start_positions`): where a strong opponent steers the games, not where self-play
goes by itself.

    CAKE=$(bash ../shared/engines/cake/build.sh)
    python tools/draughts_start_positions.py experiments/models/draughts_openspiel \
        --against cb:$CAKE@0.1 --games 100 --seed 1 \
        --out experiments/data/draughts_starts_vs_cake.txt

The agent plays `--games` games against `--against` (an engine `cb:PATH[@SECONDS]` or a
baseline such as `alphabeta:6`), each opening with paired random plies, both colours
(`tools/draughts_game_trace.py`), at `--simulations`. Every position where the agent was to
move after the opening plies, not mid-capture and with two legal actions or more, is written
once, in the order of the games: one `FEN counter ply` a line (the format of
`tools/draughts_engine_judge.py`'s positions; a run reads the FEN and starts the counter at
0), after `#` lines that say where they came from.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from draughts_engine_judge import positions_from_games  # a sibling: tools/ is on sys.path

from azjax.agent import Agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent", help="a game id (shipped model), run dir or model dir")
    parser.add_argument("--against", required=True, help="the opponent: cb:PATH[@SECONDS] or "
                        "a baseline (alphabeta:6, mcts:1000, ...)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--simulations", type=int, default=256,
                        help="the agent's simulations a move")
    parser.add_argument("--opening-plies", type=int, default=3,
                        help="random plies that open each pair of games")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="the positions file to write")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a search override for the agent")
    args = parser.parse_args()
    agent = Agent.load(args.agent).with_search(args.overrides)
    if agent.env.name != "draughts":
        raise SystemExit(f"{args.agent} plays {agent.env.name}; this tool draws draughts "
                         "positions")
    positions = positions_from_games(
        agent, args.against, args.games, args.simulations, count=None, seed=args.seed,
        opening_plies=args.opening_plies, shuffle=False)
    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])
    header = (f"# {len(positions)} positions where {args.agent} was to move in {args.games} "
              f"games against {args.against}, at {args.simulations} simulations\n"
              f"# {command}\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(header + "".join(f"{p.fen} {p.counter} {p.ply}\n"
                                               for p in positions))
    print(f"wrote {len(positions)} positions to {args.out}")


if __name__ == "__main__":
    main()
