"""Contexts of a model's own tokens: what the head and position analyses read.

- ``user_windows(model, analysis, documents, length)``: what ``documents=`` held, as ``corpora.documents.Window``s:
  texts cut into consecutive windows of ``length`` tokens (``corpora.user.token_windows``: nothing dropped, every
  window starts as a document does), or token ids read as given (refused when longer than the model allows);
- ``text_contexts(model, analysis, n_docs, length, seed, documents)``: those windows' ids, or without ``documents``
  ``n_docs`` seeded built-in contexts of ``length`` tokens (English Wikipedia lead sections joined, validation
  articles first: ``probes.position.probe_documents``), each starting with the model's document-start token(s).
"""

from __future__ import annotations


def user_windows(model, analysis: str, documents, length: int, accepts=("texts", "tokens")) -> list:
    from corpora.documents import user_inputs
    from interp.base import InputError

    inputs = user_inputs(documents, analysis, accepts)
    if inputs.kind == "texts":
        from corpora.user import token_windows

        return token_windows(model.require_tokenizer(analysis), inputs.items, length)
    for i, w in enumerate(inputs.items):
        if len(w.ids) > model.max_seq_len:
            raise InputError(f"{analysis}: documents[{i}] has {len(w.ids)} tokens; {model.model_name} takes 1 to "
                             f"{model.max_seq_len}")
    return inputs.items


def text_contexts(model, analysis: str, n_docs: int, length: int, seed: int, documents=None) -> list[list[int]]:
    if documents is not None:
        return [w.ids for w in user_windows(model, analysis, documents, length)]
    from probes.position import probe_documents

    return [d.ids for d in probe_documents(model.require_tokenizer(analysis), n_docs, length, seed=seed)]
