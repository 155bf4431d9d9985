"""The lever protocol: a baseline and variants trained under equal budgets, compared.

    python tools/lever_protocol.py sims32=experiments/c4_sims32.yaml --budget-s 1800 \
        --out runs/lever_sims32
    python tools/lever_protocol.py wide=wide.yaml deep=deep.yaml --set deep:network.blocks=6
    python tools/lever_protocol.py sims32=experiments/c4_sims32.yaml --iterations 200 --out o
    python tools/lever_protocol.py --report-only --out runs/lever_sims32

Each variant is `NAME=CONFIG.yaml` (a YAML may say `base: experiments/connect_four.yaml` and list
only what it changes), with optional `--set NAME:section.key=value` overrides (`baseline:` for the
baseline). Every run trains under the same budget: `--budget-s` wall seconds (1800 when
neither budget is given), `--iterations` iterations, or both (whichever comes first); an
oracle evaluation every `--eval-every` iterations and at the run's end, no arenas and rare
checkpoints, on this machine in this sitting, logging to OUT/NAME/log.txt. A wall budget gives
each run what the machine lets it do in that time; an iteration budget makes every run the same
length on any machine.

With `--side-by-side` (the default on a 2-core machine) the baseline is rerun beside each
variant (`baseline@1` beside the first, `baseline@2` beside the second, ...: same config and seed
each time), the two runs at once, each pinned to its own core (`taskset`) with single-threaded
XLA, so both see the same machine at the same moment. Without it the runs go one after another
on all cores, the baseline once (`baseline@1`).

OUT/table.md compares each variant with the baseline run of its pair at the last common
`train_wall_s` (evaluation time excluded) and at equal FLOPs (`flops/total`): the mean search and
raw-network oracle error over the oracle sets there, interpolated linearly between evaluations,
and the variant's difference. OUT/curves.png draws the search error per set and the mean
against `train_wall_s` (top row) and FLOPs (bottom row).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azjax.evaluation.oracle import in_set_order, set_titles  # noqa: E402
from azjax.training.metrics import read_metrics, run_game  # noqa: E402
from azjax.training.report import evaluation_records  # noqa: E402

SET_PREFIX = "eval/oracle/set/"
# Single-threaded XLA:CPU beside the pinning: XLA sizes its intra-op pool from the affinity mask
# (one core: one thread), and Eigen's own multi-threading is switched off. (The pool has no
# flag of its own; `intra_op_parallelism_threads=1` would be read as a file name.)
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false"
RARE_CHECKPOINTS = 1_000_000  # each checkpoint holds the replay buffer; the run's end saves one


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of the protocol: its name, config file, overrides and pair (1, 2, ...)."""

    name: str
    config: Path
    overrides: tuple[str, ...]
    pair: int
    baseline: bool


def plan(variants: list[tuple[str, Path]], baseline: Path, overrides: dict[str, list[str]],
         side_by_side: bool) -> list[list[Run]]:
    """The runs in launch groups (runs in one group run at once): side by side, one
    (baseline@k, variant k) pair per group; else every run alone, the baseline once first."""
    base = tuple(overrides.get("baseline", []))
    runs = [Run(name, path, tuple(overrides.get(name, [])), k, False)
            for k, (name, path) in enumerate(variants, start=1)]
    if side_by_side:
        return [[Run(f"baseline@{r.pair}", baseline, base, r.pair, True), r] for r in runs]
    return [[Run("baseline@1", baseline, base, 0, True)]] + [[r] for r in runs]


def train_command(run: Run, run_dir: Path, budget_s: float, eval_every: int,
                  iterations: int = 0) -> list[str]:
    """`python -m azjax train` for `run`: its overrides, then the protocol's (a budget of
    `budget_s` wall seconds and `iterations` iterations, 0 for no limit of that kind)."""
    command = [sys.executable, "-m", "azjax", "train", str(run.config), "--run-dir",
               str(run_dir), "--no-progress"]
    protocol = [f"budget.max_wall_s={budget_s}", f"budget.max_iterations={iterations}",
                "budget.stop_when_perfect=false",
                f"eval.every_iterations={eval_every}", "eval.opponents=[]",
                f"checkpoint.every_iterations={RARE_CHECKPOINTS}"]
    for item in (*run.overrides, *protocol):
        command += ["--set", item]
    return command


def launch(group: list[Run], out: Path, args: argparse.Namespace) -> None:
    """Runs one group's runs at once (pinned one per core side by side) and waits for them."""
    processes = []
    for core, run in enumerate(group):
        run_dir = out / run.name
        if _finished(run_dir):
            print(f"{run.name}: finished earlier, kept")
            continue
        if run_dir.exists():  # an unfinished run (rare checkpoints): started again
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        command = train_command(run, run_dir, args.budget_s, args.eval_every, args.iterations)
        env = dict(os.environ)
        if args.side_by_side:
            # alternate the cores from pair to pair, so neither run keeps the same core
            command = ["taskset", "-c", str((core + run.pair) % 2)] + command
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip()
        log = (run_dir / "log.txt").open("w")
        log.write(" ".join(command) + "\n")
        log.flush()
        print(f"{run.name}: training ({budget_text(args.budget_s, args.iterations)}), "
              f"log in {run_dir / 'log.txt'}")
        processes.append((run, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                cwd=ROOT, env=env), log))
    for run, process, log in processes:
        if process.wait() != 0:
            raise SystemExit(f"{run.name} failed (exit {process.returncode}): see "
                             f"{out / run.name / 'log.txt'}")
        log.close()
        if not args.keep_checkpoints:  # they hold the replay buffer; the table needs the log
            shutil.rmtree(out / run.name / "checkpoints", ignore_errors=True)


def budget_text(budget_s: float, iterations: int) -> str:
    """The budget in words: "1800 s", "200 iterations" or "1800 s or 200 iterations"."""
    parts = ([f"{budget_s:.0f} s"] if budget_s else []) + (
        [f"{iterations} iterations"] if iterations else [])
    return " or ".join(parts)


def _finished(run_dir: Path) -> bool:
    return any(r.get("event") == "end" for r in read_metrics(run_dir / "metrics.jsonl"))


# ---- the comparison ------------------------------------------------------------------------


def oracle_sets(records: list[dict]) -> list[str]:
    """The oracle sets the records score (names as in `eval/oracle/set/<name>/search`)."""
    return sorted({k[len(SET_PREFIX):].rsplit("/", 1)[0] for r in records for k in r
                   if k.startswith(SET_PREFIX)})


def mean_error(record: dict, kind: str) -> float:
    """The mean `kind` ("search" or "raw") error over the oracle's sets, as the evaluation
    records it (one oracle without sets: its error)."""
    return float(record[f"eval/oracle/{kind}_error"])


def curve(records: list[dict], x: str, y) -> tuple[np.ndarray, np.ndarray]:
    """A run's evaluations as (xs, ys) sorted by `x` ("train_wall_s" or "flops/total"; the
    untrained network at 0), ys = `y(record)`."""
    points = []
    for record in evaluation_records(records):
        at = 0.0 if record["iteration"] == 0 else record.get(x)
        if at is not None and "eval/oracle/search_error" in record:
            points.append((float(at), y(record)))
    points.sort()
    return np.array([p[0] for p in points]), np.array([p[1] for p in points])


def at_common_end(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, list[float]]:
    """The smallest of the curves' last x, and each curve linearly interpolated there."""
    end = min(float(xs[-1]) for xs, _ in curves)
    return end, [float(np.interp(end, xs, ys)) for xs, ys in curves]


def load_run(out: Path, name: str) -> list[dict]:
    """A run's metrics records; exits with a clear message when it has no evaluation."""
    records = read_metrics(out / name / "metrics.jsonl")
    if not any("eval/oracle/search_error" in r for r in records):
        raise SystemExit(f"{out / name}: no oracle evaluation in metrics.jsonl (a budget "
                         "shorter than the start-up and the first evaluations?)")
    return records


def summary(records: list[dict]) -> dict[str, float]:
    """The run's last iteration: iterations, positions, positions per train second, FLOPs."""
    last = [r for r in records if "positions_per_s" in r][-1]
    return {"iterations": last["iteration"], "positions": last["positions"],
            "positions_per_s": last["positions"] / max(last["train_wall_s"], 1e-9),
            "flops": last["flops/total"], "train_wall_s": last["train_wall_s"]}


def compare_pair(baseline: list[dict], variant: list[dict]) -> dict[str, object]:
    """The pair's errors at their last common `train_wall_s` and at equal FLOPs:
    {(axis, kind): (at, [baseline's, variant's])}."""
    result = {}
    for axis in ("train_wall_s", "flops/total"):
        for kind in ("search", "raw"):
            curves = [curve(records, axis, lambda r, k=kind: mean_error(r, k))
                      for records in (baseline, variant)]
            result[axis, kind] = at_common_end(curves)
    return result


def _cell(value: float, reference: float | None) -> str:
    return f"{value:.2f}" + ("" if reference is None else f" ({value - reference:+.2f})")


def table(out: Path, groups: list[list[Run]]) -> str:
    """The markdown comparison, one pair of rows per variant (its baseline run first)."""
    runs = [r for group in groups for r in group]
    baselines = {r.pair: r for r in runs if r.baseline}
    header = ("| run | iterations | positions | positions/s | FLOPs | search err @ time | "
              "raw err @ time | search err @ FLOPs | raw err @ FLOPs |")
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for variant in (r for r in runs if not r.baseline):
        base = baselines.get(variant.pair) or baselines[0]
        records = {r.name: load_run(out, r.name) for r in (base, variant)}
        compared = compare_pair(records[base.name], records[variant.name])
        for i, run in enumerate((base, variant)):
            s = summary(records[run.name])
            cells = [run.name, f"{s['iterations']}", f"{s['positions']:,}",
                     f"{s['positions_per_s']:,.0f}", f"{s['flops']:.3g}"]
            for key in (("train_wall_s", "search"), ("train_wall_s", "raw"),
                        ("flops/total", "search"), ("flops/total", "raw")):
                values = compared[key][1]
                cells.append(_cell(values[i], values[0] if i else None))
            lines.append("| " + " | ".join(cells) + " |")
        notes.append(f"- {variant.name} vs {base.name}: at train_wall_s "
                     f"{compared['train_wall_s', 'search'][0]:,.0f} s and "
                     f"{compared['flops/total', 'search'][0]:.3g} FLOPs")
    return "\n".join(lines + ["", "Mean oracle error (%) over the oracle sets, interpolated "
                              "at the pair's common point (variant: its difference from the "
                              "baseline run beside it):"] + notes)


def plot(out: Path, groups: list[list[Run]]) -> Path:
    """OUT/curves.png: search error per oracle set and their mean, against train_wall_s (top)
    and FLOPs (bottom), one colour per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.name for group in groups for r in group))
    runs = {name: load_run(out, name) for name in names}
    game = run_game(out / names[0])
    sets = in_set_order(game, oracle_sets([r for rs in runs.values() for r in rs]))
    titles = set_titles(game)
    panels = [(name, titles.get(name, name)) for name in sets] + [(None, "mean")]
    fig, axes = plt.subplots(2, len(panels), figsize=(3.6 * len(panels), 6.4), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, axis in enumerate(("train_wall_s", "flops/total")):
        for column, (name, title) in enumerate(panels):
            ax = axes[row, column]
            for k, (run, records) in enumerate(runs.items()):
                y = ((lambda r, n=name: r[f"{SET_PREFIX}{n}/search"]) if name
                     else (lambda r: mean_error(r, "search")))
                xs, ys = curve(records, axis, y)
                ax.plot(xs, ys, "-", marker="o", ms=2, color=colours[k % len(colours)],
                        label=run if row == column == 0 else None)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("train_wall_s" if row == 0 else "FLOPs")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("search error (%)")
    axes[1, 0].set_ylabel("search error (%)")
    fig.legend(loc="lower center", ncol=min(4, len(runs)), fontsize=8)
    fig.suptitle(f"{game}: lever protocol ({out.name})")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = out / "curves.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


# ---- command line ----------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", help="NAME=CONFIG.yaml")
    parser.add_argument("--baseline", type=Path, default=ROOT / "experiments/connect_four.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="NAME:section.key=value for one run (NAME `baseline`: the baseline)")
    parser.add_argument("--budget-s", type=float, default=None, help="wall seconds per run "
                        "(default 1800 without --iterations, else none)")
    parser.add_argument("--iterations", type=int, default=0, help="iterations per run "
                        "(default: no cap)")
    parser.add_argument("--eval-every", type=int, default=10, help="iterations between "
                        "evaluations (every run alike)")
    parser.add_argument("--out", type=Path, required=True, help="one run dir per run, "
                        "table.md, curves.png")
    parser.add_argument("--side-by-side", action=argparse.BooleanOptionalAction,
                        default=os.cpu_count() == 2, help="pairs at once, one core each "
                        "(default on a 2-core machine)")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep each run's final checkpoint (it holds the replay buffer)")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild table.md and curves.png from the run dirs in --out")
    args = parser.parse_args(argv)
    if args.iterations < 0 or (args.budget_s is not None and args.budget_s < 0):
        parser.error("--budget-s and --iterations take a number >= 0 (0: no limit)")
    if args.budget_s is None:
        args.budget_s = 0.0 if args.iterations else 1800.0
    if not args.budget_s and not args.iterations:
        parser.error("give a budget: --budget-s, --iterations or both")
    args.variants = [_variant(parser, spec) for spec in args.variants]
    if not args.variants and not args.report_only:
        parser.error("give at least one NAME=CONFIG.yaml")
    names = {name for name, _ in args.variants} | {"baseline"}
    args.by_run = {}
    for item in args.overrides:
        name, sep, override = item.partition(":")
        if not sep or name not in names or "=" not in override:
            parser.error(f"--set {item}: expected NAME:section.key=value, NAME one of "
                         f"{sorted(names)}")
        args.by_run.setdefault(name, []).append(override)
    return args


def _variant(parser: argparse.ArgumentParser, spec: str) -> tuple[str, Path]:
    name, sep, path = spec.partition("=")
    if not sep or not name or name.startswith("baseline") or "/" in name:
        parser.error(f"{spec}: expected NAME=CONFIG.yaml (NAME not starting with baseline)")
    if not Path(path).is_file():
        parser.error(f"{spec}: no such config file {path}")
    return name, Path(path)


def saved_plan(out: Path) -> list[list[Run]]:
    """The launch groups written to OUT/protocol.json when the runs were started."""
    path = out / "protocol.json"
    if not path.is_file():
        raise SystemExit(f"{out}: no protocol.json (not a lever protocol's output)")
    return [[Run(r["name"], Path(r["config"]), tuple(r["overrides"]), r["pair"], r["baseline"])
             for r in group] for group in json.loads(path.read_text())]


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    if args.report_only:
        groups = saved_plan(args.out)
    else:
        groups = plan(args.variants, args.baseline, args.by_run, args.side_by_side)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "protocol.json").write_text(json.dumps(
            [[{**dataclasses.asdict(r), "config": str(r.config)} for r in group]
             for group in groups], indent=1))
        started = time.perf_counter()
        for group in groups:
            launch(group, args.out, args)
        print(f"all runs done in {time.perf_counter() - started:,.0f} s")
    text = table(args.out, groups)
    (args.out / "table.md").write_text(text + "\n")
    print(text)
    print(f"wrote {args.out / 'table.md'} and {plot(args.out, groups)}")


if __name__ == "__main__":
    main()
