"""Do learned positions cost or buy language-modelling loss? (seed 001: "loss neutral")

Every model is scored on the same fixed held-out windows (English and Chinese separately, drawn from
validation documents with a fixed seed): mean next-byte cross-entropy in nats and bits per byte, with a
bootstrap interval over windows. The training record's steps and tokens are attached, since a loss
comparison only means something at equal training.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from analyses.common import check_window
from interp import parallel
from interp.base import Capability, require
from interp.tokenizers import ByteTokenizer, TokenizerError


def training_record(model) -> dict:
    """The ``training.json`` beside the model's checkpoint, if it has one."""
    source = model.source.get("path")
    path = Path(source) / "training.json" if source else None
    return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}


@torch.no_grad()
def window_losses(model, windows: np.ndarray, batch_size: int = 8) -> np.ndarray:
    out = []
    for i in range(0, len(windows), batch_size):
        w = torch.from_numpy(windows[i : i + batch_size]).to(model.device)
        logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.float().transpose(1, 2), w[:, 1:], reduction="none")
        out.append(loss.mean(1).cpu().numpy())
    return np.concatenate(out)


def loss_neutrality(model, *, n_windows: int = 64, context: int = 512, seed: int = 0, n_boot: int = 1000) -> pd.DataFrame:
    """Held-out next-byte loss per language, with the training budget beside it."""
    from corpora.streams import bilingual_streams

    require(model, Capability.CAUSAL_LM, "loss-neutrality")
    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise TokenizerError(f"loss-neutrality compares byte-level models; {model.model_name} is not one")
    check_window(model, context, "--context")
    streams = bilingual_streams("validation", 0).streams
    record = training_record(model)
    rows, per_language = [], {}
    batches = []  # (language, up to 8 windows of it)
    for index, (language, stream) in enumerate(streams.items()):
        windows = stream.windows(np.random.default_rng([12345, index]), n_windows, context + 1)
        batches += [(language, windows[i : i + 8]) for i in range(0, len(windows), 8)]
    losses = parallel.map_items(lambda job: window_losses(model, job[1]), batches, model=model,
                                desc=f"loss-neutrality {model.model_name}")
    for language in streams:
        per_language[language] = np.concatenate([l for (lang, _), l in zip(batches, losses) if lang == language])
    per_language["all"] = np.concatenate(list(per_language.values()))
    rng = np.random.default_rng(seed)
    for language, losses in per_language.items():
        boots = [losses[rng.integers(0, len(losses), len(losses))].mean() for _ in range(n_boot)]
        rows.append(dict(model=model.model_name, language=language, loss=float(losses.mean()),
                         bits_per_byte=float(losses.mean() / math.log(2)), ci_low=float(np.quantile(boots, 0.025)),
                         ci_high=float(np.quantile(boots, 0.975)), n_windows=len(losses), context=context,
                         trained_steps=record.get("steps"), trained_tokens=record.get("tokens_seen"),
                         training_validation_loss=record.get("final_validation_loss")))
    return pd.DataFrame(rows)
