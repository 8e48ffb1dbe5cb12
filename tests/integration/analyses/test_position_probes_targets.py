"""position-probes on documents that cannot give every target: plain words without a sentence end have no segment
boundary, so the segment index is 0 throughout and progress inside the one segment is the token index. The analysis
says so before reading any hidden state, probes the token index (recovered here where it was planted), writes the
other targets as NaN with the reason, records what it probed in provenance, and raises no RuntimeWarning."""

from __future__ import annotations

import json
import logging
import warnings

import numpy as np
import pandas as pd
import pytest

import analyses
from analyses.position_probes import FLAT_TEST, NO_BOUNDARY, position_probes
from analyses.registry import OptionError
from interp.base import InputError
from tests.helpers import tiny_model

WORDS = ["river", "stone", "light", "garden", "window", "quiet", "paper", "north", "field", "winter"]


def plain_documents(n: int = 36, chars: int = 120, seed: int = 0) -> list[str]:
    """``n`` documents of ``chars`` bytes: lowercase words and spaces, no punctuation, no newline."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        text = ""
        while len(text) < chars:
            text += rng.choice(WORDS) + " "
        out.append(text[: chars - 1] + "x")
    return out


@pytest.fixture
def planted():
    """A byte-level model whose layer 1 writes each token's index into dimension 0 (every document has the same
    length, so the index is a linear function of the normalised token index); ``events`` records, in order, each
    forward pass and each warning the analysis logs."""
    import torch

    model = tiny_model("per-layer", max_seq_len=256)
    events = []

    def plant(t, hook):
        t = t.clone()
        t[:, :, 0] = torch.arange(t.shape[1], dtype=t.dtype) * 3.0
        return t

    class Record(logging.Handler):
        def emit(self, record):
            events.append(("log", record.getMessage()))

    model.add_hook("blocks.1.hook_resid_post", plant)
    handle = model.register_forward_pre_hook(lambda module, args: events.append(("forward", None)))
    handler = Record(level=logging.WARNING)
    logging.getLogger("poslens").addHandler(handler)
    try:
        yield model, events
    finally:
        logging.getLogger("poslens").removeHandler(handler)
        handle.remove()
        model.reset_hooks()


def test_documents_without_sentence_ends_give_the_token_index_and_say_why_the_rest_is_missing(planted):
    model, events = planted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = position_probes(model, documents=plain_documents(), n_seeds=2, cv_folds=4)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]

    kinds = [kind for kind, _ in events]
    assert kinds[0] == "log" and kinds.count("log") == 1 and "forward" in kinds  # said before the first forward pass
    assert "no document has a segment boundary" in events[0][1] and "probing token only" in events[0][1]

    token = df[df["target"] == "token"]
    assert np.isfinite(token[["r2_mean", "r2_std"]].to_numpy()).all() and (token["r2_missing"] == "").all()
    r2 = df.set_index(["layer", "subspace", "target", "control"])["r2_mean"]
    assert r2[1, "full", "token", "none"] > 0.999  # planted at layer 1
    assert r2[0, "full", "token", "none"] < 0.99
    assert abs(r2[1, "full", "token", "shuffled"]) < 0.1
    for target in ("segment", "intra"):
        rows = df[df["target"] == target]
        assert len(rows) == len(token) and set(rows["control"]) == {"none", "shuffled"}
        assert rows[["r2_mean", "r2_std"]].isna().all().all()
        assert (rows["r2_missing"] == NO_BOUNDARY[target]).all()


def test_the_cli_path_writes_the_table_and_records_the_targets_probed(tmp_path):
    from poslens.run.execute import run_analysis

    docs = plain_documents(12, 60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = run_analysis("position-probes", [tiny_model("per-layer", max_seq_len=256)], tmp_path,
                              options=dict(documents=docs, n_seeds=1, cv_folds=2), seed=0, formats="html")
    prov = json.loads((tmp_path / "position-probes.provenance.json").read_text(encoding="utf-8"))
    assert prov["arguments"]["targets"] == ["token"]
    table = pd.read_csv(tmp_path / "position-probes.csv", keep_default_na=False, na_values=[""])
    missing = table[table["target"] != "token"]
    assert len(missing) and missing["r2_mean"].isna().all() and set(missing["r2_missing"]) == set(NO_BOUNDARY.values())
    assert result.table["r2_mean"].notna().sum() == (table["target"] == "token").sum()
    assert "not given by the documents" in analyses.get("position-probes").headline(result.table)


def test_a_target_the_documents_cannot_give_is_refused_before_any_forward_pass(planted):
    model, events = planted
    with pytest.raises(OptionError, match="targets segment: no document has a segment boundary .* leave it out "
                                          r"\(the default probes what the documents give: token\)"):
        position_probes(model, documents=plain_documents(), targets=("segment",), n_seeds=1, cv_folds=2)
    with pytest.raises(OptionError, match="targets segment,intra: "):
        position_probes(model, documents=plain_documents(), targets=("token", "segment", "intra"), n_seeds=1,
                        cv_folds=2)
    with pytest.raises(InputError, match="document '3' has fewer than two content tokens"):
        position_probes(model, documents=["a b c"] * 3 + ["z"], n_seeds=1, cv_folds=2)
    assert "forward" not in [kind for kind, _ in events]


def test_a_seed_whose_test_documents_hold_one_segment_each_is_explained(planted):
    """One document of 36 has a sentence end: segment varies in the corpus, but a seed's test documents may all be
    single-segment ones, where R^2 is undefined; the row says why instead of dividing by zero."""
    model, _ = planted
    docs = plain_documents()
    docs[0] = docs[0][:50] + ". " + docs[0][52:]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        df = position_probes(model, documents=docs, n_seeds=2, cv_folds=4)
    seg = df[df["target"] == "segment"]
    assert seg["r2_mean"].isna().any()
    assert (seg.loc[seg["r2_mean"].isna(), "r2_missing"] == FLAT_TEST).all()
    assert (df.loc[df["r2_mean"].notna(), "r2_missing"] == "").all()
    assert np.isfinite(df[df["target"] == "token"]["r2_mean"]).all()
