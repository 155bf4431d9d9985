"""The `azjax` command line: train, eval, anchors, export, play, serve.

Errors the user can fix (bad config, corrupt checkpoint, unknown game, a full or read-only
disk, a closed standard input, an option out of its bounds...) print one line, `error: ...`, to
standard error and exit with status 2, without a traceback and without the libraries' log
lines; a run dir keeps its last good checkpoint. `AZJAX_DEBUG=1` shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from azjax import __version__
from azjax.config import MAX_SEED, MAX_SIMULATIONS, baseline_forms

_BASELINES = " | ".join(baseline_forms())  # the baseline opponents' names, for help texts

app = typer.Typer(
    name="azjax",
    help="AlphaZero in JAX: train, evaluate and export agents for two-player board games.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"azjax {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """AlphaZero in JAX."""
    _quiet_libraries(os.environ)
    _enable_compilation_cache(_cache_directory(os.environ))


def _quiet_libraries(environ) -> None:
    """Keeps the libraries' log lines out of the CLI's output, which prints its own lines and
    its own one-line errors: orbax logs routine notices, and a failed save's tracebacks,
    through absl; asyncio logs the tasks such a save abandons; and the writes a failed save
    left in flight finish into its closed event loop, errors Python can only report as
    "unraisable" (a traceback each). AZJAX_DEBUG=1 keeps them all."""
    import logging

    if environ.get("AZJAX_DEBUG"):
        return
    for name in ("absl", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    sys.unraisablehook = _ignore_unraisable


def _ignore_unraisable(unraisable) -> None:
    """`sys.unraisablehook` of the CLI: drops an error raised where nothing can catch it (a
    library's callback, a finaliser); the command reports its own errors in one line."""


def _cache_directory(environ) -> str | None:
    """Where the CLI keeps compiled programs: `AZJAX_COMPILATION_CACHE` when it is set ("":
    no cache); else None when JAX's own `JAX_COMPILATION_CACHE_DIR` is set (JAX reads that
    itself); else `~/.cache/azjax/jax`."""
    if "AZJAX_COMPILATION_CACHE" in environ:
        return environ["AZJAX_COMPILATION_CACHE"]
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    return str(Path.home() / ".cache" / "azjax" / "jax")


def _enable_compilation_cache(directory: str | None) -> None:
    """JAX's persistent compilation cache in `directory` (programs that took a second or more
    to compile): a second run skips most compile time. "": no cache at all; None: JAX's
    settings stay as they are."""
    if directory is None:
        return
    import jax

    if not directory:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _fail(error: BaseException) -> None:
    """`error: <one line>` on standard error, exit status 2; AZJAX_DEBUG=1 keeps the traceback
    (a ValueError may be a bug)."""
    if os.environ.get("AZJAX_DEBUG"):
        raise error
    typer.echo(f"error: {one_line(error)}", err=True)
    raise typer.Exit(code=2)


def one_line(error: BaseException) -> str:
    """`error` for the user in one line: an OSError as `<path>: <reason>` (`runs/x/metrics.jsonl:
    No space left on device`), anything else as its message; then its notes (what was kept),
    separated by "; "."""
    if isinstance(error, OSError) and error.strerror:
        where = " -> ".join(str(f) for f in (error.filename, error.filename2) if f is not None)
        text = f"{where}: {error.strerror}" if where else error.strerror
    else:
        text = str(error) or type(error).__name__
    text = "; ".join([text, *getattr(error, "__notes__", ())])
    return " ".join(text.split())


def _user_errors():
    """What a command reports in one line: the errors a user can fix, a disk that is full or
    read-only (OSError), standard input closed or ended (EOFError)."""
    from azjax.config import ConfigError
    from azjax.model_files import CheckpointError
    from azjax.training.loop import TrainingError

    return (CheckpointError, ConfigError, TrainingError, ValueError, OSError, EOFError)


def _bounded(option: str, value: int | None, low: int, high: int, bound: str) -> None:
    """Refuses an option's value outside [low, high] in one line naming the bound."""
    if value is not None and not low <= value <= high:
        _fail(ValueError(f"{option}: must be in [{low}, {high}] ({bound}), got {value}"))


def _check_simulations(**options: int | None) -> None:
    """Refuses simulation counts above `azjax.config.MAX_SIMULATIONS`; keys name the option
    (`against_simulations` is --against-simulations)."""
    for name, value in options.items():
        _bounded("--" + name.replace("_", "-"), value, 1, MAX_SIMULATIONS,
                 "azjax.config.MAX_SIMULATIONS")


MAX_MOVETIME = 3600.0  # seconds: an hour per move is a correspondence game, not a typo


def _check_movetime(**options: float | None) -> None:
    """Refuses a time per move that is not in (0, MAX_MOVETIME] seconds; keys name the option."""
    for name, value in options.items():
        if value is not None and not 0 < value <= MAX_MOVETIME:
            _fail(ValueError(f"--{name.replace('_', '-')}: must be in (0, {MAX_MOVETIME:g}] "
                             f"seconds, got {value}"))


def _check_seed(seed: int) -> None:
    """Refuses a --seed that is no 32-bit random key seed."""
    _bounded("--seed", seed, 0, MAX_SEED, "azjax.config.MAX_SEED: the random keys are 32-bit")


_TRUST_HELP = ("Let the models and run dirs named here import their game's module from where "
               "they say it is when it is not installed (that runs its code; docs/trust.md)")


def _trusting(command):
    """`command` run inside `envs.trust_game_code(trust_game)`, so that its `--trust-game`
    reaches every model it loads (docs/trust.md)."""
    import functools

    @functools.wraps(command)
    def trusting(*args, **kwargs):
        from azjax import envs

        with envs.trust_game_code(kwargs.get("trust_game", False)):
            return command(*args, **kwargs)

    return trusting


@app.command()
def train(
    config: Annotated[Path, typer.Argument(
        help="Experiment YAML, e.g. experiments/tic_tac_toe.yaml")],
    run_dir: Annotated[Path | None, typer.Option(help="Default: runs/<config stem>")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a config key, e.g. --set search.num_simulations=32")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    coordinator: Annotated[str | None, typer.Option(
        envvar="JAX_COORDINATOR_ADDRESS", show_envvar=False,
        help="Multi-host: HOST:PORT of process 0's coordinator (jax.distributed); with "
             "--num-processes and --process-id. Every process runs the same command.")] = None,
    num_processes: Annotated[int | None, typer.Option(
        envvar="JAX_NUM_PROCESSES", show_envvar=False,
        help="Multi-host: how many processes take part.")] = None,
    process_id: Annotated[int | None, typer.Option(
        envvar="JAX_PROCESS_ID", show_envvar=False,
        help="Multi-host: this process's index, 0 to N-1.")] = None,
    distributed: Annotated[bool, typer.Option(
        "--distributed", help="Multi-host with the cluster detected by JAX (SLURM, Open MPI, "
                              "Cloud TPU pods); no other flag needed.")] = False,
) -> None:
    """Train from a config; resumes if the run dir holds a checkpoint. Uses every device; with
    the multi-host flags, every device of every process (see docs/scaling.md)."""
    try:
        if distributed or any(v is not None for v in (coordinator, num_processes, process_id)):
            from azjax.core.layout import initialize_distributed

            initialize_distributed(coordinator, num_processes, process_id)  # before JAX works
        from azjax.config import load_config
        from azjax.training.loop import train as run_training

        cfg = load_config(config, set_ or [])
        result = run_training(cfg, run_dir or Path("runs") / config.stem, show_progress=progress)
    except _user_errors() as error:
        _fail(error)
    except KeyboardInterrupt as error:  # a second Ctrl-C, or one before training started
        if os.environ.get("AZJAX_DEBUG"):
            raise
        typer.echo(f"stopped: {one_line(error) if str(error) else 'interrupted'}", err=True)
        raise typer.Exit(code=130) from None
    import jax

    if jax.process_index() != 0:  # multi-host: process 0 speaks for the run
        return
    ttp = result.time_to_perfect_s
    if result.stopped_by:
        typer.echo(f"stopped by {result.stopped_by} after iteration {result.iterations} "
                   f"(checkpoint saved; the same command resumes)")
    typer.echo(f"done: {result.iterations} iterations, wall_s {result.wall_s:.1f}"
               + (f", time to perfect play {ttp:.1f} s" if ttp is not None else "")
               + f"; results in {result.run_dir}")


@app.command("eval")
@_trusting
def evaluate(
    spec: Annotated[str, typer.Argument(help="Game id (shipped model), run dir or snapshot dir")],
    against: Annotated[list[str] | None, typer.Option(
        help=f"{_BASELINES} | another SPEC | cb:PATH or cb:PATH@SECONDS, an external checkers "
             "engine (a CheckerBoard-API library, draughts; SECONDS per move, default 0.1; "
             "docs/engines.md) (repeatable)")] = None,
    oracle: Annotated[str | None, typer.Option(
        help="Score against perfect play: --oracle alone uses the game's default oracle "
             "(tic-tac-toe: exact minimax; connect four: $AZJAX_ORACLES, else Pascal Pons's test "
             "sets packaged in azjax/data/oracles); "
             "--oracle DIR reads the oracle files in DIR")] = None,
    games: Annotated[int, typer.Option(
        min=1, help="Arena games per opponent (both colours)")] = 200,
    simulations: Annotated[int | None, typer.Option(
        min=1, help="The evaluated agent's search simulations (default: its model's)")] = None,
    against_simulations: Annotated[int | None, typer.Option(
        min=1, help="Simulations of the agent opponents (--against SPEC); default: each "
                    "one's own model's, not --simulations")] = None,
    movetime: Annotated[float | None, typer.Option(
        help="Seconds the agent thinks per move (each arena ply, each oracle position) "
             "instead of a fixed count; agent opponents get as long unless "
             "--against-movetime says otherwise. Not repeatable, as a count is")] = None,
    against_movetime: Annotated[float | None, typer.Option(
        help="Seconds per move of the agent opponents (default: --movetime)")] = None,
    equal_time: Annotated[bool, typer.Option(
        "--equal-time", help="In each arena the agent thinks, on each ply, as long as the "
                             "opponent took on that ply: equal time against alphabeta:D, "
                             "mcts:N and cb: engines, whatever the machine")] = False,
    seed: Annotated[int, typer.Option()] = 0,
    opening_plies: Annotated[int | None, typer.Option(
        min=0, help="Paired random plies opening every arena's games (default: 2 against "
                    "alpha-beta and agents, 3 against cb: engines, none against random, "
                    "greedy and mcts:N)")] = None,
    oracle_positions: Annotated[int | None, typer.Option(
        help="Score only the first N positions of each oracle set (default: all)")] = None,
    ladder: Annotated[bool, typer.Option(
        "--ladder", help="SPEC is a run dir: play its snapshots against each other and the "
                         "baselines (--against), fit Elo (random = 0), write ladder.json/.png")
    ] = False,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Change how the evaluated agent searches, e.g. --set search.algorithm=puct "
                      "(its network and game stay)")] = None,
    anchors: Annotated[str | None, typer.Option(
        help="With --ladder: an anchor table (`azjax anchors`; `shipped`: azjax's for the run's "
             "game and rules) whose baselines join with their ratings held fixed")] = None,
    pdn: Annotated[Path | None, typer.Option(
        help="Append every arena's games to this file in PDN, the notation checkers programs "
             "read (draughts; the arenas are then played ply by ply from the host, the games "
             "of one device)")] = None,
    cores: Annotated[int, typer.Option(
        help="CPU cores the arenas run on (0: all): alpha-beta over a network searches a "
             "batch of games quicker on one core of a CPU, a tree search slower "
             "(docs/engines.md)")] = 0,
    trust_game: Annotated[bool, typer.Option("--trust-game", help=_TRUST_HELP)] = False,
) -> None:
    """Evaluate an agent: arenas against baselines or agents, oracle scoring, Elo ladders."""
    _check_simulations(simulations=simulations, against_simulations=against_simulations)
    _check_movetime(movetime=movetime, against_movetime=against_movetime)
    _check_seed(seed)
    from azjax.apps.cores import on_cores
    from azjax.evaluation.measure import evaluate_agent

    if ladder:
        _check_ladder(set_, against_simulations, opening_plies,
                      movetime is not None or against_movetime is not None or equal_time, pdn)
    elif anchors is not None:
        _fail(ValueError("--anchors applies to a --ladder"))
    try:
        with on_cores(cores):
            if ladder:
                return _ladder(spec, against or [], games, simulations, seed, anchors)
            evaluate_agent(spec, against=against or [], oracle=oracle, games=games,
                           num_simulations=simulations, seed=seed,
                           oracle_positions=oracle_positions, report=typer.echo,
                           overrides=set_ or [], progress=True,
                           opponent_simulations=against_simulations,
                           opening_plies=opening_plies, movetime=movetime,
                           opponent_movetime=against_movetime, equal_time=equal_time, pdn=pdn)
    except _user_errors() as error:
        _fail(error)


def _check_ladder(set_: list[str] | None, against_simulations: int | None,
                  opening_plies: int | None, clocked: bool, pdn: Path | None) -> None:
    """Refuses (one line, exit 2) the options of `azjax eval` that a --ladder does not take."""
    if set_:
        _fail(ValueError("--set applies to one agent, not to a --ladder of snapshots"))
    if against_simulations is not None:
        _fail(ValueError("--against-simulations applies to agent opponents, not to a "
                         "--ladder (its snapshots all search with --simulations)"))
    if opening_plies is not None:
        _fail(ValueError("--opening-plies applies to arenas; a --ladder plays its anchor "
                         "table's (or 2) opening plies"))
    if clocked:
        _fail(ValueError("--movetime and --equal-time apply to one agent, not to a "
                         "--ladder (its snapshots all search with --simulations)"))
    if pdn is not None:
        _fail(ValueError("--pdn applies to arenas, not to a --ladder"))


def _ladder(run_dir: str, against: list[str], games: int, simulations: int | None,
            seed: int, anchors: str | None) -> None:
    import jax

    from azjax.training.ladder import SHIPPED, format_ladder, load_anchors, run_ladder

    try:
        table = anchors if anchors in (None, SHIPPED) else load_anchors(anchors)
        default = () if table is not None else ("random", "greedy")
        result = run_ladder(Path(run_dir), key=jax.random.PRNGKey(seed),
                            games_per_pair=games + games % 2, simulations=simulations,
                            baselines=tuple(against) or default, progress=typer.echo,
                            anchors=table)
    except _user_errors() as error:
        _fail(error)
    for line in format_ladder(result):
        typer.echo(line)


@app.command("anchors")
def anchors_table(
    game: Annotated[str, typer.Argument(help="Game id, e.g. draughts")],
    against: Annotated[list[str], typer.Option(
        help=f"A fixed baseline: {_BASELINES} | cb:PATH or cb:PATH@SECONDS, an "
             "external checkers engine (repeatable; random is always in)")],
    out: Annotated[Path, typer.Option(help="Where to write the table (JSON)")],
    games: Annotated[int, typer.Option(min=2, help="Games per pairing (both colours)")] = 200,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Rate fixed baselines by a round robin among them (random = 0) and write the anchor
    table that `azjax eval RUN --ladder --anchors FILE` holds fixed."""
    _check_seed(seed)
    import json

    import jax

    from azjax.training.ladder import rate_anchors

    if out.exists():
        _fail(ValueError(f"{out} exists; remove it or name another --out"))
    try:
        table = rate_anchors(game, against, key=jax.random.PRNGKey(seed),
                             games_per_pair=games + games % 2, progress=typer.echo)
    except _user_errors() as error:
        _fail(error)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table.to_dict(), indent=2) + "\n")
    for name, rating in table.ratings.items():
        low, high = table.intervals[name]
        typer.echo(f"{name:<14} {rating:+7.0f}  [{low:+.0f}, {high:+.0f}]")
    typer.echo(f"written: {out}")


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A training run dir")],
    every: Annotated[int, typer.Option(
        min=1, help="Every N-th evaluation (the last one always)")] = 1,
    last: Annotated[int | None, typer.Option(min=1, help="Only the last N rows")] = None,
) -> None:
    """Print a run's evaluations as a Markdown table: oracle errors per set (raw / search),
    their mean and arena scores, against iteration, wall_s and positions; then the run's
    totals (positions, FLOPs, evaluation and training seconds)."""
    from azjax.training.report import report_table, run_totals

    try:
        typer.echo(report_table(run_dir, every=every, last=last))
        totals = run_totals(run_dir)
        if totals:
            typer.echo("\n" + totals)
    except _user_errors() as error:
        _fail(error)


@app.command()
@_trusting
def export(
    run_dir: Annotated[Path, typer.Argument(help="A training run dir")],
    snapshot: Annotated[str | None, typer.Argument(
        help="Snapshot iteration (default: newest)")] = None,
    to: Annotated[Path, typer.Option("--to", help="Output directory")] = Path("model"),
    simulations: Annotated[int | None, typer.Option(
        min=1,
        help="The model's default search simulations (default: the run's evaluation setting)")
    ] = None,
    oracle: Annotated[str | None, typer.Option(
        help="Score the exported model on every position of the game's oracle (bare) or of "
             "the oracle files in DIR, for its model card")] = None,
    against: Annotated[list[str] | None, typer.Option(
        help=f"Arena opponents for the model card: {_BASELINES} | cb:PATH or "
             "cb:PATH@SECONDS, an external checkers engine (repeatable)")
    ] = None,
    games: Annotated[int, typer.Option(
        min=1, help="Arena games per opponent (both colours)")] = 200,
    seed: Annotated[int, typer.Option()] = 0,
    params_dtype: Annotated[str, typer.Option(
        help="The params' dtype on disk: float32 | float16 | bfloat16 (loaded as float32; "
             "float16 halves the size, and the card's scores are measured on what is stored)")
    ] = "float32",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Change how the exported model searches by default, e.g. --set "
                      "search.matmul_dtype=float32 (search keys only; repeatable)")] = None,
    average: Annotated[list[int] | None, typer.Option(
        "--average", help="Export the mean of these snapshots' weights (stochastic weight "
                          "averaging; repeatable, e.g. --average 150 --average 175); the "
                          "newest of them gives the model its config and provenance")] = None,
    web: Annotated[Path | None, typer.Option(
        "--web", help="Instead: write a folder of static files that plays the model (a game "
                      "id, model, run or snapshot dir as RUN_DIR) in any browser, search "
                      "included, with no server (docs/play-and-serve.md)")] = None,
    ort: Annotated[Path | None, typer.Option(
        "--ort", help="With --web: where onnxruntime-web's files are (default: the azjax "
                      "checkout's node_modules, from `npm ci`)")] = None,
    trust_game: Annotated[bool, typer.Option("--trust-game", help=_TRUST_HELP)] = False,
) -> None:
    """Write a self-contained model (params, config, search defaults, format version) and its
    model card; with --oracle / --against, the card carries scores measured on the export.
    With --web DIR, write the model's browser page instead."""
    _check_simulations(simulations=simulations)
    _check_seed(seed)
    if web is not None:
        _export_web(str(run_dir), web, ort=ort, overrides=set_ or [], simulations=simulations,
                    others={"a snapshot": snapshot, "--oracle": oracle, "--against": against,
                            "--average": average})
        return
    from azjax.training.export import export_model

    evaluate = None
    if oracle is not None or against:
        def evaluate(model_dir: Path) -> dict:
            from azjax.agent import Agent
            from azjax.evaluation.measure import measure_agent

            metrics, _ = measure_agent(Agent.load(model_dir), against=against or [],
                                       oracle=oracle, games=games, num_simulations=None,
                                       seed=seed, report=typer.echo, progress=True)
            return metrics

    try:
        out = export_model(run_dir, snapshot, to, num_simulations=simulations, evaluate=evaluate,
                           storage_dtype=params_dtype, search_overrides=set_ or [],
                           average=average)
    except _user_errors() as error:
        _fail(error)
    typer.echo(f"exported {out}")


def _export_web(spec: str, out: Path, *, ort: Path | None, overrides: list[str],
                simulations: int | None, others: dict) -> None:
    """`azjax export SPEC --web OUT`: the model's browser page (azjax.apps.web_export)."""
    from azjax.apps.turns import load_play_agent, model_label
    from azjax.apps.web_export import export_web

    given = [name for name, value in others.items() if value]
    if given:
        _fail(ValueError(f"--web exports a model as it is: {given[0]} does not apply (export "
                         "the snapshot first, then export that model with --web)"))
    try:
        agent = load_play_agent(spec).with_search(overrides)
        if simulations is not None:
            agent.meta = {**agent.meta, "num_simulations": simulations}
        typer.echo(f"exporting {agent.env.name} ({model_label(agent)}) for the browser...")
        written = export_web(agent, out, ort_dir=ort)
    except _user_errors() as error:
        _fail(error)
    size = sum(f.stat().st_size for f in written.rglob("*") if f.is_file())
    typer.echo(f"wrote {written} ({size / 1e6:.1f} MB): serve it with "
               f"`python -m http.server -d {written}` and open http://localhost:8000/")


@app.command()
@_trusting
def play(
    spec: Annotated[str, typer.Argument(
        help="Game id (its shipped model, or an untrained network until one is shipped), "
             "run dir, snapshot or model dir, or a game of your own as module:Class "
             "(an untrained network)")],
    simulations: Annotated[int | None, typer.Option(
        min=1, help="AI search simulations (default: the model's)")] = None,
    movetime: Annotated[float | None, typer.Option(
        help="Seconds the AI thinks per move, instead of a fixed count of simulations")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Change how the AI searches, e.g. --set search.tree_reuse=true "
                      "--set search.solver=true (its network and game stay)")] = None,
    first: Annotated[str, typer.Option(
        help="Who moves first (from --position and --moves: who is to move): human | ai")
    ] = "human",
    moves: Annotated[str, typer.Option(
        help="Opening moves in human notation before play starts, e.g. '5 1' or '9-13 22-18'")
    ] = "",
    position: Annotated[str, typer.Option(
        help="Start from this position in the game's notation (draughts: a FEN such as "
             "'W:W18,24,K27:B12,16,K2', White to move); --moves are played from it")] = "",
    pdn: Annotated[Path | None, typer.Option(
        help="Append each finished game to this file in PDN, the notation checkers programs "
             "read (draughts)")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    against: Annotated[str | None, typer.Option(
        help="Watch the agent play an external checkers engine, cb:PATH or cb:PATH@SECONDS "
             "(draughts; docs/engines.md), for one game: the engine takes the human's "
             "seat")] = None,
    cores: Annotated[int, typer.Option(
        envvar="AZJAX_PLAY_CORES",
        help="CPU cores the search runs on (0: all): one searches a single game fastest on "
             "a CPU; compiling, on every core, is quicker (docs/play-and-serve.md)")] = 1,
    trust_game: Annotated[bool, typer.Option("--trust-game", help=_TRUST_HELP)] = False,
) -> None:
    """Play against an agent in the terminal (moves in the game's human notation)."""
    _check_simulations(simulations=simulations)
    _check_movetime(movetime=movetime)
    _check_seed(seed)
    from azjax.apps.cores import on_cores

    try:
        with on_cores(cores):
            _play(spec, simulations=simulations, movetime=movetime, overrides=set_ or [],
                  first=first, moves=moves, position=position, pdn=pdn, seed=seed,
                  against=against)
    except _user_errors() as error:
        _fail(error)


def _play(spec: str, *, simulations: int | None, movetime: float | None, overrides: list[str],
          first: str, moves: str, position: str, pdn: Path | None, seed: int,
          against: str | None) -> None:
    """`azjax play`'s game against a person, or the watched game against `against`."""
    from azjax.apps.terminal import play_terminal, watch_engine
    from azjax.apps.turns import load_play_agent

    agent = load_play_agent(spec).with_search(overrides)
    _check_tree_search(agent, simulations)
    if against is not None:
        from azjax.config import is_engine_name
        from azjax.evaluation.checkerboard import check_engine_opponent

        if not is_engine_name(against):
            raise ValueError(f"--against takes an engine, cb:PATH[@SECONDS]; got {against!r}")
        check_engine_opponent(agent.env, against)
        watch_engine(agent, against, simulations=simulations, first=first, start=moves,
                     position=position, seed=seed, movetime=movetime, pdn=pdn)
        return
    play_terminal(agent, simulations=simulations, first=first, start=moves,
                  position=position, seed=seed, movetime=movetime, pdn=pdn)


def _check_tree_search(agent, simulations: int | None) -> None:
    """Refuses `--simulations` for an agent that searches by alpha-beta, which reads none."""
    if simulations is not None and agent.config.search.algorithm == "alphabeta":
        raise ValueError(
            "--simulations: this model searches by alpha-beta, which counts positions, not "
            "simulations: give --set search.alphabeta_nodes=N, or --set search.algorithm=gumbel "
            "to play its network's tree search")


@app.command()
@_trusting
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    warm: Annotated[bool, typer.Option(
        help="Compile every game's search at every strength before serving (else each "
             "compiles at its first request)")] = False,
    game: Annotated[list[str] | None, typer.Option(
        "--game", help="Serve this instead of the built-in games (repeatable): a game id, a "
                       "run or model dir, or a game of your own as module:Class (untrained)")
    ] = None,
    trust_game: Annotated[bool, typer.Option("--trust-game", help=_TRUST_HELP)] = False,
) -> None:
    """A local web app to play every game in the browser, and its JSON API
    (docs/play-and-serve.md)."""
    from azjax.apps.serve import GAMES, run_server

    try:
        run_server(host=host, port=port, warm=warm, games=tuple(game or GAMES))
    except _user_errors() as error:
        _fail(error)


_OPTIONAL_VALUE_OPTIONS = ("--oracle",)


def _normalise_argv(argv: list[str]) -> list[str]:
    """Lets `--oracle` stand alone (meaning: the game's default oracle) as well as take a DIR:
    a bare `--oracle` becomes `--oracle=`."""
    out = []
    for i, arg in enumerate(argv):
        following = argv[i + 1] if i + 1 < len(argv) else None
        if arg in _OPTIONAL_VALUE_OPTIONS and (following is None or following.startswith("-")):
            out.append(arg + "=")
        else:
            out.append(arg)
    return out


def run() -> None:
    """The console script `azjax` (and `python -m azjax`): a usage error (an unknown option, a
    value out of its range) is one line too, `error: ...`, exit status 2."""
    try:
        code = app(args=_normalise_argv(sys.argv[1:]), prog_name="azjax", standalone_mode=False)
    except Exception as error:  # click's (or typer's own copy of click's) exceptions
        kind = type(error).__name__
        if kind == "NoArgsIsHelpError":  # `azjax` alone: the help
            typer.echo(error.ctx.get_help(), err=True)
        elif kind == "Abort":  # an interrupted prompt
            raise SystemExit(130) from None
        elif hasattr(error, "format_message") and hasattr(error, "exit_code"):
            typer.echo(f"error: {' '.join(error.format_message().split())}", err=True)
        else:
            raise
        code = getattr(error, "exit_code", 2)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
