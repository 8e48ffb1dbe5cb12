"""Do learned positions cost or buy language-modelling loss? (seed 001: "loss neutral")

Every model is scored on the same fixed held-out windows (English and Chinese separately, drawn from
validation documents with a fixed seed): mean next-byte cross-entropy in nats and bits per byte, with a
bootstrap interval over windows. The training record's steps and tokens are attached, since a loss
comparison only means something at equal training.

The user's own ``documents=`` (strings or ``corpora.user.Document``; ``--input PATH``) replace the
built-in windows: each document is read as in training (EOS first, then its UTF-8 bytes) and split into
consecutive windows of ``context + 1`` tokens overlapping by one, so every byte after the first is
predicted exactly once and with at most ``context`` bytes of history; the last window holds the rest.
Nothing is cut. One row, ``language='all'``: the mean loss over every predicted byte (windows weighted
by their length), bootstrap over windows.
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
from analyses.tables import may_be_nan
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


@torch.no_grad()
def document_losses(model, documents, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window of the user's documents: summed next-byte loss (nats) and number of predicted bytes."""
    from corpora.user import as_documents

    sums, counts = [], []
    for doc in as_documents(documents):
        ids = model.tokenizer.encode(doc.text, doc_start=True)
        for start in range(0, len(ids) - 1, context):
            w = torch.tensor([ids[start : start + context + 1]], device=model.device)
            logits = model(w[:, :-1])
            sums.append(float(F.cross_entropy(logits[0].float(), w[0, 1:], reduction="sum")))
            counts.append(w.shape[1] - 1)
    return np.array(sums), np.array(counts)


@may_be_nan(trained_steps="no training.json beside the checkpoint", trained_tokens="no training.json beside the checkpoint", training_validation_loss="no training.json beside the checkpoint")
def loss_neutrality(model, *, n_windows: int = 64, context: int = 512, seed: int = 0, n_boot: int = 1000,
                    documents=None) -> pd.DataFrame:
    """Held-out next-byte loss per language (or on the user's documents), with the training budget beside it."""
    from corpora.streams import bilingual_streams

    require(model, Capability.CAUSAL_LM, "loss-neutrality")
    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise TokenizerError(f"loss-neutrality compares byte-level models; {model.model_name} is not one")
    check_window(model, context, "--context")
    record = training_record(model)
    if documents is not None:
        sums, counts = document_losses(model, documents, context)
        rng = np.random.default_rng(seed)
        boots = []
        for _ in range(n_boot):
            i = rng.integers(0, len(sums), len(sums))
            boots.append(sums[i].sum() / counts[i].sum())
        loss = float(sums.sum() / counts.sum())
        return pd.DataFrame([dict(model=model.model_name, language="all", loss=loss, bits_per_byte=loss / math.log(2),
                                  ci_low=float(np.quantile(boots, 0.025)), ci_high=float(np.quantile(boots, 0.975)),
                                  n_windows=len(sums), context=context, n_bytes=int(counts.sum()),
                                  trained_steps=record.get("steps"), trained_tokens=record.get("tokens_seen"),
                                  training_validation_loss=record.get("final_validation_loss"))])
    streams = bilingual_streams("validation", 0).streams
    rows, per_language = [], {}
    for index, (language, stream) in enumerate(streams.items()):
        windows = stream.windows(np.random.default_rng([12345, index]), n_windows, context + 1)
        per_language[language] = window_losses(model, windows)
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
