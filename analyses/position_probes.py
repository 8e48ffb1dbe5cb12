"""``position-probes``: ridge probes for token, segment and intra-segment position (the protocol is in
``probes.position``: the seed's 500 documents of <= 512 tokens, 400 train / 100 test, 5 seeds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.registry import Adapts, Cli, Fits, Help, NotWith, Range, analysis
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd


def headline(df) -> str:
    d = df[df["control"] == "none"]
    parts = []
    for (model, space), g in d.groupby(["model", "subspace"], sort=False):
        token = g[g["target"] == "token"].set_index("layer")["r2_mean"]
        seg = g[g["target"] == "segment"].set_index("layer")["r2_mean"]
        parts.append(f"{model} [{space}]: token R2 {token.iloc[0]:.2f} (first layer) -> {token.iloc[-1]:.2f} (last), "
                     f"segment {seg.max():.2f} at best")
    ctrl = df[df["control"] == "shuffled"]["r2_mean"]
    return "; ".join(parts) + f"; shuffled controls between {ctrl.min():.2f} and {ctrl.max():.2f}."


def summary(df):
    return df.pivot_table(index=["model", "subspace", "target", "control"], columns="layer", values="r2_mean", sort=False).reset_index()


def _split(options) -> tuple[int, int]:
    """Default (train, test) documents: 400 / 100, or 80% / 20% of the documents there are when fewer (the
    user's ``documents``, else ``n_docs``)."""
    docs = options.get("documents")
    total = len(docs) if docs is not None else options.get("n_docs", 500)
    train = options.get("n_train") or min(400, max(1, total * 4 // 5))
    return train, max(1, min(100, total - train))


@analysis("position-probes", needs=[Capability.HIDDEN_STATES], headline=headline, summary=summary)
def position_probes(model, *,
                    n_docs: Annotated[int, Help("documents"), Range(2), NotWith()] = 500,
                    n_train: Annotated[int, Help("training documents per seed (default: 400, or 80% of fewer documents)"),
                                       Range(1), Adapts(lambda m, o: _split(o)[0])] = 400,
                    n_test: Annotated[int, Help("test documents per seed (default: 100, or the rest of fewer documents)"),
                                      Range(1), Adapts(lambda m, o: _split(o)[1])] = 100,
                    n_seeds: Annotated[int, Help("train/test splits"), Range(1)] = 5,
                    length: Annotated[int, Help("tokens per document (at most the model's context)"), Range(2), Fits(),
                                      Cli(aliases=("--max-tokens",))] = 512,
                    cv_folds: Annotated[int, Help("folds of training documents for choosing alpha"), Range(2)] = 5,
                    seed: int = 0, alphas=None, documents=None) -> pd.DataFrame:
    """Held-out R^2 of ridge probes reading the normalised token index, the segment index and the progress inside
    the segment from each layer's hidden state (and from the AP-only and semantic-only subspaces where a model has
    them); shuffled targets are the control.

    ``documents=`` (``--input``) replace the built-in ones: each is read whole (one longer than ``length`` tokens
    is refused), with ``n_train`` / ``n_test`` of them."""
    from probes.position import DEFAULT_ALPHAS, fit_position_probes, probe_documents, user_probe_documents

    tokenizer = model.require_tokenizer("position-probes")
    if documents is not None:
        docs = user_probe_documents(tokenizer, documents, length)
    else:
        docs = probe_documents(tokenizer, n_docs, length, seed=seed)
    return fit_position_probes(model, docs, n_seeds=n_seeds, n_train=n_train, n_test=n_test, cv_folds=cv_folds, seed=seed,
                               alphas=DEFAULT_ALPHAS if alphas is None else alphas)
