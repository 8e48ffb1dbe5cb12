"""Generic family: any Hugging Face architecture TransformerLens' ``TransformerBridge`` has an adapter for,
run by transformers' own modules and hooked under TransformerLens names.

What comes from where:

- the architecture (which module holds the layers, the token and the learned position embeddings, whether
  positions are rotary) is read from the bridge's architecture adapter for the checkpoint's config;
- the forward pass is transformers' own, with one change: attention runs through ``poslens_attention``,
  registered with transformers' ``AttentionInterface`` under the name ``"poslens"``, which hands it to the attention
  every family shares (``interp.attention.attend``: statistics, spans, query rows). Its output comes from
  ``scaled_dot_product_attention``; only while a hook is attached to ``hook_attn_scores`` / ``hook_pattern``
  are the scores and pattern built, for the rows of ``interp.attention.query_rows`` only when it is set (edits
  to them change the output of those rows). The bridge itself forces eager attention, which builds every
  ``[head, N, N]`` pattern on every forward; this family never does unless asked.
- capabilities come from the loaded model: ``CAUSAL_LM`` / ``MASKED_LM`` only when the checkpoint's class has
  that head (the loader refuses checkpoints missing any weight, so no head is ever randomly initialised),
  ``ATTENTION`` when a probe forward finds exactly one attention call per layer, ``POSITIONS`` for rotary
  models, ``AP_STREAM`` when the adapter names a learned position table.

``blocks.{l}.attn.hook_positions`` reports the integer positions the layer rotates by (transformers'
``position_ids``); it is read-only here: editing it does not change the rotation.

Inside ``interp.attention.decoding(cache)`` a forward pass continues from ``cache.past`` (its ``position_ids``) and
each layer's attention takes its keys, values and mask from poslens' ``KVCache`` instead of transformers' (which is
not used: ``use_cache=False``); ``interp.streaming``'s rolling cache reads the model this way.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import math
from types import SimpleNamespace

import torch
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp import layer_range, padding
from interp.attention import StopForward, attend, current_kv_cache, hooked
from interp.base import CapabilityError, PosLensModel
from interp.hooks import RESULT, AttentionHooks, BlockHooks, Hook, MLPHooks, NormHooks
from interp.tl import AttentionWeights, per_head_split

ATTENTION_NAME = "poslens"

_LAYER: contextvars.ContextVar[nn.Module | None] = contextvars.ContextVar("poslens_hf_layer", default=None)


class LayerAttention(AttentionHooks, AttentionWeights):
    """The hook points of one layer's attention; ``poslens_attention`` fires them (``hook_result``: a forward hook on
    the output projection, where it is an ``nn.Linear``)."""

    hook_v = Hook("[batch, pos, kv_head, d_head]", "values")
    hook_attn_scores = Hook("[batch, head, q, k]", "scaled (soft-capped), masked logits; built only when hooked")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities; built only when hooked, query_rows honoured")
    hook_z = Hook("[batch, pos, head, d_head]", "per-head attention output before the output projection")
    hook_result = Hook(RESULT.shape, RESULT.meaning + " (an output projection that is an nn.Linear or a Conv1D)",
                       when=lambda attn: attn.linear_parts)

    def __init__(self, parts: dict | None = None, n_heads: int = 0):
        super().__init__()
        self.calls = 0  # attention calls seen (the loader's probe checks one per layer)
        self.tl_n_heads = n_heads
        self.per_head_qkv = False  # a fused qkv laid out [head, q|k|v, d_head] (PER_HEAD_QKV; set by the model)
        # transformers' q, k, v, o projections, as the bridge's adapter names them (not registered: they are self.hf's)
        self.__dict__["parts"] = parts or {}
        names = ("q", "k", "v", "o") if "qkv" not in self.parts else ("qkv", "o")
        self.linear_parts = all(linear_view(self.parts.get(k)) is not None for k in names)

    def tl_projections(self):
        """The q, k, v and o projections as ``nn.Linear``-like views (GPT-2's fused Conv1D ``c_attn`` split in
        three; a fused qkv laid out head by head, ``per_head_qkv``, split per head: ``interp.tl.per_head_split``)."""
        if not self.linear_parts:
            raise AttributeError("this architecture's attention has no q, k, v and o projections poslens can read as "
                                 "linear maps: no per-head weight views")
        if "qkv" in self.parts and self.per_head_qkv:
            fused = linear_view(self.parts["qkv"])
            return (*per_head_split(fused.weight, fused.bias, self.tl_n_heads), linear_view(self.parts["o"]))
        if "qkv" in self.parts:
            fused, o = linear_view(self.parts["qkv"]), linear_view(self.parts["o"])
            q_rows = o.weight.shape[1]  # [q | k | v], k and v of grouped-query heads narrower than q
            sizes = (q_rows, *(((fused.weight.shape[0] - q_rows) // 2,) * 2))
            bias = fused.bias.split(sizes) if fused.bias is not None else (None,) * 3
            q, k, v = (SimpleNamespace(weight=w, bias=b) for w, b in zip(fused.weight.split(sizes), bias))
            return q, k, v, o
        return tuple(linear_view(self.parts[k]) for k in ("q", "k", "v", "o"))


PER_HEAD_QKV = ("gpt_neox", "gpt_neox_japanese", "bloom", "persimmon")  # fused qkv laid out [head, q|k|v, d_head]


def linear_view(module):
    """``module`` as an ``nn.Linear``-like object (``weight [out, in]``, ``bias``): itself, a transposed view of a
    transformers ``Conv1D`` (GPT-2), or None."""
    if isinstance(module, nn.Linear):
        return module
    if type(module).__name__ == "Conv1D":
        return SimpleNamespace(weight=module.weight.T, bias=module.bias)
    return None


class PlainAttention(LayerAttention):
    hook_q = Hook("[batch, pos, head, d_head]", "queries (models without rotary positions)")
    hook_k = Hook("[batch, pos, kv_head, d_head]", "keys (models without rotary positions; grouped-query heads)")

    def queries_and_keys(self):
        return self.hook_q, self.hook_k

    def positions(self, position_ids, b: int, h: int, n_q: int, n_k: int, device) -> None:
        return None


class RotaryAttention(LayerAttention):
    """transformers rotates inside the layer: attention receives queries and keys already turned. ``hook_q`` /
    ``hook_k`` fire on the q / k projections' outputs (as TransformerLens' bridge hooks them), before any q / k norm and
    the rotation, where the adapter names those projections."""

    hook_q = Hook("[batch, pos, head, d_head]", "the q projection's output by head: before any q_norm and the rotation",
                  when=lambda attn: "q" in attn.parts)
    hook_k = Hook("[batch, pos, kv_head, d_head]", "the k projection's output by head: before any k_norm and the "
                  "rotation", when=lambda attn: "k" in attn.parts)

    hook_rot_q = Hook("[batch, pos, head, d_head]",
                      "queries after rotation (rotary models: transformers rotates inside its "
                      "layers, so queries before rotation are not visible)")
    hook_rot_k = Hook("[batch, pos, kv_head, d_head]",
                      "keys after rotation (rotary models; with a KV cache, every cached key)")
    hook_positions = Hook("[batch, head, pos]", "integer positions the layer rotates by (rotary models; read-only)")

    def queries_and_keys(self):
        return self.hook_rot_q, self.hook_rot_k

    def positions(self, position_ids, b: int, h: int, n_q: int, n_k: int, device) -> None:
        if self.hook_positions.has_hooks():
            pos = position_ids if position_ids is not None else torch.arange(n_k - n_q, n_k, device=device)[None]
            self.hook_positions(pos.to(torch.float32).expand(b, -1)[:, None, :].expand(b, h, n_q))


class OutputNormHooks(NormHooks):
    """TransformerLens' norm hooks around a transformers norm module (a forward hook on it, ``_fire_norm``): its scale
    and ``x / scale`` recomputed from its input while hooked, an edit of either added to its output through its
    weight."""

    hook_scale = Hook("[batch, pos, 1]", "the norm's divisor sqrt(mean(x^2) + eps) (of the centred x for LayerNorm), "
                      "recomputed from the norm's input while hooked")
    hook_normalized = Hook("[batch, pos, d_model]", "x / scale, before the norm's weight: recomputed from the norm's "
                           "input only while this or hook_scale is hooked; an edit d changes the norm's output by "
                           "d * weight (1 + weight for Gemma's norms)")

    def __init__(self, norm, centred: bool = False, offset: bool = False):
        super().__init__(norm)
        self.centred, self.offset = centred, offset

    def forward(self, x):
        return self.norm(x)  # the module's own forward hook fires the hooks


def norm_eps(module) -> float | None:
    """A transformers norm module's epsilon, under the names its classes give it."""
    for name in ("eps", "variance_epsilon", "epsilon", "layer_norm_eps"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _as_tokens(t: Tensor) -> Tensor:
    """``t`` as ``[batch, pos, ...]``: inside a layer that runs part of itself on flattened tokens (OPT's MLP
    region, ``[batch * pos, d]``), viewed with the layer's batch and positions; else ``t``."""
    block = _LAYER.get()
    shape = None if block is None else block.__dict__.get("_tokens")
    if shape is None or t.dim() != 2 or t.shape[0] != shape[0] * shape[1]:
        return t
    return t.view(*shape, t.shape[-1])


def _token_rows(fn, t: Tensor) -> Tensor:
    """``fn`` (a hook documented ``[batch, pos, ...]``) on ``t`` seen as tokens (``_as_tokens``), returned in ``t``'s
    shape."""
    seen = _as_tokens(t)
    y = fn(seen)
    return t if y is seen else y.reshape(t.shape)


def _fire_norm(hooks: OutputNormHooks, module, args, output):
    if not (hooked(hooks.hook_scale) or hooked(hooks.hook_normalized)) or not isinstance(output, Tensor):
        return None
    x = _as_tokens(args[0]).float()
    if hooks.centred:
        x = x - x.mean(-1, keepdim=True)
    scale = (x.pow(2).mean(-1, keepdim=True) + norm_eps(module)).sqrt()
    normed = x / scale
    edited = hooks.hook_normalized(x / hooks.hook_scale(scale))
    if edited is normed or torch.equal(edited, normed):
        return None
    weight = getattr(module, "weight", None)
    gain = 1.0 if weight is None else (1.0 + weight.float() if hooks.offset else weight.float())
    return (output.float() + ((edited - normed) * gain).reshape(output.shape)).to(output.dtype)


class Block(BlockHooks):
    """transformers adds the attention and MLP outputs inside each layer's own forward: the hooks fire on the modules
    the bridge's adapter names (``parts``): ``hook_attn_out`` on the attention's output (after ``ln1_post`` where the
    architecture has one), ``hook_mlp_out`` on the MLP's (after ``ln2_post``), ``hook_resid_mid`` on the input of
    ``ln2`` (sequential pre-norm layers), whose edit is also added to what the layer adds after the MLP, so that the
    residual carries it as in TransformerLens."""

    hook_attn_out = Hook("[batch, pos, d_model]", "attention output added to the residual (after any post-attention "
                         "norm)", when=lambda block: "attn" in block.parts)
    hook_resid_mid = Hook("[batch, pos, d_model]", "residual after attention (the input of the pre-MLP norm; layers "
                          "with one)", when=lambda block: "ln2" in block.parts and block.has_mlp)
    hook_mlp_out = Hook("[batch, pos, d_model]", "MLP output added to the residual (after any post-MLP norm)",
                        when=lambda block: block.has_mlp)

    def __init__(self, attention: LayerAttention, parts: dict | None = None, mlp_parts: dict | None = None,
                 norm_kind: tuple[bool, bool] = (False, False)):
        super().__init__()
        self.attn = attention
        self.__dict__["parts"] = parts or {}  # transformers' modules of this layer (self.hf's, not registered here)
        self.__dict__["mlp_parts"] = mlp_parts or {}
        # an MLP in a module of its own, or (OPT) its projections directly on the layer
        self.__dict__["has_mlp"] = "mlp" in self.parts or "out" in self.mlp_parts
        if "out" in self.mlp_parts and ({"gate", "in", "gate_in"} & set(self.mlp_parts)):
            self.mlp = MLPHooks(self.mlp_parts)
        for key in ("ln1", "ln1_post", "ln2", "ln2_post"):
            if key in self.parts and norm_eps(self.parts[key]) is not None:
                self.add_module(key, OutputNormHooks(self.parts[key], *norm_kind))


def _heads_last(hook, x: Tensor) -> Tensor:
    """Pass ``[batch, head, pos, d]`` through a hook documented as ``[batch, pos, head, d]``."""
    return x if not hook.has_hooks() else hook(x.transpose(1, 2)).transpose(1, 2)


def poslens_attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, *,
                      scaling: float | None = None, dropout: float = 0.0, softcap: float | None = None,
                      is_causal: bool | None = None, position_ids: Tensor | None = None, **kwargs):
    """transformers' attention-function protocol: ``query [batch, head, q, d]``, ``key`` / ``value``
    ``[batch, kv_head, k, d]`` -> ``(output [batch, q, head, d], None)``."""
    if kwargs.get("s_aux") is not None:
        raise NotImplementedError(f"{type(module).__name__}: attention sinks (s_aux) are not supported by the poslens "
                                  "attention")
    if dropout and module.training:
        raise NotImplementedError(f"{type(module).__name__}: poslens attention runs without attention dropout (call "
                                  "model.eval())")
    hooks: LayerAttention | None = getattr(_LAYER.get(), "attn", None)
    scaling = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    cache = current_kv_cache() if hooks is not None else None
    # inside attention.decoding: the cache's keys and its mask replace transformers' (see HFModel.forward)
    if cache is not None:
        key, value = (x.transpose(1, 2) for x in cache.append(hooks, key.transpose(1, 2), value.transpose(1, 2)))
        attention_mask = cache.visible(hooks, query.shape[-2], key.shape[-2], kwargs.get("sliding_window"))
        attention_mask = attention_mask.to(query.device, query.dtype) if attention_mask is not None else None
    if hooks is None:
        return attend(query, key, value, causal=causal, bias=attention_mask, scale=scaling,
                      softcap=softcap).transpose(1, 2), None
    hooks.calls += 1
    b, h, n_q, _ = query.shape
    hooks.positions(position_ids, b, h, n_q, key.shape[-2], query.device)
    q_hook, k_hook = hooks.queries_and_keys()
    q, k, v = _heads_last(q_hook, query), _heads_last(k_hook, key), _heads_last(hooks.hook_v, value)
    z = attend(q, k, v, causal=causal, bias=attention_mask, scale=scaling, softcap=softcap,
               hook_scores=hooks.hook_attn_scores, hook_pattern=hooks.hook_pattern)
    return hooks.hook_z(z.transpose(1, 2)), None


def register_attention() -> None:
    """Make ``attn_implementation="poslens"`` available to transformers (masks as for sdpa)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, poslens_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)


def _replace_hidden(output, fn):
    if isinstance(output, Tensor):
        return fn(output)
    if isinstance(output, tuple) and output and isinstance(output[0], Tensor):
        return (fn(output[0]),) + output[1:]
    if hasattr(output, "last_hidden_state"):
        output.last_hidden_state = fn(output.last_hidden_state)
        return output
    raise TypeError(f"cannot find the hidden state in a layer output of type {type(output).__name__}")


def _fire(hook: HookPoint, _module, _args, output):
    return _token_rows(hook, output)


def _fire_embedding(hook: HookPoint, _module, _args, output):
    """An embedding stage's hook, silent in a pass that starts from a given residual (``start_at_layer``)."""
    return None if layer_range.skipping_embeddings() else hook(output)


class _Skipped(nn.Module):
    """A layer ``start_at_layer`` skips, standing in its place for one pass: the hidden state passes unchanged (the
    residual ``start_at_layer`` was given, where it is the last one skipped)."""

    def __init__(self, residual: Tensor | None = None):
        super().__init__()
        self.residual = residual

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states if self.residual is None else self.residual


def _substitute(residual: Tensor, _module, args, kwargs):
    """The residual ``start_at_layer`` was given, entering its first layer in place of the hidden state."""
    if args:
        return (residual,) + tuple(args[1:]), kwargs
    return args, {**kwargs, "hidden_states": residual}


def _stop_before(_module, args, kwargs):
    raise layer_range.Stopped(args[0] if args else kwargs["hidden_states"])


def _stop_after(_module, _args, output):
    found = []
    _replace_hidden(output, found.append)
    raise layer_range.Stopped(found[0])


def _fire_gate_half(hook: HookPoint, _module, _args, output):
    """A fused ``[gate | up]`` projection's output with its gate half through ``hook`` (TransformerLens' ``hook_pre``
    of a gated MLP)."""
    if not hooked(hook):
        return None
    gate, up = output.chunk(2, dim=-1)
    return torch.cat([hook(gate), up], dim=-1)


def _fire_hidden(hook: HookPoint, _module, _args, output):
    return _replace_hidden(output, hook)


def _heads_hook(hook: HookPoint, d_head: int, _module, _args, output):
    """A projection's ``[batch, pos, heads * d_head]`` output through a hook documented per head."""
    if not hooked(hook):
        return None
    return hook(output.view(*output.shape[:-1], -1, d_head)).reshape(output.shape)


def _result(attn: LayerAttention, module, args, output):
    """The output projection of per-head outputs, through ``hook_result`` while it is hooked (their sum + bias)."""
    if not hooked(attn.hook_result):
        return None
    z, linear = args[0], linear_view(module)
    w = linear.weight.T.reshape(attn.tl_n_heads, -1, linear.weight.shape[0])  # [head, d_head, d_model]
    result = attn.hook_result(torch.einsum("...hd,hdm->...hm", z.view(*z.shape[:-1], attn.tl_n_heads, -1), w))
    out = result.sum(-2)
    return out + linear.bias if linear.bias is not None else out


def _mid(block: Block, _module, args, kwargs):
    """The pre-MLP norm's input is the residual after attention: ``hook_resid_mid``; an edit is kept for
    ``_mlp_out``."""
    x = args[0] if args else kwargs["hidden_states"]
    y = _token_rows(block.hook_resid_mid, x)
    if y is x:
        return None
    block.__dict__["_mid_edit"] = y - x
    return ((y,) + tuple(args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": y})


def _fire_input(hook: HookPoint, _module, args):
    y = _token_rows(hook, args[0])
    return None if y is args[0] else (y,) + tuple(args[1:])


def _mlp_out(block: Block, _module, _args, output):
    out = _replace_hidden(output, functools.partial(_token_rows, block.hook_mlp_out))
    edit = block.__dict__.pop("_mid_edit", None)
    return out if edit is None else _replace_hidden(out, lambda t: t + edit.reshape(t.shape))


def _enter(block: Block, _module, args, kwargs):
    """A layer starts: its hook points are the ones attention fires, and its input passes ``hook_resid_pre``."""
    block._token = _LAYER.set(block)
    hidden = args[0] if args else kwargs["hidden_states"]
    block.__dict__["_tokens"] = tuple(hidden.shape[:2])  # what a flattened MLP region is viewed as (_as_tokens)
    block.__dict__.pop("_mid_edit", None)  # a pass stopped between hook_resid_mid and the MLP leaves none behind
    if args:
        return (block.hook_resid_pre(args[0]),) + tuple(args[1:]), kwargs
    kwargs["hidden_states"] = block.hook_resid_pre(kwargs["hidden_states"])
    return args, kwargs


def _leave(block: Block, _module, _args, output):
    _LAYER.reset(block._token)
    block._token = None  # a finished forward leaves nothing a copy of the model cannot hold
    block.__dict__.pop("_tokens", None)
    return _replace_hidden(output, block.hook_resid_post)


def _parts(module: nn.Module, names: dict) -> dict:
    """The submodules of ``module`` named in ``names`` (key: dotted name) that it has."""
    found = {}
    for key, name in names.items():
        try:
            found[key] = module.get_submodule(name)
        except AttributeError:
            continue
    return found

class HFModel(PosLensModel):
    """A transformers model of any architecture the bridge knows, with poslens hooks and capabilities.

    ``structure`` (from ``interp.families.hf.checkpoints``): ``layers`` (the ModuleList of blocks), ``embed`` (token
    embedding module), ``pos_embed`` (learned position table module or None), ``rotary`` (bool), ``head``
    ("causal", "masked" or None) and ``architecture`` (the bridge's adapter name for it).
    """

    family = "hf"
    tl_layer_range = True  # its forward reads interp.layer_range (start_at_layer, stop_at_layer, embeddings)
    supports_kv_cache = True  # generate_batch: transformers' DynamicCache; inside attention.decoding: poslens' KVCache
    positions_read_only = True  # transformers computes the rotation from its own position ids
    hook_embed = Hook("[batch, pos, d_model]", "output of the token-embedding module (before any scaling)")
    hook_pos_embed = Hook("[batch, pos, d_model]",
                          "learned absolute-position embeddings (models with a position table)",
                          when=lambda model: model.pos_table is not None)

    def __init__(self, hf_model: nn.Module, structure: dict, tokenizer=None):
        super().__init__()
        cfg = hf_model.config
        self.cfg = cfg  # model.cfg: TransformerLens' fields over it (interp.tl.TLConfig)
        self.hf = hf_model
        self.structure = {k: v for k, v in structure.items() if not isinstance(v, nn.Module)}
        self.architecture = type(hf_model).__name__
        self.bridge_architecture = structure["architecture"]
        self.tokenizer = tokenizer
        layers = structure["layers"]
        self.n_layers = len(layers)
        self.n_heads = int(getattr(cfg, "num_attention_heads", None) or cfg.n_head)
        self.d_model = int(getattr(cfg, "hidden_size", None) or cfg.n_embd)
        self.d_vocab = int(cfg.vocab_size)
        self.max_seq_len = int(getattr(cfg, "max_position_embeddings", None) or cfg.n_positions)
        self.head = structure["head"]
        self.rotary = structure["rotary"]
        window = getattr(cfg, "sliding_window", None)
        windowed = window is not None and getattr(cfg, "use_sliding_window", True) is not False
        # without layer types (Mistral), a sliding window applies to every layer, as transformers' masks apply it
        self.layer_types = tuple(getattr(cfg, "layer_types", None)
                                 or ("sliding_attention" if windowed else "full_attention",) * self.n_layers)
        # keys each layer's queries may see (None: every earlier key), as transformers' masks apply them
        self.attention_windows = tuple(window if t == "sliding_attention" else None for t in self.layer_types)
        attention = RotaryAttention if self.rotary else PlainAttention
        part_names, attn_names = structure.get("parts", {}), structure.get("attn_parts", {})
        mlp_names = structure.get("mlp_parts", {})
        self.d_head = int(getattr(cfg, "head_dim", None) or self.d_model // self.n_heads)
        tl = structure.get("tl", {})
        norm_kind = (tl.get("normalization_type") == "LN", bool(tl.get("rmsnorm_uses_offset")))  # centred, 1 + w
        self.blocks = nn.ModuleList()
        for layer in layers:
            block_parts = _parts(layer, part_names)
            attn_parts = _parts(block_parts["attn"], attn_names) if "attn" in block_parts else {}
            mlp_parts = _parts(block_parts.get("mlp", layer), mlp_names)  # OPT: fc1 / fc2 on the layer itself
            attn = attention(attn_parts, self.n_heads)
            attn.per_head_qkv = getattr(cfg, "model_type", "") in PER_HEAD_QKV
            self.blocks.append(Block(attn, block_parts, mlp_parts, norm_kind))
        self.__dict__["pos_table"] = structure["pos_embed"]  # a module of self.hf, not registered twice
        self.__dict__["hf_layers"] = layers  # transformers' ModuleList of layers (a layer range swaps some out)
        final = structure.get("ln_final")
        if isinstance(final, nn.Module) and norm_eps(final) is not None:
            self.ln_final = OutputNormHooks(final, *norm_kind)
        self.capabilities = frozenset()
        # each layer's RotarySpec, found by the loader (Capability.ROTARY)
        self.rotary_specs: list = [None] * self.n_layers
        self.setup()
        self._register_hooks(structure["embed"], layers, final)

    def _register_hooks(self, embed: nn.Module, layers, final) -> None:
        """The forward hooks on transformers' modules that fire poslens' hook points. They are partials of
        module-level functions, never closures: a deep copy (interp.controls) copies a partial's hook point with the
        model, so a copy fires its own hooks."""
        embed.register_forward_hook(functools.partial(_fire_embedding, self.hook_embed))
        if self.pos_table is not None:
            self.pos_table.register_forward_hook(functools.partial(_fire_embedding, self.hook_pos_embed))
        for layer, block in zip(layers, self.blocks):
            layer.register_forward_pre_hook(functools.partial(_enter, block), with_kwargs=True)
            layer.register_forward_hook(functools.partial(_leave, block))
            self._hook_parts(block)
        if "ln_final" in self._modules:
            final.register_forward_hook(functools.partial(_fire_norm, self.ln_final))

    def _hook_parts(self, block: Block) -> None:
        """The forward hooks on transformers' modules of one layer that fire its TransformerLens-named hooks."""
        p, attn = block.parts, block.attn
        for key in ("ln1", "ln1_post", "ln2", "ln2_post"):
            if key in block._modules:
                p[key].register_forward_hook(functools.partial(_fire_norm, block._modules[key]))
        if "attn" in p:
            p["ln1_post" if "ln1_post" in p else "attn"].register_forward_hook(
                functools.partial(_fire_hidden, block.hook_attn_out))
        if "hook_resid_mid" in block._modules:
            p["ln2"].register_forward_pre_hook(functools.partial(_mid, block), with_kwargs=True)
        if "mlp" in p:
            p["ln2_post" if "ln2_post" in p else "mlp"].register_forward_hook(functools.partial(_mlp_out, block))
        elif block.has_mlp:  # no MLP module (OPT): its output projection's output is what the layer adds
            block.mlp_parts["out"].register_forward_hook(functools.partial(_mlp_out, block))
        if "mlp" in block._modules:
            m = block.mlp_parts
            fire = _fire_gate_half if "gate_in" in m else _fire
            m[next(k for k in ("gate", "gate_in", "in") if k in m)].register_forward_hook(
                functools.partial(fire, block.mlp.hook_pre))
            m["out"].register_forward_pre_hook(functools.partial(_fire_input, block.mlp.hook_post))
        if isinstance(attn, RotaryAttention):
            for key in ("q", "k"):
                if key in attn.parts:
                    attn.parts[key].register_forward_hook(
                        functools.partial(_heads_hook, attn._modules[f"hook_{key}"], self.d_head))
        if attn.linear_parts:
            attn.parts["o"].register_forward_hook(functools.partial(_result, attn))

    def tl_config(self) -> dict:
        tl = {k: v for k, v in self.structure.get("tl", {}).items() if v is not None}
        cfg = self.hf.config
        d_mlp = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None)
        return {"d_head": self.d_head, "n_key_value_heads": int(getattr(cfg, "num_key_value_heads", None)
                                                                  or self.n_heads),
                "act_fn": getattr(cfg, "hidden_act", None) or getattr(cfg, "activation_function", None),
                **({"d_mlp": int(d_mlp)} if d_mlp else {}), **tl, "original_architecture": self.architecture}

    @property
    def W_U(self) -> Tensor:
        if not self.has_output_head:
            return super().W_U
        return self._head_module().weight.T

    @property
    def b_U(self) -> Tensor:
        bias = getattr(self._head_module(), "bias", None) if self.has_output_head else None
        return bias if bias is not None else super().b_U

    @property
    def W_E(self) -> Tensor:
        return self.hf.get_input_embeddings().weight

    def tl_weight_plan(self):
        """The norms the bridge's adapter names: ``ln1`` folds into q, k, v (and the MLP where one norm serves both,
        as in parallel blocks), ``ln2`` into the MLP's input, ``ln_final`` into the output embedding (untied first)."""
        from interp.weight_processing import Norm, WeightPlan, layer_plan

        def norm(key, block):
            hooks = block._modules.get(key)
            return Norm(hooks.norm, hooks.centred, hooks.offset) if hooks is not None else None

        refuse = self._weight_refusals()
        layers = [] if not all(b.attn.linear_parts for b in self.blocks) else [
            layer_plan(b, norm("ln1", b), norm("ln2", b), self.n_heads, "ln2" not in b.parts) for b in self.blocks]
        final = self._modules.get("ln_final")
        return WeightPlan(layers, Norm(final.norm, final.centred, final.offset) if final is not None else None,
                          [t.weight for t in (self.hf.get_input_embeddings(), self.pos_table) if t is not None],
                          unembed=self._untied_head if self.has_output_head else None, refuse=refuse)

    def _weight_refusals(self) -> dict[str, str]:
        """Why each weight-processing option cannot apply to this architecture."""
        out = {}
        if not all(b.attn.linear_parts for b in self.blocks):
            out["fold_ln"] = out["fold_value_biases"] = "its attention has no q, k, v, o projections readable as linear"
        elif not all("ln1" in b._modules for b in self.blocks):
            out["fold_ln"] = f"{self.architecture} has layers without a pre-attention norm (post-norm)"
        elif not all({"in", "out"} <= set(getattr(b._modules.get("mlp"), "tl_mlp_parts", dict)())
                     for b in self.blocks if "mlp" in b.parts):
            out["fold_ln"] = "its MLP has no input and output projections readable as linear"
        if any(k in b.parts for b in self.blocks for k in ("ln1_post", "ln2_post")):
            out["center_writing_weights"] = "its sublayer outputs pass a norm before they reach the residual"
        if not self.has_output_head:
            out["center_unembed"] = f"{self.model_name} has no output head"
        elif getattr(self.hf.config, "final_logit_softcapping", None):
            out["center_unembed"] = "its logits are soft-capped (tanh), which a shift of every logit changes"
        return out

    @torch.no_grad()
    def _untied_head(self):
        """The output embedding as its own weight (no longer the input embedding's), nn.Linear-like."""
        from interp.tl_modules import as_linear

        head, embed = self._head_module(), self.hf.get_input_embeddings()
        if head.weight is embed.weight or head.weight.data_ptr() == embed.weight.data_ptr():
            head.weight = nn.Parameter(head.weight.detach().clone())
            self.hf.config.tie_word_embeddings = False
        return as_linear(head)

    def tl_absent(self) -> dict[str, str]:
        out = super().tl_absent()
        names = {"ln1": "no pre-attention norm named by the bridge's adapter",
                 "ln2": "no pre-MLP norm named by the bridge's adapter (parallel or post-norm layers)"}
        for key, why in names.items():
            if not any(key in b._modules for b in self.blocks):
                out[f"blocks.{{l}}.{key}.hook_normalized"] = out[f"blocks.{{l}}.{key}.hook_scale"] = why
        if not any(b.attn.linear_parts for b in self.blocks):
            out["blocks.{l}.attn.hook_result"] = "the output projection is neither an nn.Linear nor a Conv1D"
        if "ln2" not in self.blocks[0].parts:
            out["blocks.{l}.hook_resid_mid"] = "no pre-MLP norm whose input is the residual after attention"
        if self.rotary and "q" not in self.blocks[0].attn.parts:
            out["blocks.{l}.attn.hook_q"] = out["blocks.{l}.attn.hook_k"] = ("transformers rotates inside the "
                                                                          "layer and the adapter names no q / k "
                                                                          "projection: hook_rot_q / hook_rot_k")
        return out

    def _apply(self, fn, recurse=True):
        """``to`` / ``half`` / ``bfloat16`` move transformers' rotary frequency buffers (``*inv_freq``) to the new
        device but keep them in float32, as ``from_pretrained(dtype=...)`` leaves them (transformers computes cos and
        sin from them in float32): rounded to bfloat16 (2^-9 relative), a fast band of a query at position 2,000 would
        turn up to about 3 radians off."""
        kept = {name: buf for name, buf in self.hf.named_buffers() if name.endswith("inv_freq")
                and buf.dtype in (torch.float32, torch.float64)}
        out = super()._apply(fn, recurse)
        for name, buf in kept.items():
            path, _, attr = name.rpartition(".")
            owner = self.hf.get_submodule(path)
            now = owner._buffers[attr]
            if now is not buf and now.dtype != buf.dtype:
                owner._buffers[attr] = buf.to(now.device)
        return out

    def describe(self) -> str:
        kind = {"causal": "causal LM", "masked": "masked LM", None: "no LM head"}[self.head]
        pos = ("rotary positions" if self.rotary
               else "learned absolute positions" if self.pos_table is not None else "no position table")
        local = sum(w is not None for w in self.attention_windows)
        windows = (f" ({local} sliding-window layers of {max(w for w in self.attention_windows if w)} keys)"
                   if local else "")
        return f"hf family ({self.architecture}), {kind}, {pos}{self._scaled()}, {self.n_layers} layers{windows}"

    def _scaled(self) -> str:
        """The rope scalings transformers' rotary embedding applies, where any is not plain RoPE."""
        kinds = dict.fromkeys((s.rope_type, s.attention_scaling) for s in self.rotary_specs if s is not None)
        if all(k in (None, "default") and a == 1.0 for k, a in kinds):
            return ""
        said = [f"rope_type {k}" + (f", attention scaling {a:.4g}" if a != 1.0 else "") for k, a in kinds]
        return f" ({'; '.join(said)}: transformers' rotary embedding)"

    def rotary_bases(self) -> list[float | None]:
        """Each layer's RoPE base (theta), from the config's per-layer-type parameters where it has them."""
        if not self.rotary:
            return [None] * self.n_layers
        cfg = self.hf.config
        params = getattr(cfg, "rope_parameters", None) or {}
        out = []
        for t in self.layer_types:
            p = params.get(t, params) if isinstance(params, dict) else {}
            out.append(float(p.get("rope_theta") or getattr(cfg, "rope_theta", 10000.0)))
        return out

    def rotation(self, layer: int):
        """The layer's ``interp.rope.RotarySpec`` as the loader read it off transformers' rotary embedding and checked
        on the model's own queries, or None. Its ``inv_freq`` follows the rotary module: within a forward pass (hooks,
        edits) it holds the frequencies of that pass, which dynamic and longrope scaling choose by the sequence
        length."""
        return self.rotary_specs[layer]

    def forward(self, tokens) -> Tensor:
        """Logits ``[batch, pos, d_vocab]`` (causal or masked LM) or the last hidden state ``[batch, pos, d_model]``."""
        tokens = self.check_tokens(tokens)
        cache, where = current_kv_cache(), {}
        if cache is not None:  # poslens' KV cache (interp.attention.decoding): the tokens continue from its positions
            start = cache.past(self.blocks[0].attn)
            where["position_ids"] = torch.arange(start, start + tokens.shape[1],
                                                 device=tokens.device).expand(tokens.shape[0], -1)
        padded = padding.position_ids(tokens.shape[1], tokens.device)
        if padded is not None:  # a padded batch: each row's real tokens from position 0
            where["position_ids"] = padded
            if cache is None:  # poslens hides the padding; a mask of ones keeps transformers from reading the
                # renumbered position_ids as packed sequences (which would split a row at an interior zero)
                where["attention_mask"] = torch.ones_like(tokens)
        elif "position_ids" not in where and self.pos_table is not None:  # hook_pos_embed is [batch, pos, d_model]
            where["position_ids"] = torch.arange(tokens.shape[1], device=tokens.device).expand(tokens.shape[0], -1)
        r = layer_range.current(self)
        if r is None:
            out = self.hf(input_ids=tokens, use_cache=False, **where)
        else:
            first = {"inputs_embeds": r.embeds} if r.embeds is not None else {"input_ids": tokens}
            with self._layer_range(r):
                out = self.hf(**first, use_cache=False, **where)
        return out.logits if self.head is not None else out.last_hidden_state

    @contextlib.contextmanager
    def _layer_range(self, r):
        """transformers' layers for one pass of ``start_at_layer`` / ``stop_at_layer``: those before the start swapped
        out (``_Skipped``: nothing of theirs runs or fires), the given residual entering the first that runs, the pass
        stopped (``interp.layer_range.Stopped``) where the range ends."""
        layers, n = self.hf_layers, self.n_layers
        start = r.start if r.residual is not None else 0
        swapped, handles = {}, []
        for i in range(start):
            swapped[i] = layers[i]
            layers[i] = _Skipped(r.residual if i == start - 1 else None)
        try:
            if r.stop is not None and r.stop < n:
                handles.append(layers[r.stop].register_forward_pre_hook(_stop_before, with_kwargs=True, prepend=True))
            elif r.stop is not None:
                handles.append(layers[n - 1].register_forward_hook(_stop_after))
            if r.residual is not None and start == 0:
                handles.append(layers[0].register_forward_pre_hook(functools.partial(_substitute, r.residual),
                                                                   with_kwargs=True, prepend=True))
            yield
        finally:
            for h in handles:
                h.remove()
            for i, layer in swapped.items():
                layers[i] = layer

    # -- the output head apart from the layers: transformers' head module, then what its forward does to the logits --
    head_separable = True  # the loader's check_head: head_logits(final_hidden(t)) is forward(t) for this architecture

    @property
    def has_output_head(self) -> bool:
        return self.head is not None

    def _head_module(self) -> nn.Module:
        head = self.hf.get_output_embeddings()
        if head is None:
            raise RuntimeError(f"{self.architecture} names no output-embedding module (get_output_embeddings)")
        return head

    def final_hidden(self, tokens, **kwargs) -> Tensor:
        """The input of transformers' output-embedding module (``lm_head``; a masked LM's decoder, after its transform),
        the forward pass stopped there."""
        if not self.has_output_head:
            return self(tokens, **kwargs)
        if not self.head_separable:
            raise CapabilityError(f"{self.model_name}: poslens cannot apply {self.architecture}'s output head apart "
                                  "from its layers (its logits are not the output embedding of the last hidden state); "
                                  "run model(tokens)")
        got = []

        def stop(_module, args):
            got.append(args[0])
            raise StopForward("output head")

        handle = self._head_module().register_forward_pre_hook(stop)
        try:
            self(tokens, **kwargs)
        except StopForward:
            pass
        finally:
            handle.remove()
        if not got:
            raise RuntimeError(f"{self.model_name}: the forward pass never reached its output head")
        return got[0]

    def head_logits(self, hidden: Tensor) -> Tensor:
        """The output-embedding module, then what transformers' forward does after it: Gemma 2/3's final tanh softcap,
        Cohere's ``logit_scale``, Granite's ``logits_scaling``."""
        if not self.has_output_head:
            return super().head_logits(hidden)
        logits = self._head_module()(hidden)
        cfg = self.hf.config
        scale = getattr(self.hf, "logit_scale", None)
        if isinstance(scale, (int, float)):
            logits = logits * scale
        if getattr(cfg, "logits_scaling", None):
            logits = logits / cfg.logits_scaling
        cap = getattr(cfg, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    @torch.no_grad()
    def check_head(self) -> bool:
        """Whether ``head_logits(final_hidden(t))`` gives ``forward(t)``'s logits on a 4-token input (the loader sets
        ``head_separable`` from it; an architecture whose forward does more after the head is run whole)."""
        if not self.has_output_head:
            return True
        tokens = torch.arange(1, 5, device=self.device)[None] % self.d_vocab
        whole = self(tokens).float()
        apart = self.head_logits(self.final_hidden(tokens)).float()
        # a forward that overflows its dtype (float16) compares its finite entries; interp.load then refuses it
        scale = float(whole.nan_to_num(0.0, 0.0, 0.0).abs().max())
        return apart.shape == whole.shape and bool(torch.allclose(apart, whole, rtol=1e-4, atol=1e-4 * scale,
                                                                  equal_nan=True))

    @torch.no_grad()
    def generate_batch(self, prompts, max_new_tokens: int, stop_ids=(), budgets=None) -> list[list[int]]:
        """As ``PosLensModel.generate_batch``, one token per step through transformers' own KV cache
        (``DynamicCache``); finished rows leave the batch and the cache."""
        from transformers import DynamicCache

        seq, budgets, out, rows = self._decoding_batch(prompts, max_new_tokens, budgets)
        step, length, cache = seq[rows], seq.shape[1], DynamicCache(config=self.hf.config)
        accepts = inspect.signature(self.hf.forward).parameters
        last_only = {"logits_to_keep": 1} if "logits_to_keep" in accepts else {}
        cached = {"cache" if "cache" in accepts else "past_key_values": cache}  # renamed in transformers 5.24
        while rows and length < self.max_seq_len:
            nxt = self.hf(input_ids=step, use_cache=True, **cached, **last_only).logits[:, -1].argmax(-1)
            keep = []
            for j, (i, t) in enumerate(zip(rows, nxt.tolist())):
                out[i].append(t)
                if t not in stop_ids and len(out[i]) < budgets[i]:
                    keep.append(j)
            if len(keep) < len(rows):
                cache.batch_select_indices(torch.tensor(keep, dtype=torch.long, device=seq.device))
            rows, length, step = [rows[j] for j in keep], length + 1, nxt[keep, None]
        return out

    def ap_embedding_matrix(self) -> Tensor:
        """The learned absolute-position table ``[positions, d_model]`` (OPT's offset rows dropped)."""
        if self.pos_table is None:
            raise AttributeError(f"{self.model_name} has no learned absolute-position table")
        return self.pos_table.weight[getattr(self.pos_table, "offset", 0):].detach()

    def ap_hook(self) -> str:
        """Where the table's rows enter: the position-embedding module's output."""
        if self.pos_table is None:
            raise AttributeError(f"{self.model_name} has no learned absolute-position table")
        return "hook_pos_embed"

    def residual_subspaces(self) -> dict[str, slice]:
        return {"full": slice(0, self.d_model)}

    @torch.no_grad()
    def probe_attention(self) -> list[int]:
        """Attention calls per layer in a 4-token forward with a pattern hook on every layer."""
        for block in self.blocks:
            block.attn.calls = 0
        hooks = [(f"blocks.{l}.attn.hook_pattern", lambda p, hook: p) for l in range(self.n_layers)]
        tokens = torch.arange(1, 5, device=self.device)[None] % self.d_vocab
        with self.hooks(fwd_hooks=hooks):
            self(tokens)
        return [block.attn.calls for block in self.blocks]

