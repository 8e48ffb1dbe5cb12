"""analysis_windows, the one path from documents= to an analysis' windows.

Five analyses wrote "the user's windows, else the built-in ones" each their own way (sink-rate, kl-ablation,
positions, position-probes, and corpora.contexts.text_contexts for the others). The digests below are of the windows
those old paths gave (probes.position.probe_documents, corpora.contexts.user_windows,
probes.position.user_probe_documents, at 934cb4a) on the same inputs: the same seeds must keep giving the same
windows, or every analysis' numbers move. Planted documents are also checked against the windowing rule written out
independently (byte ids: every window is the start token and the next ``length - 1`` bytes)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from corpora.contexts import analysis_windows, wikipedia_windows
from corpora.documents import Document, Window
from interp.base import InputError
from interp.tokenizers import ByteTokenizer, WordPieceTokenizer

TEXTS = ["The river runs past the old mill. " * 6, "Short one.", "Children play on the bank. In summer they swim. " * 3]
OLD = {  # sha256 (first 16 hex) of the windows the old code paths gave
    ("bytes", "built-in"): "af52c800b5bb9d36", ("wordpiece", "built-in"): "cf9187246254397b",
    ("bytes", "user"): "a39e53fc91c63dd5", ("wordpiece", "user"): "bd6a8e0fd490547b",
    ("bytes", "whole"): "9fe7c38a77365849", ("wordpiece", "whole"): "438b1f63cb8dcd12",
}
LONG = {0: "13bc781ee90589bc", 1: "eb25cec8db26ed65"}  # 32 byte windows of 8192 tokens, by seed
VALIDATION, TRAINING = "ff642bf4c3c5ebba", {0: "dcd8f1a3ef3818f2", 1: "9da258826af880eb"}  # their first 28, the rest


def digest(windows) -> str:
    h = hashlib.sha256()
    for w in windows:
        h.update(json.dumps([w.document, w.ids, [list(s) for s in w.spans], w.index, w.start, w.text]).encode())
    return h.hexdigest()[:16]


class Reader:
    """What analysis_windows reads of a model: its tokenizer, context length and name."""

    def __init__(self, tokenizer, max_seq_len=512):
        self.tokenizer, self.max_seq_len, self.model_name = tokenizer, max_seq_len, "reader"

    def require_tokenizer(self, analysis):
        return self.tokenizer


@pytest.fixture(params=["bytes", "wordpiece"])
def model(request):
    model = Reader(ByteTokenizer() if request.param == "bytes" else WordPieceTokenizer())
    model.kind = request.param
    return model


@pytest.mark.parametrize("seed", [0, 3])
def test_built_in_windows_are_what_the_old_paths_gave(model, seed):
    new = analysis_windows(model, "sink-rate", length=65, n_docs=4, seed=seed)
    assert digest(new) == OLD[model.kind, "built-in"]
    assert new == wikipedia_windows(model.tokenizer, 4, 65, seed=seed)
    assert all(len(w.ids) == 65 for w in new) and len({w.document for w in new}) == 4


def test_the_seed_orders_the_training_articles_after_the_validation_ones():
    runs = {s: analysis_windows(Reader(ByteTokenizer()), "x", length=8192, n_docs=32, seed=s) for s in (0, 1)}
    for seed, windows in runs.items():
        assert digest(windows) == LONG[seed]
        assert digest(windows[:28]) == VALIDATION and digest(windows[28:]) == TRAINING[seed]
        assert all(w.ids[0] == ByteTokenizer.eos_id and len(w.ids) == 8192 for w in windows)


def test_user_texts_are_cut_into_windows_as_before(model):
    docs = [Document(f"d{i}", t) for i, t in enumerate(TEXTS)]
    new = analysis_windows(model, "kl-ablation", docs, length=24)
    assert digest(new) == OLD[model.kind, "user"]
    # the built-in's options unused
    assert analysis_windows(model, "kl-ablation", docs, length=24, n_docs=99, seed=7) == new
    ids = [w.ids for w in new]
    assert analysis_windows(model, "kl-ablation", ids, length=24) == [Window(str(i), x) for i, x in enumerate(ids)]


def test_planted_byte_windows_follow_the_rule():
    text = "abcdefghij" * 5  # 50 bytes: windows of 1 start token + 15 bytes hold 15, 15, 15 and 5
    got = analysis_windows(Reader(ByteTokenizer()), "x", {"doc": text}, length=16)
    assert [(w.document, w.index, w.start) for w in got] == [("doc", i, 15 * i) for i in range(4)]
    for w in got:
        chunk = text[w.start:w.start + 15]
        assert w.ids == [256] + list(chunk.encode())
        assert w.spans == [(w.start, w.start)] + [(w.start + i, w.start + i + 1) for i in range(len(chunk))]


def test_whole_documents_are_read_whole_as_before(model):
    new = analysis_windows(model, "position-probes", TEXTS, length=400, whole=True)
    assert digest(new) == OLD[model.kind, "whole"]
    assert [(w.document, w.text) for w in new] == [(str(i), t) for i, t in enumerate(TEXTS)]
    with pytest.raises(InputError, match=r"position-probes: document '0' has \d+ tokens, more than 30"):
        analysis_windows(model, "position-probes", TEXTS, length=30, whole=True)
    with pytest.raises(InputError, match="position-probes: documents= holds token ids, and this analysis reads texts"):
        analysis_windows(model, "position-probes", [[1, 2, 3]], length=30, whole=True)


def test_token_ids_longer_than_the_model_are_refused():
    with pytest.raises(InputError, match=re.escape("sink-rate: documents[1] has 600 tokens; reader takes 1 to 512")):
        analysis_windows(Reader(ByteTokenizer()), "sink-rate", [[1] * 10, [2] * 600], length=64)
