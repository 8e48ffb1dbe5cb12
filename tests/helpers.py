"""Test helpers: tiny models of every variant with non-trivial weights (``randomized``, which the RePo and encoder
helpers use too), and an independent reference implementation of the upstream learned-increments forward pass."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from interp.families.increments.model import IncrementConfig, IncrementTransformer

VARIANTS = {
    "rope": dict(pos_encoding="rope"),
    "shared": dict(pos_encoding="selective_rope"),
    "shared-per-head": dict(pos_encoding="selective_rope", per_head_delta=True),
    "per-layer": dict(pos_encoding="selective_rope", per_layer_delta=True),
    "per-layer-per-head": dict(pos_encoding="selective_rope", per_layer_delta=True, per_head_delta=True),
    "pope": dict(pos_encoding="pope"),
    "selective-pope": dict(pos_encoding="selective_pope"),
    "alibi": dict(pos_encoding="selective_rope", decay="alibi"),
    "learned-decay": dict(pos_encoding="rope", decay="learned"),
    "layernorm-gelu": dict(pos_encoding="selective_rope", norm_type="layernorm", activation="gelu"),
}


def tiny_config(**overrides) -> IncrementConfig:
    base = dict(dim=32, n_heads=4, n_layers=2, intermediate_dim=64, vocab_size=257, max_seq_len=64)
    return IncrementConfig(**{**base, **overrides})


def randomized(model, name: str, scale: float, unit: tuple[str, ...] = ()):
    """``model`` with every parameter redrawn from the caller's seed, in order: norms ``1 + N(0, 0.1)``, those whose
    name contains one of ``unit`` ``N(0, 1)``, the rest ``N(0, scale)`` (so every head and position differs); named
    ``name``, in eval mode."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif any(u in pname for u in unit):
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(scale * torch.randn_like(p))
    model.model_name = name
    return model.eval()


def tiny_model(variant: str = "per-layer", seed: int = 0, scale: float = 0.3, **overrides) -> IncrementTransformer:
    """A small model whose weights are random enough that every increment and head differs."""
    torch.manual_seed(seed)
    return randomized(IncrementTransformer(tiny_config(**{**VARIANTS[variant], **overrides})), f"tiny-{variant}", scale)


# ---- independent reference: the upstream forward written from its description ------------------------


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _norm(state, prefix, x, cfg):
    if cfg["norm_type"] == "layernorm":
        return F.layer_norm(x, x.shape[-1:], state[prefix + ".weight"], state[prefix + ".bias"], cfg["norm_eps"])
    return _rms(x, state[prefix + ".weight"], cfg["norm_eps"])


def _rope_complex(x, positions, theta):
    """Upstream convention: view consecutive pairs as complex numbers, multiply by e^{i pos freq}."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    if positions.dim() == 2:
        positions = positions.unsqueeze(-1)  # [b, n, 1] broadcast over heads
    angles = positions.unsqueeze(-1) * inv
    freqs = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2)


def _pope(x, positions, theta):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    if positions.dim() == 2:
        positions = positions.unsqueeze(-1)
    angles = positions.unsqueeze(-1) * inv
    mag = F.softplus(x.float().reshape(*x.shape[:-1], -1, 2).norm(dim=-1))
    return torch.stack([mag * angles.cos(), mag * angles.sin()], -1).flatten(-2)


def _delta(state, prefix, h, bounded):
    if bounded:
        h = _rms(h, state[prefix + "norm.weight"], torch.finfo(torch.float32).eps)
    raw = F.linear(F.gelu(F.linear(h, state[prefix + "fc1.weight"], state[prefix + "fc1.bias"])),
                   state[prefix + "fc2.weight"], state[prefix + "fc2.bias"])
    out = 10 * torch.sigmoid(raw) if bounded else F.softplus(raw)
    return out.squeeze(-1) if out.shape[-1] == 1 else out  # [b, n] or [b, n, h]


def reference_logits(state: dict, cfg: dict, ids: torch.Tensor) -> torch.Tensor:
    """Logits from an upstream-layout state dict and model_config, with no poslens code involved."""
    b, n = ids.shape
    h, hd = cfg["n_heads"], cfg["dim"] // cfg["n_heads"]
    x = state["tok_emb.weight"][ids]
    selective = cfg["pos_encoding"].startswith("selective")
    pope = cfg["pos_encoding"].endswith("pope")
    positions = torch.arange(n).float().expand(b, n)
    if selective and not cfg["per_layer_delta"]:
        positions = torch.cumsum(_delta(state, "delta_mlp.", x, bounded=False), dim=1)
    bias = None
    if cfg["decay"] == "alibi":
        ratio = 2.0 ** (-8.0 / h)
        slopes = torch.tensor([ratio ** (i + 1) for i in range(h)])
        dist = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).clamp(min=0).float()
        bias = -slopes[:, None, None] * dist
    elif cfg["decay"] == "learned":
        la = F.logsigmoid(F.linear(F.gelu(F.linear(x, state["forget_mlp.fc1.weight"], state["forget_mlp.fc1.bias"])),
                                   state["forget_mlp.fc2.weight"], state["forget_mlp.fc2.bias"]))
        cum = la.permute(0, 2, 1).cumsum(-1)
        bias = cum.unsqueeze(3) - cum.unsqueeze(2)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i in range(cfg["n_layers"]):
        p = f"layers.{i}."
        if selective and cfg["per_layer_delta"]:
            positions = torch.cumsum(_delta(state, f"delta_mlps.{i}.", x, bounded=True), dim=1)
        a = _norm(state, p + "attn_norm", x, cfg)
        q = F.linear(a, state[p + "attn.wq.weight"]).view(b, n, h, hd)
        k = F.linear(a, state[p + "attn.wk.weight"]).view(b, n, h, hd)
        v = F.linear(a, state[p + "attn.wv.weight"]).view(b, n, h, hd)
        place = _pope if pope else _rope_complex
        q, k = place(q, positions, cfg["rope_theta"]), place(k, positions, cfg["rope_theta"])
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / hd**0.5
        if bias is not None:
            scores = scores + bias
        scores = scores.masked_fill(~causal, float("-inf"))
        z = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(b, n, -1)
        x = x + F.linear(z, state[p + "attn.wo.weight"])
        f = _norm(state, p + "ffn_norm", x, cfg)
        if cfg["activation"] == "swiglu":
            hidden = F.silu(F.linear(f, state[p + "ffn.w_gate.weight"])) * F.linear(f, state[p + "ffn.w_up.weight"])
        else:
            hidden = F.gelu(F.linear(f, state[p + "ffn.w_up.weight"]))
        x = x + F.linear(hidden, state[p + "ffn.w_down.weight"])
    return _norm(state, "final_norm", x, cfg) @ state["tok_emb.weight"].T
