"""``load(name_or_path)``: one entry point for every checkpoint poslens understands.

Recognised sources:

- a registry name (``poslens models`` lists them): bundled checkpoints and models installed from packages
  (a bare name wins over a same-named folder; write ``./name`` for the folder);
- a poslens directory: ``model.safetensors`` + ``poslens.json`` (family, config) [+ ``training.json``];
- an upstream learned-increments ``step_N.pt`` (``{'step', 'model_state_dict', 'model_config'}``);
- a development encoder ``state_dict.pt`` (a plain state dict of the DSTG / NeoBERT layout, optionally with a
  ``config.json`` beside it); ``.pt`` / ``.pth`` / ``.bin`` files are told apart by their content;
- a Hugging Face ``olmo2`` directory (the released RePo layout: ``config.json`` with ``pe_config``, one
  safetensors file or shards with ``model.safetensors.index.json``);
- a Hugging Face ``neobert`` / ``dstg`` directory (the encoder family, see ``interp.loading.encoder``);
- any other Hugging Face directory whose architecture TransformerLens' bridge supports (the generic ``hf``
  family, see ``interp.loading.hf``).

``dtype`` and ``device`` move the loaded model; ``device_map`` ("auto" or a dict, with ``max_memory``)
splits a large Hugging Face checkpoint over several devices with accelerate while it is read.

Loading is strict: a missing or unexpected key, a wrong shape, a config that contradicts the weights or
a checkpoint of another family raises ``CheckpointError`` naming the file and the key.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from interp.loading import encoder, hf, increments, repo
from interp.loading.errors import CheckpointError

FORMAT = "poslens-checkpoint"
FORMAT_VERSION = 1
FAMILIES = {increments.FAMILY: increments, repo.FAMILY: repo, encoder.FAMILY: encoder}
HF_TYPES = {"olmo2": repo.FAMILY, **{t: encoder.FAMILY for t in encoder.HF_MODEL_TYPES}}


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, or of a directory's files (names and contents, sorted)."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _family(name: str, where: str):
    if name not in FAMILIES:
        raise CheckpointError(f"{where}: unknown model family '{name}' (known: {sorted(FAMILIES)})")
    return FAMILIES[name]


def _check_family(found: str, wanted: str | None, where: str) -> None:
    if wanted is not None and found != wanted:
        raise CheckpointError(f"{where}: this is a '{found}' checkpoint, not a '{wanted}' one")


def _read_torch(path: Path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"{path}: cannot be read as a torch checkpoint (truncated or corrupt?): {err}") from None


def _refuse_unknown_hf_dir(path: Path) -> None:
    """A directory with a Hugging Face config.json of a model type no family loads: say which type."""
    try:
        model_type = json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError):
        return
    if model_type not in HF_TYPES:
        known = ", ".join(f"'{t}' ({f} family)" for t, f in HF_TYPES.items())
        raise CheckpointError(f"{path / 'config.json'}: model_type {model_type!r} is not one poslens loads (known: {known}, "
                              "and every architecture TransformerLens' bridge has an adapter for)")


def read_poslens_dir(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    meta_path = path / "poslens.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{meta_path}: cannot be read as JSON: {err}") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{meta_path}: 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    for key in ("family", "config"):
        if key not in meta:
            raise CheckpointError(f"{meta_path}: lacks the '{key}' field")
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{path}: has poslens.json but no model.safetensors")
    try:
        state = load_file(weights)
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{weights}: cannot be read as safetensors (truncated or corrupt?): {err}") from None
    return meta, state


def load(source, *, family: str | None = None, device=None, dtype=None, device_map=None, max_memory=None):
    """A hooked model from a registry name, a poslens directory or an upstream checkpoint file."""
    from interp import registry

    # a bare name is looked up in the registry first; anything with a path separator is a path
    entry = registry.lookup(source) if isinstance(source, str) and "/" not in source else None
    if entry is not None:
        model = entry.load()
        _check_family(model.family, family, entry.name)
    else:
        path = Path(source)
        if not path.exists():
            raise CheckpointError(f"{source}: no such file or directory, and not a model name ({registry.names_hint()})")
        if path.is_dir() and (path / "poslens.json").exists():
            meta, state = read_poslens_dir(path)
            _check_family(meta["family"], family, str(path))
            model = _family(meta["family"], str(path)).build(meta["config"], state, str(path))
            model.model_name = meta.get("name") or path.name
            fmt = FORMAT
        elif path.is_file() and path.suffix in (".pt", ".pth", ".bin"):
            obj = _read_torch(path)
            if increments.looks_like_step_pt(obj):
                config, state, _step = increments.unpack_step_pt(obj, path)
                _check_family(increments.FAMILY, family, str(path))
                model = increments.build(config, state, str(path))
                model.model_name = path.stem
                fmt = "upstream step_N.pt"
            elif encoder.looks_like_state_dict(obj):
                _check_family(encoder.FAMILY, family, str(path))
                model = encoder.load_state_pt(obj, path)
                fmt = "development state_dict.pt"
            else:
                found = sorted(map(str, obj))[:10] if isinstance(obj, dict) else type(obj).__name__
                raise CheckpointError(
                    f"{path}: not a learned-increments step_N.pt (needs 'model_state_dict' and 'model_config') nor an encoder "
                    f"state_dict.pt (needs 'encoder.weight' or 'transformer_encoder.{{i}}.*' keys, optionally under 'model.'); found {found}"
                )
        elif repo.is_hf_dir(path):
            _check_family(repo.FAMILY, family, str(path))
            model = repo.load_hf_dir(path, device=device, dtype=dtype, device_map=device_map, max_memory=max_memory)
            device = dtype = None  # already placed while reading
            fmt = "huggingface olmo2 directory"
        elif encoder.is_hf_dir(path):
            _check_family(encoder.FAMILY, family, str(path))
            model = encoder.load_hf_dir(path)
            fmt = "huggingface neobert directory"
        elif hf.is_generic_hf_dir(path):
            _check_family(hf.FAMILY, family, str(path))
            model = hf.load_generic(path, device=device, dtype=dtype)
            device = dtype = None
            fmt = f"huggingface {model.architecture} directory (generic family)"
        elif path.is_dir():
            _refuse_unknown_hf_dir(path)
            raise CheckpointError(f"{path}: a directory without poslens.json (or a format poslens does not know)")
        else:
            raise CheckpointError(f"{path}: not a checkpoint poslens knows (expected a directory or a .pt file)")
        model.source = {"path": str(path.resolve()), "sha256": sha256_of(path), "format": fmt}
    if dtype is not None or device is not None:
        model = model.to(device=device, dtype=dtype)
    return model.eval()


def save(model, directory, *, training: dict | None = None, name: str | None = None, overwrite: bool = False,
         dtype: torch.dtype | None = None) -> Path:
    """Write ``model.safetensors`` + ``poslens.json`` (+ ``training.json``); refuse to overwrite unless asked.

    ``dtype`` stores floating-point weights in that dtype (loading casts them back to the model's).
    """
    directory = Path(directory)
    if model.family == hf.FAMILY:  # a Hugging Face directory, as it was loaded
        return hf.save_generic(model, directory, overwrite=overwrite)
    targets = [directory / "model.safetensors", directory / "poslens.json", directory / "training.json"]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{directory} already holds a checkpoint ({', '.join(existing)}); pass overwrite=True / --force")
    io = _family(model.family, str(directory))
    config, state = io.export(model)
    state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    directory.mkdir(parents=True, exist_ok=True)
    save_file(state, str(targets[0]), metadata={"format": FORMAT, "family": model.family})
    meta = {
        "format": FORMAT, "version": FORMAT_VERSION, "family": model.family, "name": name or model.model_name,
        "config": config, "n_params": int(sum(v.numel() for v in state.values())),
    }
    targets[1].write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if training is not None:
        targets[2].write_text(json.dumps(training, indent=2) + "\n", encoding="utf-8")
    return directory
