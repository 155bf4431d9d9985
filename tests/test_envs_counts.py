"""Position counts from a batched breadth-first search over OUR envs (jitted vmapped step,
deduplicated by board): tic-tac-toe's 5,478 reachable positions (958 terminal) and connect
four's distinct positions per ply (OEIS A212693)."""

from __future__ import annotations

import json

import numpy as np
from conftest import ORACLES
from env_batch import bfs_layers

from azjax import envs

# OEIS A212693: number of distinct connect-four positions after n plies, n = 0..8.
A212693 = [1, 7, 49, 238, 1120, 4263, 16422, 54859, 184275]


def test_tic_tac_toe_has_5478_positions_958_terminal():
    layers = list(bfs_layers(envs.make("tic_tac_toe"), 9, chunk=2048))
    assert sum(layer.terminated.shape[0] for layer in layers) == 5478
    assert sum(int(layer.terminated.sum()) for layer in layers) == 958
    # The 4,520 live positions are exactly the oracle's positions (boards as X/O/. strings).
    live = set()
    for ply, layer in enumerate(layers):
        boards = layer.board[~layer.terminated]
        assert (boards != -1).sum(axis=1).tolist() == [ply] * boards.shape[0]
        live.update("".join(".XO"[v + 1] for v in row) for row in boards.tolist())
    with open(ORACLES / "tictactoe" / "positions.jsonl") as f:
        oracle_boards = {json.loads(line)["board"] for line in f}
    assert live == oracle_boards


def test_connect_four_positions_per_ply_match_oeis_a212693():
    counts = []
    for ply, layer in enumerate(bfs_layers(envs.make("connect_four"), 8, chunk=8192)):
        counts.append(layer.board.shape[0])
        assert np.all((layer.board != -1).sum(axis=(1, 2)) == ply)
        assert np.all(layer.current_player[~layer.terminated] == ply % 2)
    assert counts == A212693
