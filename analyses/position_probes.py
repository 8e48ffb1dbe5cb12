"""``position-probes``: ridge probes for token, segment and intra-segment position (the protocol is in
``probes.position``: the seed's 500 documents of <= 512 tokens, 400 train / 100 test, 5 seeds).

Documents without a segment boundary (no ``. ! ?`` before a space or the end, no newline; ``probes.targets``) cannot
give two of the targets: the segment index is 0 for every token, and progress inside the one segment is the token
index itself. Before any hidden state is read, the analysis says so (a warning on the ``poslens`` logger), probes the
targets the documents give (``targets``, whose default follows the documents and which provenance records), and writes
the others' rows with NaN R^2 and the reason in ``r2_missing``. A target the user names that the documents cannot
give is refused before work.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import may_be_nan
from analyses.registry import Adapts, Choices, Fits, Help, NotWith, OptionError, Range, analysis
from analyses.runs import DSTG, ENCODERS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

TARGETS = ("token", "segment", "intra")  # probes.targets.TARGETS, without importing numpy here
NO_BOUNDARY = {
    "segment": "no document has a segment boundary (. ! or ? before a space or the end, or a newline): the segment "
               "index is 0 for every token",
    "intra": "no document has a segment boundary: progress inside the one segment is the token index (target 'token')",
}
FLAT_TEST = ("the test documents of a seed do not vary in this target (each holds one segment), so R^2 is undefined "
             "there; give more documents with segment boundaries")
log = logging.getLogger("poslens")


def headline(df) -> str:
    d = df[df["control"] == "none"]
    parts = []
    for (model, space), g in d.groupby(["model", "subspace"], sort=False):
        r2 = {t: gg.set_index("layer")["r2_mean"] for t, gg in g.groupby("target", sort=False)}
        said = []
        if "token" in r2:
            said.append(f"token R2 {r2['token'].iloc[0]:.2f} (first layer) -> {r2['token'].iloc[-1]:.2f} (last)")
        if "segment" in r2:
            best = r2["segment"].max()
            said.append(f"segment {best:.2f} at best" if best == best else "segment not given by the documents")
        if "intra" in r2 and r2["intra"].isna().all():
            said.append("intra not given by the documents")
        parts.append(f"{model} [{space}]: " + ", ".join(said))
    ctrl = df[df["control"] == "shuffled"]["r2_mean"].dropna()
    controls = f"; shuffled controls between {ctrl.min():.2f} and {ctrl.max():.2f}" if len(ctrl) else ""
    return "; ".join(parts) + controls + "."


def summary(df):
    """R^2 by layer, one row per model, subspace, target and control in the table's order (rows without R^2 kept)."""
    keys = ["model", "subspace", "target", "control"]
    wide = df.set_index(keys + ["layer"])["r2_mean"].unstack("layer")
    return wide.reindex(list(dict.fromkeys(map(tuple, df[keys].to_numpy())))).reset_index()


def _split(options) -> tuple[int, int]:
    """Default (train, test) documents: 400 / 100, or 80% / 20% of the documents there are when fewer (the
    user's ``documents``, else ``n_docs``)."""
    docs = options.get("documents")
    total = len(docs) if docs is not None else options.get("n_docs", 500)
    train = options.get("n_train") or min(400, max(1, total * 4 // 5))
    return train, max(1, min(100, total - train))


def not_given(docs) -> dict[str, str]:
    """``{target: why}`` for the targets these documents (``Window``s with text and spans) cannot give: segment and
    intra when no document has a segment boundary, nothing otherwise. A document with fewer than two content tokens
    is refused by name (no position varies inside it)."""
    from interp.base import InputError
    from probes.targets import position_targets

    boundaries = False
    for doc in docs:
        try:
            _, Y = position_targets(doc.text, doc.spans)
        except ValueError:
            raise InputError(f"position-probes: document {doc.document!r} has fewer than two content tokens, so no "
                             "position varies inside it; leave it out") from None
        boundaries = boundaries or bool(Y[:, 1].max() > 0)
    return {} if boundaries else dict(NO_BOUNDARY)


def _default_targets(model, options) -> tuple[str, ...]:
    """Every target the user's documents give (all three for the built-in articles, which have sentences)."""
    if options.get("documents") is None:
        return TARGETS
    from corpora.contexts import analysis_windows

    docs = analysis_windows(model, "position-probes", options["documents"], length=options["length"], whole=True)
    missing = not_given(docs)
    return tuple(t for t in TARGETS if t not in missing)


@analysis("position-probes", needs=[Capability.HIDDEN_STATES], headline=headline, summary=summary,
          small=Run(("dstg-small",), dict(n_docs=10, n_train=6, n_test=4, n_seeds=1, cv_folds=2, length=48)),
          main=Run(ENCODERS + ("minilm", "repo-small", "increments-per-layer"),
                   dict(n_docs=100, n_train=80, n_test=20, n_seeds=5),
                   quick=dict(n_docs=12, n_train=8, n_test=4, n_seeds=2, cv_folds=2), section=DSTG),
          memory=Run(("dstg-small",), dict(length=64, n_seeds=1, cv_folds=2)))
@may_be_nan(r2_mean="the documents cannot give this target, or its test documents do not vary in it: r2_missing "
                    "says why",
            r2_std="the documents cannot give this target, or its test documents do not vary in it: r2_missing "
                   "says why")
def position_probes(model, *,
                    n_docs: Annotated[int, Help("documents"), Range(2), NotWith()] = 500,
                    n_train: Annotated[int, Help("training documents per seed (default: 400, or 80% of fewer "
                                                 "documents)"),
                                       Range(1), Adapts(lambda m, o: _split(o)[0])] = 400,
                    n_test: Annotated[int, Help("test documents per seed (default: 100, or the rest of fewer "
                                                "documents)"),
                                      Range(1), Adapts(lambda m, o: _split(o)[1])] = 100,
                    n_seeds: Annotated[int, Help("train/test splits"), Range(1)] = 5,
                    length: Annotated[int, Help("tokens per document (at most the model's context)"), Range(2),
                                      Fits()] = 512,
                    targets: Annotated[tuple[str, ...], Help("positions to probe (default: every one the documents "
                                                             "give: segment and intra need segment boundaries)"),
                                       Choices(TARGETS), Adapts(_default_targets)] = TARGETS,
                    cv_folds: Annotated[int, Help("folds of training documents for choosing alpha"), Range(2)] = 5,
                    seed: int = 0, alphas=None, documents=None) -> pd.DataFrame:
    """Held-out R^2 of ridge probes reading the normalised token index, the segment index and the progress inside
    the segment from each layer's hidden state (and from the AP-only and semantic-only subspaces where a model has
    them); shuffled targets are the control.

    ``documents=`` (``--input``) replace the built-in ones: each is read whole (one longer than ``length`` tokens
    is refused), with ``n_train`` / ``n_test`` of them. ``targets`` the documents cannot give (no segment boundary)
    are refused when named, and left out by default: their rows hold NaN, and ``r2_missing`` says why."""
    from corpora.contexts import analysis_windows
    from probes.position import DEFAULT_ALPHAS, fit_position_probes

    docs = analysis_windows(model, "position-probes", documents, length=length, n_docs=n_docs, seed=seed, whole=True)
    missing = not_given(docs)
    named = [t for t in targets if t in missing]
    if named:
        given = ", ".join(t for t in TARGETS if t not in missing)
        raise OptionError(f"position-probes: targets {','.join(named)}: {missing[named[0]]}; leave "
                          f"{'it' if len(named) == 1 else 'them'} out (the default probes what the documents "
                          f"give: {given})")
    if missing:
        log.warning(f"position-probes: {model.model_name}: {NO_BOUNDARY['segment']}; "
                    f"probing {', '.join(targets)} only, and writing {', '.join(missing)} as NaN with the reason in "
                    "r2_missing")
    df = fit_position_probes(model, docs, n_seeds=n_seeds, n_train=n_train, n_test=n_test, cv_folds=cv_folds, seed=seed,
                             alphas=DEFAULT_ALPHAS if alphas is None else alphas)
    df = df[df["target"].isin(targets) | df["target"].isin(missing)].reset_index(drop=True)
    lost = df["target"].isin(missing)
    df.loc[lost, ["r2_mean", "r2_std"]] = float("nan")
    reason = df["target"].map(missing).fillna("")
    reason[~lost & df["r2_mean"].isna()] = FLAT_TEST
    df.insert(df.columns.get_loc("r2_std") + 1, "r2_missing", reason)
    return df
