"""Do learned positions cost or buy language-modelling loss? (seed 001: "loss neutral")

Every model is scored on the same fixed held-out windows (English and Chinese separately, drawn from
validation documents with a fixed seed): mean next-byte cross-entropy in nats and bits per byte, with a
bootstrap interval over windows. The training record's steps and tokens are attached, since a loss
comparison only means something at equal training.

The user's own ``documents=`` (strings or ``corpora.documents.Document``; ``--input PATH``) replace the
built-in windows: each document is read as in training (EOS first, then its UTF-8 bytes) and split into
consecutive windows of ``length + 1`` tokens overlapping by one, so every byte after the first is
predicted exactly once and with at most ``length`` bytes of history; the last window holds the rest.
Nothing is cut. One row, ``language='all'``: the mean loss over every predicted byte (windows weighted
by their length), bootstrap over windows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.nan_policy import may_be_nan
from analyses.registry import Fits, Help, NotWith, Range, analysis, check_window, no_grad
from analyses.runs import INC, INCREMENT_MODELS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd



def training_record(model) -> dict:
    """The ``training.json`` beside the model's checkpoint, if it has one."""
    source = model.source.get("path")
    path = Path(source) / "training.json" if source else None
    return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}


@no_grad
def window_losses(model, windows: np.ndarray, batch_size: int = 8) -> np.ndarray:
    import torch

    out = []
    for i in range(0, len(windows), batch_size):
        w = torch.from_numpy(windows[i : i + batch_size]).to(model.device)
        out.append(model.token_losses(w[:, :-1], w[:, 1:]).mean(1).cpu().numpy())
    return np.concatenate(out)


@no_grad
def document_losses(model, documents, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window of the user's documents: summed next-byte loss (nats) and number of predicted bytes."""
    import torch

    from corpora.user import user_inputs

    sums, counts = [], []
    for doc in user_inputs(documents, "loss-neutrality").items:
        ids = model.tokenizer.encode(doc.text, doc_start=True)
        for start in range(0, len(ids) - 1, context):
            w = torch.tensor([ids[start : start + context + 1]], device=model.device)
            sums.append(float(model.token_losses(w[:, :-1], w[:, 1:]).sum()))
            counts.append(w.shape[1] - 1)
    return np.array(sums), np.array(counts)


def headline(df) -> str:
    g = df[df["language"] == "all"].sort_values("loss")
    return "Held-out loss (nats/byte, all windows): " + ", ".join(
        f"{r.model} {r.loss:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]" for r in g.itertuples()) + "."


def summary(df):
    return df[["model", "language", "loss", "ci_low", "ci_high", "bits_per_byte", "trained_steps", "trained_tokens"]]


@analysis("loss-neutrality", needs=[Capability.CAUSAL_LM], headline=headline, summary=summary,
          small=Run(("increments-shared", "rope-bytes"), dict(n_docs=2, length=64, n_boot=20)),
          main=Run(INCREMENT_MODELS + ("rope-bytes",), quick=dict(n_docs=8, n_boot=100), section=INC),
          memory=Run(("increments-per-layer",), dict(length=128, n_boot=10)),
          builds_logits=False)
@may_be_nan(trained_steps="no training.json beside the checkpoint",
            trained_tokens="no training.json beside the checkpoint",
            training_validation_loss="no training.json beside the checkpoint")
def loss_neutrality(model, *,
                    n_docs: Annotated[int, Help("held-out windows per language"), Range(1), NotWith()] = 64,
                    length: Annotated[int, Help("window length in bytes"), Range(4), Fits()] = 512,
                    seed: int = 0,
                    n_boot: Annotated[int, Help("bootstrap resamples (of windows) for the 95% interval"),
                                      Range(1)] = 1000,
                    documents=None) -> pd.DataFrame:
    """Held-out next-byte loss of each model on the same English and Chinese windows: learned increments are
    loss-neutral if their loss matches the integer-RoPE baseline trained on the same data for the same steps.

    Held-out next-byte loss per language (or on the user's documents), with the training budget beside it."""
    import pandas as pd

    from corpora.streams import bilingual_streams
    from interp.runtime import parallel
    from interp.tokenizers import ByteTokenizer, TokenizerError  # transformers: not at the command line's import

    if not isinstance(getattr(model, "tokenizer", None), ByteTokenizer):
        raise TokenizerError(f"loss-neutrality compares byte-level models; {model.model_name} is not one")
    check_window(model, length, "--length")
    record = training_record(model)
    if documents is not None:
        sums, counts = document_losses(model, documents, length)
        rng = np.random.default_rng(seed)
        boots = []
        for _ in range(n_boot):
            i = rng.integers(0, len(sums), len(sums))
            boots.append(sums[i].sum() / counts[i].sum())
        loss = float(sums.sum() / counts.sum())
        return pd.DataFrame([dict(model=model.model_name, language="all", loss=loss, bits_per_byte=loss / math.log(2),
                                  ci_low=float(np.quantile(boots, 0.025)), ci_high=float(np.quantile(boots, 0.975)),
                                  n_docs=len(sums), length=length, n_bytes=int(counts.sum()),
                                  trained_steps=record.get("steps"), trained_tokens=record.get("tokens_seen"),
                                  training_validation_loss=record.get("final_validation_loss"))])
    streams = bilingual_streams("validation", 0).streams
    rows, per_language = [], {}
    batches = []  # (language, up to 8 windows of it)
    for index, (language, stream) in enumerate(streams.items()):
        windows = stream.windows(np.random.default_rng([12345, index]), n_docs, length + 1)
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
                         ci_high=float(np.quantile(boots, 0.975)), n_docs=len(losses), length=length,
                         trained_steps=record.get("steps"), trained_tokens=record.get("tokens_seen"),
                         training_validation_loss=record.get("final_validation_loss")))
    return pd.DataFrame(rows)
