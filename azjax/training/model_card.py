"""MODEL_CARD.md for an exported model: what it is, its results and how to reproduce them, how
it was trained, its limits, and how to load and play it (`azjax.training.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from azjax.agent import search_effort

__all__ = ["model_card"]


def model_card(config, extra: dict, storage_dtype: str = "float32", *, trained=None,
               run_dir: Path | None = None, spec: str = "MODEL_DIR") -> str:
    """The text of MODEL_CARD.md.

    Args:
      config: the exported model's config (its search as exported).
      extra: model.json's entries beside the config (`export._provenance`, with `eval`).
      storage_dtype: the params' dtype on disk.
      trained: the config the run trained with (default: `config`).
      run_dir: the run dir, for the training command.
      spec: how commands name the model (its game id when shipped, else its directory).

    Returns:
      The Markdown text.
    """
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
