"""TransformerLens' weight processing on a poslens model (``model.process_weights_``, ``interp.load(...,
fold_ln=...)``): the same four transformations ``HookedTransformer.from_pretrained`` applies by default, each leaving
the model's log-probabilities unchanged.

- ``fold_ln``: each pre-norm's weight (and a LayerNorm's bias) moves into the weights that read its output (the
  attention's q, k, v, the MLP's input, the unembedding), and the norm is left with weight 1 and bias 0 (TL's
  ``LNPre`` / ``RMSPre``); with LayerNorm those reading weights are also centred over ``d_model``. After it,
  ``cache.apply_ln_to_stack(resid, layer=-1) @ model.W_U + model.b_U`` is the model's logits (the logit lens and
  direct logit attribution as TransformerLens writes them).
- ``center_writing_weights``: every weight writing into the residual (embeddings, ``W_O``, ``W_out`` and their
  biases) has its mean over ``d_model`` removed; LayerNorm models only (RMSNorm does not remove the mean, so
  TransformerLens skips it there, and so does poslens).
- ``center_unembed``: ``W_U`` and ``b_U`` centred over the vocabulary (the softmax does not see a shift); logits
  change, log-probabilities do not.
- ``fold_value_biases``: ``b_V`` moves into ``b_O`` (each head's pattern sums to 1).
- ``refactor_factored_attn_matrices`` (off by default, as in TransformerLens): each head's ``W_Q``, ``W_K`` (with their
  biases, as a ``d_model + 1`` input) and ``W_V``, ``W_O`` refactored from the SVDs of ``W_Q W_K^T`` and ``W_V W_O``
  so that ``W_O`` has orthonormal rows and ``W_Q``, ``W_K`` carry half the singular values each; ``b_V`` moves into
  ``b_O``. The QK and OV circuits stay as they were. Refused where queries and keys are turned by position (rotary,
  PoPE: TransformerLens refuses rotary models too) or share key heads (grouped-query attention).

A family says which modules play which part (``PosLensModel.tl_weight_plan``: a ``WeightPlan``) and why an option
cannot apply to it (``WeightPlan.refuse``), which is the error a caller gets before any weight changes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

OPTIONS = ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases",
           "refactor_factored_attn_matrices")
QK_BILINEAR = ("standard", "alibi", "relative (T5 bias)", "shortformer")  # positions never inside q . k


class WeightProcessingError(ValueError):
    """An option a model's family cannot apply (named with the family, the option and why)."""


@dataclass
class Norm:
    """A norm module with a ``weight`` (and, for LayerNorm, a ``bias``): ``centred`` for LayerNorm (the mean is
    removed), ``offset`` for norms scaling by ``1 + weight`` (Gemma)."""

    module: nn.Module
    centred: bool = False
    offset: bool = False


@dataclass
class LayerPlan:
    """One block: ``ln1`` / ``ln2`` its pre-norms (None: none to fold), ``attn`` its q, k, v, o projections
    (``nn.Linear``-like: ``weight [out, in]``, ``bias``; q, k, v may be views ``[head, d_head, in]`` of a fused
    projection laid out head by head, ``interp.tl.per_head_split``), ``mlp`` its ``gate`` (gated MLPs), ``in`` and
    ``out`` projections, ``shared_norm`` when the MLP reads ``ln1`` too (parallel blocks with one norm)."""

    ln1: Norm | None
    ln2: Norm | None
    attn: tuple
    mlp: dict = field(default_factory=dict)
    n_heads: int = 1
    shared_norm: bool = False


@dataclass
class WeightPlan:
    """Where a model's weights sit, for ``process_weights``: ``layers``, the final norm, the tables that write into
    the residual (``[rows, d_model]``), ``unembed()`` (the output projection, untied from the embeddings first), and
    ``refuse``: option -> why this model cannot have it."""

    layers: list[LayerPlan]
    ln_final: Norm | None
    embeds: list
    unembed: object = None  # () -> nn.Linear-like: the untied output projection
    refuse: dict = field(default_factory=dict)


def check_options(options: dict) -> None:
    """Each option is a bool (``None`` for the ones ``interp.load`` leaves unset)."""
    for name, value in options.items():
        if name not in OPTIONS:
            raise TypeError(f"unknown weight-processing option {name!r} (TransformerLens' are {list(OPTIONS)})")
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name}={value!r}: weight-processing options are True or False")


@torch.no_grad()
def process_weights(model, fold_ln: bool = True, center_writing_weights: bool = True, center_unembed: bool = True,
                    fold_value_biases: bool = True, refactor_factored_attn_matrices: bool = False) -> None:
    """TransformerLens' ``process_weights_`` on ``model`` in place (see the module docstring), with its defaults; an
    option its family cannot apply is an error before any weight changes. A second call warns and does nothing, as
    TransformerLens' does (the first one's folds cannot be told apart from the weights)."""
    asked = dict(fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed,
                 fold_value_biases=fold_value_biases, refactor_factored_attn_matrices=refactor_factored_attn_matrices)
    check_options(asked)
    if getattr(model, "weights_processed", None):
        warnings.warn(f"{model.model_name}: its weights were already processed ({model.weights_processed}); "
                      "process_weights_ does nothing a second time (load the model again for other options)",
                      stacklevel=3)
        return
    plan = model.tl_weight_plan()
    if model.cfg.normalization_type in ("RMS", "RMSPre"):  # RMSNorm keeps the mean: TransformerLens skips centring
        asked["center_writing_weights"] = False
    refuse = {**_refactor_refusal(model, plan), **plan.refuse}
    for option, on in asked.items():
        if on and option in refuse:
            raise WeightProcessingError(f"{model.model_name} ({model.family} family): {option}=True is not possible: "
                                        f"{refuse[option]} (pass {option}=False)")
    steps = [("fold_ln", _fold_ln), ("center_writing_weights", _center_writing), ("center_unembed", _center_unembed),
             ("fold_value_biases", _fold_value_biases), ("refactor_factored_attn_matrices", _refactor)]
    # TransformerLens' order: a LayerNorm's bias reaches b_V first, the refactoring comes last
    for option, step in steps:
        if asked[option]:
            step(plan)
    model.weights_processed = {k: v for k, v in asked.items() if v}
    _record(model, asked)


def _record(model, asked: dict) -> None:
    """``model.cfg.normalization_type`` becomes TransformerLens' ``LNPre`` / ``RMSPre`` once the norms are folded."""
    norm = model.cfg.tl.get("normalization_type") if hasattr(model.cfg, "tl") else None
    if asked["fold_ln"] and norm in ("LN", "RMS"):
        model.cfg.tl["normalization_type"] = norm + "Pre"


def _weight(norm: Norm) -> torch.Tensor | float:
    w = getattr(norm.module, "weight", None)
    if w is None:  # a norm without a weight (OLMo's LayerNorm): nothing to fold but its bias
        return 1.0
    w = w.detach().float()
    return w + 1 if norm.offset else w


def _bias(norm: Norm):
    b = getattr(norm.module, "bias", None)
    return b.detach().float() if isinstance(b, torch.Tensor) else None


def _reset(norm: Norm) -> None:
    if getattr(norm.module, "weight", None) is not None:
        norm.module.weight.fill_(0.0 if norm.offset else 1.0)
    if isinstance(getattr(norm.module, "bias", None), torch.Tensor):
        norm.module.bias.zero_()


def _add_bias(linear, value: torch.Tensor) -> None:
    """``linear.bias += value``, giving an ``nn.Linear`` without a bias one."""
    if linear.bias is None:
        if not isinstance(linear, nn.Linear):
            raise WeightProcessingError(f"{type(linear).__name__} has no bias to fold a norm's bias into")
        w = linear.weight
        linear.bias = nn.Parameter(torch.zeros(w.shape[0], dtype=w.dtype, device=w.device))
    linear.bias.copy_((linear.bias.float() + value).to(linear.bias.dtype))


def _fold_into(norm: Norm, readers) -> None:
    w, b = _weight(norm), _bias(norm)
    for linear in readers:
        weight = linear.weight.float()  # [out, in]
        if b is not None:
            _add_bias(linear, weight @ b.to(weight.device))
        weight = weight * (w.to(weight.device) if isinstance(w, torch.Tensor) else w)
        if norm.centred:
            weight = weight - weight.mean(-1, keepdim=True)
        linear.weight.copy_(weight.to(linear.weight.dtype))


def _fold_ln(plan: WeightPlan) -> None:
    for layer in plan.layers:
        q, k, v, _ = layer.attn
        mlp_in = [layer.mlp[key] for key in ("gate", "in") if key in layer.mlp]
        if layer.ln1 is not None:
            _fold_into(layer.ln1, [q, k, v] + (mlp_in if layer.shared_norm else []))
        if layer.ln2 is not None and not layer.shared_norm:
            _fold_into(layer.ln2, mlp_in)
    for layer in plan.layers:  # a norm reset only once every reader has its weight
        for norm in (layer.ln1, layer.ln2):
            if norm is not None:
                _reset(norm)
    if plan.ln_final is not None and plan.unembed is not None:
        _fold_into(plan.ln_final, [plan.unembed()])
        _reset(plan.ln_final)


def _centre_rows(weight: torch.Tensor, dim: int) -> None:
    w = weight.float()
    weight.copy_((w - w.mean(dim, keepdim=True)).to(weight.dtype))


def _center_writing(plan: WeightPlan) -> None:
    for table in plan.embeds:
        _centre_rows(table, -1)
    for layer in plan.layers:
        for out in (layer.attn[3], layer.mlp.get("out")):
            if out is None:
                continue
            _centre_rows(out.weight, 0)  # [d_model, in]: each input's write centred over d_model
            if out.bias is not None:
                _centre_rows(out.bias, 0)


def _center_unembed(plan: WeightPlan) -> None:
    head = plan.unembed()
    _centre_rows(head.weight, 0)  # [vocab, d_model]: each d_model row of W_U centred over the vocabulary
    if head.bias is not None:
        _centre_rows(head.bias, 0)


def _fold_value_biases(plan: WeightPlan) -> None:
    for layer in plan.layers:
        _, _, v, o = layer.attn
        if v.bias is None:
            continue
        d_model = o.weight.shape[0]
        w_o = o.weight.float().T.reshape(layer.n_heads, -1, d_model)  # [head, d_head, d_model]
        b_v = v.bias.float().view(-1, w_o.shape[1])  # [kv_head, d_head]
        b_v = b_v.repeat_interleave(layer.n_heads // b_v.shape[0], dim=0)
        _add_bias(o, torch.einsum("hd,hdm->m", b_v, w_o))
        v.bias.zero_()


def _refactor_refusal(model, plan: WeightPlan) -> dict[str, str]:
    """Why ``refactor_factored_attn_matrices`` cannot apply to ``model`` (empty: it can)."""
    option = "refactor_factored_attn_matrices"
    if not plan.layers:
        return {option: plan.refuse.get("fold_value_biases", "its attention weights are not described to it")}
    positions = getattr(model.cfg, "positional_embedding_type", None)
    if positions not in QK_BILINEAR:
        return {option: f"its queries and keys are turned by position ({positions} positions), so W_Q @ W_K^T is not "
                        "its QK circuit (TransformerLens refuses rotary models too)"}
    for layer in plan.layers:
        q, k = layer.attn[:2]
        if k.weight.numel() != q.weight.numel():
            return {option: "its key and value heads are shared by several query heads (grouped-query attention), "
                            "so one head's W_K cannot be refactored alone"}
    return {}


def _heads_in(linear, n_heads: int) -> torch.Tensor:
    """``[head, in, d_head]`` (TransformerLens' layout) of a q, k or v projection, in float64."""
    w = linear.weight.double()
    return w.reshape(n_heads, -1, w.shape[-1]).transpose(1, 2)


def _even_factors(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``U, S, V`` with ``a @ b^T = U diag(S) V^T`` per head (``a`` ``[h, m, r]``, ``b`` ``[h, n, r]``, rank r), from
    QR factors of each side and an SVD of the ``r x r`` core."""
    qa, ra = torch.linalg.qr(a)
    qb, rb = torch.linalg.qr(b)
    u, s, vh = torch.linalg.svd(ra @ rb.transpose(1, 2))
    return qa @ u, s, qb @ vh.transpose(1, 2)


def _set_heads(linear, value: torch.Tensor) -> None:
    """Write ``[head, in, d_head]`` back into a projection of either layout."""
    linear.weight.copy_(value.transpose(1, 2).reshape(linear.weight.shape).to(linear.weight.dtype))


def _set_bias(linear, value: torch.Tensor) -> None:
    if linear.bias is None:
        _add_bias(linear, value.reshape(-1).float())
    else:
        linear.bias.copy_(value.reshape(linear.bias.shape).to(linear.bias.dtype))


def _refactor_qk(q, k, n_heads: int) -> None:
    w_q, w_k = _heads_in(q, n_heads), _heads_in(k, n_heads)
    biased = q.bias is not None or k.bias is not None
    if biased:  # the biases as a last input row: x -> [x, 1]
        b_q, b_k = (torch.zeros(w.shape[0], 1, w.shape[2], dtype=w.dtype, device=w.device) if p.bias is None
                    else p.bias.double().reshape(w.shape[0], 1, -1) for p, w in ((q, w_q), (k, w_k)))
        w_q, w_k = torch.cat([w_q, b_q], 1), torch.cat([w_k, b_k], 1)
    u, s, v = _even_factors(w_q, w_k)
    new_q, new_k = u * s.sqrt()[:, None, :], v * s.sqrt()[:, None, :]
    for linear, new in ((q, new_q), (k, new_k)):
        _set_heads(linear, new[:, :-1] if biased else new)
        if biased:
            _set_bias(linear, new[:, -1])


def _refactor_ov(v, o, n_heads: int) -> None:
    w_v = _heads_in(v, n_heads)
    d_model = o.weight.shape[0]
    w_o = o.weight.double().T.reshape(n_heads, -1, d_model)  # [head, d_head, d_model]
    u, s, vecs = _even_factors(w_v, w_o.transpose(1, 2))
    _set_heads(v, u * s[:, None, :])
    o.weight.copy_(vecs.transpose(1, 2).reshape(-1, d_model).T.to(o.weight.dtype))


def _refactor(plan: WeightPlan) -> None:
    _fold_value_biases(plan)  # b_V' = 0, b_O' = b_O + sum_h b_V W_O, as TransformerLens' refactoring does
    for layer in plan.layers:
        q, k, v, o = layer.attn
        _refactor_qk(q, k, layer.n_heads)
        _refactor_ov(v, o, layer.n_heads)


def layer_plan(block, ln1: Norm | None, ln2: Norm | None, n_heads: int, shared_norm: bool = False) -> LayerPlan:
    """A block's plan from TransformerLens' views: its attention's ``tl_projections()`` and its MLP's
    ``tl_mlp_parts()``."""
    mlp = block._modules.get("mlp")
    parts = mlp.tl_mlp_parts() if hasattr(mlp, "tl_mlp_parts") else {}
    return LayerPlan(ln1, ln2, tuple(block.attn.tl_projections()), parts, n_heads, shared_norm)


@torch.no_grad()
def untie_head(model, embedding: nn.Embedding) -> nn.Linear:
    """``model.lm_head``, made from ``embedding``'s weight where the model reads its logits off the embeddings (tied):
    folding the final norm into ``W_U`` must leave ``W_E`` as it was."""
    if getattr(model, "lm_head", None) is None:
        weight = embedding.weight
        head = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
        head.weight.copy_(weight)
        model.lm_head = head
        if "tie_word_embeddings" in getattr(model.cfg.original, "__dict__", {}):
            model.cfg.tie_word_embeddings = False
    return model.lm_head
