"""The bert family's formats: a Hugging Face ``bert`` directory (``BertModel`` keys, with or without ``bert.``)
and poslens directories.

The directory is read without ``transformers``; the pooler (unused) and the ``position_ids`` /
``token_type_ids`` buffers are skipped; any other key must map. The config is audited
(``interp.loading.hf_config``): only absolute positions, exact GELU and a plain encoder (no decoder, no
cross-attention) load.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from interp.loading.errors import CheckpointError
from interp.loading.hf_config import audit
from interp.loading.strict import load_strict
from interp.models.bert import BertConfig, BertEncoder, _to_file, _to_native

FAMILY = "bert"
HF_MODEL_TYPES = ("bert",)
READ = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size", "max_position_embeddings",
        "type_vocab_size", "layer_norm_eps", "tie_word_embeddings")
REQUIRE = {"hidden_act": ("gelu",), "position_embedding_type": ("absolute",), "is_decoder": (False,),
           "add_cross_attention": (False,), "model_type": HF_MODEL_TYPES, "quantization_config": (None,)}
SKIPPED = ("pooler.", "bert.pooler.")


def claims(raw: dict) -> bool:
    """A plain ``BertModel`` (no head, as sentence-transformers save it); a checkpoint with a head is the generic
    family's, which runs the head the file holds."""
    return set(raw.get("architectures") or ["BertModel"]) <= {"BertModel"}


def config_from_hf(raw: dict, where: str) -> BertConfig:
    audit(raw, where, FAMILY, read=READ, require=REQUIRE)
    missing = [k for k in READ[:6] if k not in raw]
    if missing:
        raise CheckpointError(f"{where}: config lacks {missing}")
    try:
        return BertConfig(*(int(raw[k]) for k in READ[:6]), int(raw.get("type_vocab_size", 2)), float(raw.get("layer_norm_eps", 1e-12)))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid bert config: {err}") from None


def _build(cfg: BertConfig, state: dict, where: str) -> BertEncoder:
    model = BertEncoder(cfg)
    state = {k: v for k, v in state.items() if not k.startswith(SKIPPED) and not k.endswith(("position_ids", "token_type_ids"))}
    load_strict(model, state, where, to_native=_to_native, to_file=_to_file)
    return model.eval()


def from_hf_state(raw_config: dict, state: dict, where: str) -> BertEncoder:
    return _build(config_from_hf(raw_config, where), state, where)


def build(raw_config: dict, state: dict, where: str) -> BertEncoder:
    try:
        cfg = BertConfig(**raw_config)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid bert config: {err}") from None
    return _build(cfg, state, where)


def export(model: BertEncoder) -> tuple[dict, dict[str, torch.Tensor]]:
    return dataclasses.asdict(model.cfg), {_to_file(k): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}


def load_hf_dir(path: Path) -> BertEncoder:
    from interp.loading.hf_files import read_config, read_state, read_tokenizer

    cfg = config_from_hf(read_config(path), str(path / "config.json"))
    file, state = read_state(path)
    model = _build(cfg, state, str(file))
    model.tokenizer = read_tokenizer(path)
    model.model_name = path.name
    return model
