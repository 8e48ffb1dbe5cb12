"""The RePo family's checkpoint format: a Hugging Face ``save_pretrained`` directory of an ``olmo2`` model.

``config.json`` is a normal OLMo-2 config with a nested ``pe_config``. Upstream reads only the
misspelled ``dynmaic_pe_start_layer`` / ``dynmaic_pe_layer_ids``; this loader does the same, and treats
a disagreement between the two spellings, or a correct spelling that upstream would ignore, as an error.
Weights are ``model.safetensors`` or shards listed in ``model.safetensors.index.json``. Keys and shapes
are verified from the safetensors headers before any tensor is read, so a config saying RePo with the
maps missing, maps present with a config saying otherwise, or any stray key is an error naming the key,
never the silent drop stock ``transformers`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from interp.families.repo.model import RepoConfig, RepoTransformer
from interp.loading.errors import CheckpointError, build_config
from interp.loading.hf_config import audit, defaults, probability, recorded, rope_settings, steps, text
from interp.loading.hf_files import header_shapes, read_tokenizer
from interp.loading.hf_keys import to_file, to_native
from interp.loading.strict import verify

PE_MODES = {"none": "rope", "nope": "nope", "swigluex_multihead": "repo"}
HF_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "vocab_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "attention_bias",
             "tie_word_embeddings")
READ = HF_FIELDS + ("rope_scaling", "rope_parameters", "pe_config", "poslens")
REQUIRE = {"hidden_act": ("silu",), "model_type": ("olmo2",), "quantization_config": (None,)}
PE_KEYS = ("dynamic_pe_mode", "dynamic_pe_start_layer", "dynmaic_pe_start_layer", "dynamic_pe_layer_ids",
           "dynmaic_pe_layer_ids")
# The rest of the authors' serialised PEConfig: a positional dropout that blends z toward the integer position during
# training (annealed over that many steps) and an unused model_type. None acts at inference; read, checked, recorded.
PE_TRAINING = {"dynamic_pe_init_pdrop": probability(1.0), "dynamic_pe_dropout_anneal_step": steps(0),
               "model_type": text("")}
INDEX = "model.safetensors.index.json"


def _pe_value(pe: dict, name: str, where: str, default):
    """Read ``dynmaic_<name>`` as upstream does; refuse values upstream would silently ignore."""
    misspelled, correct = pe.get(f"dynmaic_{name}"), pe.get(f"dynamic_{name}")
    if misspelled is not None and correct is not None and misspelled != correct:
        raise CheckpointError(f"{where}: pe_config has dynmaic_{name}={misspelled!r} but dynamic_{name}={correct!r}; "
                              "upstream reads the misspelled key, so they must agree")
    if misspelled is None and correct not in (None, default, ""):
        raise CheckpointError(f"{where}: pe_config sets dynamic_{name}={correct!r} but not the misspelled "
                              f"dynmaic_{name} that upstream reads (upstream would use {default!r}); add "
                              f"dynmaic_{name}")
    return misspelled if misspelled is not None else default


def config_from_hf(raw: dict, where: str) -> RepoConfig:
    if raw.get("model_type") != "olmo2":
        raise CheckpointError(f"{where}: model_type is {raw.get('model_type')!r}, not 'olmo2' (not a RePo / OLMo-2 "
                              "checkpoint)")
    audit(raw, where, "repo (olmo2)", read=READ, require=REQUIRE)
    missing = [k for k in HF_FIELDS[:5] if k not in raw and k != "num_key_value_heads"]
    if missing:
        raise CheckpointError(f"{where}: config.json lacks {missing}")
    theta, scaling = rope_settings(raw, where)
    pe = raw.get("pe_config") or {}
    if not isinstance(pe, dict):
        raise CheckpointError(f"{where}: pe_config must be an object, found {pe!r}")
    stray = sorted(set(pe) - set(PE_KEYS) - set(PE_TRAINING))
    if stray:
        raise CheckpointError(f"{where}: pe_config field '{stray[0]}' is not one poslens understands "
                              f"(known: {list(PE_KEYS) + list(PE_TRAINING)}); "
                              "it may change the positions, so poslens refuses it rather than ignore it")
    training = recorded(pe, PE_TRAINING, where, "pe_config")
    mode = pe.get("dynamic_pe_mode", "none")
    if mode not in PE_MODES:
        raise CheckpointError(f"{where}: pe_config dynamic_pe_mode={mode!r} is not one poslens loads "
                              f"({sorted(PE_MODES)})")
    start = int(_pe_value(pe, "pe_start_layer", where, 0))
    ids = str(_pe_value(pe, "pe_layer_ids", where, "") or "")
    layer_ids = tuple(int(i) for i in ids.split(",")) if ids.strip() else None
    fields = {k: raw[k] for k in HF_FIELDS if k in raw and raw[k] is not None}
    fields.update(rope_theta=theta, rope_scaling=scaling)
    tokenizer = (raw.get("poslens") or {}).get("tokenizer")
    try:
        return RepoConfig(**fields, position_mode=PE_MODES[mode], start_layer=start, layer_ids=layer_ids,
                          tokenizer=tokenizer, training_only=training)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid config: {err}") from None


def hf_config(cfg: RepoConfig) -> dict:
    """config.json in the released layout: the authors' whole serialised PEConfig (both spellings of the pe keys
    and the training-only fields), as upstream writes it."""
    mode = {v: k for k, v in PE_MODES.items()}[cfg.position_mode]
    ids = ",".join(str(i) for i in cfg.layer_ids) if cfg.layer_ids else ""
    out = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_act": "silu", "attention_dropout": 0.0,
           "rope_scaling": None, "torch_dtype": "float32", "use_cache": True}
    out.update({k: getattr(cfg, k) for k in HF_FIELDS})
    out["rope_scaling"] = dict(cfg.rope_scaling) if cfg.rope_scaling else None
    out["pe_config"] = {"dynamic_pe_mode": mode, "dynamic_pe_start_layer": cfg.start_layer,
                        "dynmaic_pe_start_layer": cfg.start_layer,
                        "dynamic_pe_layer_ids": ids, "dynmaic_pe_layer_ids": ids, **defaults(PE_TRAINING),
                        **(cfg.training_only or {})}
    if cfg.tokenizer:
        out["poslens"] = {"tokenizer": cfg.tokenizer}
    return out


def export(model: RepoTransformer) -> tuple[dict, dict[str, torch.Tensor]]:
    state = {to_file(k): v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    return model.cfg.to_dict(), state


def build(raw_config: dict, state: dict, where: str) -> RepoTransformer:
    """From a poslens directory: ``RepoConfig`` fields and a state dict in the Hugging Face layout."""
    model = RepoTransformer(build_config(RepoConfig, raw_config, where, "repo config"), init_weights=False)
    _fill(model, {k: tuple(v.shape) for k, v in state.items()}, lambda key: state[key], where, device=None, dtype=None)
    return model.eval()


def save_pretrained(model: RepoTransformer, directory, *, shard_size: int | None = None) -> Path:
    """Write the released layout: config.json + model.safetensors, or shards + index when ``shard_size`` is set."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _, state = export(model)
    (directory / "config.json").write_text(json.dumps(hf_config(model.cfg), indent=2) + "\n", encoding="utf-8")
    if shard_size is None:
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        return directory
    shards, current, size = [], {}, 0
    for key, value in state.items():
        nbytes = value.numel() * value.element_size()
        if current and size + nbytes > shard_size:
            shards.append(current)
            current, size = {}, 0
        current[key] = value
        size += nbytes
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in shard})
    total = sum(v.numel() * v.element_size() for v in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return directory


def _shard_files(path: Path) -> dict[str, Path]:
    """file key -> shard path, from the index or the single file."""
    index = path / INDEX
    if index.exists():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError) as err:
            raise CheckpointError(f"{index}: not a safetensors index ({err})") from None
        out = {}
        for key, shard in weight_map.items():
            if not (path / shard).is_file():
                raise CheckpointError(f"{index}: key '{key}' lives in shard '{shard}', which is missing from {path}")
            out[key] = path / shard
        return out
    single = path / "model.safetensors"
    if not single.is_file():
        raise CheckpointError(f"{path}: has config.json but neither model.safetensors nor {INDEX}")
    return {k: single for k in header_shapes(single)}


def _fill(model, found_shapes: dict, read, where: str, *, device, dtype, device_map=None) -> None:
    """Verify ``found_shapes`` against ``model`` (possibly on the meta device), then read tensors one by one."""
    from accelerate.utils import set_module_tensor_to_device

    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    note = (f" (from the config: d_model={model.cfg.hidden_size}, layers={model.cfg.num_hidden_layers}, "
            f"{model.describe()})")
    native = verify(expected, found_shapes, where, to_native=to_native, to_file=to_file, config_note=note)
    for nkey, fkey in native.items():
        target = device
        if device_map is not None:
            target = next((d for prefix, d in sorted(device_map.items(), key=lambda kv: -len(kv[0]))
                           if nkey == prefix or nkey.startswith(prefix + ".") or prefix == ""), "cpu")
        set_module_tensor_to_device(model, nkey, target or "cpu", value=read(fkey), dtype=dtype)


def load_hf_dir(path: Path, *, device=None, dtype=None, device_map=None, max_memory=None) -> RepoTransformer:
    """Load a released RePo / OLMo-2 directory; ``device_map='auto'`` (or a dict) splits it with accelerate."""
    import accelerate

    where = str(path)
    try:
        raw = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path / 'config.json'}: cannot be read as JSON: {err}") from None
    cfg = config_from_hf(raw, where)
    files = _shard_files(path)
    shapes = {}
    for file in sorted(set(files.values())):
        for key, shape in header_shapes(file).items():
            if files.get(key) == file:
                shapes[key] = shape
            elif key not in files:
                raise CheckpointError(f"{file}: holds key '{key}' that {INDEX} does not list")
    with accelerate.init_empty_weights(include_buffers=False):
        model = RepoTransformer(cfg, init_weights=False)
    if device_map == "auto" or isinstance(max_memory, dict):
        device_map = accelerate.infer_auto_device_map(model, max_memory=max_memory,
                                                      no_split_module_classes=["RepoBlock"],
                                                      dtype=dtype or torch.float32)
    handles: dict[Path, object] = {}

    def read(key):
        f = files[key]
        if f not in handles:
            handles[f] = safe_open(str(f), framework="pt")
        return handles[f].get_tensor(key)

    try:
        _fill(model, shapes, read, where, device=device, dtype=dtype, device_map=device_map)
    finally:
        handles.clear()
    if isinstance(device_map, dict) and len(set(device_map.values())) > 1:
        model = accelerate.dispatch_model(model, device_map=device_map)
    if model.tokenizer is None:
        model.tokenizer = read_tokenizer(path)
    model.model_name = path.name
    return model.eval()


def is_hf_dir(checkpoint) -> bool:
    return checkpoint.model_type == "olmo2" and checkpoint.path is not None


def read_checkpoint(checkpoint, place: dict) -> RepoTransformer:
    """A released directory, placed while it is read (``device``, ``dtype``, ``device_map``, ``max_memory``)."""
    model = load_hf_dir(checkpoint.path, **place)
    place.clear()
    return model


def examples() -> list[RepoTransformer]:
    """A tiny RePo model (RoPE below layer 1, RePo from it: every hook the family has)."""
    return [RepoTransformer(RepoConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                                       vocab_size=257, position_mode="repo", start_layer=1, tokenizer="bytes"))]
