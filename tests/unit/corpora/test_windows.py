"""analysis_windows, the one path from documents= to an analysis' windows, gives what the five old copies gave."""

from __future__ import annotations

import pytest

from corpora.contexts import analysis_windows, text_contexts, user_windows
from corpora.documents import Document
from interp.tokenizers import ByteTokenizer, WordPieceTokenizer
from probes.position import probe_documents, user_probe_documents

TEXTS = ["The river runs past the old mill. " * 6, "Short one.", "Children play on the bank. In summer they swim. " * 3]


class Reader:
    """What analysis_windows reads of a model: its tokenizer, context length and name."""

    def __init__(self, tokenizer, max_seq_len=512):
        self.tokenizer, self.max_seq_len, self.model_name = tokenizer, max_seq_len, "reader"

    def require_tokenizer(self, analysis):
        return self.tokenizer


@pytest.fixture(params=["bytes", "wordpiece"])
def model(request):
    return Reader(ByteTokenizer() if request.param == "bytes" else WordPieceTokenizer())


@pytest.mark.parametrize("seed", [0, 3])
def test_built_in_windows_are_the_old_probe_documents(model, seed):
    new = analysis_windows(model, "sink-rate", length=65, n_docs=4, seed=seed)
    assert new == probe_documents(model.tokenizer, 4, 65, seed=seed)
    assert [w.ids for w in new] == text_contexts(model, "sink-rate", 4, 65, seed)


def test_user_texts_and_tokens_are_the_old_user_windows(model):
    docs = [Document(f"d{i}", t) for i, t in enumerate(TEXTS)]
    new = analysis_windows(model, "kl-ablation", docs, length=24)
    assert new == user_windows(model, "kl-ablation", docs, 24) and len(new) > len(docs)
    ids = [w.ids for w in new]
    assert analysis_windows(model, "kl-ablation", ids, length=24) == user_windows(model, "kl-ablation", ids, 24)
    assert [w.ids for w in analysis_windows(model, "x", TEXTS, length=24, n_docs=3, seed=5)] == \
        text_contexts(model, "x", 3, 24, 5, TEXTS)


def test_whole_documents_are_the_old_user_probe_documents(model):
    new = analysis_windows(model, "position-probes", TEXTS, length=400, whole=True)
    assert new == user_probe_documents(model.tokenizer, TEXTS, 400) and len(new) == len(TEXTS)
