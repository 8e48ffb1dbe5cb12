"""Random attention inputs for the tests of ``interp.attention``: queries, keys and values with grouped key heads, a
KV cache's offset (fewer queries than keys) and an additive bias or a boolean mask; the float64 attention they are
checked against, written from its definition; a named hook point."""

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


def eager_attention(q, k, v, *, causal: bool, bias=None, scale: float, softcap: float | None = None, windows=()):
    """The float64 pattern and output from the definition. Queries are the last ``n_q`` of the ``n_k`` positions (a
    cache's offset); ``windows`` are ``(window, sinks)`` conditions as ``interp.attention.key_window`` sets them: a key
    is seen when it is nearer than the window or among the sinks, under each."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    rep = q.shape[1] // k.shape[1]
    s = q.double() @ k.double().repeat_interleave(rep, 1).transpose(-1, -2) * scale
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    if bias is not None:
        s = s + bias.double() if bias.dtype != torch.bool else s.masked_fill(~bias, float("-inf"))
    qa, ka = torch.arange(n_k - n_q, n_k)[:, None], torch.arange(n_k)[None]
    for window, sinks in windows:
        s = s.masked_fill(((qa - ka).abs() >= window) & (ka >= sinks), float("-inf"))
    if causal:
        s = s.masked_fill(ka > qa, float("-inf"))
    p = s.softmax(-1)
    return p, p @ v.double().repeat_interleave(rep, 1)


def named_hook(name: str):
    """A bare ``HookPoint`` called ``name``: what ``attend`` reads an attention's name from."""
    from transformer_lens.hook_points import HookPoint

    hook = HookPoint()
    hook.name = name
    return hook
