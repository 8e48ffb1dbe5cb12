"""Text contexts of a model's own tokens: what the head and position analyses read when they read text.

``text_contexts(model, analysis, n_docs, length, seed, documents)``: the user's ``documents`` cut into consecutive
windows of ``length`` tokens (``corpora.user.token_windows``: nothing dropped, every window starts as a document
does), or ``n_docs`` seeded built-in contexts of ``length`` tokens (English Wikipedia lead sections joined, validation
articles first: ``probes.position.probe_documents``). Each starts with the model's document-start token(s).
"""

from __future__ import annotations


def text_contexts(model, analysis: str, n_docs: int, length: int, seed: int, documents=None) -> list[list[int]]:
    tokenizer = model.require_tokenizer(analysis)
    if documents is not None:
        from corpora.user import as_documents, token_windows

        return [w.ids for w in token_windows(tokenizer, as_documents(documents), length)]
    from probes.position import probe_documents

    return [d.ids for d in probe_documents(tokenizer, n_docs, length, seed=seed)]
