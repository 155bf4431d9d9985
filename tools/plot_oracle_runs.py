"""Oracle error per set for one or several runs on one figure, against positions, wall_s,
train_wall_s (wall_s without evaluation) or FLOPs (`flops/total`).

    python tools/plot_oracle_runs.py "docs/runs/c4_wide=CPU, 2 cores" \
        "docs/runs/c4_h100_seed0=H100" --x positions --out /tmp/c4.png

Each argument is a run dir (its metrics.jsonl and config.yaml), optionally `=label`. One
panel per oracle set, search error solid and raw network dotted, log-scaled x (`--xscale`);
for connect four AlphaZero.jl's published error rates (search, per set) are dashed lines. A
game scored on one oracle (tic-tac-toe: all 4,520 positions) gets one panel. The run dirs may
be kept run records (docs/runs/<name>): only metrics.jsonl and config.yaml are read.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from azjax.evaluation.oracle import in_set_order, set_titles  # noqa: E402
from azjax.training.metrics import read_metrics, run_game  # noqa: E402

# AlphaZero.jl's published error rates (search, %), by Pons set.
TARGETS = {"connect_four": {"Test_L3_R1": 0.5, "Test_L2_R1": 0.5, "Test_L2_R2": 2.5,
                            "Test_L1_R1": 0.5, "Test_L1_R2": 2.0, "Test_L1_R3": 7.0}}


# --x: (the metrics key, the axis label)
X_AXES = {"positions": ("positions", "self-play positions"), "wall_s": ("wall_s", "wall_s"),
          "train_wall_s": ("train_wall_s", "train_wall_s (evaluation excluded)"),
          "flops": ("flops/total", "FLOPs (self-play + training)")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="RUN_DIR or RUN_DIR=LABEL")
    parser.add_argument("--x", choices=list(X_AXES), default="positions")
    parser.add_argument("--xscale", choices=["log", "linear"], default="log")
    parser.add_argument("--ymax", type=float, default=30.0, help="top of the error axis (%%)")
    parser.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args()
    x_key, x_label = X_AXES[args.x]

    runs = []
    for spec in args.runs:
        path, _, label = spec.partition("=")
        records = [r for r in read_metrics(Path(path) / "metrics.jsonl")
                   if "eval/oracle/search_error" in r and r.get(x_key)]
        if not records:
            parser.error(f"{path}: no oracle evaluations with {x_key!r} in metrics.jsonl")
        runs.append((label or Path(path).name, run_game(path), records))
    games = {game for _, game, _ in runs}
    if len(games) != 1:
        parser.error(f"the runs are of different games: {sorted(games)}")
    game = games.pop()
    names = in_set_order(game, {k.split("/")[3] for _, _, records in runs for r in records
                                for k in r if k.startswith("eval/oracle/set/")})
    titles, targets = set_titles(game), TARGETS.get(game, {})
    if not names:  # one oracle: its overall errors, eval/oracle/{search,raw}_error
        names, titles = [""], {"": "all positions"}

    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    # One panel (one oracle) gets room for the title and the legend.
    size = (max(8.0, 4.4 * columns), 3.4 * rows + (rows == 1))
    fig, axes = plt.subplots(rows, columns, figsize=size, squeeze=False, sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes.flat, names, strict=False):
        for (label, _, records), colour in zip(runs, colours, strict=False):
            for kind, style in (("search", "-"), ("raw", ":")):
                key = f"eval/oracle/set/{name}/{kind}" if name else f"eval/oracle/{kind}_error"
                points = [(r[x_key], r[key]) for r in records if key in r]
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, style, color=colour, lw=1.3,
                            label=f"{label} {kind}" if name == names[0] else None)
        if name in targets:
            ax.axhline(targets[name], color="black", lw=0.8, ls="--")
        ax.set_title(f"{titles.get(name, name)} ({name})" if name else titles[name], fontsize=10)
        ax.set_xscale(args.xscale)
        ax.set_ylim(0, args.ymax)
        ax.grid(alpha=0.3, which="both")
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel(x_label)
    for ax in axes[:, 0]:
        ax.set_ylabel("error (%)")
    # At most four columns, filled column by column (a run's search line over its raw one),
    # so long labels fit; the bottom margin grows with the legend's rows.
    fig.legend(loc="lower center", ncol=min(4, 2 * len(runs)), fontsize=8)
    fig.suptitle(f"{game}: oracle error" + (" per set" if names != [""] else "")
                 + " (search solid, raw network dotted"
                 + ("; dashed: AlphaZero.jl's error rate)" if targets else ")"))
    fig.tight_layout(rect=(0, 0.03 * ((len(runs) + 1) // 2 + 1), 1, 1))
    fig.savefig(args.out, dpi=90)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
