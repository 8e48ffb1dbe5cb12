"""Statistics the analyses report, written here and checked against scikit-learn / SciPy in the tests.

``roc_auc`` is the Mann-Whitney form with mid-ranks for ties. ``bootstrap_auc`` resamples whole
clusters (documents, by default) and evaluates every resample without re-sorting: the scores are
sorted once and each resample only re-weights them, so 1,000 resamples of 40,000 gaps take seconds.
"""

from __future__ import annotations

import numpy as np


def _tie_groups(sorted_scores: np.ndarray) -> np.ndarray:
    """Group id of each sorted score; equal scores share a group."""
    return np.concatenate(([0], np.cumsum(sorted_scores[1:] != sorted_scores[:-1])))


def _weighted_auc(labels_sorted: np.ndarray, groups: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """AUC for each row of ``weights [B, n]`` (scores already sorted; ties share ``groups``)."""
    pos_w = weights * labels_sorted
    neg_w = weights * (1 - labels_sorted)
    n_groups = int(groups[-1]) + 1
    neg_per_group = np.zeros((weights.shape[0], n_groups))
    np.add.at(neg_per_group.T, groups, neg_w.T)
    neg_below = np.cumsum(neg_per_group, axis=1) - neg_per_group  # negatives strictly below each group
    credit = neg_below[:, groups] + 0.5 * neg_per_group[:, groups]
    total_pos, total_neg = pos_w.sum(1), neg_w.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos_w * credit).sum(1) / (total_pos * total_neg)


def roc_auc(labels, scores, what: str = "ROC-AUC") -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counted half.

    ``what`` names the AUC in error messages (which scores, against which labels)."""
    labels = np.asarray(labels, dtype=float)
    scores = np.asarray(scores, dtype=float)
    if labels.shape != scores.shape or labels.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D and equal length, got {labels.shape} and {scores.shape}")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    if not np.isfinite(scores).all():
        raise ValueError(f"scores must be finite ({int((~np.isfinite(scores)).sum())} are NaN or infinite)")
    if len(labels) == 0:
        raise ValueError(f"{what}: no labelled items")
    if labels.min() == labels.max():
        raise ValueError(f"{what} needs both positive and negative labels, but all {len(labels)} are "
                         f"{'positive' if labels[0] == 1 else 'negative'}")
    order = np.argsort(scores, kind="mergesort")
    return float(_weighted_auc(labels[order], _tie_groups(scores[order]), np.ones((1, len(scores))))[0])


def bootstrap_auc(labels, scores, clusters=None, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                  chunk: int = 50, what: str = "ROC-AUC"):
    """Percentile bootstrap interval of the AUC, resampling ``clusters`` (or single items) with replacement.

    (NaN, NaN) when there are fewer than two clusters or no resample holds both classes.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    roc_auc(labels, scores, what)  # the same input checks
    labels = np.asarray(labels, dtype=float)
    scores = np.asarray(scores, dtype=float)
    clusters = np.arange(len(labels)) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    n_clusters = int(clusters.max()) + 1
    if n_clusters < 2:
        return float("nan"), float("nan")
    order = np.argsort(scores, kind="mergesort")
    labels_s, groups, clusters_s = labels[order], _tie_groups(scores[order]), clusters[order]
    rng = np.random.default_rng(seed)
    values = []
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        counts = np.stack([np.bincount(rng.integers(0, n_clusters, n_clusters), minlength=n_clusters)
                           for _ in range(b)])
        values.append(_weighted_auc(labels_s, groups, counts[:, clusters_s].astype(float)))
    values = np.concatenate(values)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return float("nan"), float("nan")
    alpha = (1 - level) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))
