"""Ridge regression with an unpenalised intercept, entirely from additive sufficient statistics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# a target whose sum of squares about its mean is below this fraction of its raw sum of squares is constant
FLAT = 1e-12


@dataclass
class Stats:
    """Sums over rows of (x, y): ``xx = X'X``, ``xy = X'Y``, ``yy = sum y^2`` (per target), ``x``, ``y``, ``n``."""

    xx: np.ndarray
    xy: np.ndarray
    yy: np.ndarray
    x: np.ndarray
    y: np.ndarray
    n: int = 0

    @classmethod
    def zeros(cls, d: int, t: int) -> Stats:
        return cls(np.zeros((d, d)), np.zeros((d, t)), np.zeros(t), np.zeros(d), np.zeros(t), 0)

    @classmethod
    def of(cls, X: np.ndarray, Y: np.ndarray) -> Stats:
        X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
        return cls(X.T @ X, X.T @ Y, (Y * Y).sum(0), X.sum(0), Y.sum(0), len(X))

    def __add__(self, other: Stats) -> Stats:
        return Stats(self.xx + other.xx, self.xy + other.xy, self.yy + other.yy, self.x + other.x, self.y + other.y,
                     self.n + other.n)

    def __sub__(self, other: Stats) -> Stats:
        return Stats(self.xx - other.xx, self.xy - other.xy, self.yy - other.yy, self.x - other.x, self.y - other.y,
                     self.n - other.n)

    def add_(self, other: Stats) -> None:
        self.xx += other.xx
        self.xy += other.xy
        self.yy += other.yy
        self.x += other.x
        self.y += other.y
        self.n += other.n

    def centred(self):
        """``(Xc'Xc, Xc'Yc, mean x, mean y)`` with the training means."""
        mx, my = self.x / self.n, self.y / self.n
        return self.xx - self.n * np.outer(mx, mx), self.xy - self.n * np.outer(mx, my), mx, my


def fit(stats: Stats, alphas) -> tuple[np.ndarray, np.ndarray]:
    """Weights ``[n_alpha, d, t]`` and intercepts ``[n_alpha, t]`` minimising ``|Y - XW - b|^2 + alpha |W|^2``.

    One eigendecomposition of the centred Gram matrix serves every alpha.
    """
    if stats.n < 2:
        raise ValueError(f"ridge needs at least 2 rows, got {stats.n}")
    cxx, cxy, mx, my = stats.centred()
    evals, evecs = np.linalg.eigh((cxx + cxx.T) / 2)
    proj = evecs.T @ cxy  # [d, t]
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    W = np.stack([evecs @ (proj / (evals + a)[:, None]) for a in alphas])
    b = my[None, :] - np.einsum("d,adt->at", mx, W)
    return W, b


def sse(stats: Stats, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of squared errors of predictions ``XW + b`` on the rows summarised by ``stats`` (per target)."""
    quad = np.einsum("dt,de,et->t", W, stats.xx, W)
    cross = np.einsum("dt,dt->t", W, stats.xy) + b * stats.y
    return stats.yy - 2 * cross + quad + 2 * b * (stats.x @ W) + stats.n * b * b


def r2(stats: Stats, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Coefficient of determination on the rows of ``stats`` (as sklearn's r2_score: their own mean), per target; NaN
    for a target that does not vary over these rows (a segment index with no segment boundary): there is no variance
    to explain, and a ratio to zero would be noise (sklearn returns 0 or 1 there instead)."""
    sst = stats.yy - stats.y**2 / stats.n
    varies = sst > FLAT * stats.yy
    ratio = np.divide(sse(stats, W, b), sst, out=np.full(sst.shape, np.nan), where=varies)
    return np.where(varies, 1.0 - ratio, np.nan)


def select_alpha(folds: list[Stats], alphas) -> np.ndarray:
    """Index of the alpha with the lowest cross-validated SSE, per target; ``folds`` partition the training rows."""
    total = sum(folds[1:], folds[0])
    errors = 0.0
    for fold in folds:
        W, b = fit(total - fold, alphas)
        errors = errors + np.stack([sse(fold, W[i], b[i]) for i in range(len(W))])  # [n_alpha, t]
    return np.argmin(errors, axis=0)
