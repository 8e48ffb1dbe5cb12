"""The bert family's formats: a Hugging Face ``bert`` directory (``BertModel`` keys, with or without ``bert.``)
and poslens directories.

The directory is read without ``transformers``; the pooler (unused) and the ``position_ids`` /
``token_type_ids`` buffers are skipped; any other key must map. The config is audited
(``interp.loading.hf_config``): only absolute positions, exact GELU and a plain encoder (no decoder, no
cross-attention) load.
"""

from __future__ import annotations

import dataclasses

import torch

from interp.families.bert.model import BertConfig, BertEncoder
from interp.loading.errors import CheckpointError, build_config
from interp.loading.hf_config import audit
from interp.loading.strict import load_strict

HF_MODEL_TYPES = ("bert",)
READ = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
        "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "tie_word_embeddings")
REQUIRE = {"hidden_act": ("gelu",), "position_embedding_type": ("absolute",), "is_decoder": (False,),
           "add_cross_attention": (False,), "model_type": HF_MODEL_TYPES, "quantization_config": (None,)}
SKIPPED = ("pooler.", "bert.pooler.")


def claims(raw: dict) -> bool:
    """A plain ``BertModel`` (no head, as sentence-transformers save it); a checkpoint with a head is the generic
    family's, which runs the head the file holds."""
    return set(raw.get("architectures") or ["BertModel"]) <= {"BertModel"}


def config_from_hf(raw: dict, where: str) -> BertConfig:
    audit(raw, where, "bert", read=READ, require=REQUIRE)
    missing = [k for k in READ[:6] if k not in raw]
    if missing:
        raise CheckpointError(f"{where}: config lacks {missing}")
    try:
        return BertConfig(*(int(raw[k]) for k in READ[:6]), int(raw.get("type_vocab_size", 2)),
                          float(raw.get("layer_norm_eps", 1e-12)))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid bert config: {err}") from None


def _build(cfg: BertConfig, state: dict, where: str) -> BertEncoder:
    model = BertEncoder(cfg)
    state = {k: v for k, v in state.items()
             if not k.startswith(SKIPPED) and not k.endswith(("position_ids", "token_type_ids"))}
    load_strict(model, state, where, to_native=to_native, to_file=to_file)
    return model.eval()


def build(raw_config: dict, state: dict, where: str) -> BertEncoder:
    return _build(build_config(BertConfig, raw_config, where, "bert config"), state, where)


def export(model: BertEncoder) -> tuple[dict, dict[str, torch.Tensor]]:
    return dataclasses.asdict(model.cfg), {to_file(k): v.detach().cpu().contiguous()
                                           for k, v in model.state_dict().items()}


_MAP = (
    ("embeddings.word_embeddings.", "word_embeddings."), ("embeddings.position_embeddings.", "position_embeddings."),
    ("embeddings.token_type_embeddings.", "token_type_embeddings."), ("embeddings.LayerNorm.", "embed_norm."),
    ("attention.self.query.", "attn.query."), ("attention.self.key.", "attn.key."),
    ("attention.self.value.", "attn.value."),
    ("attention.output.dense.", "attn.dense."), ("attention.output.LayerNorm.", "attn_norm."),
    ("intermediate.dense.", "intermediate."), ("output.dense.", "output."), ("output.LayerNorm.", "ffn_norm."),
)


def to_native(key: str) -> str:
    """Hugging Face BertModel key (with or without ``bert.``) -> poslens module name."""
    key = key.removeprefix("bert.")
    if key.startswith("encoder.layer."):
        _, _, i, rest = key.split(".", 3)
        key = f"blocks.{i}.{rest}"
    for hf, native in _MAP:
        key = key.replace(hf, native, 1) if hf in key else key
    return key


def to_file(key: str) -> str:
    """poslens module name -> Hugging Face BertModel key."""
    for hf, native in _MAP:
        if native in key:
            key = key.replace(native, hf, 1)
            break
    if key.startswith("blocks."):
        _, i, rest = key.split(".", 2)
        key = f"encoder.layer.{i}.{rest}"
    return key


def is_hf(checkpoint) -> bool:
    """A plain Hugging Face ``BertModel`` (a directory or a transformers model in memory); one with a head is the
    generic family's, which runs the head the file holds."""
    return checkpoint.model_type in HF_MODEL_TYPES and claims(checkpoint.config)


def read_hf(checkpoint, place: dict) -> BertEncoder:
    return checkpoint.read_hf(config_from_hf, _build)


def examples() -> list[BertEncoder]:
    return [BertEncoder(BertConfig(32, 2, 4, 48, 97, 40))]
