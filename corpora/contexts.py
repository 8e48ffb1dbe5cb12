"""Windows of a model's own tokens: what the head, position and probe analyses read.

- ``analysis_windows(model, analysis, documents, length=, n_docs=, seed=)``: the one answer to "the user's windows,
  else the built-in ones". The user's ``documents=`` (read once, by ``corpora.user.user_inputs``): texts cut into
  consecutive windows of ``length`` tokens (``corpora.user.token_windows``: nothing dropped, every window starts as a
  document does), or token ids read as given (refused when longer than the model allows); with ``whole=True`` each
  text is one window, refused when longer than ``length`` (for targets defined over a whole document). Without
  ``documents``: ``n_docs`` seeded ``wikipedia_windows`` of ``length`` tokens, drawn under a stage
  (``corpora.stages``: pilots and the judged known-results run read disjoint articles).
- ``wikipedia_windows(tokenizer, n_docs, max_tokens, seed=, stage=)``: the built-in corpus' windows, English
  Wikipedia lead sections joined by newlines up to ``max_tokens`` tokens, validation articles first (held out from
  every bundled model's training), then training articles in an order the seed draws; each starts with the model's
  document-start token(s) (an encoder's are [CLS] ... [SEP]).
"""

from __future__ import annotations

from corpora.documents import Window
from corpora.user import longer_than, token_windows, user_inputs
from interp.base import InputError


def analysis_windows(model, analysis: str, documents=None, *, length: int, n_docs: int | None = None, seed: int = 0,
                     whole: bool = False, stage: str = "any") -> list[Window]:
    """The windows ``analysis`` reads on ``model``: the user's ``documents`` (texts or token ids; texts only and each
    whole with ``whole``), or ``n_docs`` built-in windows drawn by ``seed`` under ``stage`` (``corpora.stages``)."""
    if documents is None:
        if n_docs is None:
            raise ValueError(f"{analysis}: analysis_windows needs n_docs= for the built-in windows")
        return wikipedia_windows(model.require_tokenizer(analysis), n_docs, length, seed=seed, stage=stage)
    inputs = user_inputs(documents, analysis, ("texts",) if whole else ("texts", "tokens"))
    if inputs.kind == "texts":
        tokenizer = model.require_tokenizer(analysis)
        if whole:
            return _whole(tokenizer, inputs.items, length, analysis)
        return token_windows(tokenizer, inputs.items, length)
    for i, w in enumerate(inputs.items):
        if len(w.ids) > model.max_seq_len:
            raise InputError(f"{analysis}: documents[{i}] has {len(w.ids)} tokens; {model.model_name} takes 1 to "
                             f"{model.max_seq_len}")
    return inputs.items


def _whole(tokenizer, documents, max_tokens: int, analysis: str) -> list[Window]:
    """Each document as one window (its text kept), refused when longer than ``max_tokens``."""
    longer_than(tokenizer, documents, max_tokens, analysis)
    out = []
    for d in documents:
        enc = tokenizer.encode_with_spans(d.text, doc_start=True)
        out.append(Window(d.id, enc.ids, enc.spans, text=d.text))
    return out


def wikipedia_windows(tokenizer, n_docs: int, max_tokens: int, *, seed: int = 0, stage: str = "any") -> list[Window]:
    """``n_docs`` windows of at most ``max_tokens`` tokens: lead sections joined by newlines, in the order the
    ``stage`` draws them with ``seed`` (``corpora.stages.draw_order``; under ``any`` validation articles first, then
    training articles in the order ``seed`` draws). Each window names the articles it joins (``sources``)."""
    from corpora.stages import draw_order

    docs, parts = [], []
    for article in draw_order(stage, seed):
        parts.append(article)
        text = "\n".join(a.text for a in parts)
        enc = tokenizer.encode_with_spans(text, doc_start=True)
        if len(enc.ids) >= max_tokens:
            enc = _fit(tokenizer, text, max_tokens)
            docs.append(Window(f"enwiki-joined-{len(docs)}", enc.ids, enc.spans,
                               text=text[: max(b for _, b in enc.spans)], sources=tuple(a.id for a in parts)))
            parts = []
            if len(docs) == n_docs:
                return docs
    raise ValueError(f"the corpus holds only {len(docs)} documents of {max_tokens} tokens under stage {stage!r}, "
                     f"fewer than n_docs={n_docs}")


def _fit(tokenizer, text: str, max_tokens: int):
    if hasattr(tokenizer, "cls_id"):  # encoders wrap [CLS] ... [SEP] themselves
        return tokenizer.encode_with_spans(text, max_tokens=max_tokens)
    enc = tokenizer.encode_with_spans(text, doc_start=True)
    return type(enc)(enc.ids[:max_tokens], enc.spans[:max_tokens])


