"""Config loading: defaults, overrides, and clear errors naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from azjax.config import (
    ConfigError,
    config_from_dict,
    config_to_dict,
    load_config,
    read_config_data,
)

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.rglob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_configs_load_and_round_trip(path):
    config = load_config(path)
    # Named after its game, or a variant of it (connect_four_h100.yaml).
    assert path.stem == config.game or path.stem.startswith(config.game + "_")
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
    ({"search": {"algorithm": "alphabeta"}}, "search.algorithm: must be one of"),
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
    ({"search": {"num_simulations": 0}}, "search.num_simulations: must be >= 1"),
    ({"train": {"learning_rate": -1}}, "train.learning_rate"),
    ({"eval": {"opponents": ["stockfish"]}}, "unknown opponent 'stockfish'"),
    ({"eval": {"opponents": ["mcts:0"]}}, "mcts opponent needs a positive simulation count"),
    ({"eval": {"opponents": ["mcts:lots"]}}, "got 'mcts:lots'"),
    ({"eval": {"opponents": ["alphabeta:0"]}}, "alphabeta opponent needs a depth"),
    ({"eval": {"opponents": ["alphabeta"]}}, "got 'alphabeta'"),
    ({"eval": {"num_simulations": -1}}, "eval.num_simulations: must be >= 0"),
    ({"network": {"value_hidden": 0}}, "network: policy_channels, value_channels"),
    ({"network": {"kind": "resmlp", "width": 0}}, "network.width: must be positive"),
    ({"selfplay": {"full_search_prob": 0.25}}, "selfplay.fast_simulations: must be in"),
    ({"selfplay": {"full_search_prob": 0.0}}, "selfplay.full_search_prob: in (0, 1]"),
    ({"selfplay": {"random_start_prob": 1.5}}, "selfplay.random_start_prob: in [0, 1]"),
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
