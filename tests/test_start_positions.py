"""Self-play from a file of positions (`selfplay.start_positions`, `azjax.envs.start_positions`):
the file is read as the game's notation with one-line errors, the wrapper draws only (and
every one of) its positions, and a training run's games start there."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from conftest import tiny_config

from azjax import envs
from azjax.config import (
    BudgetConfig,
    ConfigError,
    EvalConfig,
    SearchConfig,
    SelfPlayConfig,
    config_from_dict,
)
from azjax.envs.forced import ForcedMovesPlayed
from azjax.envs.start_positions import (
    StartPositions,
    read_start_positions,
    start_positions_digest,
)

# Three middle-game positions (Black and White to move) and one with a capture pending.
FENS = ["B:W18,20,21,23,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,10,11,13,16",
        "W:W13,22,26,27,28,31,32:B1,2,6,8,10,11,15,20,K30",
        "B:WK4,11,12,K15,20,23,28:BK31",
        "W:W13,30,32:B12,14,22,23,26,K27,28"]


@pytest.fixture
def positions_file(tmp_path):
    path = tmp_path / "starts.txt"
    path.write_text("# where the agent stood\n\n" + "".join(f"{f} 7 40\n" for f in FENS))
    return path


def _pieces(states) -> set[tuple[int, int, int, int]]:
    """Each state's (Black's, White's, kings, player) bitboards, as a set."""
    pieces = np.asarray(states.pieces).reshape(-1, 2)
    kings = np.asarray(states.kings).reshape(-1)
    player = np.asarray(states.current_player).reshape(-1)
    return {(int(p[0]), int(p[1]), int(k), int(c))
            for p, k, c in zip(pieces, kings, player, strict=True)}


def test_a_positions_file_reads_as_the_games_notation(positions_file):
    """Comments and blank lines are skipped; each line is its FEN (the rest of the line is
    ignored), with the counter at 0 and no moves played."""
    env = envs.make("draughts")
    starts = read_start_positions(env, positions_file)
    assert np.asarray(starts.pieces).shape == (len(FENS), 2)
    assert _pieces(starts) == _pieces(jax.tree.map(lambda *x: np.stack(x),
                                                   *[env.from_fen(f) for f in FENS]))
    assert np.all(np.asarray(starts.counter) == 0) and np.all(np.asarray(starts.step_count) == 0)


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ("# nothing\n\n", "holds no positions"),
    (f"{FENS[0]}\nB:W18:B1,X5\n", r"line 2: bad FEN square 'X5'"),
    ("B:W18,22:B\n", "line 1: the game is over in this position"),
])
def test_a_bad_positions_file_is_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "starts.txt"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_start_positions(envs.make("draughts"), path)


def test_a_game_without_a_position_notation_is_named(positions_file):
    with pytest.raises(ValueError, match="tic_tac_toe has no notation for positions"):
        read_start_positions(envs.make("tic_tac_toe"), positions_file)


def test_random_starts_draw_every_start_position_and_only_those(positions_file):
    """Uniform draws from the file's positions, jitted and vmapped; under forced moves played
    the capture-pending one starts after its forced capture, and the rest are unchanged."""
    env = envs.make("draughts")
    starts = read_start_positions(env, positions_file)
    wrapped = StartPositions(env, starts)
    drawn = jax.jit(jax.vmap(wrapped.random_start))(jax.random.split(jax.random.PRNGKey(0), 200))
    assert _pieces(drawn) == _pieces(starts)
    counts = np.unique(np.asarray(drawn.pieces)[:, 0], return_counts=True)[1]
    assert counts.min() > 200 / len(FENS) / 2

    forced = jax.vmap(ForcedMovesPlayed(wrapped).random_start)(
        jax.random.split(jax.random.PRNGKey(1), 64))
    assert np.all(np.asarray(forced.legal_action_mask).sum(axis=1) >= 2)
    assert len(_pieces(forced) - _pieces(starts)) <= 1  # the forced capture's result


def test_a_config_with_start_positions_needs_a_share_of_random_starts():
    with pytest.raises(ConfigError, match="selfplay.start_positions: needs "
                                          r"selfplay.random_start_prob > 0"):
        config_from_dict({"game": "draughts", "selfplay": {"start_positions": "starts.txt"}})


def test_a_run_starts_its_games_from_the_file(positions_file, tmp_path):
    """The trainer reads the file and every game of a run with random_start_prob 1 starts from
    one of its positions (forced moves played); a missing file names the key."""
    from azjax.training.trainer import Trainer

    config = tiny_config(
        game="draughts",
        search=SearchConfig(num_simulations=2, max_num_considered_actions=2),
        selfplay=SelfPlayConfig(batch_size=16, chunk_length=8, max_game_length=8,
                                random_start_prob=1.0, start_positions=str(positions_file)))
    env = envs.make("draughts")
    run = Trainer(env, config).init_state(jax.random.PRNGKey(0))
    starts = _pieces(read_start_positions(env, positions_file))
    games = _pieces(run.selfplay.games)
    assert len(games & starts) >= 2 and len(games - starts) <= 1
    assert np.all(np.asarray(run.selfplay.opening_moves) == 0)

    missing = dataclasses.replace(config, selfplay=dataclasses.replace(
        config.selfplay, start_positions=str(tmp_path / "none.txt")))
    with pytest.raises(ConfigError, match="selfplay.start_positions: .*none.txt: no such file"):
        Trainer(env, missing)


def test_the_digest_names_the_positions_not_the_comments(positions_file, tmp_path):
    digest = start_positions_digest(positions_file)
    commented = tmp_path / "commented.txt"
    commented.write_text("# another comment\n" + positions_file.read_text() + "\n\n")
    assert start_positions_digest(commented) == digest
    fewer = tmp_path / "fewer.txt"
    fewer.write_text("".join(f"{f} 7 40\n" for f in FENS[:-1]))
    assert start_positions_digest(fewer) != digest
    with pytest.raises(ValueError, match="none.txt: no such file"):
        start_positions_digest(tmp_path / "none.txt")


def test_a_run_refuses_to_resume_on_other_start_positions(positions_file, tmp_path):
    """The run records its positions' digest (the start record, each checkpoint); the same
    file name holding other positions is refused on resume, the run dir untouched."""
    from azjax.training.loop import train
    from azjax.training.metrics import read_metrics

    config = tiny_config(
        game="draughts",
        search=SearchConfig(num_simulations=2, max_num_considered_actions=2),
        selfplay=SelfPlayConfig(batch_size=8, chunk_length=8, max_game_length=8,
                                random_start_prob=1.0, start_positions=str(positions_file)),
        eval=EvalConfig(every_iterations=100, arena_games=2, opponents=()),
        budget=BudgetConfig(max_iterations=1))
    run_dir = tmp_path / "run"
    train(config, run_dir, show_progress=False)
    digest = start_positions_digest(positions_file)
    assert read_metrics(run_dir / "metrics.jsonl")[0]["start_positions_sha256"] == digest

    positions_file.write_text("".join(f"{f} 7 40\n" for f in FENS[1:]))
    files = sorted(str(p) for p in run_dir.rglob("*"))
    resumed = dataclasses.replace(config, budget=BudgetConfig(max_iterations=2))
    with pytest.raises(ConfigError, match=r"selfplay.start_positions: the positions in .*"
                                          r"starts.txt are not those .* was trained on"):
        train(resumed, run_dir, show_progress=False)
    assert sorted(str(p) for p in run_dir.rglob("*")) == files
