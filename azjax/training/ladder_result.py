"""What a ladder found: its rated players and games, as ladder.json, ladder.png and terminal
lines."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from azjax.evaluation.arena import ArenaResult
from azjax.training.anchors import AnchorTable

__all__ = ["LadderPlayer", "LadderResult", "format_ladder", "plot_ladder"]


@dataclasses.dataclass(frozen=True)
class LadderPlayer:
    """One rated player: a snapshot (iteration, wall_s, positions) or a baseline (None)."""

    name: str
    kind: str  # "snapshot" or "baseline"
    elo: float
    low95: float
    high95: float
    iteration: int | None = None
    wall_s: float | None = None
    positions: int | None = None


@dataclasses.dataclass(frozen=True)
class LadderResult:
    """The ladder's players (baselines, then snapshots by iteration) and its games."""

    run_dir: Path
    players: tuple[LadderPlayer, ...]
    matches: tuple[tuple[str, str, ArenaResult], ...]  # (a, b, A's results)
    num_simulations: int
    games_per_pair: int
    opening_plies: int
    json_path: Path
    png_path: Path
    anchors: AnchorTable | None = None

    def ratings(self) -> dict[str, tuple[float, float, float]]:
        """{player name: (Elo, low95, high95)}."""
        return {p.name: (p.elo, p.low95, p.high95) for p in self.players}

    def to_dict(self) -> dict[str, Any]:
        """The ladder as ladder.json holds it (JSON types only)."""
        return {
            "run_dir": str(self.run_dir),
            "anchor": "random",
            "method": "maximum-likelihood Elo (Bradley-Terry, 400 log10 scale, draws = half); "
                      "95% intervals = +-1.96 SE from the inverse observed Fisher information, "
                      "relative to random; prior: 1 virtual draw of each player against random",
            "num_simulations": self.num_simulations,
            "games_per_pair": self.games_per_pair,
            "opening_plies": self.opening_plies,
            "players": [dataclasses.asdict(p) for p in self.players],
            "matches": [{"a": a, "b": b, **r.counts()} for a, b, r in self.matches],
            "fixed_anchors": None if self.anchors is None else self.anchors.to_dict(),
        }


def format_ladder(result: LadderResult) -> list[str]:
    """Terminal lines: one per player (baselines, then snapshots), Elo +- the 95% half-width."""
    held = ("" if result.anchors is None else
            f"; held fixed: {', '.join(n for n in result.anchors.ratings if n != 'random')} "
            f"(engine {result.anchors.engine}, {result.anchors.evaluation})")
    lines = [f"Elo ladder of {result.run_dir} (random = 0{held}; greedy search at "
             f"{result.num_simulations} simulations; {result.games_per_pair} games per pair, "
             f"{result.opening_plies} random opening plies; 95% intervals)",
             f"{'player':<14}{'iteration':>10}{'wall_s':>10}{'Elo':>8}   95% interval"]
    for p in result.players:
        iteration = "-" if p.iteration is None else str(p.iteration)
        wall = "-" if p.wall_s is None else f"{p.wall_s:.1f}"
        half = (p.high95 - p.low95) / 2
        lines.append(f"{p.name:<14}{iteration:>10}{wall:>10}{p.elo:>+8.0f} "
                     f"+- {half:<5.0f} [{p.low95:+.0f}, {p.high95:+.0f}]")
    lines.append(f"written: {result.json_path}, {result.png_path}")
    return lines


def plot_ladder(result: LadderResult) -> None:
    """ladder.png (`result.png_path`): the snapshots' Elo over the run with their intervals,
    each baseline a line with its band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    snaps = [p for p in result.players if p.kind == "snapshot"]
    by_wall = all(p.wall_s is not None for p in snaps)
    xs = [p.wall_s if by_wall else float(p.iteration) for p in snaps]
    ys = [p.elo for p in snaps]
    errors = [[p.elo - p.low95 for p in snaps], [p.high95 - p.elo for p in snaps]]
    ax.errorbar(xs, ys, yerr=errors, fmt="o-", capsize=3, label="snapshots (greedy search, "
                f"{result.num_simulations} sims)")
    for x, p in zip(xs, snaps, strict=True):
        ax.annotate(str(p.iteration), (x, p.elo), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(p for p in result.players if p.kind == "baseline"):
        colour = colours[(i + 1) % len(colours)]
        ax.axhline(p.elo, ls="--", lw=1, color=colour, label=f"{p.name} ({p.elo:+.0f})")
        if p.high95 > p.low95:
            ax.axhspan(p.low95, p.high95, color=colour, alpha=0.12)
    ax.set_xlabel("wall_s" if by_wall else "iteration")
    ax.set_ylabel("Elo (random = 0), 95% intervals")
    ax.set_title(f"Elo ladder: {result.run_dir.name} ({result.games_per_pair} games per pair)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(result.png_path, dpi=90)
    plt.close(fig)
