"""The learned-increment family's checkpoint formats: upstream ``step_N.pt`` and the key layout they share."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import torch

from interp.families.increments.model import IncrementConfig, IncrementTransformer
from interp.loading.errors import CheckpointError, build_config
from interp.loading.strict import load_strict

COMPUTED_FIELDS = ("head_dim", "effective_delta_hidden_dim")
COMPILE_PREFIX = "_orig_mod."


def to_native(key: str) -> str:
    key = re.sub(r"^delta_mlps\.(\d+)\.", r"blocks.\1.delta_mlp.", key)
    return re.sub(r"^layers\.(\d+)\.", r"blocks.\1.", key)


def to_file(key: str) -> str:
    key = re.sub(r"^blocks\.(\d+)\.delta_mlp\.", r"delta_mlps.\1.", key)
    return re.sub(r"^blocks\.(\d+)\.", r"layers.\1.", key)


def config_from_dict(raw, where: str) -> IncrementConfig:
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: model_config must be a dict, found {type(raw).__name__}")
    fields = {f.name for f in dataclasses.fields(IncrementConfig)}
    unknown = sorted(set(raw) - fields - set(COMPUTED_FIELDS))
    if unknown:
        raise CheckpointError(
            f"{where}: model_config has fields {unknown} that no learned-increments config has "
            "(is this a checkpoint of another family?)"
        )
    required = [f.name for f in dataclasses.fields(IncrementConfig) if f.default is dataclasses.MISSING]
    absent = [k for k in required if k not in raw]
    if absent:
        raise CheckpointError(f"{where}: model_config lacks required fields {absent}")
    cfg = build_config(IncrementConfig, {k: v for k, v in raw.items() if k in fields}, where, "model_config")
    for name in COMPUTED_FIELDS:
        if name in raw and raw[name] != getattr(cfg, name):
            raise CheckpointError(
                f"{where}: model_config {name}={raw[name]} contradicts the other fields, which "
                f"give {getattr(cfg, name)}"
            )
    return cfg


def build(raw_config: dict, state: dict, where: str) -> IncrementTransformer:
    """A model from a config dict and a state dict in the upstream key layout, strictly checked."""
    cfg = config_from_dict(raw_config, where)
    model = IncrementTransformer(cfg, init_weights=False)
    note = f" (from model_config: dim={cfg.dim}, n_layers={cfg.n_layers}, vocab_size={cfg.vocab_size})"
    load_strict(model, state, where, to_native=to_native, to_file=to_file, config_note=note)
    return model.eval()


def export(model: IncrementTransformer) -> tuple[dict, dict[str, torch.Tensor]]:
    """(model_config, state dict) in the upstream layout."""
    state = {to_file(k): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return model.cfg.to_dict(), state


def read_step_pt(path: Path) -> tuple[dict, dict, int | None]:
    """(model_config, state dict without the torch.compile prefix, step) from an upstream ``step_N.pt``."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"{path}: cannot be read as a torch checkpoint (truncated or corrupt?): {err}") from None
    return unpack_step_pt(obj, path)


def unpack_step_pt(obj, path: Path) -> tuple[dict, dict, int | None]:
    """``read_step_pt`` for an object already loaded with ``torch.load``."""
    if not isinstance(obj, dict) or "model_state_dict" not in obj or "model_config" not in obj:
        found = sorted(obj)[:10] if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(
            f"{path}: not a learned-increments step_N.pt (needs 'model_state_dict' and 'model_config'; found {found})"
        )
    state = {k.removeprefix(COMPILE_PREFIX): v for k, v in obj["model_state_dict"].items()}
    return obj["model_config"], state, obj.get("step")


def looks_like_step_pt(obj) -> bool:
    return isinstance(obj, dict) and "model_state_dict" in obj and "model_config" in obj


def is_step_pt(checkpoint) -> bool:
    """A torch file holding upstream's ``{'step', 'model_state_dict', 'model_config'}``."""
    return checkpoint.is_torch_file and looks_like_step_pt(checkpoint.torch_object)


def read_checkpoint(checkpoint, place: dict) -> IncrementTransformer:
    config, state, _step = unpack_step_pt(checkpoint.torch_object, checkpoint.path)
    model = build(config, state, checkpoint.where)
    model.model_name = checkpoint.path.stem
    return model


def examples() -> list[IncrementTransformer]:
    """Tiny models that between them have every hook of the family: per-layer increments, and shared ones with learned
    decay."""
    small = dict(dim=16, n_heads=2, n_layers=2, intermediate_dim=32, vocab_size=257, max_seq_len=32,
                 pos_encoding="selective_rope")
    return [IncrementTransformer(IncrementConfig(**small, per_layer_delta=True)),
            IncrementTransformer(IncrementConfig(**small, decay="learned"))]


def save_step_pt(model: IncrementTransformer, path: Path, step: int) -> Path:
    """Write ``model`` exactly as upstream does: ``{'step', 'model_state_dict', 'model_config'}``."""
    config, state = export(model)
    torch.save({"step": step, "model_state_dict": state, "model_config": config}, path)
    return path
