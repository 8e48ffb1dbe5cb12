"""The encoder family's checkpoint formats: the development code's key layout, as a ``state_dict.pt`` or a
``save_pretrained`` directory.

**Key layout** (the development ``NeoBERT`` module; ``NeoBERTLMHead`` prefixes every key with ``model.``
and adds top-level ``decoder.weight`` / ``decoder.bias``):
``encoder.weight``, ``positional_embedding.weight``, ``transformer_encoder.{i}.`` +
``qkv_pos / qkv_sem / wo_pos / wo_sem`` (DSTG) or ``qkv / wo`` (baselines) ``.weight``,
``pos_attention_norm / sem_attention_norm / pos_ffn_norm / sem_ffn_norm`` (DSTG) or
``attention_norm / ffn_norm`` (baselines) ``.weight``, ``ffn.w12.weight``, ``ffn.w3.weight``,
``relative_pos_bias.relative_attention_bias`` ``[buckets, H]``, ``relative_pos_bias.bucket_indices``,
``cls_sep_override.thetas`` ``[4, H]``, ``pos_layer_norm.weight`` + ``sem_layer_norm.weight`` (DSTG) or
``layer_norm.weight`` (baselines). poslens maps ``transformer_encoder.{i}`` to ``blocks.{i}`` (attention
weights to ``blocks.{i}.attn``), everything else keeps its name.

The reference lists ``relative_pos_bias.*`` and ``cls_sep_override.thetas`` without a layer index: by default
they are one module shared by all layers. The development code seen in its repository builds them inside each
block (``transformer_encoder.{i}.relative_pos_bias.*``); such files load as ``rp_per_layer=True``.

**Older key variants**, rewritten to the layout above before the strict check (errors name the keys as the
file spells them): ``qk_pos`` + ``v_pos`` (and ``qk_sem`` + ``v_sem``) instead of the fused ``qkv_*``, where
``qk`` is split per head as the development code did (rows ``[q_0 k_0 | q_1 k_1 | ...]``, ``d_qk`` each);
per-head ``cls_sep_override.theta_cls_out / theta_sep_out / theta_cls_in / theta_sep_in`` (``[H]`` or
``[1, H]``: CLS row, SEP row, CLS column, SEP column) instead of ``thetas``;
``relative_pos_bias.relative_attention_bias.weight`` (an ``nn.Embedding`` spelling) for the bare parameter.
A fused ``qk`` over the concatenated stream (an early prototype with cross-stream logits) is refused.

**Config.** A ``state_dict.pt`` carries none: it is read off the shapes (vocab and hidden from
``encoder.weight``, pos_size and max_length from ``positional_embedding``, layers from the largest block
index, intermediate size from ``ffn.w3``, heads from ``relative_attention_bias`` / ``thetas``, d_qk from the
``qkv_pos`` rows), with the residual mode the development code used (``normalized`` for DSTG, ``prenorm`` for
the baselines) and its interleaved rotary layout for the RoPE baseline. A ``config.json`` beside the file
overrides it: either the development schema below (recognised by ``model_type``) or ``EncoderConfig`` fields.

**save_pretrained directories**: ``config.json`` + ``model.safetensors`` (or ``pytorch_model.bin``), keys
as above with or without ``model.``.

**The development config.json** is what the transformers fork's ``NeoBERTConfig`` (LequeuISIR/transformers
8a10641, ``model_type`` ``neobert``, or ``dstg``) writes: every field it has, plus transformers' bookkeeping
(``transformers_version``, ``architectures``, ``torch_dtype``, ...: ``interp.loading.hf_config.BENIGN``). Each field is
read by what it does at inference (``DEV_FORWARD``, ``DEV_DERIVED``, ``DEV_TRAINING``, ``DEV_INERT``):

- the forward pass: ``hidden_size``, ``pos_size`` (default 384, read with ``posneobert`` only), ``num_hidden_layers``,
  ``num_attention_heads``, ``vocab_size``, ``max_length`` (1024), ``norm_eps`` (1e-6), ``pad_token_id`` (0), the
  switches ``posneobert`` (DSTG), ``rope`` (default true), ``relative_pos_bias``, ``AP_embeddings`` (true),
  ``untie_cls`` (read with ``posneobert`` only), ``use_only_sem_for_decoding`` (DSTG head on the semantic stream, else
  on ``[AP | sem]``), and the SwiGLU width by the development rule:
  ``8 * ceil(int(2 * (pos_intermediate_size + intermediate_size) / 3) / 8)`` for DSTG,
  ``8 * ceil(int(2 * intermediate_size / 3) / 8)`` otherwise (``intermediate_size`` defaulting to ``4 * hidden_size``,
  ``pos_intermediate_size`` to ``4 * pos_size``). Values this encoder does not implement are refused with the field and
  value named: ``hidden_act`` other than SwiGLU (GELU, PosBERTSwiGLU's block-masked output), ``rms_norm`` false
  (LayerNorm), ``mixed_feed_forward`` false with ``posneobert`` (separate FFNs), ``mix_attentions`` ``hadamard``,
  ``attention_activation`` ``softpick``, rotary AP queries (``posneobert`` with ``rope``), an AP + RP baseline, and a
  ``pad_token_id`` other than 0 where there are AP rows (the development code reads rows ``pad_token_id + 1..``). The
  fork's bucketed bias is 0 on the [CLS]/[SEP] rows and columns: configs without thetas load with ``rp_skip_special``;
- derived: ``dim_head`` (``(hidden_size + pos_size) // heads`` with ``posneobert``, else ``hidden_size // heads``) must
  equal that derivation; it becomes DSTG's ``d_qk``, which the ``qkv_pos`` / ``qkv_sem`` shapes then check;
- training or initialisation only: ``dropout_prob``, ``pos_dropout_prob``, ``attention_probs_dropout_prob``,
  ``embedding_init_range``, ``decoder_init_range``, ``positional_embed_init`` (``random``, ``2dim_cosine``, ``fixed``:
  a ``fixed`` table saved as the buffer ``pos_embs`` is read as ``positional_embedding.weight``), ``random_offset``,
  and older configs' ``dropout`` / ``classifier_init_range``: checked, kept as ``EncoderConfig.training_only``
  (provenance's ``training_only_config``);
- inert for this architecture: ``base_scale`` (any number; nGPT's), ``flash_attention`` (true or false; a kernel),
  ``ngpt`` (false only: true is nGPT's NormNeoBERT), ``shared_pos_keys`` (false only: true raises there), ``kwargs``
  (NeoBERTConfig's extra keyword arguments: ``{}``, or what a reload left there, transformers' bookkeeping,
  ``dim_head`` and an older ``kwargs``, each checked as at the top level): kept as ``EncoderConfig.inert_config``.

Any other field is named and refused, never ignored. An optional ``"poslens"`` object of ``EncoderConfig`` fields
overrides the result. ``save_pretrained`` writes every field back (the recorded ones as read, the forward ones from
the model's config, widths chosen to give the same SwiGLU width) and the exact config under ``"poslens"``. Whether
the file has an MLM head and per-layer RP modules is read off its keys.

Loading is strict: a missing or unexpected key, a wrong shape, a ``bucket_indices`` that is not the T5
bucketing, or a config contradicting the weights raises ``CheckpointError`` naming the file and the key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from interp.families.encoder.model import EncoderConfig, EncoderModel, RelativePositionBias, t5_buckets
from interp.loading.errors import CheckpointError, build_config
from interp.loading.hf_config import BENIGN, audit, choice, defaults, flag, number, probability, recorded, scale
from interp.loading.hf_files import read_json
from interp.loading.strict import verify

HF_MODEL_TYPES = ("neobert", "dstg")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
ATTN_MODULES = ("qkv_pos", "qkv_sem", "wo_pos", "wo_sem", "qkv", "wo", "relative_pos_bias", "cls_sep_override")
OLD_THETAS = ("theta_cls_out", "theta_sep_out", "theta_cls_in", "theta_sep_in")  # rows of ``thetas``, in order
FIXED_AP = "pos_embs"  # the AP table as a buffer (positional_embed_init "fixed")
PREFIX = "model."
COMPILE_PREFIX = "_orig_mod."
BLOCK = re.compile(r"^transformer_encoder\.(\d+)\.(.+)$")
NATIVE_BLOCK = re.compile(r"^blocks\.(\d+)\.(?:attn\.)?(.+)$")


# ---- key layout ------------------------------------------------------------------------------------------


def to_native(key: str) -> str:
    """Development key (without ``model.``) -> poslens module name."""
    m = BLOCK.match(key)
    if not m:
        return key
    layer, rest = m.groups()
    return f"blocks.{layer}.attn.{rest}" if rest.split(".")[0] in ATTN_MODULES else f"blocks.{layer}.{rest}"


def to_file(key: str) -> str:
    """poslens module name -> development key (without ``model.``)."""
    m = NATIVE_BLOCK.match(key)
    return f"transformer_encoder.{m[1]}.{m[2]}" if m else key


def _prefixed(key: str, prefix: str) -> str:
    return key if key.startswith("decoder.") else prefix + key


def split_prefix(state: dict, where: str) -> tuple[str, dict]:
    """(``'model.'`` or ``''``, state with that prefix and torch.compile's removed); keys must agree on it."""
    for key, value in state.items():
        if not isinstance(key, str):
            raise CheckpointError(f"{where}: key {key!r} is not a string")
        if not torch.is_tensor(value):
            raise CheckpointError(f"{where}: key '{key}' holds a {type(value).__name__}, not a tensor")
    state = {k.removeprefix(COMPILE_PREFIX): v for k, v in state.items()}
    body = [k for k in state if not k.startswith("decoder.")]
    prefixed = [k for k in body if k.startswith(PREFIX)]
    if prefixed and len(prefixed) != len(body):
        odd = next(k for k in body if not k.startswith(PREFIX))
        raise CheckpointError(f"{where}: key '{odd}' lacks the '{PREFIX}' prefix the other keys carry "
                              "(an MLM-head state dict prefixes every backbone key)")
    prefix = PREFIX if prefixed else ""
    return prefix, {(k if k.startswith("decoder.") else k.removeprefix(prefix)): v for k, v in state.items()}


def looks_like_state_dict(obj) -> bool:
    """A plain dict of tensors with the development encoder's token embedding or blocks."""
    if not isinstance(obj, dict) or not obj or not all(isinstance(k, str) for k in obj):
        return False
    keys = [k.removeprefix(COMPILE_PREFIX).removeprefix(PREFIX) for k in obj]
    return "encoder.weight" in keys or any(BLOCK.match(k) for k in keys)


# ---- config ----------------------------------------------------------------------------------------------


def _layer_keys(flat, name: str) -> list[str]:
    """Keys of module ``name`` (e.g. 'relative_pos_bias.'), shared or inside a block."""
    return [k for k in flat if k.startswith(name) or ((m := BLOCK.match(k)) and m[2].startswith(name))]


def _theta_heads(flat) -> int | None:
    for key in _layer_keys(flat, "cls_sep_override."):
        shape = tuple(flat[key].shape)
        if key.endswith(".thetas") and len(shape) == 2:
            return shape[1]
        if key.rsplit(".", 1)[-1] in OLD_THETAS and len(shape) in (1, 2):
            return shape[-1]
    return None


def _shape_variant(flat: dict, prefix: str, where: str, first: str, pe, rp_keys: list) -> dict:
    """The variant read off the keys (DSTG's AP projections, a position table, relative-bias tables, else RoPE) and,
    for DSTG, ``pos_size`` from its position table, checked against the projections."""
    if any(first + f"{name}_pos.weight" in flat for name in ("qkv", "qk")):
        if pe is None:
            raise CheckpointError(f"{where}: has '{prefix}{first}qkv_pos.weight' (DSTG) but no "
                                  f"'{prefix}positional_embedding.weight'")
        pos_in = next((flat[first + f"{n}_pos.weight"] for n in ("qkv", "qk") if first + f"{n}_pos.weight" in flat),
                      None)
        if pe.dim() != 2 or (pos_in is not None and pos_in.dim() == 2 and pe.shape[1] != pos_in.shape[1]):
            raise CheckpointError(f"{where}: key '{prefix}positional_embedding.weight' has shape {list(pe.shape)}, "
                                  "but the AP projections take "
                                  f"pos_size={pos_in.shape[1] if pos_in is not None and pos_in.dim() == 2 else '?'} "
                                  "inputs: expected [max_length + 1, pos_size] (the position table is corrupt)")
        return {"variant": "disentangled", "pos_size": int(pe.shape[1])}
    if pe is not None:
        if rp_keys:
            raise CheckpointError(f"{where}: has both '{prefix}positional_embedding.weight' and '{prefix}{rp_keys[0]}' "
                                  "in one stream (an AP + RP baseline), which poslens does not load")
        return {"variant": "ap"}
    return {"variant": "rp" if rp_keys else "rope"}


def infer_config(flat: dict, prefix: str, where: str) -> dict:
    """``EncoderConfig`` fields read off the shapes of a development state dict (keys without the prefix).

    ``num_attention_heads`` is left out when no key shows it; ``d_qk`` is filled in by ``_finish``.
    """
    if "encoder.weight" not in flat:
        raise CheckpointError(f"{where}: no key '{prefix}encoder.weight' (the token embedding): cannot read the config "
                              "off the shapes")
    vocab, hidden = tuple(flat["encoder.weight"].shape)
    layers = sorted({int(m[1]) for k in flat if (m := BLOCK.match(k))})
    if not layers:
        raise CheckpointError(f"{where}: no '{prefix}transformer_encoder.{{i}}.*' keys (no blocks)")
    first = f"transformer_encoder.{layers[0]}."
    if first + "qk.weight" in flat:
        raise CheckpointError(f"{where}: key '{prefix}{first}qk.weight' is an early development layout (one qk "
                              "projection over the concatenated [AP | semantic] stream, with cross-stream logits); "
                              "poslens does not load it")
    rp_keys, theta_keys = _layer_keys(flat, "relative_pos_bias."), _layer_keys(flat, "cls_sep_override.")
    pe = flat.get("positional_embedding.weight", flat.get(FIXED_AP))
    fields: dict = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers[-1] + 1}
    fields.update(_shape_variant(flat, prefix, where, first, pe, rp_keys))
    if pe is not None:
        fields["max_length"] = int(pe.shape[0]) - 1
    bucket_keys = [k for k in rp_keys if k.endswith("bucket_indices")]
    if pe is None and bucket_keys:
        fields["max_length"] = int(flat[bucket_keys[0]].shape[0])
    w3 = first + "ffn.w3.weight"
    if w3 in flat and flat[w3].dim() == 2:
        fields["intermediate_size"] = int(flat[w3].shape[1])
    table = next((k for k in rp_keys if "relative_attention_bias" in k), None)
    if table is not None and flat[table].dim() == 2:
        fields["num_buckets"], fields["num_attention_heads"] = (int(s) for s in flat[table].shape)
    elif (heads := _theta_heads(flat)) is not None:
        fields["num_attention_heads"] = heads
    fields["rp_bias"] = bool(rp_keys)
    fields["untie_cls"] = bool(theta_keys)
    fields["rp_per_layer"] = any(BLOCK.match(k) for k in rp_keys + theta_keys)
    fields["mlm_head"] = "decoder.weight" in flat or "decoder.bias" in flat
    if (fields["variant"] == "disentangled" and "decoder.weight" in flat
            and flat["decoder.weight"].shape[-1] == hidden + fields["pos_size"]):
        fields["mlm_input"] = "full"
    if fields["variant"] == "rope":
        fields["rope_style"] = "interleaved"
    if vocab == 30522:
        fields["tokenizer"] = "bert-uncased"
    return fields


def _finish(fields: dict, flat: dict, prefix: str, where: str, source: str) -> EncoderConfig:
    """Fill what needs the head count (d_qk), then build the config, naming what is missing or invalid."""
    if "num_attention_heads" not in fields:
        raise CheckpointError(f"{where}: cannot read num_attention_heads off the shapes (only relative_pos_bias / "
                              "cls_sep_override show it, and this file has neither); put a config.json with "
                              "num_attention_heads beside it")
    if "intermediate_size" not in fields:
        raise CheckpointError(f"{where}: cannot read intermediate_size: no 2-d "
                              f"'{prefix}transformer_encoder.0.ffn.w3.weight'")
    if fields.get("variant") == "disentangled" and fields.get("d_qk") is None:
        h, p = fields["num_attention_heads"], fields["pos_size"]
        key = next((k for k in ("transformer_encoder.0.qkv_pos.weight", "transformer_encoder.0.qk_pos.weight")
                    if k in flat), None)
        if key is not None and flat[key].dim() == 2:
            rows = int(flat[key].shape[0]) - (p if "qkv" in key else 0)
            if rows <= 0 or rows % (2 * h):
                raise CheckpointError(f"{where}: key '{prefix}{key}' has {flat[key].shape[0]} rows, which is not "
                                      f"2 * heads ({h}) * d_qk{' + pos_size (%d)' % p if 'qkv' in key else ''} for any "
                                      "whole d_qk")
            fields["d_qk"] = rows // (2 * h)
    return make_config(fields, where, source)


def make_config(fields: dict, where: str, source: str) -> EncoderConfig:
    return build_config(EncoderConfig, fields, where, f"encoder config ({source})", family="encoder")


def _swiglu_width(n: float) -> int:
    width = int(2 * n / 3)
    return 8 * ((width + 7) // 8)


# The fork's NeoBERTConfig (LequeuISIR/transformers 8a10641) writes every field it has; by what each does at inference:
DEV_FORWARD = ("hidden_size", "pos_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "pos_intermediate_size",
               "mixed_feed_forward", "hidden_act", "rms_norm", "norm_eps", "rope", "posneobert", "relative_pos_bias",
               "untie_cls",
               "mix_attentions", "attention_activation", "use_only_sem_for_decoding", "AP_embeddings", "max_length",
               "vocab_size", "pad_token_id")
DEV_DERIVED = ("dim_head",)  # (hidden_size + pos_size) // heads with posneobert, else hidden_size // heads
DEV_TRAINING = {
    "dropout_prob": probability(0.1), "pos_dropout_prob": probability(0.1),
    "attention_probs_dropout_prob": probability(0.1),
    "embedding_init_range": scale(0.02), "decoder_init_range": scale(0.02),
    "positional_embed_init": choice("random", "random", "2dim_cosine", "fixed"),  # the AP table's initialisation
    "random_offset": flag(False),  # AP shifting while training
    # older development configs' names, recorded when present
    "dropout": probability(), "classifier_init_range": scale(),
}
DEV_INERT = {
    "base_scale": number(1.0 / 960.0 ** 0.5),  # nGPT's scale, read only by NormNeoBERT
    "flash_attention": flag(True),  # a kernel choice
    "ngpt": choice(False, why="ngpt=True builds nGPT's normalised blocks (NormNeoBERT), another architecture, which "
                              "poslens does not load; the development code refuses it with posneobert"),
    "shared_pos_keys": choice(False, why="shared AP keys raise NotImplementedError in the development code"),
}
DEV_READ = DEV_FORWARD + DEV_DERIVED + tuple(DEV_TRAINING) + tuple(DEV_INERT) + ("kwargs", "poslens")


def _switch(raw: dict, name: str, default: bool, where: str) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise CheckpointError(f"{where}: config field {name}={value!r} is not true or false")
    return value


def _whole(raw: dict, name: str, default, where: str, *, optional: bool = False) -> int | None:
    """A whole number >= 0 (or None where the development code fills it in: ``optional``)."""
    value = raw.get(name, default)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointError(f"{where}: config field {name}={value!r} is not a whole number >= 0")
    return value


def _dim_head(hidden: int, pos: int, heads: int, posneobert: bool) -> tuple[int, str]:
    """(dim_head as the development code derives it, the derivation in words)."""
    if posneobert:
        return (hidden + pos) // heads, f"(hidden_size {hidden} + pos_size {pos}) // num_attention_heads {heads}"
    return hidden // heads, f"hidden_size {hidden} // num_attention_heads {heads}"


def _check_derived(value, name: str, derived: tuple[int, str], where: str) -> None:
    if value != derived[0]:
        raise CheckpointError(f"{where}: config field {name}={value!r} contradicts the fields it is derived from: the "
                              f"development code computes it as {derived[1]} = {derived[0]}")


def _extra_kwargs(value, derived: tuple[int, str], where: str, path: str = "kwargs") -> dict:
    """``kwargs``, the extra keyword arguments NeoBERTConfig keeps: ``{}`` for a config built from its named arguments.
    One loaded with ``from_pretrained`` and saved again keeps there what was not a named argument (transformers'
    bookkeeping, ``dim_head``, the previous ``kwargs``): those are accepted and checked as at the top level; anything
    else is named."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: config field {path}={value!r} is not an object (NeoBERTConfig's extra keyword "
                              "arguments)")
    for key, item in value.items():
        name = f"{path}.{key}"
        if key == "kwargs":
            _extra_kwargs(item, derived, where, name)
        elif key in DEV_DERIVED:
            _check_derived(item, name, derived, where)
        elif key in DEV_TRAINING:
            if not DEV_TRAINING[key].accepts(item):
                raise CheckpointError(f"{where}: config field {name}={item!r} is not {DEV_TRAINING[key].says}")
        elif key not in BENIGN:
            raise CheckpointError(f"{where}: config field {name} (= {item!r}) is an extra keyword argument the encoder "
                                  "(neobert) family does not know; the development code sets it on its config, where "
                                  "it may change the forward pass, so poslens refuses it rather than ignore it")
    return value


def _refuse(where: str, name: str, value, why: str) -> CheckpointError:
    return CheckpointError(f"{where}: config field {name}={value!r}: {why}")


ACTIVATIONS = {"posbertswiglu": "PosBERTSwiGLU masks its output projection block-diagonally (AP and semantic FFN "
                                "outputs kept apart), which poslens' encoder does not implement",
               "gelu": "a GELU MLP, which poslens' encoder does not implement (it has SwiGLU only)"}


def _check_forward(raw: dict, where: str, posneobert: bool) -> None:
    """Refuse the forward-pass options poslens' encoder does not implement, naming the field and its value."""
    act = raw.get("hidden_act", "SwiGLU")
    if not isinstance(act, str) or act.lower() != "swiglu":
        raise _refuse(where, "hidden_act", act, ACTIVATIONS.get(str(act).lower(),
                                                                "not an activation of the development code") +
                      "; poslens loads only 'SwiGLU'")
    if not _switch(raw, "rms_norm", True, where):
        raise _refuse(where, "rms_norm", False, "LayerNorm instead of RMSNorm, which poslens' encoder does not "
                                                "implement")
    if posneobert and not _switch(raw, "mixed_feed_forward", True, where):
        raise _refuse(where, "mixed_feed_forward", False,
                      "separate AP and semantic FFNs, which poslens' encoder does not implement "
                      "(its FFN reads the concatenated stream)")
    for name, ok, why in (("mix_attentions", "sum",
                           "hadamard mixing raises NotImplementedError in the development code"),
                          ("attention_activation", "softmax", "softpick is not implemented in poslens' encoder")):
        if raw.get(name, ok) != ok:
            raise _refuse(where, name, raw[name], f"{why}; poslens loads only {ok!r}")
    if posneobert and not _switch(raw, "AP_embeddings", True, where):
        raise _refuse(where, "AP_embeddings", False,
                      "posneobert without AP embeddings, which the development code refuses")


def config_from_dev(raw: dict, where: str) -> dict:
    """``EncoderConfig`` fields from a development ``NeoBERTConfig`` dict (see the module docstring)."""
    if raw.get("model_type") not in HF_MODEL_TYPES:
        raise CheckpointError(f"{where}: model_type is {raw.get('model_type')!r}, not one of {list(HF_MODEL_TYPES)} "
                              "(not a NeoBERT / DSTG encoder config)")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size") if k not in raw]
    if missing:
        raise CheckpointError(f"{where}: config.json lacks {missing}")
    audit(raw, where, "encoder (neobert)", read=DEV_READ, require={"model_type": HF_MODEL_TYPES})
    posneobert, use_rope = _switch(raw, "posneobert", False, where), _switch(raw, "rope", True, where)
    rp, ap = _switch(raw, "relative_pos_bias", False, where), _switch(raw, "AP_embeddings", True, where)
    hidden, heads = _whole(raw, "hidden_size", None, where), _whole(raw, "num_attention_heads", None, where)
    pos = _whole(raw, "pos_size", 384, where)
    if heads == 0:
        raise _refuse(where, "num_attention_heads", 0, "an encoder needs at least one head")
    _check_forward(raw, where, posneobert)
    derived = _dim_head(hidden, pos, heads, posneobert)
    if "dim_head" in raw:
        _check_derived(raw["dim_head"], "dim_head", derived, where)
    eps = raw.get("norm_eps", 1e-6)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
        raise _refuse(where, "norm_eps", eps, "not a number > 0")
    training = recorded(raw, DEV_TRAINING, where, "config field")
    inert = recorded(raw, DEV_INERT, where, "config field")
    inert["kwargs"] = _extra_kwargs(raw.get("kwargs", {}), derived, where)
    pad = _whole(raw, "pad_token_id", 0, where)
    fields = {"vocab_size": _whole(raw, "vocab_size", None, where), "hidden_size": hidden,
              "num_hidden_layers": _whole(raw, "num_hidden_layers", None, where), "num_attention_heads": heads,
              "max_length": _whole(raw, "max_length", 1024, where), "norm_eps": float(eps), "pad_token_id": pad,
              "training_only": training, "inert_config": inert}
    inter = _whole(raw, "intermediate_size", None, where, optional=True) or 4 * hidden
    fields.update(_dev_variant(raw, where, posneobert, use_rope, rp, ap, pos, derived[0], inter))
    if pad and fields["variant"] in ("disentangled", "ap"):
        raise _refuse(where, "pad_token_id", pad,
                      f"the development code gives real tokens the AP rows pad_token_id + 1.. "
                      f"({pad + 1}..), poslens' encoder rows 1..n; poslens loads AP encoders with pad_token_id 0 only")
    # the fork's RelativePositionBucketedBias zeroes the [CLS]/[SEP] rows and columns
    if rp and not fields.get("untie_cls"):
        fields["rp_skip_special"] = True
    if fields["vocab_size"] == 30522:
        fields["tokenizer"] = "bert-uncased"
    return fields


def _dev_variant(raw: dict, where: str, posneobert: bool, use_rope: bool, rp: bool, ap: bool, pos: int, d_qk: int,
                 inter: int) -> dict:
    """The variant's fields, from the development config's position switches: DSTG (posneobert), RoPE, RP or AP,
    each combination the development code or poslens refuses an error."""
    if posneobert:
        if use_rope:
            raise CheckpointError(f"{where}: config.json sets posneobert and rope (rotary on the AP queries), which "
                                  "poslens does not load")
        pos_inter = _whole(raw, "pos_intermediate_size", None, where, optional=True) or 4 * pos
        return dict(variant="disentangled", pos_size=pos, d_qk=d_qk, rp_bias=rp,
                    untie_cls=_switch(raw, "untie_cls", False, where),
                    mlm_input="semantic" if _switch(raw, "use_only_sem_for_decoding", False, where) else "full",
                    intermediate_size=_swiglu_width(pos_inter + inter))
    if use_rope:
        if rp:
            raise CheckpointError(f"{where}: config.json sets both rope and relative_pos_bias, which the "
                                  "development code refuses")
        fields = dict(variant="rope", rope_style="interleaved")
    elif rp:
        if ap:
            raise CheckpointError(f"{where}: config.json sets relative_pos_bias with AP_embeddings (an AP + RP "
                                  "baseline), which poslens does not load; set AP_embeddings false for the RP "
                                  "baseline")
        fields = dict(variant="rp", untie_cls=False)  # the development code reads untie_cls with posneobert only
    elif ap:
        fields = {"variant": "ap"}
    else:
        raise CheckpointError(f"{where}: config.json has no position information at all (rope, "
                              "relative_pos_bias and AP_embeddings all off); poslens does not load NoPE encoders")
    return fields | {"intermediate_size": _swiglu_width(inter)}


def hf_config(cfg: EncoderConfig) -> dict:
    """``config.json`` as the development NeoBERTConfig writes it (every field), with the exact config under
    ``poslens``."""
    dis = cfg.disentangled
    pos = cfg.pos_size if dis else 0
    # the development rule's inputs, best effort (exact only when intermediate_size is a multiple of 8);
    # the exact config is the "poslens" object, which readers of this schema apply last
    pos_inter = 4 * pos
    out = {"model_type": "neobert", "architectures": ["NeoBERTLMHead" if cfg.mlm_head else "NeoBERT"],
           "hidden_size": cfg.hidden_size, "pos_size": pos, "num_hidden_layers": cfg.num_hidden_layers,
           "num_attention_heads": cfg.num_attention_heads,
           "dim_head": _dim_head(cfg.hidden_size, pos, cfg.num_attention_heads, dis)[0],
           "intermediate_size": -(-3 * cfg.intermediate_size // 2) - pos_inter, "pos_intermediate_size": pos_inter,
           "mixed_feed_forward": True, "hidden_act": "SwiGLU", "rms_norm": True, "norm_eps": cfg.norm_eps,
           "rope": cfg.variant == "rope", "posneobert": dis, "relative_pos_bias": bool(cfg.rp_bias),
           "untie_cls": bool(cfg.untie_cls), "mix_attentions": "sum", "attention_activation": "softmax",
           "use_only_sem_for_decoding": cfg.mlm_input == "semantic" and dis,
           "AP_embeddings": cfg.variant in ("disentangled", "ap"),
           "max_length": cfg.max_length, "vocab_size": cfg.vocab_size, "pad_token_id": cfg.pad_token_id}
    out.update({**defaults(DEV_TRAINING), **(cfg.training_only or {})})
    out.update({**defaults(DEV_INERT), "kwargs": {}, **(cfg.inert_config or {})})
    out["poslens"] = cfg.to_dict()
    return out


# ---- reading ---------------------------------------------------------------------------------------------


def _expected_file_shapes(model: EncoderModel, flat: dict) -> dict[str, tuple]:
    """The model's keys and shapes in the development layout (unprefixed), in the variant this file uses."""
    cfg = model.cfg
    expected = {to_file(k): tuple(v.shape) for k, v in model.state_dict().items()}
    for key in list(expected):
        if key in flat:
            continue
        m = re.match(r"^(.*)qkv_(pos|sem)\.weight$", key)
        if m and f"{m[1]}qk_{m[2]}.weight" in flat:
            rows, cols = expected.pop(key)
            expected[f"{m[1]}qk_{m[2]}.weight"] = (rows - cols, cols)
            expected[f"{m[1]}v_{m[2]}.weight"] = (cols, cols)
        elif key.endswith("cls_sep_override.thetas") and any(key[:-6] + name in flat for name in OLD_THETAS):
            expected.pop(key)
            for name in OLD_THETAS:
                found = tuple(flat[key[:-6] + name].shape) if key[:-6] + name in flat else None
                h = cfg.num_attention_heads
                expected[key[:-6] + name] = found if found in ((h,), (1, h)) else (h,)
        elif key.endswith("relative_attention_bias") and key + ".weight" in flat:
            expected[key + ".weight"] = expected.pop(key)
        elif key == "positional_embedding.weight" and FIXED_AP in flat:
            expected[FIXED_AP] = expected.pop(key)
    return expected


def _native_state(model: EncoderModel, flat: dict) -> dict[str, torch.Tensor]:
    """Rewrite a verified development state dict (any variant) into the model's own keys."""
    h, dqk = model.cfg.num_attention_heads, model.cfg.d_qk
    native = {}
    for key, value in flat.items():
        if m := re.match(r"^(.*\.)?qk_(pos|sem)\.weight$", key):
            qk = value.view(h, 2, dqk, value.shape[-1]).transpose(0, 1).reshape(2 * h * dqk, value.shape[-1])
            base = m[1] or ""
            native[to_native(f"{base}qkv_{m[2]}.weight")] = torch.cat([qk, flat[f"{base}v_{m[2]}.weight"]], dim=0)
        elif re.search(r"(^|\.)v_(pos|sem)\.weight$", key):  # consumed with its qk_* partner
            continue
        elif key.rsplit(".", 1)[-1] in OLD_THETAS and "cls_sep_override." in key:
            base = key.rsplit(".", 1)[0] + "."
            native[to_native(base + "thetas")] = torch.stack([flat[base + name].reshape(-1) for name in OLD_THETAS])
        elif key.endswith("relative_attention_bias.weight"):
            native[to_native(key.removesuffix(".weight"))] = value
        elif key == FIXED_AP:
            native["positional_embedding.weight"] = value
        else:
            native[to_native(key)] = value
    return native


def _note(cfg: EncoderConfig, source: str) -> str:
    sizes = f"hidden_size={cfg.hidden_size}" + (f", pos_size={cfg.pos_size}" if cfg.disentangled else "")
    return (f" (from {source}: variant={cfg.variant}, {sizes}, heads={cfg.num_attention_heads}, d_qk={cfg.d_qk}, "
            f"layers={cfg.num_hidden_layers}, intermediate_size={cfg.intermediate_size}, vocab_size={cfg.vocab_size})")


def fill(model: EncoderModel, flat: dict, prefix: str, where: str, source: str) -> EncoderModel:
    """Verify a development state dict (prefix removed) against ``model`` by file key, then copy it in."""
    expected = {_prefixed(k, prefix): s for k, s in _expected_file_shapes(model, flat).items()}
    found = {_prefixed(k, prefix): tuple(v.shape) for k, v in flat.items()}
    verify(expected, found, where, config_note=_note(model.cfg, source))
    with torch.no_grad():
        model.load_state_dict(_native_state(model, flat), strict=True)
    for name, module in model.named_modules():
        if isinstance(module, RelativePositionBias):
            _check_buckets(module, _prefixed(to_file(f"{name}.bucket_indices"), prefix), where)
    return model.eval()


def _check_buckets(module: RelativePositionBias, key: str, where: str) -> None:
    n = module.bucket_indices.shape[0]
    pos = torch.arange(n)
    want = t5_buckets(pos[None, :] - pos[:, None], module.num_buckets, module.max_distance)
    bad = (module.bucket_indices != want).nonzero()
    if len(bad):
        q, k = (int(i) for i in bad[0])
        raise CheckpointError(f"{where}: key '{key}' is not the T5 bucketing of key - query ({module.num_buckets} "
                              f"buckets, max distance {module.max_distance}): at query {q}, key {k} it "
                              f"holds {int(module.bucket_indices[q, k])}, T5 gives {int(want[q, k])}")


def _overrides(raw: dict, where: str) -> dict:
    extra = raw.get("poslens") or {}
    if not isinstance(extra, dict):
        raise CheckpointError(f"{where}: 'poslens' must be an object of encoder config fields")
    return dict(extra)


def _config_for(flat: dict, prefix: str, weights: Path, sidecar: dict | None,
                sidecar_path: Path | None) -> tuple[EncoderConfig, str]:
    """Config of a development state dict: from the shapes, a development config.json, or config fields."""
    where = str(weights)
    inferred = infer_config(flat, prefix, where)
    if sidecar is None:
        return _finish(inferred, flat, prefix, where, "the shapes"), "shapes of the file"
    source = f"{sidecar_path}"
    if "model_type" in sidecar:
        fields = config_from_dev(sidecar, str(sidecar_path))
        fields.update({k: inferred[k] for k in ("mlm_head", "rp_per_layer") if k in inferred})
        fields.update(_overrides(sidecar, str(sidecar_path)))
    else:
        fields = {**inferred, **sidecar}
    return _finish(fields, flat, prefix, where, source), source


def load_state_pt(obj: dict, path: Path) -> EncoderModel:
    """A model from a loaded development ``state_dict.pt`` (+ an optional ``config.json`` beside it)."""
    prefix, flat = split_prefix(obj, str(path))
    sidecar_path = path.parent / "config.json"
    sidecar = read_json(sidecar_path) if sidecar_path.is_file() else None
    cfg, source = _config_for(flat, prefix, path, sidecar, sidecar_path if sidecar is not None else None)
    model = fill(EncoderModel(cfg, init_weights=False), flat, prefix, str(path), source)
    model.model_name = path.parent.name if path.stem == "state_dict" and path.parent.name else path.stem
    return model


def _read_weights(path: Path) -> tuple[Path, dict]:
    for name in WEIGHT_FILES:
        file = path / name
        if not file.is_file():
            continue
        if name.endswith(".safetensors"):
            try:
                return file, load_file(str(file))
            except (SafetensorError, OSError) as err:
                raise CheckpointError(f"{file}: cannot be read as safetensors (truncated or corrupt?): {err}") from None
        try:
            return file, torch.load(file, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises several types for truncated or foreign files
            raise CheckpointError(f"{file}: cannot be read as a torch checkpoint (truncated or "
                                  f"corrupt?): {err}") from None
    if (path / "model.safetensors.index.json").exists():
        raise CheckpointError(f"{path}: sharded encoder checkpoints (model.safetensors.index.json) are not supported")
    raise CheckpointError(f"{path}: has config.json but neither {' nor '.join(WEIGHT_FILES)}")


def load_hf_dir(path: Path) -> EncoderModel:
    """A model from a development ``save_pretrained`` directory."""
    raw = read_json(path / "config.json")
    file, state = _read_weights(path)
    if not isinstance(state, dict):
        raise CheckpointError(f"{file}: holds a {type(state).__name__}, not a state dict")
    prefix, flat = split_prefix(state, str(file))
    fields = config_from_dev(raw, str(path / "config.json"))
    inferred = infer_config(flat, prefix, str(file))
    fields.update({k: inferred[k] for k in ("mlm_head", "rp_per_layer")})
    fields.update(_overrides(raw, str(path / "config.json")))
    source = str(path / "config.json")
    cfg = _finish(fields, flat, prefix, str(file), source)
    model = fill(EncoderModel(cfg, init_weights=False), flat, prefix, str(file), source)
    model.model_name = path.name
    return model


# ---- poslens directories and writing -------------------------------------------------------------------------


def build(raw_config: dict, state: dict, where: str) -> EncoderModel:
    """From a poslens directory: ``EncoderConfig`` fields and a state dict in the development layout."""
    cfg = make_config(raw_config, where, "poslens.json")
    prefix, flat = split_prefix(state, where)
    return fill(EncoderModel(cfg, init_weights=False), flat, prefix, where, "poslens.json")


def export(model: EncoderModel) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config, state dict in the development layout: ``model.``-prefixed backbone + ``decoder.*`` when there is a
    head)."""
    prefix = PREFIX if model.cfg.mlm_head else ""
    state = {_prefixed(to_file(k), prefix): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return model.cfg.to_dict(), state


def save_pretrained(model: EncoderModel, directory) -> Path:
    """Write ``config.json`` (development schema + exact ``poslens`` config) and ``model.safetensors``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(hf_config(model.cfg), indent=2) + "\n", encoding="utf-8")
    save_file(export(model)[1], str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


# ---- the family's layouts -------------------------------------------------------------------------------------


def is_state_pt(checkpoint) -> bool:
    return checkpoint.is_torch_file and looks_like_state_dict(checkpoint.torch_object)


def read_state_pt(checkpoint, place: dict) -> EncoderModel:
    return load_state_pt(checkpoint.torch_object, checkpoint.path)


def is_dev_dir(checkpoint) -> bool:
    return checkpoint.path is not None and checkpoint.model_type in HF_MODEL_TYPES


def read_dev_dir(checkpoint, place: dict) -> EncoderModel:
    return load_hf_dir(checkpoint.path)


def examples() -> list[EncoderModel]:
    """One tiny model of each variant (DSTG, ap, rp, rope)."""
    base = dict(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                max_length=32)
    return [EncoderModel(EncoderConfig(**base, variant="disentangled", pos_size=8)),
            *(EncoderModel(EncoderConfig(**base, variant=v)) for v in ("ap", "rp", "rope"))]
