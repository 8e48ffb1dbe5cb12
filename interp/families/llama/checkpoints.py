"""The llama family's formats: a Hugging Face ``llama`` directory, a GGUF file, and poslens directories.

A ``llama`` directory is read without ``transformers`` (config.json + safetensors); a GGUF file is
de-quantised by ``transformers`` (with the ``gguf`` package). Either way the whole config is audited
(``interp.loading.hf_config``): rope scaling ``linear`` / ``llama3`` is applied, a field this family does not
know is refused by name. A directory (or a transformers model in memory) whose ``rope_type`` is another one
(``yarn``, ``longrope``, ``dynamic``, ...) is declined, with the reason, and read by the generic ``hf`` family with
transformers' own rotary embedding; a GGUF file with one is refused by name (GGUF files are read here only).

``interp.load`` reads a GGUF file from its de-quantised copy in the on-disk cache (``interp.loading.converted``:
converted once per file, keyed by its sha256), as a ``llama`` directory; ``load_gguf`` does the same for a direct
call. Every load builds a fresh module (a load never hands out an object another load returned, and converting or
editing one model leaves the next load untouched).
"""

from __future__ import annotations

from pathlib import Path

import torch

from interp.families.llama.model import LlamaConfig, LlamaTransformer
from interp.loading.errors import CheckpointError, build_config
from interp.loading.hf_config import audit, implemented, rope_settings, rope_type
from interp.loading.hf_keys import to_file, to_native
from interp.loading.strict import load_strict
from interp.rope import SCALING_TYPES

HF_MODEL_TYPES = ("llama",)
READ = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "vocab_size",
        "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "head_dim", "attention_bias", "mlp_bias",
        "rope_theta", "rope_scaling", "rope_parameters")
REQUIRE = {"hidden_act": ("silu",), "model_type": HF_MODEL_TYPES, "pretraining_tp": (1, None),
           "quantization_config": (None,)}


def config_from_hf(raw: dict, where: str) -> LlamaConfig:
    """A ``LlamaConfig`` from a Hugging Face config dict, every field accounted for."""
    audit(raw, where, "llama", read=READ, require=REQUIRE)
    missing = [k for k in READ[:8] if k not in raw and k != "num_key_value_heads"]
    if missing:
        raise CheckpointError(f"{where}: config lacks {missing}")
    theta, scaling = rope_settings(raw, where, family="llama")
    try:
        return LlamaConfig(raw["hidden_size"], raw["intermediate_size"], raw["num_hidden_layers"],
                           raw["num_attention_heads"],
                           raw.get("num_key_value_heads") or raw["num_attention_heads"], raw["vocab_size"],
                           raw["max_position_embeddings"], theta, float(raw.get("rms_norm_eps", 1e-6)),
                           bool(raw.get("tie_word_embeddings", False)), raw.get("head_dim"), scaling,
                           bool(raw.get("attention_bias", False)), bool(raw.get("mlp_bias", False)))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid llama config: {err}") from None


def _untie(cfg: LlamaConfig, state: dict, where: str) -> dict:
    """Drop a stored ``lm_head.weight`` of a tied model (it must equal the embedding)."""
    if cfg.tie_word_embeddings and "lm_head.weight" in state:
        head, embed = state["lm_head.weight"], state.get("model.embed_tokens.weight")
        if embed is None or head.shape != embed.shape or not torch.equal(head, embed):
            raise CheckpointError(f"{where}: tie_word_embeddings is true but 'lm_head.weight' differs from "
                                  "'model.embed_tokens.weight'")
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    return state


def _build(cfg: LlamaConfig, state: dict, where: str) -> LlamaTransformer:
    model = LlamaTransformer(cfg)
    load_strict(model, _untie(cfg, dict(state), where), where, to_native=to_native, to_file=to_file)
    return model.eval()


def from_hf_state(raw_config: dict, state: dict, where: str) -> LlamaTransformer:
    """From a Hugging Face config dict and state dict (Hugging Face key layout)."""
    return _build(config_from_hf(raw_config, where), state, where)


def build(raw_config: dict, state: dict, where: str) -> LlamaTransformer:
    """From a poslens directory: ``LlamaConfig`` fields and a state dict in the Hugging Face layout."""
    return _build(build_config(LlamaConfig, raw_config, where, "llama config"), state, where)


def export(model: LlamaTransformer) -> tuple[dict, dict[str, torch.Tensor]]:
    return model.cfg.to_dict(), {to_file(k): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}


def load_gguf(path: Path) -> LlamaTransformer:
    """A GGUF LLaMA file, de-quantised to float32 once into the on-disk cache (``interp.loading.converted``) and read
    from there as a Hugging Face ``llama`` directory; the module is new every time."""
    from interp.loading.checkpoint import Checkpoint
    from interp.loading.converted import gguf_directory

    model = read_hf(Checkpoint(gguf_directory(path)), {})
    model.model_name = Path(path).stem
    if model.tokenizer is not None:
        model.tokenizer.name = Path(path).stem
    return model


def is_gguf(checkpoint) -> bool:
    return checkpoint.path is not None and (checkpoint.format == "gguf" or (checkpoint.path.is_file()
                                                                            and checkpoint.path.suffix == ".gguf"))


def read_gguf(checkpoint, place: dict) -> LlamaTransformer:
    return load_gguf(checkpoint.path)


def is_hf(checkpoint) -> bool:
    """A Hugging Face ``llama`` directory, or a transformers LLaMA model in memory, whose rope scaling this family
    implements."""
    return checkpoint.model_type in HF_MODEL_TYPES and implemented(rope_type(checkpoint.config))


def declines_hf(checkpoint) -> str | None:
    """Why a ``llama`` checkpoint is left to the generic family: a rope_type ``interp.rope`` does not implement."""
    if checkpoint.model_type not in HF_MODEL_TYPES or implemented(kind := rope_type(checkpoint.config)):
        return None
    return (f"{checkpoint.config_where}: rope_type {kind!r} is not one the llama family implements (default, "
            f"{', '.join(SCALING_TYPES)}); transformers' own rotary embedding runs it")


def read_hf(checkpoint, place: dict) -> LlamaTransformer:
    """The whole config audited, every key mapped (a directory is read without transformers)."""
    return checkpoint.read_hf(config_from_hf, _build)


def examples() -> list[LlamaTransformer]:
    return [LlamaTransformer(LlamaConfig(32, 48, 2, 4, 2, 97, 64, 10000.0, 1e-6, True))]
