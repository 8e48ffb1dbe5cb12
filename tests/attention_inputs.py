"""Random attention inputs for the tests of ``interp.attention``: queries, keys and values with grouped key heads, a
KV cache's offset (fewer queries than keys) and an additive bias or a boolean mask."""

from __future__ import annotations

import torch


def random_attention(seed: int, *, n_q: int, offset: int = 0, heads: int = 4, kv: int = 4, d: int = 8, d_v: int = 5,
                     bias: str | None = None, batch: int = 2, q_scale: float = 1.5, window: int | None = None):
    """``(q [batch, heads, n_q, d], k [batch, kv, n_k, d], v [batch, kv, n_k, d_v], bias)`` with ``n_k = n_q + offset``.

    ``bias``: None; ``"float"``, an additive ``[1, heads, n_q, n_k]`` normal term; ``"bool"``, a random boolean mask
    ``[batch, 1, n_q, n_k]`` (True: visible) that leaves the first key and each query's own key visible; ``"sliding"``,
    a causal sliding window of ``window`` keys as a boolean ``[1, 1, n_q, n_k]`` mask (Gemma's sliding layers)."""
    g = torch.Generator().manual_seed(seed)
    n_k = n_q + offset
    q = torch.randn(batch, heads, n_q, d, generator=g) * q_scale
    k, v = torch.randn(batch, kv, n_k, d, generator=g), torch.randn(batch, kv, n_k, d_v, generator=g)
    mask = None
    if bias == "float":
        mask = torch.randn(1, heads, n_q, n_k, generator=g)
    elif bias == "bool":
        mask = torch.rand(batch, 1, n_q, n_k, generator=g) > 0.3
        mask[..., 0] = True
        mask[..., torch.arange(n_q), torch.arange(n_q) + offset] = True
    elif bias == "sliding":
        if window is None:
            raise ValueError("random_attention: a sliding mask needs window=")
        back = torch.arange(n_q)[:, None] + offset - torch.arange(n_k)[None]
        mask = ((back >= 0) & (back < window))[None, None]
    elif bias is not None:
        raise ValueError(f"random_attention: bias={bias!r}; known: None, 'float', 'bool', 'sliding'")
    return q, k, v, mask
