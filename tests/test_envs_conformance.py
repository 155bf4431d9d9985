"""`check_env` over every registered game, and proof that it can fail on a broken env."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import envs
from azjax.envs.connect_four import ConnectFour
from azjax.envs.core import random_positions
from azjax.envs.draughts import Draughts
from azjax.envs.tic_tac_toe import TicTacToe


@pytest.mark.parametrize("game_id", envs.available())
def test_every_registered_game_passes_check_env(game_id):
    envs.check_env(envs.make(game_id))


class _NotZeroSum(TicTacToe):
    """Pays the winner AND the loser."""

    def _apply_legal_action(self, state, action):
        state = super()._apply_legal_action(state, action)
        return state.replace(rewards=jnp.abs(state.rewards))


class _WrongObservationDtype(ConnectFour):
    def observe(self, state):
        return super().observe(state).astype(jnp.int32)


class _RewardsEveryStep(TicTacToe):
    def _apply_legal_action(self, state, action):
        state = super()._apply_legal_action(state, action)
        return state.replace(rewards=state.rewards + jnp.array([0.5, -0.5], jnp.float32))


class _ForgivesIllegalMoves(ConnectFour):
    def step(self, state, action):
        # Plays a full column's move in the first open column instead of forfeiting.
        in_range = (action >= 0) & (action < self.num_actions)
        legal_action = jnp.where(~in_range | state.legal_action_mask[action], action,
                                 jnp.argmax(state.legal_action_mask))
        return super().step(state, legal_action)


class _WrongMaskDtype(TicTacToe):
    def _init(self):
        state = super()._init()
        return state.replace(legal_action_mask=state.legal_action_mask.astype(jnp.int32))


class _BoardCodesSwapTheMarks(TicTacToe):
    """Its board codes draw X where the view has O, and O where it has X."""

    def board_codes(self, state):
        codes = super().board_codes(state)
        return jnp.where(codes >= 9, 19 - codes, codes)


class _SymmetryBlursThePolicy(ConnectFour):
    """Its mirror copy averages neighbouring columns' policy: not a permutation."""

    def symmetries(self, obs, policy):
        sym_obs, sym_pol = super().symmetries(obs, policy)
        return sym_obs, sym_pol.at[1].set((sym_pol[1] + jnp.roll(sym_pol[1], 1)) / 2)


class _NotationOffByOne(TicTacToe):
    """Reads back a cell one too far: `str_to_action(action_to_str(a)) != a`."""

    def str_to_action(self, text):
        return (super().str_to_action(text) + 1) % 9


class _BoardViewMissesACell(ConnectFour):
    def board_view(self, state):
        view = super().board_view(state)
        return dataclasses.replace(view, cells=view.cells[:-1])


class _ClicksOffTheBoard(TicTacToe):
    def action_clicks(self, action):
        return ((int(action) + 9,),)


class _WholeMovesDoNotParseBack(ConnectFour):
    """Lists its moves as `c1`.. but parses only plain column numbers."""

    def legal_moves(self, state):
        return {f"c{text}": actions for text, actions in super().legal_moves(state).items()}


class _RenderGivesAList(TicTacToe):
    def render(self, state):
        return super().render(state).splitlines()


class _EmptyHistory(Draughts):
    """OpenSpiel's draw rule with a position history of length 0: an array orbax cannot save."""

    def __init__(self):
        super().__init__(draw_rule="openspiel")
        self.history_length = 0


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [
        (_NotZeroSum, "zero-sum"),
        (_WrongObservationDtype, "observe gives int32"),
        (_RewardsEveryStep, "zero except on the final step"),
        (_ForgivesIllegalMoves, "illegal action"),
        (_WrongMaskDtype, "legal_action_mask is int32"),
        (_SymmetryBlursThePolicy, "permute the policy"),
        (_NotationOffByOne, "notation round trip fails for action 0"),
        (_BoardViewMissesACell, "rows \\* cols cells"),
        (_ClicksOffTheBoard, "action_clicks\\(0\\) must name cells"),
        (_WholeMovesDoNotParseBack, "does not parse and format back"),
        (_RenderGivesAList, "render must return a str"),
        (_BoardCodesSwapTheMarks, "board_codes draws cell"),
        (_EmptyHistory, "the state's history has no element"),
    ],
)
def test_check_env_catches_a_broken_env(broken, complaint):
    with pytest.raises(AssertionError, match=complaint):
        envs.check_env(broken(), num_games=4)


@pytest.mark.parametrize("game_id, supported", [
    ("tic_tac_toe", set()),
    ("connect_four", set()),
    ("draughts", {"random_start", "material"}),
    ("draughts_tactics", {"random_start", "material"}),
])
def test_supports_names_the_optional_methods_a_game_implements(game_id, supported):
    from azjax.envs.forced import ForcedMovesPlayed

    env = envs.make(game_id)
    for wrapped in (env, ForcedMovesPlayed(env)):  # the wrapper forwards both
        assert {m for m in ("random_start", "material") if wrapped.supports(m)} == supported


def test_random_positions_at_several_counts_are_the_same_games_at_each():
    """Several ply counts give the same games' positions after each, one batch after another:
    3 and 7 pieces on a connect-four board (no game ends before its 7th ply), and the last
    batch is what the largest count alone gives (the same keys)."""
    env = envs.make("connect_four")
    key = jax.random.PRNGKey(9)
    several = random_positions(env, key, 6, (3, 7))
    chex.assert_trees_all_equal(jax.tree.map(lambda x: x[6:], several),
                                random_positions(env, key, 6, 7))
    pieces = np.asarray(jax.vmap(env.observe)(several))[..., :2].sum(axis=(1, 2, 3))
    np.testing.assert_array_equal(pieces, [3] * 6 + [7] * 6)
