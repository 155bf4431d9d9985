"""Elo ratings from pairwise results: maximum likelihood on the Bradley-Terry model.

    ratings = fit_elo(["random", "a", "b"], {("a", "random"): (8, 1, 1), ("a", "b"): (3, 4, 3)})

`fit_elo` rates every player relative to an anchor (random = 0 in the ladder and the anchor
tables), may hold more players at given ratings (an anchor table), and gives each rating a 95%
interval from the observed Fisher information.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["fit_elo"]

_C = math.log(10.0) / 400.0  # Elo scale: P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))
_Z95 = 1.959963984540054


def fit_elo(
    names: Iterable[str],
    results: Mapping[tuple[str, str], Any] | Iterable[tuple[str, str, Any]],
    *,
    anchor: str = "random",
    anchor_rating: float = 0.0,
    fixed: Mapping[str, float] | None = None,
    prior_draws: float = 1.0,
    max_iterations: int = 100,
) -> dict[str, tuple[float, float, float]]:
    """Maximum-likelihood Elo (Bradley-Terry on the 400 log10 scale) from pairwise results.

    Args:
      names: the players (each rated, even one without games).
      results: ``{(a, b): r}`` or an iterable of ``(a, b, r)``, where r is an `ArenaResult` or
        ``(wins, draws, losses)`` from a's point of view; a draw counts half a win and half a
        loss; the same pair may appear several times, in either order (counts add up).
      anchor: the player fixed at `anchor_rating`; the others are rated relative to it.
      fixed: more players held at given ratings (on the anchor's scale, e.g. a game's anchor
        table, `load_anchors`): only the others are fitted, and their intervals are relative
        to these fixed ratings, which games between two fixed players do not move.
      prior_draws: a weak prior that keeps every rating finite: each player other than the
        anchor gets this many virtual draws against the anchor. Without it, a player that wins
        (or loses) every game, or one not connected to the anchor by games, has no finite MLE.
        It pulls ratings towards the anchor's by about as much as one more drawn game would.
        0 disables it (then such data raise ValueError).

    Returns:
      ``{name: (rating, low95, high95)}``. The interval is rating +- 1.96 standard errors from
      the inverse of the observed Fisher information (the log-likelihood's negative Hessian,
      prior included) with the anchor held fixed: each interval is the uncertainty relative to
      the anchor, whose own interval is the point. Newton's method with step halving; the
      log-likelihood is concave, so it converges to the unique maximum.
    """
    names = list(names)
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        raise ValueError(f"player names must be unique, got {names}")
    if anchor not in index:
        raise ValueError(f"the anchor {anchor!r} is not among the players {names}")
    if prior_draws < 0:
        raise ValueError(f"prior_draws must be >= 0, got {prior_draws}")
    fixed = dict(fixed or {})
    for name in fixed:
        if name not in index:
            raise ValueError(f"the fixed player {name!r} is not among the players {names}")
    score, games = _tally(index, results)
    k = index[anchor]
    held = {k: 0.0} | {index[name]: rating - anchor_rating for name, rating in fixed.items()
                       if name != anchor}
    free = np.array([i for i in range(len(names)) if i not in held], dtype=int)
    score[free, k] += prior_draws / 2
    score[k, free] += prior_draws / 2
    games[free, k] += prior_draws
    games[k, free] += prior_draws
    theta = np.zeros(len(names))
    theta[list(held)] = list(held.values())
    half = np.zeros(len(names))
    if len(free):
        theta = _newton(score, games, free, max_iterations, anchor, theta)
        half[free] = _half_widths(score, games, free, theta, anchor)
    theta = theta + anchor_rating
    return {name: (float(theta[i]), float(theta[i] - half[i]), float(theta[i] + half[i]))
            for name, i in index.items()}


def _counts(result: Any) -> tuple[float, float, float]:
    if hasattr(result, "wins"):
        return float(result.wins), float(result.draws), float(result.losses)
    wins, draws, losses = result
    return float(wins), float(draws), float(losses)


def _tally(index: dict[str, int], results: Any) -> tuple[np.ndarray, np.ndarray]:
    """(score [n, n]: points of i against j (win 1, draw 1/2), games [n, n]) from `fit_elo`'s
    results, players numbered by `index`."""
    n = len(index)
    score = np.zeros((n, n))
    games = np.zeros((n, n))
    items = results.items() if isinstance(results, Mapping) else (
        ((a, b), r) for a, b, r in results)
    for (a, b), result in items:
        for name in (a, b):
            if name not in index:
                raise ValueError(f"result for unknown player {name!r} (players: {list(index)})")
        if a == b:
            raise ValueError(f"a player cannot play itself: {a!r}")
        wins, draws, losses = _counts(result)
        if min(wins, draws, losses) < 0:
            raise ValueError(f"negative counts for {a!r} vs {b!r}: {result}")
        i, j = index[a], index[b]
        score[i, j] += wins + draws / 2
        score[j, i] += losses + draws / 2
        games[i, j] += wins + draws + losses
        games[j, i] += wins + draws + losses
    return score, games


def _loglik(score: np.ndarray, theta: np.ndarray) -> float:
    """The Bradley-Terry log-likelihood of ratings theta [n]: sum s_ij log p_ij."""
    d = _C * (theta[:, None] - theta[None, :])
    return float(np.sum(score * -np.logaddexp(0.0, -d)))


def _grad_and_fisher(score: np.ndarray, games: np.ndarray, free: np.ndarray,
                     theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood's gradient [F] and observed information [F, F] over the F players
    other than the anchor (`free`)."""
    p = 1.0 / (1.0 + np.exp(-_C * (theta[:, None] - theta[None, :])))
    grad = _C * np.sum(score - games * p, axis=1)
    w = _C * _C * games * p * (1.0 - p)
    fisher = np.diag(w.sum(axis=1)) - w
    return grad[free], fisher[np.ix_(free, free)]


def _newton(score: np.ndarray, games: np.ndarray, free: np.ndarray, max_iterations: int,
            anchor: str, start: np.ndarray) -> np.ndarray:
    """The maximum-likelihood ratings [n] of the `free` players, the others held at `start`
    (the anchor at 0): Newton's method with step halving."""
    theta = start.copy()
    for _ in range(max_iterations):
        grad, fisher = _grad_and_fisher(score, games, free, theta)
        try:
            step = np.linalg.solve(fisher, grad)
        except np.linalg.LinAlgError:
            raise ValueError("no finite Elo fit: some player won or lost all its games, or "
                             f"no games link it to the anchor {anchor!r}; use prior_draws > 0"
                             ) from None
        current, scale = _loglik(score, theta), 1.0
        while scale > 1e-6:  # Newton step, halved until the likelihood does not drop
            trial = theta.copy()
            trial[free] += scale * step
            if _loglik(score, trial) >= current - 1e-12:
                break
            scale /= 2
        theta = trial
        if np.max(np.abs(theta[free])) > 1e5:
            raise ValueError("no finite Elo fit: a player won or lost all its games; "
                             "use prior_draws > 0")
        if np.max(np.abs(scale * step)) < 1e-7:
            break
    return theta


def _half_widths(score: np.ndarray, games: np.ndarray, free: np.ndarray, theta: np.ndarray,
                 anchor: str) -> np.ndarray:
    """The 95% half-widths [F] of the free players' ratings: 1.96 standard errors from the
    inverse observed information at `theta`."""
    _, fisher = _grad_and_fisher(score, games, free, theta)
    try:
        cov = np.linalg.inv(fisher)
    except np.linalg.LinAlgError:
        raise ValueError("singular information matrix: a player is not connected to the "
                         f"anchor {anchor!r}; use prior_draws > 0") from None
    return _Z95 * np.sqrt(np.maximum(np.diag(cov), 0.0))
