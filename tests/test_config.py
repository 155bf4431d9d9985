"""Config loading: defaults, overrides, and clear errors naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from azjax.config import (
    BASELINES,
    DROPPED_KEYS,
    MAX_INTEGER,
    MAX_SEED,
    MAX_SIMULATIONS,
    ConfigError,
    ExperimentConfig,
    SearchConfig,
    apply_overrides,
    baseline_forms,
    baseline_kind,
    config_from_dict,
    config_from_saved,
    config_to_dict,
    load_config,
    parse_baseline,
    read_config_data,
    resolve_simulations,
)

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.rglob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_configs_load_and_round_trip(path):
    config = load_config(path)
    # Named after its game, or a variant of it (connect_four_h100.yaml).
    game_id = config.game.split("(")[0]  # a spec may name arguments: draughts(draw_rule=...)
    assert path.stem == game_id or path.stem.startswith(game_id + "_")
    assert config_from_dict(config_to_dict(config)) == config
    hash(config)  # usable as a static jit argument


def test_override_sets_nested_keys_with_yaml_types(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("game: tic_tac_toe\nsearch: {num_simulations: 8}\n")
    config = load_config(path, ["search.num_simulations=32", "network.hidden=[64, 64]",
                                "search.algorithm=puct", "train.learning_rate=1e-3"])
    assert config.search.num_simulations == 32 and config.network.hidden == (64, 64)
    assert config.search.algorithm == "puct" and config.train.learning_rate == 0.001


@pytest.mark.parametrize(("data", "message"), [
    ({"serch": {}}, "unknown config key 'serch'"),
    ({"search": {"num_simulation": 3}}, "unknown config key 'search.num_simulation'"),
    ({"search": {"num_simulations": "many"}}, "search.num_simulations: expected an integer"),
    ({"search": {"num_simulations": 2.5}}, "search.num_simulations: expected an integer"),
    ({"search": {"algorithm": "minimax"}}, "search.algorithm: must be one of"),
    ({"selfplay": {"symmetries": "yes"}}, "selfplay.symmetries: expected true or false"),
    ({"network": {"hidden": 5}}, "network.hidden: expected a list"),
    ({"game": "chess"}, "unknown game 'chess'"),
    ({"game": {"module": "mygames:Board"}}, "game: a mapping names a game of your own as"),
    ({"game": {"import": "mygames:Board", "kwargs": [4]}}, "game.kwargs: expected a mapping"),
    ({"game": {"import": "mygames:Board", "kwargs": {"size": object()}}},
     "keyword size=<object"),
    ({"game": "mygames:Board(4)"}, "arguments are written as keyword=literal"),
    ({"game": "no_such_games_module:Board"}, "game: cannot import module "
                                              "'no_such_games_module'"),
    ({"search": {"num_simulations": 0}}, "search.num_simulations: must be in [1, 100000]"),
    ({"train": {"learning_rate": -1}}, "train.learning_rate"),
    ({"eval": {"opponents": ["stockfish"]}}, "unknown opponent 'stockfish'"),
    ({"eval": {"opponents": ["mcts:0"]}}, "mcts opponent needs a positive simulation count"),
    ({"eval": {"opponents": ["mcts:lots"]}}, "got 'mcts:lots'"),
    ({"eval": {"opponents": ["alphabeta:0"]}}, "alphabeta opponent needs a depth"),
    ({"eval": {"opponents": ["alphabeta"]}}, "got 'alphabeta'"),
    ({"eval": {"num_simulations": -1}}, "eval.num_simulations: must be in [0, 100000]"),
    ({"network": {"value_hidden": 0}}, "network: policy_channels, value_channels"),
    ({"network": {"kind": "resmlp", "width": 0}}, "network.width: must be positive"),
    ({"selfplay": {"full_search_prob": 0.25}}, "selfplay.fast_simulations: must be in"),
    ({"selfplay": {"full_search_prob": 0.0}}, "selfplay.full_search_prob: in (0, 1]"),
    ({"selfplay": {"random_start_prob": 1.5}}, "selfplay.random_start_prob: in [0, 1]"),
    ({"selfplay": {"tree_reuse": True, "per_game_randomness": True}},
     "selfplay.tree_reuse: needs per_game_randomness off"),
    ({"search": {"contempt": 1.0}}, "search.contempt: in [0, 1)"),
    ({"search": {"contempt": -0.1}}, "search.contempt: in [0, 1)"),
    ({"search": {"material_utility": -0.1}}, "search.material_utility: in [0, 1]"),
    ({"game": "draughts", "search": {"material_utility": 0.5}},
     "search.material_utility: needs network.material_head"),
    ({"search": {"algorithm": "puct", "greedy_action": "halving"}},
     "search.greedy_action: 'halving' is gumbel's"),
    ({"search": {"greedy_action": "visits"}}, "search.greedy_action"),
    ({"search": {"prior_temperature": 0.0}}, "search.prior_temperature: must be > 0"),
    ({"replay": {"capacity": 1024}, "train": {"min_replay_size": 2048}},
     "train.min_replay_size: must be in"),
    ({"train": {"lr_schedule": "cosine", "lr_decay_steps": 0}}, "train.lr_decay_steps: must be"),
    ({"train": {"max_grad_norm": -1.0}}, "train.max_grad_norm: must be >= 0"),
    ({"train": {"value_loss_weight": -0.5}}, "train.value_loss_weight: must be >= 0"),
    ({"train": {"momentum": 1.5}}, "train.momentum: in [0, 1)"),
    ({"train": {"warmup_steps": -10}}, "train.warmup_steps: must be >= 0"),
    ({"train": {"lr_floor": 1.5}}, "train.lr_floor: must be in [0, 1]"),
    ({"train": {"lr_floor": -0.01}}, "train.lr_floor: must be in [0, 1]"),
    ({"selfplay": {"temperature_moves": -1}}, "selfplay.temperature_moves: must be >= 0"),
    ({"search": {"pb_c_base": 0}}, "search.pb_c_init: pb_c_init and pb_c_base must be > 0"),
    ({"eval": {"arena_games": 51}}, "eval.arena_games: must be even and >= 2"),
    ({"network": {"material_head": True}},
     "network.material_head: tic_tac_toe has no material count"),
    ({"game": "draughts", "network": {"material_head": True},
      "train": {"material_loss_weight": 0.0}}, "train.material_loss_weight: must be > 0"),
    ({"train": {"material_loss_weight": -1.0}}, "train.material_loss_weight: must be >= 0"),
    ({"game": "draughts", "search": {"endgame_table": 6}},
     "search.endgame_table: must be 0 or in [2, 5] for draughts"),
    ({"game": "draughts", "search": {"endgame_table": 1}},
     "search.endgame_table: must be 0 or in [2, 5] for draughts"),
    ({"game": "connect_four", "search": {"endgame_table": 2}},
     "search.endgame_table: must be 0: connect_four has no endgame table"),
])
def test_bad_configs_name_the_key(data, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict(data)


def test_missing_file_and_bad_override(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "c.yaml").write_text("game: tic_tac_toe\n")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(tmp_path / "c.yaml", ["search.num_simulations"])
    (tmp_path / "bad.yaml").write_text("game: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


def test_base_chain_merges_sections_key_by_key(tmp_path):
    (tmp_path / "root.yaml").write_text(
        "game: connect_four\nsearch: {num_simulations: 8, algorithm: puct}\n"
        "network: {kind: resmlp, width: 32}\neval: {opponents: [random, 'mcts:100']}\n")
    (tmp_path / "variants").mkdir()
    (tmp_path / "variants" / "mid.yaml").write_text(
        "base: ../root.yaml\nsearch: {num_simulations: 16}\n")
    (tmp_path / "variants" / "leaf.yaml").write_text(
        "base: mid.yaml\nnetwork: {width: 64}\neval: {opponents: [random]}\n")
    config = load_config(tmp_path / "variants" / "leaf.yaml", ["search.num_simulations=24"])
    assert config.game == "connect_four"
    assert config.search.algorithm == "puct" and config.search.num_simulations == 24
    assert config.network.kind == "resmlp" and config.network.width == 64
    assert config.eval.opponents == ("random",)  # a list replaces, it does not append
    assert "base" not in config_to_dict(config)


@pytest.mark.parametrize(("files", "message"), [
    ({"a.yaml": "base: missing.yaml\n"}, "a.yaml: base config file not found"),
    ({"a.yaml": "base: b.yaml\n", "b.yaml": "base: a.yaml\n"}, "configs include each other"),
    ({"a.yaml": "base: a.yaml\n"}, "configs include each other"),
    ({"a.yaml": "base: [b.yaml]\n"}, "a.yaml: base: expected the path of a YAML config"),
    ({"a.yaml": "base: b.yaml\n", "b.yaml": "- game\n"}, "b.yaml: a config must be a mapping"),
    ({"a.yaml": "base: b.yaml\nsearch: {num_simulatons: 3}\n", "b.yaml": "game: tic_tac_toe\n"},
     "unknown config key 'search.num_simulatons'"),
])
def test_bad_base_chains_name_the_file(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(tmp_path / "a.yaml")


def test_variant_configs_list_only_their_changes():
    """Each `base:` variant differs from its base in every key it sets (nothing restated)."""
    for path in sorted(EXPERIMENTS.rglob("*.yaml")):
        own = yaml.safe_load(path.read_text())
        if "base" not in own:
            continue
        base = read_config_data(path.parent / own.pop("base"))
        for section, values in own.items():
            keys = values.items() if isinstance(values, dict) else [(None, values)]
            for key, value in keys:
                inherited = (base.get(section, {}) or {}).get(key) if key else base.get(section)
                assert value != inherited, f"{path.name}: {section}.{key} restates its base"


def test_alphabeta_opponents_are_valid_in_training_arenas(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "game: draughts\neval: {opponents: [random, 'mcts:100', 'alphabeta:6']}\n")
    assert load_config(tmp_path / "c.yaml").eval.opponents == ("random", "mcts:100",
                                                               "alphabeta:6")


# ---- configs saved with keys azjax does not have -------------------------------------------------

# What a run or model saved while these keys existed held with their features off: the defaults
# of the time, and other values of the keys that only tuned a feature.
_SAVED_OFF = {
    "reanalyse": {"fraction": 0.0, "num_simulations": 64, "value_weight": -1.0},
    "network": {"reply_policy_head": False, "short_value_head": False},
    "train": {"reply_policy_loss_weight": 0.15, "short_value_loss_weight": 0.5},
    "selfplay": {"short_value_horizon": 3.0, "random_start_source": "env"},
}


def _saved(extra: dict) -> dict:
    """A saved config's mapping: today's keys of a connect-four config, plus `extra`'s."""
    data = config_to_dict(config_from_dict({"game": "connect_four",
                                            "search": {"num_simulations": 24}}))
    for section, values in extra.items():
        data[section] = {**data.get(section, {}), **values}
    return data


def test_a_saved_config_with_dropped_keys_at_their_off_values_loads_without_them():
    assert {f"{section}.{key}" for section, keys in _SAVED_OFF.items()
            for key in keys} == set(DROPPED_KEYS)  # the fixture covers the table
    expected = config_from_saved(_saved({}))
    assert config_from_saved(_saved(_SAVED_OFF)) == expected
    assert expected.search.num_simulations == 24
    # Integer spellings of the off values, and a lone key, load too.
    assert config_from_saved(_saved({"reanalyse": {"fraction": 0}})) == expected


@pytest.mark.parametrize(("section", "key", "value"), [
    ("reanalyse", "fraction", 0.1),
    ("network", "reply_policy_head", True),
    ("network", "short_value_head", True),
    ("selfplay", "random_start_source", "replay"),
])
def test_a_saved_config_that_used_a_dropped_feature_is_refused_in_one_line(section, key, value):
    with pytest.raises(ConfigError) as error:
        config_from_saved(_saved({**_SAVED_OFF, section: {**_SAVED_OFF[section], key: value}}))
    message = str(error.value)
    assert message.startswith(f"config key {section}.{key}: ")
    assert "is not part of azjax" in message and "cannot be loaded" in message
    assert "\n" not in message


def test_a_model_saved_with_dropped_keys_loads(tmp_path):
    """A model.json written while the keys existed: off, the model loads; on, it is refused
    with the key named."""
    import json

    import jax

    from azjax import envs
    from azjax.core.network import init_network
    from azjax.model_files import CheckpointError, load_model, save_model

    config = config_from_dict({"game": "tic_tac_toe",
                               "network": {"kind": "mlp", "hidden": [8]}})
    env = envs.make(config.game)
    params = init_network(config.network, env.num_actions, env.observation_shape,
                          jax.random.PRNGKey(0))["params"]
    model = save_model(tmp_path / "model", params, config)
    (model / "checksums.json").unlink()  # model.json is edited below, as an older writer's
    meta = json.loads((model / "model.json").read_text())
    for section, values in _SAVED_OFF.items():
        meta["config"][section] = {**meta["config"].get(section, {}), **values}
    (model / "model.json").write_text(json.dumps(meta))
    _, loaded, _ = load_model(model)
    assert loaded == config
    meta["config"]["reanalyse"]["fraction"] = 0.25
    (model / "model.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=re.escape("config key reanalyse.fraction: "
                                                        "reanalysis is not part of azjax")):
        load_model(model)


@pytest.mark.parametrize(("data", "key"), [
    ({"reanalyse": {"fraction": 0.1}}, "reanalyse"),
    ({"network": {"short_value_head": False}}, "network.short_value_head"),
    ({"selfplay": {"random_start_source": "env"}}, "selfplay.random_start_source"),
])
def test_a_config_file_setting_a_dropped_key_is_told_so(data, key):
    """A config written now (not a saved one) may not set them at all; the error says why."""
    with pytest.raises(ConfigError, match=re.escape(f"config key {key}: ")) as error:
        config_from_dict(data)
    assert "is not part of azjax" in str(error.value)


# ---- baseline opponents and simulations --------------------------------------------------------


def test_every_baseline_kind_parses_from_its_written_form():
    assert len(baseline_forms()) == len(BASELINES)
    for (kind, entry), form in zip(BASELINES.items(), baseline_forms(), strict=True):
        name = f"{kind}:{entry.example}" if entry.count else kind
        assert form == (f"{kind}:{entry.letter}" if entry.count else kind)
        assert parse_baseline(name) == (kind, entry.example if entry.count else 0)
        assert baseline_kind(name) == kind
        config_from_dict({"game": "draughts", "eval": {"opponents": [name]}})
    assert baseline_kind("connect_four") is None and baseline_kind("runs/a:b") is None
    with pytest.raises(ValueError, match="unknown opponent 'random:3'"):
        parse_baseline("random:3")


def test_zero_or_no_simulations_means_the_searchs_own_count():
    search = SearchConfig(num_simulations=24)
    assert resolve_simulations(0, search) == resolve_simulations(None, search) == 24
    assert resolve_simulations(7, search) == 7
    from azjax.agent import default_simulations

    config = ExperimentConfig(search=search)
    assert default_simulations(config) == 24
    assert default_simulations(config_from_dict({"search": {"num_simulations": 24},
                                                 "eval": {"num_simulations": 64}})) == 64


# ---- one line for every bad value: YAML errors and bounds ------------------------------------


def test_bad_yaml_is_one_line_naming_where(tmp_path):
    with pytest.raises(ConfigError) as error:
        apply_overrides({}, ["network.hidden=[1, 2"])
    assert str(error.value) == ("--set network.hidden=[1, 2: not valid YAML: expected ',' or "
                                "']', but got '<stream end>' (while parsing a flow sequence)")
    (tmp_path / "bad.yaml").write_text("game: tic_tac_toe\nnetwork:\n  hidden: [1, 2\n")
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "bad.yaml")
    assert str(error.value) == (f"{tmp_path / 'bad.yaml'}: not valid YAML: line 4, column 1: "
                                f"expected ',' or ']', but got '<stream end>' (while parsing "
                                f"a flow sequence)")


@pytest.mark.parametrize(("data", "message"), [
    ({"seed": MAX_SEED + 1}, f"seed: must be in [0, {MAX_SEED}] (azjax.config.MAX_SEED"),
    ({"seed": -1}, "seed: must be in [0, "),
    ({"seed": 99999999999999999999999}, "got 99999999999999999999999"),
    ({"search": {"num_simulations": MAX_SIMULATIONS + 1}},
     f"search.num_simulations: must be in [1, {MAX_SIMULATIONS}] "
     f"(azjax.config.MAX_SIMULATIONS), got {MAX_SIMULATIONS + 1}"),
    ({"eval": {"num_simulations": MAX_SIMULATIONS + 1}},
     f"eval.num_simulations: must be in [0, {MAX_SIMULATIONS}]"),
    ({"replay": {"capacity": MAX_INTEGER + 1}},
     f"replay.capacity: must be at most {MAX_INTEGER} in size (azjax.config.MAX_INTEGER"),
    ({"network": {"kind": "mlp", "hidden": [64, 2**40]}}, "network.hidden: must be at most"),
    ({"budget": {"max_iterations": 10**30}}, "budget.max_iterations: must be at most"),
])
def test_values_past_their_bounds_are_refused_naming_the_bound(data, message):
    with pytest.raises(ConfigError) as error:
        config_from_dict(data)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_bounds_themselves_load():
    config = config_from_dict({"seed": MAX_SEED, "search": {"num_simulations": MAX_SIMULATIONS},
                               "eval": {"num_simulations": MAX_SIMULATIONS},
                               "budget": {"max_iterations": MAX_INTEGER}})
    assert config.seed == MAX_SEED and config.search.num_simulations == MAX_SIMULATIONS
