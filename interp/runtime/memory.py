"""The memory a run needs, known before it starts; and keeping a long corpus loop's memory flat.

``estimate(RunShape)`` adds up what an inference pass holds at its peak, from the config alone (no weights needed):

- the weights, ``params x dtype bytes`` (left out once the model is loaded: free memory already excludes them);
- the residual stream and the final hidden state, ``batch x length x d_model`` each;
- one layer's transients (only one layer's exist at a time, every family runs layer by layer): queries, keys and values
  ``batch x length x (heads + 2 kv_heads) x d_head`` twice (before and after rotation), the attention output twice,
  the MLP's ``3 x batch x length x d_ff`` (gate, up, product), and where patterns are materialised
  ``3 x batch x heads x rows x length`` float32 scores (the fused kernel itself holds a few key blocks);
- the logits: built for every position, ``batch x length x vocab`` in the model's dtype plus a float32 copy and its
  log-softmax when losses are taken (``logits=True``: 8.6 GB of Gemma 3's 10.3 GB peak at 8,192 tokens); in chunks
  (``PosLensModel.token_losses``), the same for ``chunk`` positions at a time, after the layers have finished.

It is a sum of what is alive at once, not a measurement: allocator slack, the interpreter and the tokenizer are not in
it (``tests/unit/interp/test_memory.py`` compares it with the peak RSS a forward pass really adds, within 25% + 48 MB).
``check`` refuses a run whose estimate exceeds the free memory (``free_memory``: ``MemAvailable`` of /proc/meminfo,
lowered to a cgroup's limit; CUDA's free memory on a GPU; ``POSLENS_FREE_MEMORY`` overrides both, for tests and
for keeping a share of the machine free). ``loss_chunk`` sizes the loss chunks to a sixteenth of the free memory.

glibc's allocator raises its mmap threshold each time a large block is freed, so the next attention matrices of a
similar size come from the heap, whose free space between live blocks is never returned: a loop over documents of
slightly different lengths then grows by tens of MB a document (kl-ablation on a 1M-parameter encoder: 1.6 GB
at 40 documents). ``release()`` returns free heap pages to the system (``malloc_trim``); the parallel loops call
it after every unit. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

GB = 1024 ** 3
MB = 1024 ** 2
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8}


class MemoryRefused(MemoryError):
    """A run whose estimated peak exceeds the memory free on its device; the message gives both."""


@dataclass(frozen=True)
class RunShape:
    """What an inference run's peak memory depends on: the model's config and the run's sizes."""
    params: int
    layers: int
    heads: int
    kv_heads: int
    d_head: int
    d_model: int
    d_ff: int
    vocab: int
    length: int
    batch: int = 1
    dtype_bytes: int = 4
    logits: bool = True  # the logits of every position are built (and a loss taken over them)
    loss_chunk: int | None = None  # positions per loss chunk when logits are not built whole (None: ``loss_chunk()``)
    # query rows whose [head, row, key] scores are materialised per layer (0: fused kernel only)
    attention_rows: int = 0

    def with_run(self, **run) -> RunShape:
        return replace(self, **run)

    @classmethod
    def from_config(cls, config, **run) -> RunShape:
        """From a Hugging Face config (a dict or an object; Gemma 3's text config inside a multimodal one is used)."""
        cfg = config if isinstance(config, dict) else dict(vars(config))
        if "text_config" in cfg and "hidden_size" not in cfg:
            inner = cfg["text_config"]
            cfg = inner if isinstance(inner, dict) else dict(vars(inner))

        def get(*names, default=None):
            return next((cfg[n] for n in names if cfg.get(n) is not None), default)

        d_model = int(get("hidden_size", "n_embd", "d_model", "dim"))
        heads = int(get("num_attention_heads", "n_head", "n_heads"))
        kv_heads = int(get("num_key_value_heads", "n_kv_heads", default=heads))
        d_head = int(get("head_dim", default=d_model // heads))
        d_ff = int(get("intermediate_size", "n_inner", "ffn_dim", default=4 * d_model))
        layers = int(get("num_hidden_layers", "n_layer", "n_layers"))
        vocab = int(get("vocab_size"))
        per_layer = d_model * (heads + 2 * kv_heads) * d_head + heads * d_head * d_model + 3 * d_model * d_ff
        params = layers * per_layer + vocab * d_model * (1 if get("tie_word_embeddings", default=True) else 2)
        dtype = str(get("torch_dtype", "dtype", default="float32")).replace("torch.", "")
        run.setdefault("dtype_bytes", DTYPE_BYTES.get(dtype, 4))
        run.setdefault("length", int(get("max_position_embeddings", "n_positions", default=2048)))
        return cls(params=params, layers=layers, heads=heads, kv_heads=kv_heads, d_head=d_head, d_model=d_model,
                   d_ff=d_ff, vocab=vocab, **run)

    @classmethod
    def from_model(cls, model, **run) -> RunShape:
        """From a loaded poslens model: its own parameter count and dtype, the rest from its config."""
        cfg = getattr(getattr(model, "hf", None), "config", None) or getattr(model, "cfg", None)
        known = {}
        if cfg is not None:
            try:
                known = {f.name: getattr(cls.from_config(cfg, length=1), f.name) for f in fields(cls)}
            except (TypeError, ValueError, KeyError):
                known = {}
        d_model = int(model.d_model)
        heads = int(model.n_heads)
        p = next(model.parameters())
        shape = dict(known, params=sum(t.numel() for t in model.parameters()), layers=int(model.n_layers), heads=heads,
                     d_model=d_model, vocab=int(model.d_vocab), dtype_bytes=p.element_size())
        shape.setdefault("kv_heads", heads)
        shape.setdefault("d_head", d_model // heads)
        shape.setdefault("d_ff", 4 * d_model)
        shape.update(length=int(model.max_seq_len))
        shape.update(run)
        return cls(**{f.name: shape[f.name] for f in fields(cls) if f.name in shape})


@dataclass(frozen=True)
class Estimate:
    weights: int
    activations: int
    logits: int
    shape: RunShape

    def total(self, loaded: bool = False) -> int:
        """Peak bytes; ``loaded``: with the weights already in memory (left out)."""
        return (0 if loaded else self.weights) + self.activations + self.logits

    def describe(self, loaded: bool = False) -> str:
        s = self.shape
        where = "whole" if s.logits else f"in chunks of {s.loss_chunk or '?'} positions"
        parts = ([] if loaded else [f"weights {_gb(self.weights)}"]) + [f"activations {_gb(self.activations)}",
                                                                        f"logits {_gb(self.logits)} ({where})"]
        return (f"{_gb(self.total(loaded))} ({', '.join(parts)}; {s.batch} x {s.length} tokens, {s.layers} layers, "
                f"vocabulary {s.vocab})")


def _gb(n: int) -> str:
    return f"{n / GB:.2f} GB" if n >= 0.1 * GB else f"{n / MB:.0f} MB"


def estimate(shape: RunShape) -> Estimate:
    s = shape
    tokens, b = s.batch * s.length, s.dtype_bytes
    residual = 2 * tokens * s.d_model * b  # the stream and the final hidden state
    qkv = 2 * tokens * (s.heads + 2 * s.kv_heads) * s.d_head * b
    attn_out = 2 * tokens * s.heads * s.d_head * b + tokens * s.d_model * b
    mlp = 3 * tokens * s.d_ff * b
    scores = 3 * s.batch * s.heads * min(s.attention_rows, s.length) * s.length * 4
    layer = 2 * tokens * s.d_model * b + qkv + attn_out + max(mlp, scores)
    # the logits, their float32 copy (none in float32), their log-softmax
    per_row = s.vocab * (b + 4 + 4 if b != 4 else 8)
    if s.logits:
        logits = tokens * per_row
    else:
        s = replace(s, loss_chunk=s.loss_chunk or loss_chunk(s.vocab))
        logits = min(s.loss_chunk, tokens) * per_row + tokens * 4
    return Estimate(weights=s.params * b, activations=residual + layer, logits=logits, shape=s)


# -- free memory ----------------------------------------------------------------------------------------------------

def parse_size(text: str) -> int:
    """``"512M"``, ``"2G"``, ``"1.5GB"`` or a number of bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1024, "M": MB, "G": GB, "T": 1024 * GB}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if scale > 1 else t) * scale)
    except ValueError:
        raise ValueError(f"POSLENS_FREE_MEMORY={text!r}: expected a size such as 512M, 8G or a number of "
                         "bytes") from None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_room() -> int | None:
    base = Path("/sys/fs/cgroup")
    try:
        limit = (base / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((base / "memory.current").read_text())
    except (OSError, ValueError):
        return None


def free_memory(device=None) -> int:
    """Bytes a run may still take on ``device``: ``POSLENS_FREE_MEMORY`` if set; CUDA's free memory for a CUDA device;
    else ``MemAvailable`` (lowered to a cgroup's remaining limit)."""
    planted = os.environ.get("POSLENS_FREE_MEMORY")
    if planted:
        return parse_size(planted)
    if device is not None and str(device).startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    found = [m for m in (_meminfo_available(), _cgroup_room()) if m is not None]
    return min(found) if found else 64 * GB


def loss_chunk(vocab: int, device=None, free: int | None = None) -> int:
    """Positions per loss chunk: their logits, float32 copy and log-softmax (at most ``12 x chunk x vocab`` bytes) in a
    sixteenth of the free memory, between 16 and 4,096 positions."""
    free = free_memory(device) if free is None else free
    return int(max(16, min(4096, free // 16 // (12 * vocab))))


def check(est: Estimate, device=None, *, loaded: bool, what: str, free: int | None = None) -> None:
    """Refuse (``MemoryRefused``) a run whose estimated peak exceeds the free memory, naming both."""
    free = free_memory(device) if free is None else free
    need = est.total(loaded)
    if need > free:
        where = f"on {device}" if device is not None and str(device) != "cpu" else "in this machine's memory"
        raise MemoryRefused(f"{what} needs about {est.describe(loaded)}, but only {_gb(free)} is free {where}"
                            f"{' (POSLENS_FREE_MEMORY)' if os.environ.get('POSLENS_FREE_MEMORY') else ''}: "
                            "use a shorter length, a smaller batch, or a machine with more memory")


# -- keeping a long loop flat ---------------------------------------------------------------------------------------

@functools.cache
def _trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release() -> None:
    trim = _trim()
    if trim is not None:
        trim(0)


# -- a run's numbers, checked before it starts ----------------------------------------------------------------

def config_before_load(source) -> dict | None:
    """A Hugging Face ``config.json`` readable without the weights: a local directory's, or a hub id's in the local
    cache. None for anything else (registry names, GGUF files, poslens directories are checked once loaded)."""
    import json

    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    found = path / "config.json" if path.is_dir() else None
    if found is None and isinstance(source, str) and source.count("/") == 1 and not path.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "config.json")
            found = Path(cached) if isinstance(cached, str) else None
        except Exception:  # noqa: BLE001 (an unreadable cache is no reason to refuse a run)
            found = None
    if found is None or not found.is_file() or (path.is_dir() and (path / "poslens.json").exists()):
        return None
    try:
        cfg = json.loads(found.read_text())
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) and "vocab_size" in cfg else None


def check_run(run: dict, *, model=None, config: dict | None = None, device=None, what: str = "") -> None:
    """Refuse a run (``run``: its ``length``, ``batch``, ``attention_rows`` and ``logits``) on one model before it
    runs (``model`` loaded) or before it loads (its ``config``) when its estimated peak exceeds the free memory."""
    try:
        shape = RunShape.from_model(model, **run) if model is not None else RunShape.from_config(config, **run)
    except (TypeError, ValueError, KeyError, StopIteration):
        return  # a config this estimate cannot read: nothing to refuse on
    check(estimate(shape), device, loaded=model is not None, what=what or getattr(model, "model_name", "?"))
