"""Sequences of random tokens, the input of the induction and sink-rate probes: ids drawn uniformly (seeded) from
the model's ordinary vocabulary, ``[LOW, min(d_vocab, HIGH))`` less the tokenizer's special ids, as TransformerLens'
induction demo draws from GPT-2's (100 to 20,000)."""

from __future__ import annotations

import numpy as np

LOW, HIGH = 100, 20_000


def ordinary_ids(model) -> np.ndarray:
    tok = getattr(model, "tokenizer", None)
    low = min(LOW, model.d_vocab // 4)
    ids = np.arange(low, min(model.d_vocab, HIGH))
    special = {getattr(tok, a, None) for a in ("bos_id", "eos_id", "pad_id")} - {None}
    return ids[~np.isin(ids, list(special))]


def random_sequences(model, n: int, length: int, seed: int, stage: str = "any") -> list[list[int]]:
    """``n`` sequences of ``length`` random ordinary ids, from the stream ``stage`` draws with ``seed``
    (``corpora.stages.stage_seed``)."""
    from corpora.stages import stage_seed

    rng = np.random.default_rng(stage_seed(seed, stage))
    pool = ordinary_ids(model)
    return [rng.choice(pool, size=length).tolist() for _ in range(n)]


def start_token(model) -> int | None:
    """The token a document starts with (BOS, or the EOS a byte-level model separates documents with), if any."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return None
    first = tok.encode("a", doc_start=True)
    return first[0] if len(first) == 2 else None
