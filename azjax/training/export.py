"""`azjax export`: a run's snapshot as a self-contained model directory with a model card."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from azjax.agent import (
    default_simulations,
    resolve_model_dir,
    search_effort,
    with_search_overrides,
)
from azjax.model_files import CheckpointError, load_model, save_model
from azjax.training.metrics import machine_description, read_metrics

__all__ = ["export_model"]


def export_model(run_dir: str | Path, snapshot: str | None, to: str | Path, *,
                 num_simulations: int | None = None,
                 evaluate: Callable[[Path], dict[str, Any]] | None = None,
                 storage_dtype: str = "float32",
                 search_overrides: list[str] | None = None,
                 average: list[int] | None = None) -> Path:
    """Copies a snapshot of `run_dir` to `to`, adding the search defaults, the run's
    provenance and a Markdown model card (MODEL_CARD.md).

    Args:
      run_dir: the run dir.
      snapshot: the snapshot's iteration (default: the newest).
      to: the model directory to write (an earlier export there is replaced).
      num_simulations: the model's default search simulations (default: the run's evaluation
        setting).
      evaluate: measures the exported model (given its directory) and returns metrics under
        the training run's `eval/...` keys; they replace the snapshot's training-time figures
        in the card, which stay in model.json as `training_eval`.
      storage_dtype: the params' dtype on disk (`save_model`); the evaluation measures the
        params as stored.
      search_overrides: `KEY=VALUE` changes to how the model searches by default (e.g.
        `search.matmul_dtype=float32` for a run that searched in bfloat16), validated like
        `Agent.with_search`; the card is measured under them.
      average: snapshot iterations whose params are averaged into the exported model
        (stochastic weight averaging: the mean of weights along one run's low-learning-rate
        tail). The newest of them supplies the config and provenance (`snapshot`, if given,
        must be that one).

    Returns:
      `to`, as written by `save_model`.

    Raises:
      CheckpointError: no such snapshot, a target overlapping the run dir or not a model
        directory, or averaged snapshots of different networks.
      ValueError: num_simulations < 1, or a bad `average` list.
    """
    run_dir, to = Path(run_dir), Path(to)
    if average:
        source, params, config, meta = _averaged_snapshots(run_dir, average, snapshot)
    else:
        source = (resolve_model_dir(run_dir) if snapshot is None
                  else _snapshot_dir(run_dir, snapshot))
        params, config, meta = load_model(source)
    _check_target(run_dir, to)
    trained = config
    if search_overrides:
        config = with_search_overrides(config, search_overrides)
    if num_simulations is not None and num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    extra = _provenance(run_dir, source, params, config, meta, num_simulations, average)
    if evaluate is not None:
        # Measured from a staging copy: `to` (e.g. a shipped model) is replaced only once the
        # evaluation has succeeded.
        scratch = Path(tempfile.mkdtemp(prefix=f".{to.name}.staging-", dir=to.parent))
        try:
            metrics = evaluate(save_model(scratch / to.name, params, config, extra,
                                          storage_dtype=storage_dtype))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        earlier = extra.pop("eval", None)
        if (earlier or {}).get("eval/measured_at") != "export":  # re-exports keep the run's
            extra["training_eval"] = earlier
        extra["eval"] = {"eval/measured_at": "export", **metrics}
    card = _card(config, extra, storage_dtype, trained=trained, run_dir=run_dir,
                 spec=_model_spec(to, config.game))
    return save_model(to, params, config, extra, storage_dtype=storage_dtype,
                      text_files={"MODEL_CARD.md": card})


def _provenance(run_dir: Path, source: Path, params: Any, config, meta: dict[str, Any],
                num_simulations: int | None, average: list[int] | None) -> dict[str, Any]:
    """model.json's entries beside the config: the snapshot's own, the search defaults, where
    and from what the model was trained."""
    return {
        **{k: v for k, v in meta.items() if k not in ("format_version", "game", "config")},
        "num_simulations": num_simulations or default_simulations(config),
        "search": {key: getattr(config.search, key) for key in (
            "algorithm", "contempt", "material_utility", "symmetry_average", "greedy_action",
            "prior_temperature", "endgame_table", "quiescence", "quiescence_moves",
            "alphabeta_depth", "alphabeta_nodes")},
        "seed": config.seed,
        "num_params": sum(int(leaf.size) for leaf in jax.tree.leaves(params)),
        # Self-play searches: one per position, each with the training search's simulations.
        "training_simulations": int(meta.get("positions") or 0) * config.search.num_simulations,
        "machine": machine_description(),
        "source": str(source),
        **({"averaged_snapshots": sorted(average)} if average else {}),
        "time_to_perfect_s": _time_to_perfect(run_dir, meta),
        "resume_changes": _resume_changes(run_dir, meta),
    }


def _snapshot_dir(run_dir: Path, iteration: int | str) -> Path:
    source = run_dir / "snapshots" / str(iteration)
    if not (source / "model.json").is_file():
        raise CheckpointError(f"no snapshot {iteration} in {run_dir / 'snapshots'}")
    return source


def _averaged_snapshots(run_dir: Path, iterations: list[int], snapshot: str | None
                        ) -> tuple[Path, Any, Any, dict[str, Any]]:
    """(source, mean params, config, meta) of the snapshots `iterations` of one run; the
    newest supplies source, config and meta. Refuses fewer than two distinct snapshots, a
    `snapshot` other than the newest, and snapshots of different networks."""
    if len(set(iterations)) != len(iterations) or len(iterations) < 2:
        raise ValueError(f"--average needs two or more distinct snapshots, got {iterations}")
    newest = max(iterations)
    if snapshot is not None and str(snapshot) != str(newest):
        raise ValueError(f"with --average the exported snapshot is the newest averaged one "
                         f"({newest}), not {snapshot}")
    sources = {it: _snapshot_dir(run_dir, it) for it in sorted(iterations)}
    loaded = {it: load_model(source) for it, source in sources.items()}
    _, config, meta = loaded[newest]
    for it, (_, other, _) in loaded.items():
        if (other.game, other.network) != (config.game, config.network):
            raise CheckpointError(f"snapshot {it} of {run_dir} has another game or network "
                                  f"than snapshot {newest}; only one run's weights average")
    # The mean in float64, so that the order of the sum does not round the result.
    trees = [params for params, _, _ in loaded.values()]
    mean = jax.tree.map(lambda *leaves: np.mean(np.stack(leaves).astype(np.float64), axis=0)
                        .astype(np.asarray(leaves[0]).dtype), *trees)
    return sources[newest], mean, config, meta


def _check_target(run_dir: Path, to: Path) -> None:
    """Refuses a target that would overwrite anything but an earlier model export."""
    run, target = run_dir.resolve(), to.resolve()
    if target == run or run in target.parents or target in run.parents:
        raise CheckpointError(f"--to {to} overlaps the run dir {run_dir}; export elsewhere")
    if target.exists() and not (target / "model.json").is_file():
        raise CheckpointError(f"--to {to} exists and is not a model directory (no model.json); "
                              "refusing to replace it")


def _time_to_perfect(run_dir: Path, meta: dict[str, Any]) -> float | None:
    """The run's `wall_s` when it first met the perfect-play bar, if the snapshot is at or past
    that point (else None: an earlier snapshot is not credited with it)."""
    if "time_to_perfect_s" in meta:  # recorded with the snapshot
        return meta["time_to_perfect_s"]
    times = [r["time_to_perfect_s"] for r in read_metrics(run_dir / "metrics.jsonl")
             if r.get("time_to_perfect_s") is not None]
    reached = min(times, default=None)
    return reached if reached is not None and reached <= meta.get("wall_s", 0.0) else None


def _resume_changes(run_dir: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The config changes the run took when it resumed, up to the snapshot's iteration:
    [{"iteration", "changes"}] from metrics.jsonl's `resume` records (a re-export keeps the
    ones its model recorded)."""
    if "resume_changes" in meta:
        return meta["resume_changes"]
    iteration = meta.get("iteration") or 0
    return [{"iteration": r["iteration"], "changes": list(r["config_changed"])}
            for r in read_metrics(run_dir / "metrics.jsonl")
            if r.get("event") == "resume" and r.get("config_changed")
            and r.get("iteration", 0) <= iteration]


def _model_spec(to: Path, game: str) -> str:
    """How `azjax eval` / `azjax play` / `Agent.load` name the model: its game id where it is
    the shipped model of that game, else its directory."""
    from azjax.agent import MODELS_DIR

    return game if to.resolve() == (MODELS_DIR / game).resolve() else str(to)


def _card(config, extra: dict, storage_dtype: str = "float32", *, trained=None,
          run_dir: Path | None = None, spec: str = "MODEL_DIR") -> str:
    """MODEL_CARD.md: what the model is, its results and how to reproduce them, how it was
    trained, its limits, and how to load and play it."""
    evaluation = dict(extra.get("eval") or {})
    lines = [f"# azjax model: {config.game}", "", *_what_it_is(config, extra, storage_dtype), ""]
    # A game whose module is not installed loads only with the user's say-so (docs/trust.md).
    command_spec = f"{spec} --trust-game" if config.game_dir else spec
    lines += _results(config, extra, evaluation)
    lines += _reproduce(config, extra, command_spec)
    lines += _training(trained or config, extra, run_dir)
    lines += _limits(config, extra)
    lines += _load_and_play(config, spec)
    return "\n".join(lines) + "\n"


def _network_shape(net) -> str:
    shape = {"mlp": f"MLP {list(net.hidden)}",
             "resmlp": f"residual MLP {net.blocks} blocks x {net.width} units" + (
                 f" after {net.stem_layers} 3x3 conv layers x {net.stem_channels} channels"
                 if net.stem_layers else ""),
             "resnet": f"ResNet {net.blocks} blocks x {net.channels} channels"}[net.kind]
    return shape


def _what_it_is(config, extra: dict, storage_dtype: str) -> list[str]:
    net, search = config.network, config.search
    shape = _network_shape(net)
    if net.material_head:
        shape += (" (+ a material head, trained as an auxiliary target; "
                  + (f"the search adds {search.material_utility} x its prediction)"
                     if search.material_utility else "play does not read it)"))
    lines = [
        f"An AlphaZero-style agent for {config.game}, trained by azjax from self-play alone: "
        "a policy-and-value network that guides a tree search.",
        "",
        f"- network: {shape}, {extra['num_params']:,} parameters stored as {storage_dtype}",
        "- search: " + ("" if search.algorithm == "alphabeta" else f"{search.algorithm}, ")
        + f"{search_effort(search, extra['num_simulations'])} by default"
        + (f", contempt {search.contempt} (draws scored against it)" if search.contempt else "")
        + (f", material utility {search.material_utility} (outcome + that x the final"
           " material difference)" if search.material_utility else "")
        + (", each evaluation averaged over the game's symmetric copies"
           if search.symmetry_average else "")
        + (", greedy move: sequential halving's survivor"
           if search.greedy_action == "halving" else "")
        + (f", prior temperature {search.prior_temperature}"
           if search.prior_temperature != 1.0 else "")
        + (f", endgame table of {search.endgame_table} pieces" if search.endgame_table else "")
        + (f", quiescence {search.quiescence} levels of {search.quiescence_moves} moves"
           if search.quiescence else ""),
        f"- trained: iteration {extra.get('iteration')}, wall_s {extra.get('wall_s', 0):.1f}, "
        f"{extra.get('positions')} self-play positions searched with "
        f"{search.num_simulations} simulations each "
        f"({extra['training_simulations']:,} simulations), seed {config.seed}",
        f"- machine: {extra['machine']}",
    ]
    if extra.get("averaged_snapshots"):
        lines.append("- weights: the mean of snapshots "
                     + ", ".join(str(i) for i in extra["averaged_snapshots"])
                     + " (stochastic weight averaging)")
    return lines


def _results(config, extra: dict, evaluation: dict) -> list[str]:
    measured_at = evaluation.pop("eval/measured_at", "training")
    source = ("measured at export" if measured_at == "export"
              else "from the training run, at the snapshot")
    lines = [f"## Results ({source})", ""]
    sets = sorted({k.split("/")[3] for k in evaluation if k.startswith("eval/oracle/set/")})
    if sets:
        from azjax.evaluation.oracle import in_set_order, set_titles

        titles = set_titles(config.game)
        sets = in_set_order(config.game, sets)
        lines += ["Oracle error rates (% of positions where the move is not value-preserving):",
                  "", "| set | raw network | search |", "|---|---:|---:|"]
        for name in sets:
            raw = evaluation.pop(f"eval/oracle/set/{name}/raw")
            search = evaluation.pop(f"eval/oracle/set/{name}/search")
            label = f"{titles[name]} ({name})" if name in titles else name
            lines.append(f"| {label} | {raw:.2f} | {search:.2f} |")
        lines.append("")
    for key, value in sorted(evaluation.items()):
        lines.append(f"- {key}: {value}")
    if extra.get("stopped_by") and measured_at != "export":
        lines.append(f"Not evaluated: {extra['stopped_by']} stopped the run after this "
                     "iteration, between evaluations. `azjax export --against SPEC` (or "
                     "`--oracle`) measures it.")
    return [*lines, ""]


def _arena_games(evaluation: dict) -> dict[str, int]:
    """{opponent: games} of the arenas in `evaluation` (wins + draws + losses)."""
    games: dict[str, int] = {}
    for key in evaluation:
        parts = key.split("/")
        if len(parts) == 3 and parts[1].startswith("vs_") and parts[2] == "wins":
            prefix = "/".join(parts[:2])
            games[parts[1][3:]] = sum(int(evaluation.get(f"{prefix}/{k}", 0))
                                      for k in ("wins", "draws", "losses"))
    return games


def _reproduce(config, extra: dict, spec: str) -> list[str]:
    """The `azjax eval` commands that measure the results again."""
    evaluation = extra.get("eval") or {}
    at_export = evaluation.get("eval/measured_at") == "export"
    commands = []
    if any(k.startswith("eval/oracle/") for k in evaluation):
        # A game without packaged labels is scored on its config's folder of them.
        folder = config.eval.oracle_dir
        commands.append(f"azjax eval {spec} --oracle" + (f" {folder}" if folder else ""))
    by_games: dict[int, list[str]] = {}
    for opponent, count in _arena_games(evaluation).items():
        by_games.setdefault(count, []).append(opponent)
    devices = int(evaluation.get("eval/arena_devices", 1) or 1)
    on_cpu = "(cpu)" in str(extra.get("machine", ""))  # forced host devices, as measured
    prefix = (f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} "
              if devices > 1 and on_cpu else "")
    for count, opponents in by_games.items():
        against = " ".join(f"--against {o}" for o in opponents)  # in the order played
        commands.append(f"{prefix}azjax eval {spec} {against} --games {count}")
    if not commands:
        return ["## Reproduce", "", f"No figures to reproduce: `azjax eval {spec} --against "
                "random` (or `--oracle` for a game with one) measures the model.", ""]
    lines = ["## Reproduce", "", "```bash", *commands, "```", ""]
    if at_export:
        oracle = any(k.startswith("eval/oracle/") for k in evaluation)
        effort = search_effort(config.search, extra["num_simulations"])
        lines.append(f"They search with the model's default search ({effort}) and seed 0, as "
                     "the export does by default; "
                     + ("oracle scores are deterministic, " if oracle else "")
                     + "arena scores repeat on the same device count"
                     + (f" ({devices})" if devices > 1 else "") + ".")
    else:
        lines.append("The figures are the training run's own evaluation (its config's "
                     "`eval` section); these commands measure the same quantities on the "
                     "exported model, the arenas with other random draws.")
    return [*lines, ""]


def _changed_keys(config) -> dict[str, Any]:
    """The config's keys that differ from azjax's defaults, `game` and `seed` always."""
    from azjax.config import config_from_dict, config_to_dict

    values = config_to_dict(config)
    defaults = config_to_dict(config_from_dict({"game": config.game,
                                                "game_dir": config.game_dir}))
    out: dict[str, Any] = {"game": values["game"], "seed": values["seed"]}
    for section, fields in values.items():
        if isinstance(fields, dict):
            changed = {k: v for k, v in fields.items() if defaults[section].get(k) != v}
            if changed:
                out[section] = changed
    return out


def _training(config, extra: dict, run_dir: Path | None) -> list[str]:
    import yaml

    recipe = yaml.safe_dump(_changed_keys(config), sort_keys=False).strip().splitlines()
    lines = ["## Training", "",
             "The recipe: the run's config, its keys that differ from azjax's defaults "
             "(model.json holds every key). Saved as `recipe.yaml`, `azjax train recipe.yaml` "
             "trains it from scratch"
             + (f"; the run itself was `azjax train {run_dir}/config.yaml --run-dir {run_dir}`"
                if run_dir is not None and (run_dir / "config.yaml").is_file() else "") + ".",
             "", "```yaml", *recipe, "```", ""]
    changes = extra.get("resume_changes") or []
    if changes:
        lines.append("The run changed its config when it resumed (the recipe above is the "
                     "config it ended with):")
        lines += [f"- at iteration {c['iteration']}: " + "; ".join(c["changes"])
                  for c in changes]
        lines += ["", "To follow its schedule, run the first segment with the saved values "
                  "(`--set KEY=VALUE`, `--set budget.max_iterations=N`) and resume with the "
                  "recipe."]
    lines.append(f"This model is iteration {extra.get('iteration')}; to repeat the run on "
                 f"another machine, count iterations (`--set budget.max_iterations="
                 f"{extra.get('iteration')}`) rather than wall_s, which depends on the machine.")
    return [*lines, ""]


def _limits(config, extra: dict) -> list[str]:
    evaluation = extra.get("eval") or {}
    if config.search.algorithm == "alphabeta":
        effort = ("- The results hold for the model's alpha-beta search "
                  f"({search_effort(config.search, extra['num_simulations'])}). Another "
                  "depth or budget (`--set search.alphabeta_nodes=N`) and the web app "
                  "(`azjax serve`: the network's Gumbel search at its own fixed simulation "
                  "counts) play at other strengths than this card's.")
    else:
        effort = (f"- The results hold at {extra['num_simulations']} simulations per move. "
                  "Fewer search less deep: `azjax play --simulations N`, `Agent.act(..., "
                  "num_simulations=N)` and the web app's strengths (`azjax serve`, its own "
                  "fixed simulation counts) play at other strengths than this card's.")
    lines = ["## Limits", "", effort]
    if not any(k.startswith("eval/oracle/") for k in evaluation):
        lines.append("- Measured against baselines only, not against perfect play.")
    if "eval/oracle/raw_error" in evaluation:
        lines.append(f"- Without search (the raw network, `num_simulations=0`) it errs more: "
                     f"{evaluation['eval/oracle/raw_error']:.2f}% of the oracle's positions "
                     "against "
                     f"{evaluation.get('eval/oracle/search_error', float('nan')):.2f}% with it.")
    lines.append(f"- Measured on {extra['machine']}; another backend or device count can flip "
                 "a near-tie between moves, and with it a position or a game.")
    return [*lines, ""]


def _load_and_play(config, spec: str) -> list[str]:
    trust = bool(config.game_dir)  # a game from user code that is not installed
    load = f'"{spec}", trust_game=True' if trust else f'"{spec}"'
    command_spec = f"{spec} --trust-game" if trust else spec
    return ["## Load and play", "", "```python", "import jax", "import azjax",
            "from azjax.agent import states_from_moves", "",
            f"agent = azjax.Agent.load({load})",
            "states = states_from_moves(agent.env, [[]])  # the start; or a list of moves",
            "move = agent.act(jax.random.PRNGKey(0), states)  # with the default search",
            "print(agent.env.action_to_str(int(move[0])))", "```", "", "```bash",
            f"azjax play {command_spec}          # in the terminal",
            f"azjax eval {command_spec} --against greedy",
            "```"]
