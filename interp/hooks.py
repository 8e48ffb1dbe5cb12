"""Hook points declared once: on the module class that fires them, with their shape and meaning.

    class Attention(AttentionHooks):
        hook_q = Hook("[batch, pos, head, d_head]", "queries before rotation")

        def forward(self, x):
            q = self.hook_q(self.q_proj(x))      # a TransformerLens HookPoint

A ``Hook`` is a class attribute; ``make_hook_points(model)`` (called by ``PosLensModel.setup``) gives every module of
the model a ``HookPoint`` for each ``Hook`` its class declares (``when=`` can leave one out for an instance), so the
hook points and the documentation cannot disagree. ``hook_table(model)`` reads the declarations back as ``HookDoc``
rows (``blocks.3.attn.hook_q`` becomes ``blocks.{l}.attn.hook_q``), in forward order: the README's tables, the shapes
that say which axes run over tokens (``extract`` trims padding by them). ``BlockHooks`` and ``AttentionHooks`` declare
what every family's blocks and attentions offer; a family's class re-declares one only to say more about it.
``head_hooks`` declares an attention's per-head queries, keys, values and outputs in one line; ``Either`` declares one
hook name whose shape or meaning depends on the instance (a model whose variants differ in what a hook carries).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from transformer_lens.hook_points import HookPoint

from interp.tl_modules import MLPWeights

TOKEN_DIMS = ("pos", "q", "k")  # shape names whose axis runs over tokens (queries and keys of a pattern)


class Hook:
    """A hook point of the module class that declares it: ``shape`` (``"[batch, pos, d_model]"``, alternatives by rank
    joined by `` or ``) and ``meaning``; ``when(module)`` says whether an instance has it (default: always)."""

    def __init__(self, shape: str, meaning: str, when: Callable[[nn.Module], bool] | None = None):
        self.shape, self.meaning, self.when = shape, meaning, when
        self.name = ""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, module, owner=None):
        if module is None:
            return self
        try:
            return module._modules[self.name]
        except KeyError:
            raise AttributeError(f"{type(module).__name__} has no hook point {self.name} (make_hook_points has "
                                 "not run, or this instance leaves it out)") from None

    def pick(self, module: nn.Module) -> Hook | None:
        """The declaration that holds for this instance, or None where it leaves the hook out."""
        return self if self.when is None or self.when(module) else None


class Either(Hook):
    """One hook name declared several ways: an instance has the first alternative whose ``when`` holds."""

    def __init__(self, *alternatives: Hook):
        super().__init__(alternatives[0].shape, alternatives[0].meaning)
        self.alternatives = alternatives

    def pick(self, module: nn.Module) -> Hook | None:
        return next((hook for hook in self.alternatives if hook.pick(module) is not None), None)


def head_hooks(q: str, k: str, v: str, z: str, *, d: str = "d_head", d_v: str | None = None,
               kv_head: bool = False) -> tuple[Hook, Hook, Hook, Hook]:
    """``hook_q, hook_k, hook_v, hook_z = head_hooks(...)``: per-head queries, keys, values and outputs with these
    meanings, each ``[batch, pos, head, d]`` (values and outputs ``d_v`` wide; keys and values over ``kv_head`` for
    grouped-query attention)."""
    kv, d_v = "kv_head" if kv_head else "head", d_v or d
    return (Hook(f"[batch, pos, head, {d}]", q), Hook(f"[batch, pos, {kv}, {d}]", k),
            Hook(f"[batch, pos, {kv}, {d_v}]", v), Hook(f"[batch, pos, head, {d_v}]", z))


def declared(cls) -> dict[str, Hook]:
    """The ``Hook``s of a module class, its bases' first: a subclass's declaration of a name wins, and a subclass that
    sets the name to anything else (``hook_final = None``) has no such hook."""
    out: dict[str, Hook] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, Hook):
                out[name] = value
            elif name in out:
                del out[name]
    return out


def make_hook_points(root: nn.Module) -> None:
    """A ``HookPoint`` for each hook every module of ``root`` declares (and has, by ``when``)."""
    for module in list(root.modules()):
        for name, hook in declared(type(module)).items():
            if name not in module._modules and hook.pick(module) is not None:
                module.add_module(name, HookPoint())


@dataclass(frozen=True)
class HookDoc:
    pattern: str  # hook name, with {l} for the layer index
    shape: str  # "[batch, pos, d_model]"; alternatives by rank joined by " or "
    meaning: str

    def dims(self, ndim: int | None = None) -> list[str]:
        """The documented axis names (of the alternative with ``ndim`` axes when there are several)."""
        options = [[d.strip() for d in alt.strip().strip("[]").split(",")] for alt in self.shape.split(" or ")]
        if ndim is None:
            return options[0]
        match = [o for o in options if len(o) == ndim]
        if not match:
            raise ValueError(f"hook {self.pattern} is documented as {self.shape}, not {ndim}-dimensional")
        return match[0]

    def token_axes(self, ndim: int | None = None) -> tuple[int, ...]:
        """Axes that run over tokens, read off the documented shape: ``(1,)`` for ``[batch, pos, d_model]``,
        ``(2, 3)`` for ``[batch, head, q, k]``."""
        return tuple(i for i, d in enumerate(self.dims(ndim)) if d in TOKEN_DIMS)


_LAYER = re.compile(r"^blocks\.\d+(?=\.|$)")
_BLOCK_ORDER = {"hook_resid_pre": 1, "ln1.hook_scale": 1.5, "ln1.hook_normalized": 1.6, "attn.hook_attn_scores": 4,
                "attn.hook_pattern": 5, "attn.hook_result": 6.5, "hook_attn_out": 7, "ln1_post.hook_scale": 7.1,
                "ln1_post.hook_normalized": 7.2, "hook_resid_mid": 8, "ln2.hook_scale": 8.5,
                "ln2.hook_normalized": 8.6, "hook_mlp_in": 9, "mlp.hook_pre": 9.2, "mlp.hook_pre_linear": 9.3,
                "mlp.hook_post": 9.4, "ln2_post.hook_scale": 9.6, "ln2_post.hook_normalized": 9.7, "hook_mlp_out": 10,
                "hook_resid_post": 12}


def forward_rank(pattern: str) -> float:
    """Where a hook sits in the forward pass, for ordering the tables: embeddings, block hooks in order, final."""
    if not pattern.startswith("blocks.{l}."):
        return 13 if "final" in pattern else 0
    leaf = pattern.removeprefix("blocks.{l}.")
    if leaf in _BLOCK_ORDER:
        return _BLOCK_ORDER[leaf]
    if leaf.startswith("attn."):
        return 6 if leaf.startswith("attn.hook_z") else 3.5 if leaf.startswith("attn.hook_logits") else 3
    return 11 if leaf.startswith("hook_resid_") else 2


def hook_table(root: nn.Module) -> list[HookDoc]:
    """Every hook ``root``'s modules declare and have, as ``HookDoc`` rows with ``{l}`` for the layer, in forward
    order."""
    rows: dict[str, HookDoc] = {}
    for path, module in root.named_modules():
        hooks = declared(type(module))
        for name in (n for n, child in module._modules.items() if n in hooks and isinstance(child, HookPoint)):
            pattern = _LAYER.sub("blocks.{l}", f"{path}.{name}" if path else name)
            hook = hooks[name].pick(module)
            rows.setdefault(pattern, HookDoc(pattern, hook.shape, hook.meaning))
    return sorted(rows.values(), key=lambda h: forward_rank(h.pattern))


def doc_of(table: list[HookDoc], name: str) -> HookDoc | None:
    """The row of ``table`` that documents hook ``name`` (e.g. ``blocks.3.attn.hook_pattern``), or None."""
    return next((h for h in table if fnmatch.fnmatchcase(name, h.pattern.replace("{l}", "*"))), None)


class BlockHooks(nn.Module):
    """The hooks every family's blocks have (declared once here; a block class may re-declare one to say more)."""

    hook_resid_pre = Hook("[batch, pos, d_model]", "residual entering layer l")
    hook_attn_out = Hook("[batch, pos, d_model]", "attention output added to the residual")
    hook_resid_mid = Hook("[batch, pos, d_model]", "residual after attention")
    hook_mlp_out = Hook("[batch, pos, d_model]", "MLP output added to the residual")
    hook_resid_post = Hook("[batch, pos, d_model]", "residual leaving layer l")


class AttentionHooks(nn.Module):
    """The hooks every family's attention has: the logits before the softmax and the attention probabilities."""

    hook_attn_scores = Hook("[batch, head, q, k]", "attention logits before the softmax")
    hook_pattern = Hook("[batch, head, q, k]", "attention probabilities")


class NormHooks(nn.Module):
    """TransformerLens' norm hooks under its names (``blocks.{l}.ln1``, ``ln2``, ``ln_final``; ``ln1_post`` /
    ``ln2_post`` for norms on a sublayer's output): a weightless module beside the norm, which keeps its own name and
    checkpoint keys; ``interp.tl.normalize`` fires them."""

    hook_scale = Hook("[batch, pos, 1]", "the norm's divisor sqrt(mean(x^2) + eps) (of the centred x for "
                      "LayerNorm)")
    hook_normalized = Hook("[batch, pos, d_model]", "x / scale, before the norm's weight (and bias); the norm runs "
                           "step by step only while this or hook_scale is hooked")

    def __init__(self, norm: nn.Module | Callable | None = None):
        super().__init__()
        self.__dict__["norm"] = norm  # not registered: the norm's weights keep their own name and checkpoint keys

    def forward(self, x):
        from interp.tl import normalize  # interp.tl imports this module

        return normalize(self, self.norm, x)

    @property
    def w(self) -> torch.Tensor:
        """TransformerLens' name for the norm's weight (ones where it has none)."""
        return self._param("weight", 1.0)

    @property
    def b(self) -> torch.Tensor:
        """TransformerLens' name for the norm's bias (zeros where it has none)."""
        return self._param("bias", 0.0)

    def _param(self, name: str, fill: float) -> torch.Tensor:
        value = getattr(self.norm, name, None)
        if isinstance(value, torch.Tensor):
            return value + 1 if name == "weight" and getattr(self, "offset", False) else value
        width = next((p.shape[-1] for p in getattr(self.norm, "parameters", list)()), None)
        if width is None:
            raise AttributeError(f"{type(self.norm).__name__} has no {name} and no width to give one of")
        like = next(iter(self.norm.parameters()))
        return torch.full((width,), fill, dtype=like.dtype, device=like.device)


class MLPHooks(nn.Module, MLPWeights):
    """TransformerLens' MLP hooks under ``blocks.{l}.mlp`` for a family whose MLP module has another name; ``parts``
    (the MLP's ``in``, ``out``, ``gate`` or fused ``gate_in`` projections, not registered here) give its neuron weights
    (``interp.tl_modules.MLPWeights``)."""

    hook_pre = Hook("[batch, pos, d_mlp]", "MLP hidden pre-activation (the gate's, for a gated MLP)")
    hook_post = Hook("[batch, pos, d_mlp]", "MLP hidden activation: what the output projection reads")

    def __init__(self, parts: dict | None = None):
        super().__init__()
        self.__dict__["tl_parts"] = dict(parts or {})


RESULT = Hook("[batch, pos, head, d_model]", "each head's contribution to the attention output (z_h @ W_O[h]); "
              "computed only while hooked, and then the output is their sum (plus b_O)")
