"""Ridge probes for token-level, segment-level and intra-segment position, by layer and subspace (seed 002).

Documents are English Wikipedia lead sections concatenated up to the model's input length
(``corpora.contexts.wikipedia_windows``). For each of ``n_seeds`` seeds the documents are split into train and test
documents, and the training documents into ``cv_folds`` folds; every document's hidden states are read once and its
sufficient statistics are added to the (seed, fold or test) accumulators it belongs to. Per layer, subspace and
target, the alpha with the lowest cross-validated error on the training documents is refitted on all of them and
scored (R^2) on the test documents. A control refits on targets shuffled within each document: with no positional
signal its R^2 must sit near 0.

The user's own ``documents=`` (strings or ``corpora.documents.Document``; ``--input PATH``) replace the built-in
ones (``corpora.contexts.analysis_windows(..., whole=True)``); segments come from their text by the same rule
(``probes.targets``). A user document longer than ``max_tokens`` is refused, not split: the targets (normalised
token index, segment index) are defined over a whole document, and a window would silently redefine them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from corpora.documents import Window
from interp import extract
from interp.capabilities import Capability, require
from interp.runtime import parallel
from probes.ridge import Stats, fit, r2, select_alpha
from probes.targets import TARGETS, position_targets

DEFAULT_ALPHAS = tuple(float(a) for a in np.logspace(-3, 5, 9))


def fit_position_probes(model, docs: list[Window], *, n_seeds: int = 5, n_train: int | None = None,
                        n_test: int | None = None,
                        alphas=DEFAULT_ALPHAS, cv_folds: int = 5, layers=None, subspaces=None,
                        seed: int = 0) -> pd.DataFrame:
    require(model, Capability.HIDDEN_STATES, "position-probes")
    n_test = n_test if n_test is not None else max(1, len(docs) // 5)
    n_train = n_train if n_train is not None else len(docs) - n_test
    if n_train + n_test > len(docs) or n_train < cv_folds:
        raise ValueError(f"need n_train + n_test <= {len(docs)} documents and n_train >= cv_folds={cv_folds}; "
                         f"got n_train={n_train}, n_test={n_test}")
    layers = list(range(model.n_layers)) if layers is None else list(layers)
    spaces = model.residual_subspaces()
    subspaces = list(spaces) if subspaces is None else list(subspaces)
    for s in subspaces:
        if s not in spaces:
            raise ValueError(f"{model.model_name} has no subspace '{s}' (it has {list(spaces)})")
    groups = _groups(len(docs), n_seeds, n_train, n_test, cv_folds, seed)
    acc = _accumulate(model, docs, groups, layers, subspaces, spaces, cv_folds, seed)
    return pd.DataFrame(_fits(model, acc, alphas, cv_folds, n_train, n_test, n_seeds))


def _groups(n_docs: int, n_seeds: int, n_train: int, n_test: int, cv_folds: int, seed: int) -> np.ndarray:
    """``[seed, document]``: the group of each document per seed, 0..cv_folds-1 a training fold, cv_folds the test
    documents, -1 unused."""
    groups = np.full((n_seeds, n_docs), -1)
    for s in range(n_seeds):
        order = np.random.default_rng([seed, s]).permutation(n_docs)
        groups[s, order[:n_train]] = np.arange(n_train) % cv_folds
        groups[s, order[n_train : n_train + n_test]] = cv_folds
    return groups


def _accumulate(model, docs: list[Window], groups, layers: list, subspaces: list, spaces: dict, cv_folds: int,
                seed: int) -> dict:
    """Per (layer, subspace), per seed, the ``Stats`` of each training fold and of the test documents, over the
    targets and their within-document shuffles; every document's hidden states read once."""
    n_seeds = len(groups)
    n_targets = 2 * len(TARGETS)  # the targets, then their within-document shuffles
    dims = {name: spaces[name].stop - spaces[name].start for name in subspaces}
    names = [f"blocks.{l}.hook_resid_post" for l in layers]
    shuffle_rng = np.random.default_rng([seed, 99])
    targets = []
    for doc in docs:
        rows, Y = position_targets(doc.text, doc.spans)
        targets.append((rows, np.concatenate([Y, np.stack([shuffle_rng.permutation(Y[:, j]) for j in range(Y.shape[1])],
                                                          1)], 1)))

    def doc_stats(indices):
        """Per document, the ``Stats`` of each (layer, subspace)."""
        out = []
        for j, acts in extract.stream(model, [docs[i].ids for i in indices], names, batch_size=1):
            rows, Y = targets[indices[j]]
            per = {}
            for layer, hook in zip(layers, names):
                X = acts[hook][rows].double().numpy()
                if not np.isfinite(X).all():
                    raise ValueError(f"position-probes: {hook} of {model.model_name} holds NaN/inf on "
                                     f"document {indices[j]} ({int((~np.isfinite(X)).sum())} values); a probe fitted "
                                     "on it would be meaningless (check the weights and any attached hooks)")
                for name in subspaces:
                    per[layer, name] = Stats.of(X[:, spaces[name]], Y)
            out.append(per)
        return out

    def add(state, i, per):
        for (layer, name), st in per.items():
            for s in range(n_seeds):
                if groups[s, i] >= 0:
                    _add_stats(state, f"{layer}/{name}/{s}/{groups[s, i]}", st)

    state = {}
    for layer in layers:
        for name in subspaces:
            for s in range(n_seeds):
                for g in range(cv_folds + 1):
                    state.update(_stats_state(f"{layer}/{name}/{s}/{g}", Stats.zeros(dims[name], n_targets)))
    state = parallel.fold_items(doc_stats, range(len(docs)), state, add, model=model, batch_size=1,
                                desc=f"probes {model.model_name}")
    return {(layer, name): [[_state_stats(state, f"{layer}/{name}/{s}/{g}") for g in range(cv_folds + 1)]
                            for s in range(n_seeds)]
            for layer in layers for name in subspaces}


def _fits(model, acc: dict, alphas, cv_folds: int, n_train: int, n_test: int, n_seeds: int) -> list[dict]:
    """Per (layer, subspace) and target, the test R^2 over seeds of the probe refitted at the alpha the folds chose,
    and that alpha's geometric median."""
    from interp.runtime.progress import progress

    n_targets = 2 * len(TARGETS)
    rows_out = []
    alphas = np.asarray(alphas, dtype=np.float64)
    for (layer, name), per_seed in progress(list(acc.items()), f"probe fits {model.model_name}"):
        scores, chosen = [], []
        for folds in per_seed:
            best = select_alpha(folds[:cv_folds], alphas)
            W, b = fit(sum(folds[1:cv_folds], folds[0]), alphas)
            scores.append([r2(folds[cv_folds], W[best[t]], b[best[t]])[t] for t in range(n_targets)])
            chosen.append(alphas[best])
        scores, chosen = np.array(scores), np.array(chosen)
        for t in range(n_targets):
            rows_out.append(dict(model=model.model_name, layer=layer, subspace=name, target=TARGETS[t % len(TARGETS)],
                                 control="shuffled" if t >= len(TARGETS) else "none",
                                 r2_mean=float(scores[:, t].mean()), r2_std=float(scores[:, t].std()),
                                 alpha=float(np.exp(np.median(np.log(chosen[:, t])))),
                                 n_train=n_train, n_test=n_test, n_seeds=n_seeds))
    return rows_out


STATS_FIELDS = ("xx", "xy", "yy", "x", "y")


def _stats_state(prefix: str, st: Stats) -> dict:
    return {**{f"{prefix}/{f}": getattr(st, f) for f in STATS_FIELDS}, f"{prefix}/n": np.array([st.n], dtype=np.int64)}


def _add_stats(state: dict, prefix: str, st: Stats) -> None:
    for f in STATS_FIELDS:
        state[f"{prefix}/{f}"] += getattr(st, f)
    state[f"{prefix}/n"] += st.n


def _state_stats(state: dict, prefix: str) -> Stats:
    return Stats(*(state[f"{prefix}/{f}"] for f in STATS_FIELDS), int(state[f"{prefix}/n"][0]))
