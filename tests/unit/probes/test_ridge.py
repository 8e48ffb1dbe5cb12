import warnings

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score

from probes.ridge import Stats, fit, r2, select_alpha, sse
from probes.targets import position_targets, segment_ids


def _data(seed=0, n=600, d=12, t=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 5, d) + rng.normal(size=d) * 4
    Y = X @ rng.normal(size=(d, t)) + rng.normal(size=(n, t)) * 2 + 7
    return X, Y


@pytest.mark.parametrize("alpha", [1e-3, 1.0, 1e3])
def test_streamed_fit_equals_sklearn_ridge(alpha):
    X, Y = _data()
    stats = sum((Stats.of(X[i : i + 50], Y[i : i + 50]) for i in range(50, 500, 50)), Stats.of(X[:50], Y[:50]))
    W, b = fit(stats, [alpha])
    ref = Ridge(alpha=alpha).fit(X[:500], Y[:500])
    np.testing.assert_allclose(W[0], ref.coef_.T, atol=1e-6)
    np.testing.assert_allclose(b[0], ref.intercept_, atol=1e-6)
    test = Stats.of(X[500:], Y[500:])
    pred = ref.predict(X[500:])
    np.testing.assert_allclose(r2(test, W[0], b[0]), [r2_score(Y[500:, t], pred[:, t]) for t in range(3)], atol=1e-6)
    np.testing.assert_allclose(sse(test, W[0], b[0]), ((Y[500:] - pred) ** 2).sum(0), rtol=1e-6)


def test_alpha_selection_equals_explicit_fold_loop():
    X, Y = _data(1, d=40, n=300)
    alphas = np.logspace(-2, 4, 7)
    folds = [Stats.of(X[i::5], Y[i::5]) for i in range(5)]
    best = select_alpha(folds, alphas)
    errors = np.zeros((len(alphas), 3))
    for k in range(5):
        train = np.array([i for i in range(300) if i % 5 != k])
        for a, alpha in enumerate(alphas):
            pred = Ridge(alpha=alpha).fit(X[train], Y[train]).predict(X[k::5])
            errors[a] += ((Y[k::5] - pred) ** 2).sum(0)
    np.testing.assert_array_equal(best, errors.argmin(0))


def test_targets_on_a_hand_checked_text():
    text = "Ab cd. Ef!\nGh"
    assert list(segment_ids(text)) == [0] * 7 + [1] * 4 + [2] * 2
    spans = [(0, 0), (0, 2), (3, 6), (7, 9), (9, 10), (11, 13), (13, 13)]  # special tokens have empty spans
    rows, Y = position_targets(text, spans)
    assert list(rows) == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(Y[:, 0], [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(Y[:, 1], [0, 0, 1, 1, 2])
    np.testing.assert_allclose(Y[:, 2], [0, 1, 0, 1, 0])


def test_r2_of_a_target_that_does_not_vary_is_nan_without_a_warning():
    """A segment index with no segment boundary is 0 on every row (and a constant 7 has rounding in its sum of squares
    about the mean): there is no variance to explain, so R^2 is NaN, quietly; the varying target beside them is scored
    as sklearn scores it."""
    X, Y = _data(2, t=1)
    Y = np.concatenate([Y, np.zeros((len(Y), 1)), np.full((len(Y), 1), 7.0)], axis=1)
    W, b = fit(Stats.of(X[:500], Y[:500]), [1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = r2(Stats.of(X[500:], Y[500:]), W[0], b[0])
    assert np.isnan(scores[1:]).all()
    assert scores[0] == pytest.approx(r2_score(Y[500:, 0], X[500:] @ W[0][:, 0] + b[0][0]), abs=1e-9)
