"""A run's evaluations as one Markdown table, read from its `metrics.jsonl` (`azjax report`).

One row per evaluation: iteration, `wall_s`, positions, each oracle set's raw / search error
(set names from the game's oracle, e.g. End-Easy), their mean, and each arena's score. What the
docs' per-run tables are made of, without copying numbers by hand. `run_totals` sums the run up:
iterations, positions, FLOPs by part and the wall seconds spent evaluating and training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from azjax.evaluation.oracle import in_set_order, set_titles
from azjax.training.metrics import read_metrics, run_game

_SET_PREFIX = "eval/oracle/set/"


def evaluation_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that carry an evaluation, the untrained baseline (logged under
    `untrained/`) first as iteration 0, each iteration once (a resumed run's redone ones: the
    last)."""
    by_iteration: dict[int, dict[str, Any]] = {}
    for record in records:
        if any(k.startswith("untrained/") for k in record):  # logged late; trained for 0 s
            record = {**{k.replace("untrained/", "eval/", 1): v for k, v in record.items()},
                      "wall_s": 0.0, "positions": 0}
        if any(k.startswith("eval/") for k in record) and "iteration" in record:
            by_iteration[int(record["iteration"])] = record
    return [by_iteration[i] for i in sorted(by_iteration)]


def report_table(run_dir: str | Path, *, every: int = 1, last: int | None = None) -> str:
    """The Markdown table of a run's evaluations: every `every`-th one (the last always kept),
    or only the `last` ones.

    Args:
      run_dir: the run dir (its metrics.jsonl, and config.yaml for the oracle sets' names).
      every: keep every `every`-th evaluation.
      last: keep only the last `last` of those (None: all).

    Returns:
      The table's lines, joined by newlines (no trailing newline).

    Raises:
      FileNotFoundError: no metrics.jsonl in `run_dir`.
      ValueError: `every` < 1, or a run with no evaluation logged yet.
    """
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir} (is it a run dir?)")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    records = read_metrics(path)
    rows = evaluation_records(records)
    if not rows:
        raise ValueError(f"{run_dir}: no evaluation logged yet")
    rows = [r for i, r in enumerate(rows) if i % every == 0 or i == len(rows) - 1]
    if last is not None:
        rows = rows[-last:]
    game = run_game(run_dir)
    names = {k[len(_SET_PREFIX):].rsplit("/", 1)[0] for r in rows for k in r
             if k.startswith(_SET_PREFIX)}
    sets = in_set_order(game, names)
    titles = set_titles(game)
    oracle = any("eval/oracle/raw_error" in r for r in rows)
    arenas = sorted({k.split("/")[1][3:] for r in rows for k in r
                     if k.startswith("eval/vs_") and k.endswith("/score")})
    header = ["iteration", "`wall_s`", "positions"]
    header += [titles.get(name, name) for name in sets]
    header += ["mean (raw / search)"] if oracle else []
    header += [f"vs {name}" for name in arenas]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i < 3 else "---" for i in range(len(header))) + "|"]
    for r in rows:
        cells = [str(r["iteration"]), f"{r.get('wall_s', 0):,.0f}",
                 f"{int(r['positions']):,}" if "positions" in r else ""]
        cells += [_pair(r, f"{_SET_PREFIX}{name}/raw", f"{_SET_PREFIX}{name}/search")
                  for name in sets]
        if oracle:
            cells.append(_pair(r, "eval/oracle/raw_error", "eval/oracle/search_error"))
        cells += [f"{r[f'eval/vs_{name}/score']:.3f}" if f"eval/vs_{name}/score" in r else ""
                  for name in arenas]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pair(record: dict[str, Any], raw: str, search: str) -> str:
    if raw not in record:
        return ""
    return f"{record[raw]:.1f} / {record[search]:.1f}"



def run_totals(run_dir: str | Path) -> str:
    """One line of the run's totals at its last logged iteration: iterations, positions, FLOPs
    (by part) and `wall_s` split into evaluation and the rest ("" before any iteration).

    Raises:
      FileNotFoundError: no metrics.jsonl in `run_dir`.
    """
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir} (is it a run dir?)")
    iterations = [r for r in read_metrics(path) if "positions_per_s" in r]
    if not iterations:
        return ""
    last = iterations[-1]
    text = (f"Totals: {last['iteration']} iterations, {int(last['positions']):,} positions, "
            f"wall_s {last['wall_s']:,.0f}")
    if "eval_wall_s" in last:
        rate = last["positions"] / max(last["train_wall_s"], 1e-9)
        text += (f" (evaluation {last['eval_wall_s']:,.0f}, self-play + training "
                 f"{last['train_wall_s']:,.0f}: {rate:,.0f} positions/s)")
    if "flops/total" in last:
        parts = ", ".join(f"{k.split('/', 1)[1]} {v:.3g}" for k, v in last.items()
                          if k.startswith("flops/") and k != "flops/total")
        text += f", {last['flops/total']:.3g} FLOPs ({parts})"
    return text + "."
