"""Experiment configuration: nested frozen dataclasses, loaded from YAML, validated by name.

Frozen dataclasses are hashable, so a config (or any part of it) can be a static jit argument.
`load_config(path, overrides)` reads a file, applies `--set a.b=value` overrides, and rejects
unknown keys and wrong types naming the offending key. A file may start from another with
`base: other.yaml` (a path relative to the file) and list only what it changes; sections merge
key by key, lists and scalars replace. Runs save the resolved config, never the `base:` key.

The string under each field is its meaning, ending with `Valid: ...` where the validation below
limits it; `python tools/config_reference.py` builds docs/config-reference.md from them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = [
    "BASELINES",
    "DROPPED_KEYS",
    "RESUME_FIXED_KEYS",
    "RESUME_FREE_KEYS",
    "BaselineKind",
    "BudgetConfig",
    "DEFAULT_ENGINE_SECONDS",
    "ENGINE_PREFIX",
    "MAX_INTEGER",
    "MAX_SEED",
    "MAX_SIMULATIONS",
    "CheckpointConfig",
    "ConfigError",
    "EvalConfig",
    "ExperimentConfig",
    "NetworkConfig",
    "ReplayConfig",
    "SearchConfig",
    "SelfPlayConfig",
    "TrainConfig",
    "baseline_forms",
    "baseline_kind",
    "config_from_dict",
    "config_from_saved",
    "config_to_dict",
    "free_on_resume",
    "game_from_mapping",
    "is_engine_name",
    "load_config",
    "locate_game",
    "merge_config_data",
    "parse_baseline",
    "parse_engine_name",
    "parse_override",
    "read_config_data",
    "resolve_simulations",
    "with_game_dir",
    "yaml_reason",
]


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names the key."""


# The bounds every value is held to, named in the errors that refuse one outside them.
MAX_SEED = 2**32 - 1  # the random keys are 32-bit: `jax.random.PRNGKey` of the seed
MAX_SIMULATIONS = 100_000  # per search, in a config and on every command's --simulations
MAX_INTEGER = 2**31 - 1  # any other integer: counts and sizes are int32 on the device


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The policy-value network: its kind and sizes (`azjax.core.network`)."""

    kind: Literal["resnet", "resmlp", "mlp"] = "resnet"
    """The trunk (`azjax.core.network.BODIES`): `resnet` (AlphaZero's tower of 3x3-conv residual
    blocks), `resmlp` (residual blocks of dense layers over the flattened board; plain matmuls,
    fast on CPUs) or `mlp` (plain dense layers)."""
    channels: int = 32
    """resnet: channels of the stem and of every residual block. Valid: > 0."""
    blocks: int = 4
    """resnet, resmlp: the number of residual blocks. Valid: >= 0."""
    width: int = 512
    """resmlp: width of the stem's dense layer and of every block. Valid: > 0."""
    stem_layers: int = 0
    """resmlp: 3x3 conv layers (LayerNorm, ReLU) over the board before the dense layers, for
    local patterns the MLP would otherwise learn square by square; 0 = none. Valid: >= 0."""
    stem_channels: int = 32
    """resmlp: channels of each stem conv layer. Valid: > 0."""
    hidden: tuple[int, ...] = (128, 128)
    """mlp: the hidden layers' widths, in order. Valid: a list of positive integers."""
    policy_channels: int = 2
    """resnet: channels of the policy head's 1x1 conv. Valid: >= 1."""
    value_channels: int = 1
    """resnet: channels of the value head's 1x1 conv. Valid: >= 1."""
    value_hidden: int = 64
    """resnet, resmlp: width of the value head's dense layer (and of the material head's, for
    every kind). Valid: >= 1."""
    head_norm: bool = True
    """resnet: normalises each head's 1x1-conv channels over the board before their ReLU.
    Without it a 1-channel value head can die (its conv negative on every cell: a constant
    value, no gradient). Configs saved before this key existed load with false."""
    material_head: bool = False
    """Adds a third head, trained only: the game's final material difference from the mover's
    view (`Env.material`), an auxiliary target that carries signal in drawn games too, where
    the value target is 0. Weighted by train.material_loss_weight; the search reads it only
    through search.material_utility. Valid: true only for a game that counts material
    (draughts)."""


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """The tree search of self-play, evaluation and play: mctx's `gumbel_muzero_policy` or
    `muzero_policy` and their arguments, plus azjax's own options around them."""

    algorithm: Literal["gumbel", "puct", "alphabeta"] = "gumbel"
    """`gumbel` (Gumbel MuZero: sequential halving over sampled root moves) or `puct`
    (AlphaZero's PUCT, with Dirichlet noise at the root in self-play); for play only,
    `alphabeta`: every move searched to alphabeta_depth whole moves, the network's value at
    the leaves and its policy ordering the moves (`azjax.core.search_alphabeta`). Self-play
    needs gumbel or puct; alphabeta has no kept trees, solver, network quiescence (it
    searches captures through itself) or contempt; it reads endgame_table and plays on a
    clock (movetime, --equal-time)."""
    alphabeta_depth: int = 6
    """alphabeta: whole moves searched before the network values a position (a multi-jump
    is one move), then on through pending captures. Valid: in [1, 16]."""
    alphabeta_nodes: int = 0
    """alphabeta: the positions each game's search may step into per move, all depths
    together; a deepening step cut short plays the deepest finished step's move, so a move's
    time is bounded however long a line's captures run. 0: no bound (the depth alone). On a
    clock, the time decides and this bounds it too. Valid: >= 0."""
    num_simulations: int = 16
    """Simulations per move in self-play, and at evaluation and play unless
    eval.num_simulations names another count. Valid: in [1, 100000]; the bound is
    `azjax.config.MAX_SIMULATIONS`."""
    pb_c_init: float = 1.25
    """puct: c_init, the base weight of the exploration term. Valid: > 0."""
    pb_c_base: float = 19652.0
    """puct: c_base; the exploration weight grows by log((N + c_base + 1) / c_base) with the
    parent's visit count N. Valid: > 0."""
    dirichlet_alpha: float = 0.3
    """puct: concentration of the Dirichlet noise mixed into the root prior in self-play.
    Valid: > 0."""
    dirichlet_fraction: float = 0.25
    """puct: the noise's share of the root prior in self-play (evaluation and play search
    without noise). Valid: in [0, 1]."""
    max_num_considered_actions: int = 16
    """gumbel: how many root moves (the best by prior logit plus Gumbel noise) sequential
    halving starts from. Valid: >= 1."""
    gumbel_scale: float = 1.0
    """gumbel: scale of the Gumbel noise on the root logits in self-play (evaluation and play
    always use 0). Valid: >= 0."""
    qtransform: Literal["completed_by_mix_value", "by_parent_and_siblings", "by_min_max"] = (
        "completed_by_mix_value"
    )
    """How the tree's Q-values are transformed for selection: `completed_by_mix_value` is
    gumbel's usual choice, `by_parent_and_siblings` puct's, `by_min_max` rescales by the game's
    value range [-1, 1]."""
    play_forced_moves: bool = False
    """Plays every position with a single legal move at once (`azjax.envs.forced`), so tree nodes
    and self-play positions are decisions only; draughts' forced captures and hops then cost
    no simulation."""
    matmul_dtype: Literal["float32", "bfloat16"] = "float32"
    """Precision of the search's network evaluations: `bfloat16` multiplies the trunk's dense
    layers in bfloat16, accumulating in float32, heads in float32 (`azjax.core.network`):
    faster forward passes on a CPU with AVX512-BF16 (docs/benchmarks.md). Training always runs
    in float32."""
    contempt: float = 0.0
    """Draw aversion for play against weaker opponents: the search scores a draw as -contempt
    for the player to move at its root (+contempt for the other), at finished games and, with
    1 - |v| as the draw share, at the network's values (`azjax.core.search`). 0 = the zero-sum
    game as trained. Valid: in [0, 1)."""
    material_utility: float = 0.0
    """KataGo's score utility, with material as the score: the search maximises outcome +
    material_utility x the final material difference (mover's side, a side's starting
    material = 1), exact at finished games, the material head's prediction elsewhere. Breaks
    ties between lines the value head calls equal in favour of keeping material; 0 = the game
    as trained. Valid: in [0, 1]; above 0 only with network.material_head."""
    symmetry_average: bool = False
    """Evaluates every position the search reaches in each of the game's symmetric copies
    (`Env.symmetries`) and averages them: value and material, and the policy mapped back onto
    the position's moves. The same network with less of its noise, for S times the network's
    work per evaluation."""
    greedy_action: Literal["policy", "halving"] = "policy"
    """gumbel: how a search without noise (evaluation and play) picks its move. `policy`: the
    argmax of the improved policy (the policy target) over every legal move. `halving`:
    sequential halving's survivor (mctx's own action at gumbel_scale 0), as Gumbel MuZero
    plays; a move dropped early, whose Q rests on few visits, cannot then be chosen. Puct plays
    the most visited move either way. Valid: `halving` only with algorithm `gumbel`."""
    prior_temperature: float = 1.0
    """Divides the network's policy logits by T at every node the search expands (root
    included): it searches with the prior p^(1/T), renormalised. T > 1 spreads the visits over
    moves the network rates unlikely (Leela Chess plays with ~1.6), so a reply the policy
    missed still gets searched; 1 = the network's own prior. Valid: > 0."""
    solver: bool = False
    """MCTS-Solver: results of finished games found in the tree go up it as exact values
    (`azjax.core.solver`): a position with a winning move, or with every move lost or drawn,
    is proven; walks enter only unproven moves; a search whose root is proven stops; a proven
    win plays its shortest win, a proven loss its longest resistance. The policy target is the
    search's own, from the visits made until then (a search stopped at once by a proven root
    has few)."""
    endgame_table: int = 0
    """Ends the tree's lines at the positions of at most this many pieces with their exact
    result from the game's endgame table, solved from the rules, as engines use endgame
    databases (`azjax.core.endgames`; draughts: `azjax.envs.draughts_endings`, 2-5 pieces,
    solved once and cached under $AZJAX_CACHE or ~/.cache/azjax: 4 in under a minute, 5 in
    about 12 minutes with 8 GB of memory). A root
    the table solves plays its quickest win or longest resistance; self-play games end where
    they reach it, with its result. 0 = off. Valid: 0, or 2 to the game's
    `Env.endgame_max_pieces` (0 for a game without a table)."""
    quiescence: int = 0
    """Quiescence at the tree's leaves (`azjax.core.quiescence`): a position the game calls
    forcing (`Env.forcing`; draughts: the mover must capture) is valued as the best of its
    quiescence_moves likeliest moves, each valued the same way, this many levels deep, as
    alpha-beta engines search on through an exchange before they trust their evaluation. Up to
    1 + k + ... + k^d network evaluations per position. 0 = off. Valid: in [0, 4]; above 0
    only for a game with forcing positions."""
    quiescence_moves: int = 4
    """How many of a forcing position's likeliest moves (by the network's prior) quiescence
    follows. Valid: in [1, 16]."""
    tree_reuse: bool = False
    """At play (`Agent.player`, `azjax play`, the arenas of `azjax eval`): keeps the searched
    tree from one move to the next, the subtree under the moves played becoming the next
    search's root with its visits (`azjax.core.search_engine`). Gumbel halves over the new
    search's visits only; a game whose kept tree leaves too little room starts afresh.
    Training's evaluation does not read it; self-play reads selfplay.tree_reuse."""


def resolve_simulations(count: int | None, search: SearchConfig) -> int:
    """The simulations a search runs when asked for `count`.

    The one reading of "0 (or None) = the search's own count", for every simulations setting
    that defers to `search.num_simulations` (`eval.num_simulations`) and for a search call
    that names no count.

    Args:
      count: the asked count; 0 or None for the default.
      search: the search section whose `num_simulations` is the default.

    Returns:
      `count`, or `search.num_simulations` when `count` is 0 or None.
    """
    return int(count) if count else int(search.num_simulations)


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Self-play: the games each iteration plays in lockstep and the targets they give."""

    batch_size: int = 256
    """Games played in lockstep, one batched search per step. Valid: >= 1."""
    chunk_length: int = 0
    """Self-play steps per iteration; games still running carry over to the next iteration.
    0 = the max game length. Valid: 0, or at least the max game length (checked when
    training starts)."""
    max_game_length: int = 0
    """Plies after which a game is truncated (a truncated game gives no value target); 0 = the
    game's own bound. Valid: >= 0; a game without a known bound needs one (checked when
    training starts)."""
    temperature_moves: int = 0
    """The first N plies of each game play the search's sampled move; later plies play the
    argmax of the search policy. Valid: >= 0."""
    random_opening_prob: float = 0.0
    """Share of games that open with uniformly random moves (random_opening_max_moves).
    Valid: in [0, 1]; above 0 needs random_opening_max_moves >= 1."""
    random_opening_max_moves: int = 0
    """A game with a random opening plays 1..N random legal moves first, N drawn uniformly.
    Valid: >= 0; >= 1 when random_opening_prob > 0."""
    random_start_prob: float = 0.0
    """Share of games that start from the game's random start positions instead of its initial
    one (draughts: random endings, `Draughts.random_start`), or with `start_positions` from
    that file's, with no random opening moves. Valid: in [0, 1]."""
    start_positions: str = ""
    """A text file of positions, one per line in the game's notation (draughts: a FEN;
    `azjax.envs.start_positions`), that the `random_start_prob` share of games start from,
    drawn uniformly, instead of the game's own random starts; "" = none. A relative path is
    read from the working directory. A run records the SHA-256 of the file's positions and
    refuses to resume on others. Valid: "" or a file (read when training starts); needs
    random_start_prob > 0."""
    symmetries: bool = True
    """Augments every training sample with a random symmetry of the game (`Env.symmetries`)
    when a batch is drawn."""
    search_value_weight: float = 0.0
    """The value target: (1 - w) x the game's outcome + w x the root search value.
    Valid: in [0, 1]."""
    full_search_prob: float = 1.0
    """Playout-cap randomisation (KataGo): at each step all games search with the full
    search.num_simulations with this probability, else with fast_simulations; fast steps give
    no policy target (only their games' outcomes count). 1 = always full. Valid: in (0, 1];
    below 1 needs fast_simulations."""
    fast_simulations: int = 0
    """Simulations of a fast step (full_search_prob < 1). Valid: in [1, search.num_simulations)
    when full_search_prob < 1; unused otherwise."""
    per_game_randomness: bool = False
    """Each game draws its randomness from its own index and is searched alone (a vmap of
    batch-1 searches): the games, and so the whole run, are then the same on any number of
    devices. Off (faster, docs/scaling.md), device d of D uses the key fold_in(key, d)."""
    tree_reuse: bool = False
    """Keeps each game's searched tree from one ply to the next within an iteration's chunk:
    the subtree under the move played becomes the next search's root with its visits
    (`azjax.core.search_engine`), given fresh root noise; a game whose kept tree leaves too
    little room (the tree holds 2 x search.num_simulations + 1 nodes) or that has just ended
    starts afresh, and so does every game at a chunk's start. Puct's policy target counts the
    kept visits too; gumbel's halves over the new search's visits and reads the kept ones
    through its completed Q-values. Valid: only with per_game_randomness off."""


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replay buffer self-play fills and training samples from."""

    capacity: int = 100_000
    """Positions the buffer holds (allocated up front; the newest replace the oldest).
    Valid: >= train.batch_size."""
    window_start: int = 0
    """Training samples from the newest N positions only; 0 = the whole capacity.
    Valid: >= 0."""
    window_growth: int = 0
    """With window_start > 0, the window grows by this many positions per iteration, up to the
    capacity. Valid: >= 0."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Training: the update steps after each self-play chunk, the optimizer and the loss."""

    batch_size: int = 256
    """Positions per update step, drawn uniformly (with replacement) from the replay window.
    Valid: >= 1."""
    updates_per_iteration: int = 8
    """Update steps after each iteration's self-play chunk. Valid: >= 0."""
    updates_per_call: int = 1
    """Update steps per compiled call (a `lax.scan`); 1 = one call per step. A grouping only:
    the same batches and the same parameters, to float rounding. Valid: >= 1 and divides
    train.updates_per_iteration."""
    optimizer: Literal["sgd", "adam"] = "adam"
    """`adam`, or `sgd` with Nesterov momentum (train.momentum)."""
    learning_rate: float = 1e-3
    """The (peak) learning rate. Valid: > 0."""
    lr_schedule: Literal["constant", "cosine", "warmup_cosine"] = "constant"
    """`constant`; `cosine`: from learning_rate down to lr_floor x learning_rate over
    lr_decay_steps; `warmup_cosine`: a linear rise from 0 over warmup_steps, then the
    cosine."""
    lr_decay_steps: int = 10_000
    """Length of the cosine schedules in update steps (warm-up included). Valid: >= 1 with a
    decaying lr_schedule."""
    lr_floor: float = 0.01
    """The cosines end at lr_floor x learning_rate and stay there. Valid: in [0, 1]."""
    warmup_steps: int = 0
    """warmup_cosine: update steps of the linear warm-up. Valid: >= 0."""
    momentum: float = 0.9
    """sgd: the momentum. Valid: in [0, 1)."""
    weight_decay: float = 1e-4
    """L2 weight decay on the kernels (not on biases or norms), through optax. Valid: >= 0."""
    init_params: str = ""
    """A model directory (`azjax export`'s, a run's snapshot) whose params start a fresh run
    in place of a random network ("" = random); its network config must be this run's. Where
    this run's observation has more planes than the model's game (the same board, planes
    added at the end, as the laws' repetitions plane adds to a draughts model of OpenSpiel's
    rules), the first layer's weights for the added planes start at zero, so the network
    computes what the model did until training moves them. The optimizer starts afresh.
    Read once, when the run starts; a resumed run goes on from its checkpoint."""
    value_loss_weight: float = 1.0
    """Weight of the value loss (mean squared error) against the policy's cross-entropy.
    Valid: >= 0."""
    material_loss_weight: float = 0.5
    """Weight of the material head's mean squared error, with network.material_head.
    Valid: >= 0; > 0 with network.material_head."""
    max_grad_norm: float = 0.0
    """Clips the gradient to this global norm; 0 = no clipping. Valid: >= 0."""
    min_replay_size: int = 0
    """No update steps until the buffer holds this many positions (and at least one).
    Valid: in [0, replay.capacity]."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation during training: scores against the game's perfect-play oracle, arenas
    against baseline players, and AlphaGo Zero's gating."""

    every_iterations: int = 10
    """Evaluates (and snapshots the params) every N iterations, and at the run's last
    iteration. Valid: >= 1."""
    oracle: bool = True
    """Scores the raw network and the search against the game's perfect-play oracle, for the
    games that have one (tic-tac-toe, connect four)."""
    oracle_dir: str = ""
    """Folder of the oracle files; "" = the game's default (azjax's own tic-tac-toe table,
    else `$AZJAX_ORACLES`, else the sets packaged in azjax/data/oracles). Any game: a folder of
    its labels in the generic format (`*.jsonl`, moves and preserving moves as action ids).
    Valid: "" or a folder holding the game's oracle files (checked when training starts)."""
    oracle_positions: int = 0
    """Scores only the first N positions of each oracle set; 0 = all. Valid: >= 0."""
    arena_games: int = 200
    """Games against each opponent in an arena, half of them with each colour. Valid: even
    and >= 2."""
    arena_every: int = 1
    """Plays the arenas at every N-th evaluation (counted from the untrained network at
    iteration 0), whenever the oracle bar is met, and at the run's last evaluation.
    Valid: >= 1."""
    opponents: tuple[str, ...] = ("random", "greedy")
    """The arenas' opponents: `random` (uniform legal moves), `greedy` (wins at once if it
    can, else avoids moves that let the opponent win next), `mcts:N` (plain UCT with random
    rollouts, N simulations) and `alphabeta:D` (alpha-beta to D whole moves over the game's
    hand-made evaluation, docs/evaluation.md); for draughts also an external engine
    `cb:PATH[@SECONDS]` (a CheckerBoard-API library, SECONDS per move, default 0.1;
    docs/engines.md), whose arena is played from the host after the others. Valid: a list of
    `random`, `greedy`, `mcts:N` with N >= 1, `alphabeta:D` with D >= 1 and, for draughts,
    `cb:PATH[@SECONDS]` with SECONDS in (0, 3600]."""
    num_simulations: int = 0
    """Search simulations at evaluation, and a run's default for play and export;
    0 = search.num_simulations. Valid: in [0, 100000]; the bound is
    `azjax.config.MAX_SIMULATIONS`."""
    gating: bool = False
    """AlphaGo Zero's gating: self-play uses the best params so far, replaced at an evaluation
    only when the newly trained params score at least gating_threshold against them over
    gating_games games."""
    gating_games: int = 100
    """Games of each gating match, both colours. Valid: >= 2."""
    gating_threshold: float = 0.55
    """The score the new params need against the best ones to replace them in self-play.
    Valid: in [0, 1]."""


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    """When a run stops (Ctrl-C or SIGTERM also stop it, with a checkpoint)."""

    max_iterations: int = 0
    """Stops after this many iterations in all (a resumed run counts on from its checkpoint);
    0 = unlimited. Valid: >= 0."""
    max_wall_s: float = 0.0
    """Stops after this many seconds, summed across resumed segments; 0 = unlimited. An
    iteration starts only when one costing what the last did (training and evaluation) still
    ends inside it. Valid: >= 0."""
    stop_when_perfect: bool = False
    """Stops at the first evaluation that meets the perfect-play bar: the search makes no
    oracle error, the raw network at most 1%, and no arena game is lost (games with an
    oracle)."""


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """How often the run state is saved, for resuming."""

    every_iterations: int = 10
    """Saves the whole run state (params, optimizer, games in flight, replay buffer, random
    keys) after the run's first iteration, then every N iterations, and when the run stops.
    Valid: >= 1."""
    keep: int = 3
    """How many of the newest checkpoints are kept. Valid: >= 1."""


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment: the game, the seed, and one section per part of the pipeline."""

    game: str = "tic_tac_toe"
    """The game to learn, a spec that `envs.make` resolves, tried in this order: a registered
    id; `pgx:<id>`, a pgx game; an import path `module.sub:Attr`, a subclass of `envs.Env` or
    a function marked `@envs.game_factory` in your own code (never any other callable); the
    name of an entry point in the
    `azjax.games` group of an installed package. A game that takes arguments is a mapping,
    `{import: "mygames.othello4:Othello4", kwargs: {size: 4}}`, kept as the string
    `mygames.othello4:Othello4(size=4)`, which may be written directly. Valid: `tic_tac_toe`,
    `connect_four`, `draughts`, `draughts_tactics` (draughts with four more observation
    planes, each side's one-hop captures), an id added with `envs.register`, `pgx:<id>`
    (needs the pgx package), an import path, an entry point name, or that mapping; a game of
    your own must pass `envs.check_env` (checked when the config loads)."""
    game_dir: str = ""
    """The directory the game's module was found in, for a game from an import path whose
    module is not part of an installed package. Left out, it is filled in where the module is
    found: the installed packages, then the config file's directory, then the working
    directory. A run saves it in config.yaml and in its models, so that loading the run or a
    model can import the game's module from there, from any working directory; as that runs
    the module's code, a model loads it only when asked to (`trust_game=True`, `--trust-game`;
    docs/trust.md)."""
    seed: int = 0
    """The root random key of the run: the initial parameters, self-play and evaluation all
    draw from it. Valid: in [0, 4294967295]; the bound is `azjax.config.MAX_SEED` (2**32 - 1:
    the random keys are 32-bit)."""
    network: NetworkConfig = NetworkConfig()
    search: SearchConfig = SearchConfig()
    selfplay: SelfPlayConfig = SelfPlayConfig()
    replay: ReplayConfig = ReplayConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    budget: BudgetConfig = BudgetConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()

    def __post_init__(self) -> None:
        _validate(self)


# What a resumed run may change ("section.key" fnmatch patterns; `azjax train` on a run dir
# with a checkpoint takes the saved config otherwise): budget, checkpointing and evaluation do
# not change the parameters the run trains (evaluations draw their own keys); nor do the
# learning-rate schedule's length and floor (fitted to a longer or shorter budget, the new
# schedule applies from the resumed update step on) or how update steps are grouped into
# compiled calls. Gating does (self-play then uses the gate's winner): RESUME_FIXED_KEYS wins.
RESUME_FREE_KEYS: tuple[str, ...] = ("budget.*", "checkpoint.*", "eval.*", "train.lr_decay_steps",
                                     "train.lr_floor", "train.updates_per_call")
RESUME_FIXED_KEYS: tuple[str, ...] = ("eval.gating*",)


def free_on_resume(key: str) -> bool:
    """Whether `key` ("section.key") may change when a run resumes (`RESUME_FREE_KEYS`)."""
    return (any(fnmatch.fnmatchcase(key, p) for p in RESUME_FREE_KEYS)
            and not any(fnmatch.fnmatchcase(key, p) for p in RESUME_FIXED_KEYS))


# ---- conversion --------------------------------------------------------------------------------


def _coerce(value: Any, annotation: Any, key: str) -> Any:
    """Checks `value` against a field's type annotation, converting lists to tuples."""
    origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return _from_dict(annotation, value, prefix=key + ".")
    if origin is Literal:
        choices = typing.get_args(annotation)
        if value not in choices:
            raise ConfigError(f"{key}: must be one of {list(choices)}, got {value!r}")
        return value
    if origin is tuple:
        item_type = typing.get_args(annotation)[0]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, item_type, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        raise ConfigError(f"{key}: unsupported annotation {annotation}")
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported annotation {annotation}")


def _from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown and _dropped_feature(prefix + unknown[0]):
        raise ConfigError(f"config key {prefix + unknown[0]}: "
                          f"{_dropped_feature(prefix + unknown[0])} is not part of azjax")
    if unknown:
        raise ConfigError(
            f"unknown config key {prefix + unknown[0]!r}; known keys under "
            f"{prefix.rstrip('.') or 'the top level'}: {', '.join(sorted(names))}"
        )
    kwargs = {name: _coerce(value, hints[name], prefix + name) for name, value in data.items()}
    return cls(**kwargs)


def game_from_mapping(value: Any) -> Any:
    """The spec string of `game:`'s mapping form, `{import: "module:Attr", kwargs: {...}}`
    (`envs.game_spec`); any other value as it is."""
    if not isinstance(value, dict):
        return value
    from azjax import envs  # late import: envs imports jax

    if set(value) - {"import", "kwargs"} or not isinstance(value.get("import"), str):
        raise ConfigError(f"game: a mapping names a game of your own as {{import: "
                          f"\"module:Attr\", kwargs: {{...}}}}, got {value!r}")
    kwargs = value.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ConfigError(f"game.kwargs: expected a mapping, got {kwargs!r}")
    try:
        return envs.game_spec(value["import"], kwargs)
    except ValueError as error:
        raise ConfigError(f"game: {error}") from None


def config_from_dict(data: dict[str, Any]) -> ExperimentConfig:
    """Builds and validates an ExperimentConfig; missing keys take their defaults. `game` may
    be a spec string or its mapping form (`game_from_mapping`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping, got {type(data).__name__}")
    if isinstance(data.get("game"), dict):
        data = {**data, "game": game_from_mapping(data["game"])}
    return _from_dict(ExperimentConfig, data)


def with_game_dir(config: ExperimentConfig) -> ExperimentConfig:
    """`config` with `game_dir` set to the directory its game's module was found in, when the
    game comes from an import path outside the installed packages (else as it is)."""
    from azjax import envs
    found = envs.game_dir(config.game)
    return dataclasses.replace(config, game_dir=found) if found and (
        found != config.game_dir) else config


def locate_game(data: dict[str, Any], directories: tuple[str | Path, ...]) -> dict[str, Any]:
    """Resolves the game of a config's data, looking for its module in `game_dir` (if given),
    then `directories`, before the working directory (`envs.make`); the data with `game` as a
    spec string and `game_dir` where the module was found.

    Raises:
      ConfigError: `game: <why the game cannot be made>`.
    """
    from azjax import envs
    if not isinstance(data, dict) or not isinstance(data.get("game", ""), (str, dict)):
        return data
    data = {**data, "game": game_from_mapping(data.get("game", ExperimentConfig.game))}
    recorded = data.get("game_dir")
    dirs = ((recorded,) if isinstance(recorded, str) and recorded else ()) + tuple(directories)
    try:
        envs.make(data["game"], search_dirs=dirs)
    except ValueError as error:
        raise ConfigError(f"game: {error}") from None
    found = envs.game_dir(data["game"])
    return {**data, "game_dir": found} if found else data


# Keys that configs saved by runs and models may hold but azjax does not have, each as
# "section.key": (the value that leaves its feature off, or None when every value does; the
# feature). `config_from_saved` drops such a key at that value and refuses one that turned its
# feature on; `config_from_dict` names the feature when a config file sets one.
DROPPED_KEYS: dict[str, tuple[Any, str]] = {
    "reanalyse.fraction": (0.0, "reanalysis"),
    "reanalyse.num_simulations": (None, "reanalysis"),
    "reanalyse.value_weight": (None, "reanalysis"),
    "network.reply_policy_head": (False, "the reply-policy head"),
    "network.short_value_head": (False, "the short-value head"),
    "train.reply_policy_loss_weight": (None, "the reply-policy head"),
    "train.short_value_loss_weight": (None, "the short-value head"),
    "selfplay.short_value_horizon": (None, "the short-value head"),
    "selfplay.random_start_source": ("env", "starting games from replay positions (branching "
                                            "starts)"),
}


def _dropped_feature(key: str) -> str | None:
    """The feature of `DROPPED_KEYS` that `key` ("section.key", or a section) belonged to."""
    for dropped, (_, feature) in DROPPED_KEYS.items():
        if key in (dropped, dropped.split(".")[0]):
            return feature
    return None


def _without_dropped_keys(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without the `DROPPED_KEYS` it holds at their off values; a section that is not
    one of `ExperimentConfig`'s goes too once empty.

    Raises:
      ConfigError: `config key <key>: ...`, for a dropped key whose feature was on.
    """
    data = dict(data)
    sections = {f.name for f in dataclasses.fields(ExperimentConfig)}
    for key, (off, feature) in DROPPED_KEYS.items():
        section, name = key.split(".")
        values = data.get(section)
        if not isinstance(values, dict) or name not in values:
            continue
        if off is not None and values[name] != off:
            raise ConfigError(f"config key {key}: {feature} is not part of azjax; a run or "
                              f"model that uses it cannot be loaded")
        data[section] = {k: v for k, v in values.items() if k != name}
        if not data[section] and section not in sections:
            del data[section]
    return data


def config_from_saved(data: dict[str, Any]) -> ExperimentConfig:
    """`config_from_dict` for a config saved in a run dir or model: keys added to the config
    since take the value that reproduces what was saved, not today's default, and keys azjax
    does not have (`DROPPED_KEYS`) are dropped while their feature is off.

    Raises:
      ConfigError: a config that cannot be used, or one that turned a dropped feature on.
    """
    if isinstance(data, dict) and isinstance(data.get("network"), dict):
        # Saved before `network.head_norm` existed: heads without the normalisation.
        data = {**data, "network": {"head_norm": False, **data["network"]}}
    if isinstance(data, dict):
        data = _without_dropped_keys(data)
    return config_from_dict(data)


def config_to_dict(config: Any) -> dict[str, Any]:
    """Plain nested dict (tuples as lists), the inverse of `config_from_dict`."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        return value

    return {
        f.name: config_to_dict(getattr(config, f.name))
        if dataclasses.is_dataclass(getattr(config, f.name))
        else plain(getattr(config, f.name))
        for f in dataclasses.fields(config)
    }


def parse_override(text: str) -> tuple[list[str], Any]:
    """`"search.num_simulations=32"` -> (["search", "num_simulations"], 32) (value as YAML)."""
    if "=" not in text:
        raise ConfigError(f"an override is KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    path = [part for part in key.strip().split(".") if part]
    if not path:
        raise ConfigError(f"an override needs a key, got {text!r}")
    try:
        return path, yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {text}: not valid YAML: {yaml_reason(error)}") from None


def yaml_reason(error: Exception) -> str:
    """A YAML parse error in one line: what PyYAML found wrong and, for a file, where
    (`line L, column C: expected ',' or ']', but got '<stream end>'`)."""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    mark = getattr(error, "problem_mark", None)
    where = (f"line {mark.line + 1}, column {mark.column + 1}: "
             if mark is not None and mark.name not in ("<unicode string>", "<string>") else "")
    context = getattr(error, "context", None)
    return where + problem + (f" ({context})" if context else "")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Returns a copy of `data` with each `KEY=VALUE` override set (nested keys by dots)."""
    data = yaml.safe_load(yaml.safe_dump(data)) or {}
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(path)}: {part} is not a section")
        node[path[-1]] = value
    return data


def merge_config_data(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` laid over it: mappings merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_config_data(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_config_data(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping a YAML config file stands for, its `base:` chain resolved (not validated)."""
    path = Path(path)
    if not path.is_file():
        if _chain:
            raise ConfigError(f"{_chain[-1]}: base config file not found: {path}")
        raise ConfigError(f"config file not found: {path}")
    try:
        with path.open() as file:  # the file's name in the error's marks
            data = yaml.safe_load(file) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {yaml_reason(error)}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot be read: "
                          f"{getattr(error, 'strerror', None) or error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a mapping, got {type(data).__name__}")
    if "base" not in data:
        return data
    base = data.pop("base")
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{path}: base: expected the path of a YAML config, got {base!r}")
    base_path = (path.parent / base).resolve()
    chain = (*_chain, path.resolve())
    if base_path in chain:
        cycle = " -> ".join(str(p) for p in (*chain, base_path))
        raise ConfigError(f"{path}: base: configs include each other ({cycle})")
    return merge_config_data(read_config_data(base_path, chain), data)


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Reads a YAML config file (and its `base:` chain) and applies `KEY=VALUE` overrides. A
    game from an import path is looked up in the installed packages, then the file's own
    directory, then the working directory; `game_dir` records where it was found."""
    data = apply_overrides(read_config_data(path), list(overrides))
    return config_from_dict(locate_game(data, (Path(path).resolve().parent,)))


# ---- baseline opponents -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BaselineKind:
    """How a kind of baseline opponent (`BASELINES`) is named and how arenas treat it.

    Attributes:
      count: what the count after its colon must be (`mcts:100`), for errors; "" for a kind
        named alone (`random`).
      letter: the count's placeholder in help and errors (`mcts:N`).
      example: a count for the errors' example.
      searches: it searches at every move, so training's evaluation gives it an arena of its
        own (in a shared arena its search would run in every game).
      fixed_moves: its move is fixed by the position, so arenas against it open from paired
        random plies (`azjax.evaluation.players.arena_opening_plies`).
    """

    count: str = ""
    letter: str = ""
    example: int = 0
    searches: bool = False
    fixed_moves: bool = False


# The baseline opponents by name: what `eval.opponents`, `azjax eval --against` and the ladder
# accept. `azjax.evaluation.players` builds each kind's player from the same names.
BASELINES: dict[str, BaselineKind] = {
    "random": BaselineKind(),
    "greedy": BaselineKind(),
    "mcts": BaselineKind("a positive simulation count", "N", 100, searches=True),
    "alphabeta": BaselineKind("a depth of at least 1 whole move", "D", 6, searches=True,
                              fixed_moves=True),
}


def baseline_forms() -> tuple[str, ...]:
    """How each baseline's name is written, in `BASELINES`' order: `random`, `mcts:N`, ..."""
    return tuple(f"{kind}:{entry.letter}" if entry.count else kind
                 for kind, entry in BASELINES.items())


def baseline_kind(name: str) -> str | None:
    """The kind of baseline a name asks for (the part before any colon), None when it names
    none; its count is not checked (`parse_baseline`)."""
    kind = name.partition(":")[0]
    return kind if kind in BASELINES else None


def parse_baseline(name: str) -> tuple[str, int]:
    """A baseline opponent's name as (kind, count): ``random`` and ``greedy`` -> (name, 0),
    ``mcts:N`` -> ("mcts", N simulations), ``alphabeta:D`` -> ("alphabeta", D whole moves);
    the kinds and their counts are `BASELINES`'.

    Raises:
      ValueError: a name of no baseline, or a count that is not a positive integer.
    """
    kind, colon, count = name.partition(":")
    entry = BASELINES.get(kind)
    if entry is None or (colon and not entry.count):
        *others, last = baseline_forms()
        raise ValueError(f"unknown opponent {name!r}: use {', '.join(others)} or {last}")
    if entry.count and not (count.isdigit() and int(count) >= 1):
        raise ValueError(f"{kind} opponent needs {entry.count}, e.g. {kind}:{entry.example}; "
                         f"got {name!r}")
    return kind, int(count) if entry.count else 0


# ---- external engines ----------------------------------------------------------------------------

ENGINE_PREFIX = "cb:"
"""An opponent named `cb:PATH[@SECONDS]` is an external checkers engine: a shared library with
the CheckerBoard engine API (`azjax.evaluation.checkerboard`), for English draughts."""
DEFAULT_ENGINE_SECONDS = 0.1
"""An external engine's time per move when its name gives none."""
MAX_ENGINE_SECONDS = 3600.0


def is_engine_name(name: str) -> bool:
    """Whether an opponent's name names an external engine (`cb:PATH[@SECONDS]`)."""
    return name.startswith(ENGINE_PREFIX)


def parse_engine_name(name: str) -> tuple[str, float]:
    """An external engine's name as (the library's path as written, seconds per move):
    ``cb:/x/cake.so@0.5`` -> ("/x/cake.so", 0.5); ``cb:/x/cake.so`` -> ("/x/cake.so",
    `DEFAULT_ENGINE_SECONDS`). A path holding `@` needs its `@SECONDS` written out.

    Raises:
      ValueError: no path, or SECONDS that is not a number in (0, 3600].
    """
    if not is_engine_name(name):
        raise ValueError(f"an engine is named {ENGINE_PREFIX}PATH[@SECONDS], got {name!r}")
    rest = name[len(ENGINE_PREFIX):]
    path, at, text = rest.rpartition("@")
    if not at:
        path, text = rest, str(DEFAULT_ENGINE_SECONDS)
    try:
        seconds = float(text or "nan")
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_ENGINE_SECONDS:
        raise ValueError(f"an engine's time per move (cb:PATH@SECONDS) must be a number of "
                         f"seconds in (0, {MAX_ENGINE_SECONDS:g}], got {text!r} in {name!r}")
    if not path:
        raise ValueError(f"an engine is named {ENGINE_PREFIX}PATH[@SECONDS] (PATH: its shared "
                         f"library), got {name!r}")
    return path, seconds


# ---- validation ----------------------------------------------------------------------------------


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{key}: {message}")


def _validate(config: ExperimentConfig) -> None:
    """Raises ConfigError naming the first key of `config` that cannot be used."""
    from azjax import envs  # late import: envs imports jax

    try:
        env = envs.make(config.game, search_dirs=(config.game_dir,) if config.game_dir else ())
    except ValueError as error:
        raise ConfigError(f"game: {error}") from None
    _validate_integers(config)
    _validate_network(config.network)
    _validate_search(config.search, config.network)
    _validate_selfplay(config.selfplay, config.search)
    _validate_replay(config.replay, config.train)
    _validate_train(config.train, config.replay)
    _validate_material_head(config, env)
    _validate_endgame_table(config, env)
    _validate_quiescence(config, env)
    _validate_eval(config.eval)
    _validate_engine_opponents(config.eval, env)
    _require(config.checkpoint.every_iterations >= 1, "checkpoint.every_iterations", ">= 1")
    _require(config.checkpoint.keep >= 1, "checkpoint.keep", "must be >= 1")
    _require(config.budget.max_iterations >= 0 and config.budget.max_wall_s >= 0, "budget",
             "limits must be >= 0")


def _validate_integers(config: ExperimentConfig) -> None:
    """The seed in [0, MAX_SEED]; every other integer (lists' items too) at most MAX_INTEGER in
    size, so that no count or size overflows the device's int32."""
    _require(0 <= config.seed <= MAX_SEED, "seed",
             f"must be in [0, {MAX_SEED}] (azjax.config.MAX_SEED: the random keys are "
             f"32-bit), got {config.seed}")
    for section in dataclasses.fields(config):
        part = getattr(config, section.name)
        if not dataclasses.is_dataclass(part):
            continue
        for field in dataclasses.fields(part):
            value = getattr(part, field.name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, int) and not isinstance(item, bool) and (
                        abs(item) > MAX_INTEGER):
                    raise ConfigError(f"{section.name}.{field.name}: must be at most "
                                      f"{MAX_INTEGER} in size (azjax.config.MAX_INTEGER: "
                                      f"counts and sizes are int32), got {item}")


def _validate_network(net: NetworkConfig) -> None:
    _require(net.channels > 0 and net.blocks >= 0, "network", "channels > 0 and blocks >= 0")
    _require(net.width > 0, "network.width", "must be positive")
    _require(net.stem_layers >= 0 and net.stem_channels > 0, "network",
             "stem_layers >= 0 and stem_channels > 0")
    _require(min(net.policy_channels, net.value_channels, net.value_hidden) >= 1, "network",
             "policy_channels, value_channels and value_hidden must be >= 1")
    _require(all(h > 0 for h in net.hidden), "network.hidden", "widths must be positive")


def _validate_search(search: SearchConfig, net: NetworkConfig) -> None:
    _require(search.gumbel_scale >= 0, "search.gumbel_scale", "must be >= 0")
    _require(1 <= search.num_simulations <= MAX_SIMULATIONS, "search.num_simulations",
             f"must be in [1, {MAX_SIMULATIONS}] (azjax.config.MAX_SIMULATIONS), got "
             f"{search.num_simulations}")
    _require(search.max_num_considered_actions >= 1, "search.max_num_considered_actions",
             "must be >= 1")
    _require(0.0 <= search.dirichlet_fraction <= 1.0, "search.dirichlet_fraction", "in [0, 1]")
    _require(search.dirichlet_alpha > 0, "search.dirichlet_alpha", "must be > 0")
    _require(0.0 <= search.contempt < 1.0, "search.contempt", "in [0, 1)")
    _require(0.0 <= search.material_utility <= 1.0, "search.material_utility", "in [0, 1]")
    _require(not search.material_utility or net.material_head, "search.material_utility",
             "needs network.material_head (the search reads its prediction)")
    _require(search.prior_temperature > 0, "search.prior_temperature", "must be > 0")
    _require(search.greedy_action == "policy" or search.algorithm == "gumbel",
             "search.greedy_action", "'halving' is gumbel's (puct plays the most visited move)")
    _require(search.pb_c_init > 0 and search.pb_c_base > 0, "search.pb_c_init",
             "pb_c_init and pb_c_base must be > 0")
    _require(1 <= search.alphabeta_depth <= 16, "search.alphabeta_depth", "must be in [1, 16]")
    _require(search.alphabeta_nodes >= 0, "search.alphabeta_nodes", "must be >= 0")
    unread = [name for name in ("solver", "tree_reuse", "quiescence", "contempt")
              if getattr(search, name)]
    _require(search.algorithm != "alphabeta" or not unread, "search.algorithm",
             f"alphabeta does not read search.{', search.'.join(unread)}: turn "
             f"{'it' if len(unread) == 1 else 'them'} off or search with gumbel or puct")


def _validate_selfplay(play: SelfPlayConfig, search: SearchConfig) -> None:
    _require(play.batch_size >= 1, "selfplay.batch_size", "must be >= 1")
    _require(play.chunk_length >= 0, "selfplay.chunk_length", "must be >= 0")
    _require(play.max_game_length >= 0, "selfplay.max_game_length", "must be >= 0")
    _require(0.0 <= play.search_value_weight <= 1.0, "selfplay.search_value_weight", "in [0, 1]")
    _require(0.0 < play.full_search_prob <= 1.0, "selfplay.full_search_prob", "in (0, 1]")
    _require(play.full_search_prob == 1.0
             or 1 <= play.fast_simulations < search.num_simulations, "selfplay.fast_simulations",
             "must be in [1, search.num_simulations) when full_search_prob < 1")
    _require(0.0 <= play.random_opening_prob <= 1.0, "selfplay.random_opening_prob", "in [0, 1]")
    _require(play.random_opening_max_moves >= 0, "selfplay.random_opening_max_moves", ">= 0")
    _require(0.0 <= play.random_start_prob <= 1.0, "selfplay.random_start_prob", "in [0, 1]")
    _require(not play.start_positions or play.random_start_prob > 0, "selfplay.start_positions",
             "needs selfplay.random_start_prob > 0 (the share of games that start there)")
    _require(play.random_opening_prob == 0 or play.random_opening_max_moves >= 1,
             "selfplay.random_opening_max_moves", "must be >= 1 when random_opening_prob > 0")
    _require(play.temperature_moves >= 0, "selfplay.temperature_moves", "must be >= 0")
    _require(not (play.tree_reuse and play.per_game_randomness), "selfplay.tree_reuse",
             "needs per_game_randomness off (its one-game searches keep no tree)")


def _validate_replay(replay: ReplayConfig, train: TrainConfig) -> None:
    _require(replay.capacity >= train.batch_size, "replay.capacity",
             "must be >= train.batch_size")
    _require(replay.window_start >= 0 and replay.window_growth >= 0,
             "replay.window_start", "window sizes must be >= 0")


def _validate_train(train: TrainConfig, replay: ReplayConfig) -> None:
    _require(train.batch_size >= 1, "train.batch_size", "must be >= 1")
    # Above the capacity the buffer never gets there: the run would self-play without training.
    _require(0 <= train.min_replay_size <= replay.capacity,
             "train.min_replay_size", "must be in [0, replay.capacity]")
    _require(train.updates_per_iteration >= 0, "train.updates_per_iteration", ">= 0")
    _require(train.updates_per_call >= 1
             and train.updates_per_iteration % train.updates_per_call == 0,
             "train.updates_per_call",
             f"must be >= 1 and divide train.updates_per_iteration "
             f"({train.updates_per_iteration})")
    _require(train.learning_rate > 0, "train.learning_rate", "must be > 0")
    _require(train.weight_decay >= 0, "train.weight_decay", "must be >= 0")
    _require(train.lr_schedule == "constant" or train.lr_decay_steps >= 1,
             "train.lr_decay_steps", "must be >= 1 with a decaying lr_schedule")
    _require(train.warmup_steps >= 0, "train.warmup_steps", "must be >= 0")
    _require(0.0 <= train.lr_floor <= 1.0, "train.lr_floor",
             "must be in [0, 1] (a fraction of train.learning_rate)")
    _require(0.0 <= train.momentum < 1.0, "train.momentum", "in [0, 1)")
    _require(train.value_loss_weight >= 0, "train.value_loss_weight", "must be >= 0")
    _require(train.material_loss_weight >= 0, "train.material_loss_weight", "must be >= 0")
    _require(train.max_grad_norm >= 0, "train.max_grad_norm", "must be >= 0 (0 = off)")


def _validate_material_head(config: ExperimentConfig, env: Any) -> None:
    """A material head needs a game that counts material and a weight that trains it."""
    if not config.network.material_head:
        return
    _require(config.train.material_loss_weight > 0, "train.material_loss_weight",
             "must be > 0 with network.material_head (else the head never trains)")
    _require(env.supports("material"), "network.material_head",
             f"{config.game} has no material count (Env.material)")


def _validate_endgame_table(config: ExperimentConfig, env: Any) -> None:
    """An endgame table needs a game that has one, of that many pieces."""
    pieces, most = config.search.endgame_table, env.endgame_max_pieces
    _require(pieces == 0 or 2 <= pieces <= most, "search.endgame_table",
             f"must be 0 or in [2, {most}] for {config.game}" if most
             else f"must be 0: {config.game} has no endgame table")


def _validate_quiescence(config: ExperimentConfig, env: Any) -> None:
    """Quiescence needs a game whose positions can be forcing, and a bounded cost."""
    from azjax.envs.core import Env  # late import: envs imports jax

    search = config.search
    _require(0 <= search.quiescence <= 4, "search.quiescence", "must be in [0, 4]")
    _require(1 <= search.quiescence_moves <= 16, "search.quiescence_moves", "must be in [1, 16]")
    _require(search.quiescence == 0 or type(env).forcing is not Env.forcing, "search.quiescence",
             f"must be 0: {config.game} has no forcing positions (Env.forcing)")


def _validate_eval(evaluation: EvalConfig) -> None:
    _require(evaluation.every_iterations >= 1, "eval.every_iterations", "must be >= 1")
    _require(evaluation.arena_every >= 1, "eval.arena_every", "must be >= 1")
    _require(evaluation.oracle_positions >= 0, "eval.oracle_positions", "must be >= 0")
    _require(evaluation.gating_games >= 2, "eval.gating_games", "must be >= 2 (both colours)")
    _require(0.0 <= evaluation.gating_threshold <= 1.0, "eval.gating_threshold", "in [0, 1]")
    _require(evaluation.arena_games >= 2 and evaluation.arena_games % 2 == 0,
             "eval.arena_games", "must be even and >= 2 (each side plays both colours equally)")
    _require(0 <= evaluation.num_simulations <= MAX_SIMULATIONS, "eval.num_simulations",
             f"must be in [0, {MAX_SIMULATIONS}] (azjax.config.MAX_SIMULATIONS; 0 = "
             f"search.num_simulations), got {evaluation.num_simulations}")
    for opponent in evaluation.opponents:
        try:
            (parse_engine_name if is_engine_name(opponent) else parse_baseline)(opponent)
        except ValueError as error:
            raise ConfigError(f"eval.opponents: {error}") from None


def _validate_engine_opponents(evaluation: EvalConfig, env: Any) -> None:
    """An external engine (`cb:PATH[@SECONDS]`) plays English draughts only."""
    from azjax.envs.draughts import Draughts

    for opponent in filter(is_engine_name, evaluation.opponents):
        _require(isinstance(env, Draughts), "eval.opponents",
                 f"{opponent}: a CheckerBoard engine plays English draughts, not "
                 f"{getattr(env, 'name', type(env).__name__)}")
