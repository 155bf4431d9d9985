"""External checkers engines through the CheckerBoard engine API (azjax/evaluation/checkerboard.py).

The engine here is `tests/fixtures/cb_test_engine.c`, built with the system's C compiler into
the test's own folder: a legal move generator of its own, and a file beside it
(`cb_test_engine.mode`) that makes it answer an illegal move, crash, abort or hang at its N-th
move; it logs every `getmove` it receives to `cb_test_engine.log` in its working directory.
The one timeout (a hang) is 10 s against a hang that never ends, while every other move of
that arena is a C call answered in well under a millisecond.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import GUMBEL_NO_TABLE, REPO_ROOT, FakeClock
from typer.testing import CliRunner

from azjax import envs
from azjax.apps.cli import app
from azjax.config import NetworkConfig, parse_engine_name
from azjax.envs.core import jitted_step
from azjax.evaluation.baselines import random_player
from azjax.evaluation.checkerboard import (
    BLACK,
    KING,
    MAN,
    WHITE,
    CheckerBoardPlayer,
    captured_squares,
    engine_board,
    engine_player,
    match_move,
    square_of,
    square_xy,
)
from azjax.evaluation.engine_arena import play_engine_arena
from azjax.evaluation.players import arena_opening_plies

SOURCE = Path(__file__).parent / "fixtures" / "cb_test_engine.c"
COMPILER = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C compiler (cc or gcc) to build "
                                                         "the test engine")
RUNNER = CliRunner(env={"AZJAX_COMPILATION_CACHE": str(REPO_ROOT / ".jax_cache")})


@pytest.fixture(scope="module")
def env():
    return envs.make("draughts")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The test engine, and a build of it without `getmove`."""
    folder = tmp_path_factory.mktemp("cb_build")
    out = {}
    for name, flags in (("engine", []), ("no_getmove", ["-DNO_GETMOVE"])):
        out[name] = folder / f"{name}.so"
        subprocess.run([COMPILER, "-O1", "-shared", "-fPIC", *flags, "-o", str(out[name]),
                        str(SOURCE)], check=True)
    return out


def install(built, folder: Path, mode: str | None = None, which: str = "engine") -> Path:
    """A copy of the engine in `folder`, with its mode file when `mode` is given."""
    library = folder / "cb_test_engine.so"
    shutil.copy(built[which], library)
    if mode is not None:
        (folder / "cb_test_engine.mode").write_text(mode + "\n")
    return library


def calls(folder: Path) -> list[dict[str, float]]:
    """The engine's log: one {color, maxtime, info} per getmove it received."""
    log = folder / "cb_test_engine.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [{k: float(v) for k, v in re.findall(r"(\w+)=([-\d.]+)", line)} for line in lines]


def arena(env, player, games: int = 4, seed: int = 0):
    return play_engine_arena(env, random_player(env), player, key=jax.random.PRNGKey(seed),
                             num_games=games, opening_plies=arena_opening_plies(player.label))


def one(state):
    return jax.tree.map(lambda x: jnp.asarray(x)[None], state)


# ---- squares, boards, names ----------------------------------------------------------------


def test_squares_follow_the_apis_board_layout(env):
    """Square s is board[x][y] with y = (s-1)//4, x = 2*(3-(s-1)%4) + y%2; the start position
    has Black's men on 1-12, White's on 21-32, Black to move."""
    for s in range(1, 33):
        y = (s - 1) // 4
        assert square_xy(s) == (2 * (3 - (s - 1) % 4) + y % 2, y)
        assert square_of(*square_xy(s)) == s
    assert square_of(0, 1) is None and square_of(8, 0) is None
    board, color = engine_board(env.init(jax.random.PRNGKey(0)))
    assert color == BLACK
    for s in range(1, 33):
        x, y = square_xy(s)
        assert board[8 * x + y] == (BLACK | MAN if s <= 12 else WHITE | MAN if s > 20 else 0)
    board, color = engine_board(env.from_fen("W:WK27:B6"))
    x, y = square_xy(27)
    assert color == WHITE and board[8 * x + y] == WHITE | KING


def test_engine_names():
    assert parse_engine_name("cb:/x/cake.so") == ("/x/cake.so", 0.1)
    assert parse_engine_name("cb:rel/e.so@2.5") == ("rel/e.so", 2.5)
    for bad in ("cb:", "cb:x.so@", "cb:x.so@0", "cb:x.so@soon", "cb:@1"):
        with pytest.raises(ValueError, match="cb:PATH"):
            parse_engine_name(bad)
    assert arena_opening_plies("cb:/x/cake.so") == 3


def test_a_move_is_matched_by_its_ends_and_captured_squares(env):
    legal = env.legal_moves(env.from_fen("B:W14,15,23,24,30:B9,10"))
    assert match_move(legal, 9, 27, [14, 23]) == legal["9x18x27"]
    assert match_move(legal, 9, 27, [23, 14]) == legal["9x18x27"]  # another order: the set
    assert match_move(legal, 10, 26, [15, 23]) == legal["10x19x26"]
    assert match_move(legal, 10, 17, [14]) == legal["10x17"]
    assert match_move(legal, 10, 26, [15]) is None  # a capture cut short
    assert match_move(legal, 10, 17, []) is None  # no capture named
    assert match_move(legal, 9, 13, []) is None  # captures are compulsory
    assert match_move(legal, None, 13, []) is None  # off the board


# ---- games -----------------------------------------------------------------------------------


def test_the_engine_plays_legal_games_to_their_end(env, built, tmp_path):
    """Four games against random from paired 3-ply openings, both colours: no forfeit, every
    game decided by azjax's rules, the engine asked in both colours and only when to move."""
    library = install(built, tmp_path)
    with engine_player(env, f"cb:{library}@0.25") as player:
        assert player.engine_name == "azjax test engine"
        result, _, stats = arena(env, player)
    assert result.num_games == 4 and result.illegal_moves_b == 0
    assert stats.forfeits == 0 and stats.per_game_move and player.faults == []
    log = calls(tmp_path)
    assert len(log) == stats.moves > 0
    assert {c["color"] for c in log} == {BLACK, WHITE}
    assert all(c["maxtime"] == 0.25 for c in log)  # the asked seconds reach the engine


def test_the_time_per_move_reaches_the_engine(env, built, tmp_path):
    library = install(built, tmp_path)
    with engine_player(env, f"cb:{library}@0.37") as player:
        states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
        actions, seconds = player.move(states, np.array([True, False]))
    assert [c["maxtime"] for c in calls(tmp_path)] == [0.37]  # one game to move, one call
    assert seconds is not None and bool(states.legal_action_mask[0, actions[0]])


@pytest.mark.parametrize("fen", ["B:W14,23,32:B9,1", "W:W26:B22,14,15",
                                 "B:W14,15,23,24,30:B9,10"])
def test_a_multi_jump_is_played_hop_by_hop_from_one_engine_move(env, built, tmp_path, fen):
    """The engine names a multi-jump by its ends and captured squares (no path); each hop is
    one azjax action by the same player, and the later ones are played without asking."""
    library = install(built, tmp_path)
    states = one(env.from_fen(fen))
    legal = env.legal_moves(env.from_fen(fen))
    played = []
    with engine_player(env, f"cb:{library}") as player:
        while True:
            actions, seconds = player.move(states, np.array([True]))
            played.append(int(actions[0]))
            assert (seconds is None) == (len(played) > 1)
            mover = int(states.current_player[0])
            states = jax.vmap(env.step)(states, jnp.asarray(actions))
            if int(states.current_player[0]) != mover or bool(states.terminated[0]):
                break
    assert played in legal.values() and len(played) >= 2
    assert len(calls(tmp_path)) == 1


# ---- faults: one line each, the game forfeited, the other games kept ------------------------


def _fault_arena(env, built, tmp_path, mode: str, **kwargs):
    library = install(built, tmp_path, mode)
    lines = []
    with engine_player(env, f"cb:{library}@0.1", report=lines.append, **kwargs) as player:
        result, _, stats = arena(env, player)
    assert result.num_games == 4 and stats.forfeits == 1 == result.illegal_moves_b
    assert lines == player.faults and len(lines) == 1
    assert stats.moves > 10  # past the fault at its third move, in the other games
    return lines[0]


def test_an_illegal_move_forfeits_that_game_only(env, built, tmp_path):
    line = _fault_arena(env, built, tmp_path, "illegal 3 once")
    found = re.fullmatch(r"engine cb:\S+ played (\d+-\d+) on its move (\d+) of game (\d) in "
                         r"([BW]:W[^ ]*:B[^ ]*), not a legal move \(legal: (.+)\); game \3 "
                         r"forfeited", line)
    assert found, line
    move, fen, legal = found.group(1), found.group(4), found.group(5).split(", ")
    assert legal == list(env.legal_moves(env.from_fen(fen)))  # the FEN is the position
    assert move not in legal


@pytest.mark.parametrize("mode,signal", [("crash", "signal 11, SIGSEGV"),
                                         ("abort", "signal 6, SIGABRT")])
def test_a_crash_forfeits_that_game_and_a_new_process_plays_on(env, built, tmp_path, mode,
                                                                signal):
    line = _fault_arena(env, built, tmp_path, f"{mode} 3 once")
    assert re.fullmatch(rf"engine cb:\S+ crashed \({signal}\) on its move \d+ of game (\d) in "
                        r"[BW]:W[^ ]*:B[^ ]*; game \1 forfeited \(a new engine process plays "
                        r"the next games\)", line), line


def test_a_hung_engine_forfeits_after_its_timeout(env, built, tmp_path):
    line = _fault_arena(env, built, tmp_path, "hang 2 once", timeout=10.0)
    assert "did not answer within 10 s (taken as hung and stopped) on its move" in line, line


def test_a_library_without_getmove_is_refused_in_one_line(env, built, tmp_path):
    library = install(built, tmp_path, which="no_getmove")
    with pytest.raises(ValueError) as caught:
        engine_player(env, f"cb:{library}")
    assert str(caught.value) == (f"engine cb:{library}: has no function getmove: not a "
                                 f"CheckerBoard engine")
    with pytest.raises(ValueError, match=r"^engine cb:\S+: \S+nowhere.so: no such file$"):
        engine_player(env, f"cb:{tmp_path}/nowhere.so")


# ---- the arena at equal time, and the command line ------------------------------------------


def test_at_equal_time_the_agent_thinks_as_long_as_the_engine_did(env, built, tmp_path,
                                                                  monkeypatch):
    """The engine's moves read a fake clock (0.25 s each); on each ply the agent's clock for
    its search of the batch is set to the engine's mean time per move on that ply times the
    games (a ply of only a multi-jump's later hops keeps the last time)."""
    from azjax import engine_player as engine_player_module
    from azjax.apps.turns import untrained_agent

    monkeypatch.setattr(engine_player_module, "now", FakeClock(1.0))  # one chunk a move
    agent = untrained_agent("draughts", network=NetworkConfig(kind="mlp", hidden=(16,)),
                            num_simulations=4)
    me = agent.player(movetime=1.0, keep_tree=False)
    library = install(built, tmp_path)
    engine = CheckerBoardPlayer(env, f"cb:{library}", clock=FakeClock(0.25))
    given, expected, took = [], [], [0.5]  # the agent's first time per game (1 s / 2 games)
    engine_move, agent_move = engine.move, me.move

    def timed_engine(states, turn):
        actions, seconds = engine_move(states, turn)
        if seconds is not None:
            took.append(seconds)
        return actions, seconds

    def timed_agent(key, states):
        given.append(me.movetime)
        expected.append(took[-1] * 2)  # two games in the batch
        return agent_move(key, states)

    engine.move, me.move = timed_engine, timed_agent
    with engine:
        result, _, stats = play_engine_arena(env, me, engine, key=jax.random.PRNGKey(0),
                                             num_games=2, opening_plies=3, equal_time=True)
    assert result.num_games == 2 and stats.forfeits == 0
    assert stats.seconds_per_move == pytest.approx(0.25)
    assert given == expected  # B moves first on each ply: A gets the time it took per move
    assert set(given) == {0.5}  # 0.25 s a move, per game of the two, however many B moved in


def test_eval_against_an_engine_from_the_command_line(built, tmp_path):
    library = install(built, tmp_path)
    name = f"cb:{library}@0.2"
    result = RUNNER.invoke(app, ["eval", "draughts", "--against", name, "--games", "2",
                                 "--simulations", "2", *GUMBEL_NO_TABLE,
                                 "--pdn", str(tmp_path / "match.pdn")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"    its 2 games are saved in {tmp_path / 'match.pdn'} (PDN)" in lines
    saved = (tmp_path / "match.pdn").read_text()
    assert saved.count('[Event "azjax eval"]') == 2
    assert saved.count(f'[White "{name}"]') == 1 and saved.count(f'[Black "{name}"]') == 1
    assert f"opponent {name}: 'azjax test engine', an external engine, 0.2 s per move" in lines
    (outcome,) = [line for line in lines if line.startswith(f"vs {name}: +")]
    assert re.fullmatch(r"vs \S+: \+\d =\d -\d \(score [\d.]+ over 2 games\)  \(Elo difference "
                        r"\S+; 3 paired random opening plies\)", outcome), outcome
    (pace,) = [line for line in lines if line.startswith("    agent ")]
    assert f"; {name} " in pace and pace.endswith(" moves, 0 games forfeited")


def test_an_engine_for_another_game_is_refused_in_one_line(built, tmp_path):
    library = install(built, tmp_path)
    result = RUNNER.invoke(app, ["eval", "tic_tac_toe", "--against", "random", "--against",
                                 f"cb:{library}", "--games", "2"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        f"error: cb:{library}: a CheckerBoard engine plays English draughts; this agent plays "
        f"tic_tac_toe")
    assert "vs " not in result.output  # refused before any arena


def test_an_engine_anchors_a_ladder(env, built, tmp_path):
    """`azjax anchors` rates an engine against random (its matches played from the host), and
    a ladder on that table plays the run's snapshots against it."""
    from azjax.apps.turns import untrained_agent
    from azjax.model_files import save_model
    from azjax.training.anchors import rate_anchors
    from azjax.training.ladder import run_ladder

    name = f"cb:{install(built, tmp_path)}@0.1"
    lines = []
    table = rate_anchors("draughts", [name], key=jax.random.PRNGKey(0), games_per_pair=2,
                         progress=lines.append)
    assert [m[:2] for m in table.matches] == [("random", name)]
    assert sum(table.matches[0][2:]) == 2 and set(table.ratings) == {"random", name}
    run_dir = tmp_path / "run"
    agent = untrained_agent("draughts", network=NetworkConfig(kind="mlp", hidden=(16,)),
                            num_simulations=2)
    for iteration in (1, 2):
        save_model(run_dir / "snapshots" / str(iteration), agent.params, agent.config,
                   {"iteration": iteration, "num_simulations": 2})
    before = len(calls(tmp_path))
    result = run_ladder(run_dir, key=jax.random.PRNGKey(1), games_per_pair=2, baselines=(),
                        anchors=table)
    assert {(a, b) for a, b, _ in result.matches} == {
        ("iter_1", "random"), ("iter_1", name), ("iter_2", "random"), ("iter_2", name),
        ("iter_1", "iter_2")}
    assert all(r.num_games == 2 for _, _, r in result.matches)
    assert result.ratings()[name] == (table.ratings[name],) * 3
    assert len(calls(tmp_path)) > before  # the engine played the snapshots


def test_a_training_run_can_name_an_engine_among_its_opponents(env, built, tmp_path):
    """`eval.opponents` takes `cb:PATH[@SECONDS]` for draughts (refused for other games); the
    training evaluator plays its arena from the host, after the compiled ones."""
    from azjax.apps.turns import untrained_agent
    from azjax.config import ConfigError, config_from_dict
    from azjax.evaluation.evaluator import Evaluator

    name = f"cb:{install(built, tmp_path)}@0.1"
    with pytest.raises(ConfigError, match="eval.opponents: cb:.* plays English draughts, not "
                                          "tic_tac_toe"):
        config_from_dict({"game": "tic_tac_toe", "eval": {"opponents": [name]}})
    with pytest.raises(ConfigError, match="eval.opponents: an engine's time per move"):
        config_from_dict({"game": "draughts", "eval": {"opponents": [name + "@x"]}})
    agent = untrained_agent("draughts", network=NetworkConfig(kind="mlp", hidden=(16,)),
                            num_simulations=2)
    config = config_from_dict({
        "game": "draughts", "network": {"kind": "mlp", "hidden": [16]},
        "search": {"num_simulations": 2, "max_num_considered_actions": 2},
        "eval": {"opponents": ["random", name], "arena_games": 2, "oracle": False}})
    evaluator = Evaluator(env, config, agent.apply_fn, agent.search_fn)
    metrics = evaluator.evaluate(agent.params, jax.random.PRNGKey(0))
    for opponent in ("random", name):
        assert sum(metrics[f"eval/vs_{opponent}/{k}"] for k in ("wins", "draws", "losses")) == 2
    assert metrics[f"eval/vs_{name}/forfeits"] == 0 and calls(tmp_path)
    assert f"vs {name} W/D/L" in evaluator.summary_line(0, {**metrics, "wall_s": 1.0})
    for engine in evaluator.engines.values():
        engine.close()
    with pytest.raises(ConfigError, match="eval.opponents: engine cb:.*: no such file"):
        Evaluator(env, dataclasses.replace(config, eval=dataclasses.replace(
            config.eval, opponents=(f"cb:{tmp_path}/gone.so",))), agent.apply_fn,
            agent.search_fn)


def test_play_shows_the_agent_against_an_engine(built, tmp_path):
    library = install(built, tmp_path)
    result = RUNNER.invoke(app, ["play", "draughts", "--against", f"cb:{library}@0.1",
                                 "--simulations", "2", "--first", "ai", *GUMBEL_NO_TABLE])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith(f"plays Black (b) with 2 simulations; the engine 'azjax test "
                             f"engine' (cb:{library}@0.1) plays White (w), 0.1 s a move.")
    assert any(line.startswith("Engine plays ") for line in lines)
    assert any(line.startswith("AI plays ") for line in lines)
    assert lines[-1] in ("Result: draw.", "Result: the engine wins.", "Result: the AI wins.")
    # From a position (a FEN): the engine is to move (`--first human`) and must capture.
    result = RUNNER.invoke(app, ["play", "draughts", "--against", f"cb:{library}@0.1",
                                 "--simulations", "2", "--position", "W:W18:B14",
                                 "--pdn", str(tmp_path / "watched.pdn"), *GUMBEL_NO_TABLE])
    assert result.exit_code == 0, result.output
    assert "Engine plays 18x9" in result.output
    assert result.output.splitlines()[-2] == "Result: the engine wins."
    saved = (tmp_path / "watched.pdn").read_text()
    assert f'[White "\'azjax test engine\' (cb:{library}@0.1)"]' in saved
    assert '[Result "0-1"]' in saved and saved.endswith("\n\n1... 18x9 0-1\n\n")
    refused = RUNNER.invoke(app, ["play", "draughts", "--against", "random"])
    assert refused.exit_code == 2
    assert refused.output.splitlines()[-1] == ("error: --against takes an engine, "
                                               "cb:PATH[@SECONDS]; got 'random'")


# ---- an engine as a judge of moves (tools/draughts_engine_judge.py) ---------------------------

_JUDGE_SPEC = importlib.util.spec_from_file_location(
    "draughts_engine_judge", REPO_ROOT / "tools" / "draughts_engine_judge.py")
judge_tool = sys.modules.setdefault(  # registered: its dataclasses look their module up
    "draughts_engine_judge", importlib.util.module_from_spec(_JUDGE_SPEC))
_JUDGE_SPEC.loader.exec_module(judge_tool)


def _test_engine_value(env, state, pdn: str) -> int:
    """What the test engine writes as its value of its move `pdn`: the material after it
    (a man 100, a king 130; the moving piece keeps its kind), from the mover's side."""
    board = env.board(state) * (1 if int(state.current_player) == 0 else -1)
    worth = np.where(np.abs(board) == 2, 130, 100) * np.sign(board)
    taken = [s - 1 for s in captured_squares(pdn)]
    return int(worth.sum() - worth[taken].sum())


def _random_positions(env, count: int, seed: int) -> list:
    """Positions of random games, each with two legal whole moves or more, none mid-capture."""
    rng = np.random.default_rng(seed)
    step = jitted_step(env)
    out = []
    while len(out) < count:
        state = env.init(jax.random.PRNGKey(int(rng.integers(1 << 30))))
        for _ in range(int(rng.integers(0, 60))):
            if bool(state.terminated | state.truncated):
                break
            state = step(state, jnp.int32(rng.choice(np.flatnonzero(state.legal_action_mask))))
        if (not bool(state.terminated | state.truncated) and int(state.jumper) < 0
                and len(env.legal_moves(state)) >= 2):
            out.append(state)
    return out


def test_the_judge_values_a_move_by_the_engines_value_after_it(env, built, tmp_path):
    judge = judge_tool.Judge(env, f"cb:{install(built, tmp_path)}@0.01")
    rng = np.random.default_rng(0)
    judged = 0
    try:
        for state in _random_positions(env, 12, seed=1):
            legal = env.legal_moves(state)
            agent_pdn = list(legal)[int(rng.integers(len(legal)))]
            verdict = judge.judge(state, legal[agent_pdn])
            assert verdict.agent_move == agent_pdn and verdict.engine_move in legal
            engine_value = _test_engine_value(env, state, verdict.engine_move)
            assert verdict.engine_value == engine_value
            if agent_pdn == verdict.engine_move:
                assert verdict.loss == 0
                continue
            after = state
            for action in legal[agent_pdn]:
                after = jitted_step(env)(after, jnp.int32(action))
            if bool(after.terminated):
                assert verdict.agent_value == 5000 * int(after.rewards[state.current_player])
            else:
                _, reply = judge.ask(after)
                reply_value = _test_engine_value(env, after, env.format_move(reply))
                assert verdict.agent_value == -reply_value
                assert verdict.loss == engine_value + reply_value
                judged += 1
    finally:
        judge.close()
    assert judged >= 4  # the comparison above ran, not only the shortcut of equal moves


def test_the_judges_answers_are_kept_for_the_next_run_of_the_same_judge(env, built, tmp_path):
    name = f"cb:{install(built, tmp_path)}@0.01"
    answers = tmp_path / "answers.json"
    positions = _random_positions(env, 4, seed=2)
    moves = [next(iter(env.legal_moves(s).values())) for s in positions]
    first = judge_tool.Judge(env, name, str(answers))
    verdicts = [first.judge(s, m) for s, m in zip(positions, moves, strict=True)]
    first.close()
    again = judge_tool.Judge(env, name, str(answers))
    assert [again.judge(s, m) for s, m in zip(positions, moves, strict=True)] == verdicts
    again.close()
    assert first.calls >= 4 and again.calls == 0
    with pytest.raises(SystemExit, match="holds the answers of"):
        judge_tool.Judge(env, name + "1", str(answers))


def test_the_judge_leaves_out_a_position_answered_from_a_book(env, built, tmp_path):
    judge = judge_tool.Judge(env, f"cb:{install(built, tmp_path, 'silent')}@0.01")
    try:
        state = env.init(jax.random.PRNGKey(0))
        verdict = judge.judge(state, next(iter(env.legal_moves(state).values())))
    finally:
        judge.close()
    assert verdict.engine_value is None and verdict.loss is None
    assert judge_tool.read_value("best: 11-15 depth 13/25 nodes 9 value>-36 time 0.1s") == -36
    assert judge_tool.read_value("book move") is None


def test_the_judge_plays_the_agents_whole_multi_jump(env):
    class FirstLegal:  # stands in for an Agent: the lowest legal action at every hop
        def __init__(self, env):
            self.env = env

        def search_output(self, key, states, num_simulations):
            return dataclasses.make_dataclass("Out", ["action"])(
                jnp.argmax(states.legal_action_mask, axis=-1))

    fens = ["B:W14,22:B9", "W:W27:B23,15,14", "B:W21,22:B1,2", "W:W22,K31:B18,27,11"]
    states = [env.from_fen(f) for f in fens]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    moves = judge_tool.whole_moves(FirstLegal(env), batch, 1, jax.random.PRNGKey(0))
    for state, actions in zip(states, moves, strict=True):
        assert actions in env.legal_moves(state).values()
    assert [len(m) for m in moves] == [2, 2, 1, 2]  # 9x18x25, 27x18x9, 1-5, 22x15x8
