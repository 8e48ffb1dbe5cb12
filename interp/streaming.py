"""Streaming a long text through a rolling KV cache (Xiao et al., ICLR 2024, "Efficient Streaming Language Models with
Attention Sinks", StreamingLLM), and the two references it is compared with.

The paper's cache: ``sinks`` first tokens and the most recent ``cache_size - sinks`` tokens; each new token attends
to the cache and itself, and positions are the tokens' places in the cache, not in the text (§3.2): with a full cache
the sinks sit at 0..sinks-1, the recent tokens after them and the new token at ``cache_size``, whatever its place in
the text. For RoPE the paper caches keys before rotation and rotates them by their in-cache positions at every step.
Here a key is cached as the family rotated it, with the position it was rotated at, and turned by the difference to
its in-cache position at every step: rotations compose, so that is the unrotated key turned by its in-cache
position, up to float32 rounding.

``RollingCache`` is an ``interp.attention.KVCache``: inside ``attention.decoding(cache)`` every attention of the
llama, repo (integer RoPE) and hf families rotates its new queries and keys from ``cache.past``, hands them to
``cache.append`` and attends under ``cache.visible``'s mask. ``cache_size=None`` keeps every token at its own
position: dense attention, read through a KV cache.

Tokens are read ``chunk`` at a time, and the result is token-by-token streaming's, not an approximation: the mask
gives each new token exactly the keys it would see one token at a time (the sinks and the ``cache_size - sinks``
tokens before it, a token of the chunk included; tokens the chunk has already pushed out of the cache are masked for
the later ones), every key other than a sink at its own distance, and each new token its own copy of the sinks,
turned to the in-cache distance a token-by-token cache would give them (``cache_size - s`` once the cache is full).
So a chunk costs ``sinks x chunk`` keys more, and nothing else changes. A layer with its own attention window
(Gemma 3's sliding layers) masks by in-cache distance as well, so it sees a sink only while the sink is within its
window of the new token in the cache (never, once a cache longer than the window is full) and keeps only the keys its
window can reach.

``recomputed_nll`` is the paper's "sliding window with re-computation": each evaluated token predicted by a fresh
forward pass over the ``window`` tokens before it, at positions 0..window-1.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from interp import attention
from interp.capabilities import Capability, CapabilityError, require

STREAMING_FAMILIES = ("llama", "hf", "repo")  # whose attention reads ``attention.current_kv_cache``


def check_streamable(model, who: str) -> None:
    """Refuse, naming ``who``, a model a rolling cache cannot re-index: one without rotary positions, one whose
    attention does not read ``interp.attention``'s KV cache, or one whose positions are not the tokens' integer
    places (RePo's learned positions)."""
    require(model, Capability.ROTARY, who)
    require(model, Capability.CAUSAL_LM, who)
    if model.family not in STREAMING_FAMILIES or not getattr(model, "supports_kv_cache", False):
        raise CapabilityError(f"{who} streams through a rolling KV cache, which the {model.family} family's attention "
                              f"does not read ({model.model_name}); families that do: {', '.join(STREAMING_FAMILIES)}")
    modes = getattr(model, "position_modes", lambda: [])()
    learned = sorted({m for m in modes if m not in ("rope", "nope")})
    if learned:
        raise CapabilityError(f"{who} re-indexes integer positions inside the cache; {model.model_name} "
                              f"has {learned[0]} positions computed from the tokens, which a cache cannot re-index")


class RollingCache(attention.KVCache):
    """StreamingLLM's cache for one sequence (batch 1): ``sinks`` first tokens and the most recent
    ``cache_size - sinks`` others, positions re-indexed in the cache; ``cache_size=None``: every token, at its own
    position. Call ``begin(start, n)`` before the forward pass over stream tokens ``start..start+n-1`` and ``end()``
    after it."""

    def __init__(self, model, cache_size: int | None, sinks: int = 0):
        super().__init__()
        if cache_size is None and sinks:
            raise ValueError("RollingCache: sinks are kept in a rolling cache; without cache_size nothing is evicted")
        if cache_size is not None and not 0 <= sinks < cache_size:
            raise ValueError(f"RollingCache: sinks={sinks} must be at least 0 and fewer than cache_size={cache_size}")
        self.model, self.cache_size, self.sinks = model, cache_size, sinks
        self.layer_of = {block.attn: layer for layer, block in enumerate(model.blocks)}
        rotary = Capability.ROTARY in model.capabilities
        self.specs = [model.rotation(layer) if rotary else None for layer in range(model.n_layers)]
        self.windows = tuple(getattr(model, "attention_windows", None) or (None,) * model.n_layers)
        self.start, self.n = 0, 0
        # owner -> sink keys / values, recent keys / values and the positions they were rotated at
        self._store: dict = {}
        self._layout: dict = {}  # owner -> (sinks, recent) held when this chunk's keys were built
        self._masks: dict = {}
        self._seen: set = set()

    def position(self, g: Tensor) -> Tensor:
        """In-cache position of stream token ``g`` when it is the new token: ``min(g, cache_size)``."""
        return g if self.cache_size is None else g.clamp(max=self.cache_size)

    def begin(self, start: int, n: int) -> None:
        if self.cache_size is not None and n > self.cache_size - self.sinks:
            raise ValueError(f"RollingCache: a chunk of {n} tokens is longer than "
                             f"the {self.cache_size - self.sinks} recent tokens the cache keeps")
        self.start, self.n = start, n
        g = torch.arange(start, start + n)
        self.first = int(self.position(torch.tensor(start)))  # in-cache position of the chunk's first token
        # each new token's copy of the sinks sits this far from where the sinks sit for the chunk's other tokens
        offsets = self.first + torch.arange(n) - self.position(g)
        self.offsets, self.group = torch.unique(offsets, return_inverse=True)
        self._layout, self._masks, self._seen = {}, {}, set()

    def end(self) -> None:
        missing = [layer for owner, layer in self.layer_of.items() if owner not in self._seen]
        if missing:
            raise RuntimeError(f"{self.model.model_name}: layers {missing} did not read the rolling cache; the "
                               f"{self.model.family} family does not stream")
        self.start += self.n

    def past(self, owner) -> int:
        return self.first

    def select(self, rows) -> None:
        raise NotImplementedError("RollingCache streams one sequence")

    def _turn(self, owner, k: Tensor, by: Tensor) -> Tensor:
        spec = self.specs[self.layer_of[owner]]
        if spec is None or not bool(by.any()):
            return k
        return spec.rotate(k, by.to(k.device, torch.float32)[None])

    def append(self, owner, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """``k`` (rotated at ``past(owner)`` onwards) and ``v`` ``[1, n, kv_head, d]`` of this chunk -> the keys and
        values its queries attend to: the sinks (one copy per distinct offset), the recent tokens, then the chunk."""
        if k.shape[0] != 1 or k.shape[1] != self.n:
            raise ValueError(f"RollingCache: expected keys [1, {self.n}, kv_head, d] (begin() set a chunk "
                             f"of {self.n}), got {tuple(k.shape)}")
        self._seen.add(owner)
        layer = self.layer_of[owner]
        t, n, first = self.start, self.n, self.first
        store = self._store.get(owner)
        parts_k, parts_v = [], []
        n_sinks = n_recent = 0
        if store is not None:
            n_sinks, n_recent = store["sink_k"].shape[1], store["k"].shape[1]
            # a sink is rotated at its own index s; its copy for each offset at s + offset, offset by offset
            if n_sinks:
                copies = len(self.offsets)
                parts_k.append(self._turn(owner, store["sink_k"].repeat(1, copies, 1, 1),
                                          self.offsets.repeat_interleave(n_sinks)))
                parts_v.append(store["sink_v"].repeat(1, copies, 1, 1))
            if n_recent:
                wanted = torch.arange(t - n_recent, t) - t + first  # recent token j at j - t + first
                parts_k.append(self._turn(owner, store["k"], wanted - store["pos"]))
                parts_v.append(store["v"])
        keys, values = torch.cat(parts_k + [k], 1), torch.cat(parts_v + [v], 1)
        self._layout[owner] = (n_sinks, n_recent)
        # the chunk joins the cache: stream tokens below ``sinks`` as sinks, the rest as recent tokens
        pos = torch.arange(first, first + n, dtype=torch.float32)
        is_sink = torch.arange(t, t + n) < self.sinks
        s = int(is_sink.sum())
        empty = k[:, :0]
        old = store or dict(sink_k=empty, sink_v=v[:, :0], k=empty, v=v[:, :0], pos=torch.zeros(0))
        store = dict(sink_k=torch.cat([old["sink_k"], k[:, :s]], 1), sink_v=torch.cat([old["sink_v"], v[:, :s]], 1),
                     k=torch.cat([old["k"], k[:, s:]], 1), v=torch.cat([old["v"], v[:, s:]], 1),
                     pos=torch.cat([old["pos"], pos[s:]]))
        keep = self._capacity(layer)
        if keep is not None and store["k"].shape[1] > keep:
            store.update(k=store["k"][:, -keep:] if keep else store["k"][:, :0],
                         v=store["v"][:, -keep:] if keep else store["v"][:, :0],
                         pos=store["pos"][-keep:] if keep else store["pos"][:0])
        self._store[owner] = store
        return keys, values

    def _capacity(self, layer: int) -> int | None:
        """Recent tokens a layer keeps for the tokens to come: the cache's, or fewer where the layer's own window
        reaches fewer."""
        limits = [c for c in (None if self.cache_size is None else self.cache_size - self.sinks,
                              None if self.windows[layer] is None else self.windows[layer] - 1) if c is not None]
        return min(limits) if limits else None

    def visible(self, owner, n_q: int, n_k: int, window: int | None = None) -> Tensor:
        """Additive mask ``[1, 1, n_q, n_k]`` (0 or -inf) of the keys ``append`` returned: what each new token sees one
        token at a time; ``window`` (else the layer's own) limits in-cache distances."""
        layer = self.layer_of[owner]
        if window is not None and window != self.windows[layer]:
            raise ValueError(f"RollingCache: layer {layer} attends through a window of {window} keys, but "
                             f"{self.model.model_name} declares {self.windows[layer]}")
        window = self.windows[layer]
        n_sinks, n_recent = self._layout[owner]
        key = (n_sinks, n_recent, window, n_q, n_k)
        if key not in self._masks:
            self._masks[key] = self._mask(n_sinks, n_recent, window, n_q, n_k)
        return self._masks[key]

    def _mask(self, n_sinks: int, n_recent: int, window: int | None, n_q: int, n_k: int) -> Tensor:
        t, n, C, k = self.start, self.n, self.cache_size, self.sinks
        if n_q != n or n_k != len(self.offsets) * n_sinks + n_recent + n:
            raise ValueError(f"RollingCache: attention of {n_q} queries over {n_k} keys, but the cache built "
                             f"{len(self.offsets) * n_sinks + n_recent + n} keys for {n} new tokens")
        g = torch.arange(t, t + n)[:, None]  # the new tokens, [n, 1]
        far = (lambda d: torch.zeros_like(d, dtype=torch.bool)) if window is None else (lambda d: d >= window)
        kept = ((lambda j: torch.ones_like(j, dtype=torch.bool)) if C is None
                else (lambda j: (j < k) | (j >= g - (C - k))))
        sink_idx = torch.arange(n_sinks).repeat(len(self.offsets))[None, :]
        sink_group = torch.arange(len(self.offsets)).repeat_interleave(n_sinks)[None, :]
        sinks = (sink_group == self.group[:, None]) & ~far(self.position(g) - sink_idx)
        recent = torch.arange(t - n_recent, t)[None, :]
        recent = kept(recent) & ~far(g - recent)
        chunk = torch.arange(t, t + n)[None, :]
        chunk = (chunk <= g) & kept(chunk) & ~far(g - chunk)
        ok = torch.cat([sinks, recent, chunk], 1)
        return torch.zeros(ok.shape).masked_fill_(~ok, float("-inf"))[None, None].to(self.model.device)


def _chunks(n_inputs: int, chunk: int):
    for start in range(0, n_inputs, chunk):
        yield start, min(chunk, n_inputs - start)


@torch.no_grad()
def stream_nll(model, ids, cache_size: int | None, sinks: int = 0, chunk: int = 64, progress=None) -> np.ndarray:
    """Next-token loss (nats, float64) of tokens 1..len(ids)-1 of one stream read through ``RollingCache(model,
    cache_size, sinks)``, ``chunk`` tokens per forward pass (fewer where the cache keeps fewer recent tokens; the
    numbers are the same, see the module docstring). ``progress(n)`` is called after each chunk."""
    tokens = torch.as_tensor(ids, dtype=torch.long).flatten().to(model.device)
    if tokens.numel() < 2:
        raise ValueError(f"stream_nll: a stream of {tokens.numel()} tokens has nothing to predict")
    if cache_size is not None:
        chunk = min(chunk, cache_size - sinks)
    cache = RollingCache(model, cache_size, sinks)
    out = np.empty(tokens.numel() - 1)
    with attention.decoding(cache):
        for start, n in _chunks(tokens.numel() - 1, chunk):
            cache.begin(start, n)
            nll = model.token_losses(tokens[start:start + n][None], tokens[start + 1:start + n + 1][None])[0]
            cache.end()
            out[start:start + n] = nll.double().cpu().numpy()
            if progress is not None:
                progress(n)
    return out


def last_logits(model, tokens: Tensor) -> Tensor:
    """Next-token logits ``[batch, d_vocab]`` of the last position only, without the output head over every other
    position where the family allows (``hook_final`` keeps the last row; the hf family asks transformers for one)."""
    import inspect

    tokens = model.check_tokens(tokens)
    if model.family == "hf" and "logits_to_keep" in inspect.signature(model.hf.forward).parameters:
        return model.hf(input_ids=tokens, use_cache=False, logits_to_keep=1).logits[:, -1]
    if "hook_final" in model.hook_dict:
        with model.hooks(fwd_hooks=[("hook_final", lambda x, hook: x[:, -1:])]):
            return model(tokens)[:, -1]
    return model(tokens)[:, -1]


@torch.no_grad()
def recomputed_nll(model, ids, window: int, targets, progress=None, prefix=()) -> np.ndarray:
    """Loss (nats, float64) of each stream token in ``targets`` predicted from a fresh forward pass over the ``window``
    tokens before it (fewer near the start), at positions 0..window-1: sliding-window attention with re-computation.
    With ``prefix`` (e.g. the start token) the pass reads ``prefix`` then the ``window - len(prefix)`` tokens before the
    target (the whole stream before it where that is shorter and already begins with ``prefix``), so every pass begins
    as the model's documents do."""
    tokens = torch.as_tensor(ids, dtype=torch.long).flatten().to(model.device)
    head = torch.as_tensor(list(prefix), dtype=torch.long).to(model.device)
    if len(head) >= window:
        raise ValueError(f"recomputed_nll: a prefix of {len(head)} tokens leaves no room in a window of {window}")
    out = np.empty(len(targets))
    for i, g in enumerate(int(g) for g in targets):
        if not 1 <= g < tokens.numel():
            raise ValueError(f"recomputed_nll: target {g} is not a token of the stream (1..{tokens.numel() - 1})")
        if len(head):
            a = max(0, g - (window - len(head)))
            seen = tokens[a:g]
            if not (a == 0 and torch.equal(seen[:len(head)], head)):
                seen = torch.cat([head, seen])
            logits = last_logits(model, seen[None])
        else:
            logits = last_logits(model, tokens[max(0, g - window):g][None])
        out[i] = float(F.cross_entropy(logits.float(), tokens[g:g + 1]))
        if progress is not None:
            progress(1)
    return out
