"""Hugging Face ``config.json`` read completely or refused.

Every family that reads a Hugging Face config names the fields it uses (``read``), the fields whose value
it can only take one way (``require``: field -> allowed values; absent is fine), and everything else must
be in ``BENIGN``: fields that do not change the forward pass of an inference model (token ids, dropout,
initialisation, bookkeeping). Any other field is an error naming it, never a silent default.

RoPE fields come in two spellings: transformers 4 writes ``rope_theta`` and ``rope_scaling``
(``{"type" | "rope_type": ..., "factor": ...}`` or null) at the top level; transformers 5 writes
``rope_parameters = {"rope_type": ..., "rope_theta": ..., ...}``. ``rope_settings`` reads either and
returns ``(theta, scaling)`` for the hand-written families; scaling types other than ``default``, ``linear`` and
``llama3`` (yarn, longrope, dynamic, ...) are refused by name there. ``rope_type`` reads the type alone, so that a
family can leave such a checkpoint to the generic ``hf`` family, which runs transformers' own rotary embedding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from interp.loading.errors import CheckpointError
from interp.rope import SCALING_TYPES

BENIGN = frozenset({
    "_name_or_path", "architectures", "transformers_version", "model_type", "dtype", "torch_dtype", "use_cache",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "id2label", "label2id",
    "problem_type", "return_dict", "output_hidden_states", "output_attentions", "chunk_size_feed_forward",
    "is_encoder_decoder", "initializer_range", "attention_dropout", "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "classifier_dropout", "gradient_checkpointing", "tokenizer_class", "pretraining_tp", "torchscript", "use_bfloat16",
    "_attn_implementation_autoset", "_model_name_or_path", "unk_token_id", "finetuning_task", "task_specific_params",
    "prefix", "tf_legacy_loss", "pruned_heads",
})


def audit(raw: dict, where: str, family: str, *, read, require: dict | None = None) -> None:
    """Refuse a field this family neither reads nor knows to be harmless, or a value it cannot honour."""
    for key, allowed in (require or {}).items():
        if key in raw and raw[key] not in allowed:
            raise CheckpointError(f"{where}: config field {key}={raw[key]!r} is not supported by the {family} family "
                                  f"(supported: {', '.join(map(repr, allowed))})")
    known = set(read) | set(require or {}) | BENIGN
    unknown = sorted(k for k in raw if k not in known)
    if unknown:
        raise CheckpointError(f"{where}: config field '{unknown[0]}' (= {raw[unknown[0]]!r}) is not one "
                              f"the {family} family understands and may change the forward pass; poslens refuses it "
                              "rather than ignore it"
                              + (f" (also unknown: {unknown[1:]})" if unknown[1:] else ""))


def rope_type(raw: dict) -> str:
    """The ``rope_type`` (or transformers 4's ``type``) a config declares, ``"default"`` when it declares none; a
    malformed field reads as ``"default"`` here and is refused by ``rope_settings``."""
    params, legacy = raw.get("rope_parameters"), raw.get("rope_scaling")
    scaling = params if isinstance(params, dict) and params else legacy if isinstance(legacy, dict) else {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    return kind if isinstance(kind, str) else "default"


def implemented(kind: str) -> bool:
    """Whether the hand-written families' ``interp.rope`` applies this ``rope_type``."""
    return kind == "default" or kind in SCALING_TYPES


def rope_settings(raw: dict, where: str, default_theta: float | None = None,
                  family: str | None = None) -> tuple[float, dict | None]:
    """``(theta, scaling)`` from either spelling; scaling is None for plain RoPE. ``family`` names the reader in
    errors."""
    params, legacy, top = raw.get("rope_parameters"), raw.get("rope_scaling"), raw.get("rope_theta")
    for name, value in (("rope_parameters", params), ("rope_scaling", legacy)):
        if value is not None and not isinstance(value, dict):
            raise CheckpointError(f"{where}: config field {name} must be an object or null, found {value!r}")
    if params and legacy:
        raise CheckpointError(f"{where}: config has both rope_parameters and rope_scaling; keep one")
    scaling = dict(params or legacy or {})
    name = "rope_parameters" if params else "rope_scaling"
    theta = scaling.pop("rope_theta", None)
    if theta is not None and top is not None and float(theta) != float(top):
        raise CheckpointError(f"{where}: rope_theta={top!r} but rope_parameters.rope_theta={theta!r}")
    theta = theta if theta is not None else top if top is not None else default_theta
    if theta is None:
        raise CheckpointError(f"{where}: config has no rope_theta (neither at the top level nor in rope_parameters)")
    if "type" in scaling:
        kind = scaling.pop("type")
        if scaling.setdefault("rope_type", kind) != kind:
            raise CheckpointError(f"{where}: {name} has type={kind!r} but rope_type={scaling['rope_type']!r}")
    kind = scaling.pop("rope_type", "default")
    if kind == "default":
        if scaling:
            raise CheckpointError(f"{where}: {name} has rope_type 'default' with scaling fields {sorted(scaling)} that "
                                  "poslens would ignore")
        return float(theta), None
    if kind not in SCALING_TYPES:
        raise CheckpointError(f"{where}: {name} rope_type {kind!r} is not supported "
                              f"by {f'the {family}' if family else 'this'} family (it implements "
                              f"default, {', '.join(SCALING_TYPES)}); it changes the rotation and cannot be ignored")
    missing = [k for k in SCALING_TYPES[kind] if scaling.get(k) is None]
    extra = sorted(k for k in scaling if k not in SCALING_TYPES[kind] and scaling[k] is not None)
    if missing or extra:
        raise CheckpointError(f"{where}: {name} rope_type {kind!r} "
                              + (f"lacks {missing}" if missing else f"has fields {extra} poslens does not apply"))
    return float(theta), {"rope_type": kind, **{k: scaling[k] for k in SCALING_TYPES[kind]}}


class Recorded(NamedTuple):
    """A config field read, checked and kept, but not used by the forward pass."""

    default: object  # what the authors' code uses when the field is absent; ABSENT: nothing is recorded then
    accepts: Callable[[object], bool]
    says: str  # what ``accepts`` lets through, for the error: "... is not <says>"


ABSENT = object()


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def probability(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: _real(v) and 0 <= v <= 1, "a probability in [0, 1]")


def steps(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a step count >= 0")


def scale(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: _real(v) and math.isfinite(v) and v >= 0, "a finite number >= 0")


def number(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: _real(v) and math.isfinite(v), "a finite number")


def text(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: isinstance(v, str), "a string")


def flag(default=ABSENT) -> Recorded:
    return Recorded(default, lambda v: isinstance(v, bool), "true or false")


def choice(default, *values, why: str = "") -> Recorded:
    """One of ``values`` (``default`` alone when none are given), of the same type: ``0`` is not ``False``."""
    allowed = values or (default,)

    def accepts(value) -> bool:
        return any(value == a and type(value) is type(a) for a in allowed)

    return Recorded(default, accepts, " or ".join(map(repr, allowed)) + (f" ({why})" if why else ""))


def recorded(raw: dict, spec: dict[str, Recorded], where: str, scope: str) -> dict:
    """``spec``'s fields of ``raw``, each checked (``'{where}: {scope} {name}={value!r} is not {says}'``), defaults
    filled in."""
    out = {}
    for name, field in spec.items():
        value = raw.get(name, field.default)
        if value is ABSENT:
            continue
        if name in raw and not field.accepts(value):
            raise CheckpointError(f"{where}: {scope} {name}={value!r} is not {field.says}")
        out[name] = value
    return out


def defaults(spec: dict[str, Recorded]) -> dict:
    """What the authors' code writes for ``spec``'s fields when nothing was recorded."""
    return {name: field.default for name, field in spec.items() if field.default is not ABSENT}
