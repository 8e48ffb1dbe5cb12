"""What a model is: the hash of the checkpoint it was read from (``files_sha256``), a hash of its weights now and the
hooks attached to it.

``weights_sha256`` hashes every tensor of the state dict (name, shape, dtype, bytes), so an edit made in
memory after loading gives a different hash than the one ``load`` stored in ``model.source``.
``active_hooks`` lists the forward / backward hooks attached to any submodule (hook points included), the
edits provenance must mention because they change what the model computes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch


def files_sha256(path) -> str:
    """Hex sha256 of a checkpoint file, or of a directory's files (their names and contents, sorted)."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def weights_sha256(model) -> str:
    h = hashlib.sha256()
    for name, t in model.state_dict(keep_vars=False).items():
        t = t.detach()
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
        if t.device.type == "meta":
            h.update(b"<not materialised>")  # offloaded by accelerate: only name, shape and dtype are known
        elif t.numel():
            h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # the buffer itself, no copy
    return h.hexdigest()


def active_hooks(model) -> list[dict]:
    """``[{'hook': module name, 'kind': 'fwd' | 'fwd_pre' | 'bwd', 'function': qualified name}]``: the hooks attached
    to the loaded model, not those its family registers as part of itself (marked ``poslens_own``, e.g.
    ``interp.tl_modules.fire_tokens``, which only routes the tokens through ``hook_tokens``)."""
    out = []
    for name, module in model.named_modules():
        for kind, table in (("fwd_pre", module._forward_pre_hooks), ("fwd", module._forward_hooks),
                            ("bwd", module._backward_hooks), ("bwd_pre", getattr(module, "_backward_pre_hooks", {}))):
            for fn in table.values():
                target = getattr(fn, "func", fn)  # functools.partial (TransformerLens wraps hooks in one)
                if getattr(target, "poslens_own", False):
                    continue
                label = getattr(target, "__qualname__", None) or type(target).__name__
                out.append({"hook": name, "kind": kind, "function": f"{getattr(target, '__module__', '?')}.{label}"})
    return out
