"""``load(source)``: one entry point for every checkpoint poslens understands, entered once per call.

A source is resolved first (``resolve``), then read by the family that recognises it (``_read``):

- a name from the catalog (``poslens models`` lists them; ``interp.catalog`` holds them as data): a bundled
  directory, a file inside an installed package with its format, or a hub id. A bare name wins over a
  same-named folder; write ``./name`` for the folder;
- an existing path;
- a Hugging Face hub id ``owner/name`` (or ``hf://owner/name``) that is not an existing path: resolved by
  ``huggingface_hub.snapshot_download`` at ``revision`` (a branch, tag or commit; default ``main``),
  downloading when online and reading the local cache when ``HF_HUB_OFFLINE=1`` (the cache is
  ``HF_HUB_CACHE``, both read at call time). ``./owner/name`` is always a path; ``hf://`` forces the hub;
- a ``transformers`` model in memory (what ``LlamaTransformer.from_hf`` and ``BertEncoder.from_hf`` pass).

A GGUF file (a path, or a catalog entry such as ``smollm2``) is de-quantised once into the on-disk cache, keyed by
the file's sha256 (``interp.loading.converted``), and read from there like any Hugging Face directory: seconds from
the second load on, in any process.

A poslens directory (``model.safetensors`` + ``poslens.json`` naming the family and its config [+ ``training.json``,
tokenizer files]) is read by the family it names. Anything else is offered to the registered families' layouts
(``interp.families``), fallbacks last, and the first that recognises it reads it: upstream ``step_N.pt`` files,
development encoder ``state_dict.pt`` files and directories, released RePo ``olmo2`` directories, Hugging Face
``llama`` and ``bert`` directories, GGUF files, and any architecture TransformerLens' bridge supports (the generic
family). ``poslens models`` and the README list them; this module names none. A layout may decline a checkpoint of the
kind it reads, with a reason (a ``llama`` directory whose rope scaling the llama family does not implement, such as
yarn, is read by the generic family with transformers' own rotary embedding): the recorded format says so, and
``family=`` naming the declining family is refused with the reason.

``dtype`` and ``device`` move the loaded model (a family that reads its checkpoint itself, such as the generic one,
reads it in ``dtype``); every family runs in bfloat16 and float16, with the capabilities and rotations float32 finds
(``tests/integration/interp/test_half_precision.py``); ``device_map`` ("auto" or a dict, with ``max_memory``)
splits a large checkpoint over several devices with accelerate while it is read, for the families whose ``placement``
takes it.

Loading is strict: a missing or unexpected key, a wrong shape, a config field poslens does not understand,
a config that contradicts the weights or a checkpoint of another family raises ``CheckpointError`` naming
the file and the key. Every load builds a new module: no load changes what another returned.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from interp import catalog, families
from interp.atomic import replacing, write_text
from interp.fingerprint import files_sha256, weights_sha256
from interp.loading import hf_files
from interp.loading.checkpoint import Checkpoint
from interp.loading.errors import CheckpointError
from interp.loading.finite import check_finite, check_forward

FORMAT = "poslens-checkpoint"
FORMAT_VERSION = 1
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
HUB_PREFIX = "hf://"
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.gguf", "*.jinja"]  # never pickles


def _check_family(found: str, wanted: str | None, where: str) -> None:
    if wanted is not None and found != wanted:
        raise CheckpointError(f"{where}: this is a '{found}' checkpoint, not a '{wanted}' one")


def _unknown(checkpoint: Checkpoint) -> CheckpointError:
    """Why no family reads ``checkpoint``: what it is, and what the layouts of its kind expect."""
    path = checkpoint.path

    def listing(kind: str, owners=None) -> str:
        return "; ".join(f"{x.name} ({f.name} family: {x.expects})" for f, x in families.layouts()
                         if x.kind == kind and (owners is None or f.name in owners or x.fallback))

    if checkpoint.is_torch_file:
        obj = checkpoint.torch_object
        found = sorted(map(str, obj))[:10] if isinstance(obj, dict) else type(obj).__name__
        return CheckpointError(f"{path}: a torch file of no layout poslens reads (it reads: {listing('torch file')}); "
                               f"found {found}")
    if checkpoint.has("config.json"):
        model_type = checkpoint.model_type
        owners = [f.name for f in families.families() if model_type in f.hf_model_types]
        if owners:
            return CheckpointError(f"{path / 'config.json'}: model_type {model_type!r} is the {owners[0]} family's, "
                                   "but this directory is none of the layouts that could read it "
                                   f"({listing('directory', owners)})")
        known = ", ".join(f"'{t}' ({f.name} family)" for f in families.families() for t in f.hf_model_types)
        return CheckpointError(f"{path / 'config.json'}: model_type {model_type!r} is not one poslens loads (known: "
                               f"{known}, and every architecture TransformerLens' bridge has an adapter for)")
    if checkpoint.is_dir:
        return CheckpointError(f"{path}: a directory without poslens.json or config.json (or a format poslens does "
                               "not know)")
    return CheckpointError(f"{path}: not a checkpoint poslens knows (expected a directory, a .pt file or a .gguf file)")


@dataclass
class Resolved:
    """A source made local: the path to read (or a transformers model in memory), a format when the path alone does not
    say, and provenance."""

    path: Path | None
    format: str | None = None
    name: str | None = None  # registry name: becomes the model's name
    family: str | None = None  # known before reading (registry entries)
    record: dict = field(default_factory=dict)  # extra provenance: package, hub id, revision
    module: object = None  # a transformers model given in memory


def _offline() -> bool:
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES",
                                                                    "TRUE") or bool(constants.HF_HUB_OFFLINE)


def resolve_hub(repo_id: str, revision: str | None = None) -> Resolved:
    """A hub id as a local snapshot directory (downloaded, or from the cache when offline)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    if not HUB_ID.match(repo_id):
        raise CheckpointError(f"{repo_id!r} is not a hub id (expected owner/name)")
    offline, cache = _offline(), os.environ.get("HF_HUB_CACHE") or None
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision, cache_dir=cache, local_files_only=offline,
                                          allow_patterns=HUB_FILES))
    except LocalEntryNotFoundError:
        from huggingface_hub import constants

        where = cache or constants.HF_HUB_CACHE
        why = "HF_HUB_OFFLINE=1, so nothing is downloaded" if offline else "the hub could not be reached"
        raise CheckpointError(f"hub id '{repo_id}' (revision {revision or 'main'}) is not in the hub cache {where} "
                              f"and {why}; download it once online, or pass a local path") from None
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise CheckpointError(f"hub id '{repo_id}' "
                              f"(revision {revision or 'main'}): {type(err).__name__}: {err}") from None
    return Resolved(snapshot, record={"hub": repo_id, "revision": snapshot.name,
                                      "requested_revision": revision or "main"})


def resolve(source, *, revision: str | None = None) -> Resolved:
    """Registry name, existing path, hub id or transformers model -> ``Resolved`` (see the module docstring)."""
    if isinstance(source, torch.nn.Module) and hasattr(source, "config") and hasattr(source.config, "to_dict"):
        return Resolved(None, record={"in_memory": type(source).__name__}, module=source)
    if not isinstance(source, (str, os.PathLike)):
        raise CheckpointError(f"load() takes a model name, a path, a hub id or a transformers model, not a "
                              f"{type(source).__name__}")
    text = os.fspath(source)
    if isinstance(source, str) and text.startswith(HUB_PREFIX):
        return resolve_hub(text[len(HUB_PREFIX):], revision)
    entry = catalog.lookup(text) if isinstance(source, str) and "/" not in text and os.sep not in text else None
    if entry is not None:
        if revision is not None and entry.source.kind != "hub":
            raise CheckpointError(f"revision={revision!r}: '{entry.name}' is a {entry.source.kind} entry, not a hub id")
        resolved = _resolve_entry(entry, revision)
        resolved.name, resolved.family = entry.name, entry.family
        return resolved
    path = Path(source)
    if path.exists():
        if revision is not None:
            raise CheckpointError(f"revision={revision!r} applies to hub ids only; {path} is a local path")
        return _dequantised(path) if _is_gguf(path) else Resolved(path)
    if isinstance(source, str) and HUB_ID.match(text):
        return resolve_hub(text, revision)
    import difflib

    close = difflib.get_close_matches(text, [e.name for e in catalog.entries()], n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise CheckpointError(f"{source}: no such file or directory, and not a model name ({catalog.names_hint()}) "
                          f"nor a hub id (owner/name){hint}")


def _resolve_entry(entry, revision) -> Resolved:
    src = entry.source
    if src.kind == "hub":
        return resolve_hub(src.location, revision or src.revision)
    if src.kind == "package":
        from interp.package_files import PackageFileMissing, package_file

        try:
            path = package_file(src.package, src.location, src.pip)
        except PackageFileMissing as err:
            raise CheckpointError(f"model '{entry.name}' is not available here: {err}") from None
        if src.format == "gguf parts":
            from interp.catalog import CHUNKED
            from interp.loading.converted import converted, converter

            spec = CHUNKED[entry.name]
            return Resolved(converted(entry.name, spec), record={"package": src.pip.split()[0], "gguf": spec["file"],
                                                                 "gguf_sha256": spec["sha256"],
                                                                 "converted": converter()})
        if src.format == "gguf":
            resolved = _dequantised(path)
            resolved.record["package"] = src.pip.split()[0]
            return resolved
        return Resolved(path, format=src.format, record={"package": src.pip.split()[0]})
    path = Path(src.location)
    if not path.exists():
        raise CheckpointError(f"model '{entry.name}' is not available here: {path} is missing")
    return Resolved(path, format=src.format)


def _is_gguf(path: Path) -> bool:
    if not path.is_file():
        return False
    if path.suffix == ".gguf":
        return True
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def _dequantised(path: Path) -> Resolved:
    """A GGUF file as its de-quantised copy in the cache (``interp.loading.converted``: converted on the first load of
    this file's bytes, read in seconds by every later one)."""
    from interp.loading.converted import converter, file_sha256, gguf_directory

    sha = file_sha256(path)
    return Resolved(gguf_directory(path, sha256=sha), name=None,
                    record={"gguf": str(path.resolve()), "gguf_sha256": sha, "converted": converter()})


def read_poslens_dir(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    meta = _poslens_meta(path)
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{path}: has poslens.json but no model.safetensors")
    try:
        state = load_file(weights)
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{weights}: cannot be read as safetensors (truncated or corrupt?): {err}") from None
    return meta, state


def _poslens_meta(path: Path) -> dict:
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
    return meta


def _refuse_placement(place: dict, takes: tuple[str, ...], where: str, layout: str) -> None:
    """Placement a layout's reader does not take is refused before any weight is read."""
    refused = [k for k, v in place.items() if v is not None and k not in takes]
    if refused:
        takers = [f"{f.name} ({x.name})" for f, x in families.layouts() if set(refused) <= set(x.placement)]
        given = ", ".join(f"{k}={place[k]!r}" for k in refused)
        raise CheckpointError(f"{where}: {given} {'applies' if len(refused) == 1 else 'apply'} to the "
                              f"checkpoints of the {' and '.join(takers)} family only, not to a {layout}")


def _read_poslens(path: Path, family: str | None, place: dict):
    meta = _poslens_meta(path)
    _check_family(meta["family"], family, str(path))
    owner = families.get(meta["family"], str(path))
    if owner.build is None:
        raise CheckpointError(f"{path / 'poslens.json'}: names the {owner.name} family, which does not read poslens "
                              "directories (its checkpoints are its own layout)")
    _refuse_placement(place, ("device", "dtype"), str(path), FORMAT)
    meta, state = read_poslens_dir(path)
    model = owner.build(meta["config"], state, str(path))
    if getattr(model, "tokenizer", None) is None:
        model.tokenizer = hf_files.read_tokenizer(path)
    model.model_name = meta.get("name") or path.name
    return model, FORMAT


def _read(res: Resolved, family: str | None, place: dict):
    """(model, format): a poslens directory by the family it names, anything else by the first family layout that
    recognises it. ``place`` (device, dtype, device_map, max_memory) is emptied by a reader that places the weights
    itself while reading; placement a family does not take is refused before reading."""
    checkpoint = Checkpoint(res.path, format=res.format, module=res.module)
    if checkpoint.has("poslens.json"):
        return _read_poslens(res.path, family, place)
    match = next(((f, layout) for f, layout in families.layouts() if layout.matches(checkpoint)), None)
    if match is None:
        raise _unknown(checkpoint)
    owner, layout = match
    declined = [(f, why) for f, x in families.layouts() if f is not owner and x.declines is not None
                and (why := x.declines(checkpoint))]
    if family is not None and family != owner.name:
        why = next((why for f, why in declined if f.name == family), None)
        if why is not None:
            raise CheckpointError(f"{checkpoint.where}: the {family} family does not read it: {why}; load it without "
                                  f"family= and the {owner.name} family reads it")
    _check_family(owner.name, family, checkpoint.where)
    _refuse_placement(place, layout.placement, checkpoint.where, layout.name)
    model = layout.read(checkpoint, place)
    recorded = layout.recorded(checkpoint, model)
    return model, "; ".join([recorded] + [f"not the {f.name} family's: {why}" for f, why in declined])


def load(source, *, family: str | None = None, revision: str | None = None, device=None, dtype=None, device_map=None,
         max_memory=None, allow_nonfinite: bool = False, fold_ln: bool = False, center_writing_weights: bool = False,
         center_unembed: bool = False, fold_value_biases: bool = False, refactor_factored_attn_matrices: bool = False):
    """A new hooked model from a registry name, a path or a hub id (see the module docstring).

    ``model.source`` records where it came from: ``path``, ``sha256`` (of the checkpoint's files; for a GGUF file,
    read from its de-quantised copy in the cache at ``path``, the GGUF's own sha256, also under ``gguf_sha256``),
    ``format`` and the weights' hash ``weights_sha256``.

    Weights holding NaN or inf are refused by name unless ``allow_nonfinite`` (see ``interp.loading.finite``), and so
    is a model whose forward pass in a half-precision ``dtype`` gives NaN or inf (float16 overflowing).

    ``fold_ln``, ``center_writing_weights``, ``center_unembed``, ``fold_value_biases``,
    ``refactor_factored_attn_matrices``: TransformerLens' weight
    processing (``interp.weight_processing``; ``model.process_weights_`` on a loaded model), off by default: poslens
    models keep the checkpoint's weights, where TransformerLens' ``from_pretrained`` processes them. The options applied
    are recorded in ``model.source["processed"]``; one the family cannot apply is an error naming it."""
    from interp.weight_processing import check_options

    processing = dict(fold_ln=fold_ln, center_writing_weights=center_writing_weights, center_unembed=center_unembed,
                      fold_value_biases=fold_value_biases,
                      refactor_factored_attn_matrices=refactor_factored_attn_matrices)
    check_options(processing)
    res = resolve(source, revision=revision)
    where = res.name or (str(res.path) if res.path is not None else type(res.module).__name__)
    _check_family(res.family or family, family, where)
    place = {"device": device, "dtype": dtype, "device_map": device_map, "max_memory": max_memory}
    try:
        model, fmt = _read(res, family, place)
    except CheckpointError as err:
        if not res.record.get("converted"):
            raise
        from interp.loading.converted import damaged

        raise CheckpointError(damaged(res.path, err)) from None
    _check_family(model.family, family, where)
    if res.record.get("converted"):  # a GGUF read from its de-quantised copy: named and hashed as the GGUF
        gguf = Path(res.record["gguf"])
        if not res.name:
            model.model_name = gguf.stem
        if getattr(model, "tokenizer", None) is not None and hasattr(model.tokenizer, "name"):
            model.tokenizer.name = gguf.stem
        fmt = f"gguf, de-quantised once into the cache ({fmt})"
    if res.name:
        model.model_name = res.name
    if res.record.get("converted"):
        model.source = {"path": str(res.path.resolve()), "sha256": res.record["gguf_sha256"], "format": fmt,
                        **res.record}
    elif res.path is not None:
        model.source = {"path": str(res.path.resolve()), "sha256": files_sha256(res.path), "format": fmt, **res.record}
    else:
        model.source = {"path": None, "sha256": None, "format": f"{fmt}, from a transformers model in memory",
                        **res.record}
    model.source["nonfinite"] = check_finite(model, where, allow_nonfinite)
    if place and (dtype is not None or device is not None):
        model = model.to(device=device, dtype=dtype)
    if dtype is not None and dtype not in (torch.float32, torch.float64) and not allow_nonfinite:
        check_forward(model, where)  # a half-precision forward that overflows is refused by name, not run as NaN
    if any(processing.values()):
        model.process_weights_(**processing)
        model.source["processed"] = sorted(model.weights_processed)
    model.source["weights_sha256"] = weights_sha256(model)  # provenance compares the weights it sees with these
    return model.eval()


def load_tokenizer(source):
    """The tokenizer that ``source`` holds: a directory of tokenizer files, or a registry name, checkpoint or hub
    id whose model has one (that model is loaded to read it). ``tokenizer.source`` records where it came from."""
    res = resolve(source)
    if res.path is None:
        raise CheckpointError(f"{res.module.__class__.__name__}: a model in memory holds no tokenizer files; pass the "
                              "directory its tokenizer was saved in")
    tokenizer = hf_files.read_tokenizer(res.path) if res.path.is_dir() else None
    if tokenizer is None and (res.path.is_file() or _is_checkpoint(res.path)):
        tokenizer = getattr(load(source), "tokenizer", None)
    if tokenizer is None:
        raise CheckpointError(f"{source}: holds no tokenizer (expected a directory "
                              f"with {' / '.join(hf_files.VOCABULARY_FILES)}, or a model that has one)")
    tokenizer.source = {"given": str(source), "path": str(res.path.resolve()), "kind": type(tokenizer).__name__}
    return tokenizer


def attach_tokenizer(model, tokenizer) -> None:
    """Give ``model`` (loaded without one) ``tokenizer``, refusing one whose ids do not fit its vocabulary."""
    vocab = getattr(model, "d_vocab", None)
    size = getattr(tokenizer, "vocab_size", None)
    if vocab is not None and size is not None and size > vocab:
        where = getattr(tokenizer, "source", {}).get("given", getattr(tokenizer, "name", "the tokenizer"))
        raise CheckpointError(f"tokenizer {where} has {size} tokens but {model.model_name} reads {vocab}: "
                              "its ids would fall outside the model's vocabulary")
    model.tokenizer = tokenizer


def _is_checkpoint(path: Path) -> bool:
    return any((path / f).is_file() for f in ("config.json", "poslens.json", "model.safetensors"))


def save(model, directory, *, training: dict | None = None, name: str | None = None, overwrite: bool = False,
         dtype: torch.dtype | None = None) -> Path:
    """Write ``model.safetensors`` + ``poslens.json`` (+ ``training.json``, + the tokenizer files when the
    tokenizer is not named by the config); refuse to overwrite unless asked. Every family round-trips:
    ``load(save(model, d))`` gives the same logits.

    ``dtype`` stores floating-point weights in that dtype (loading casts them back to the model's).
    """
    directory = Path(directory)
    owner = families.get(model.family, str(directory))
    if owner.save is not None:  # a family that writes its own layout (the generic family: a Hugging Face directory)
        return owner.save(model, directory, overwrite)
    if owner.export is None:
        raise CheckpointError(f"{directory}: the {owner.name} family cannot be saved (it declares neither save "
                              "nor export)")
    targets = [directory / "model.safetensors", directory / "poslens.json", directory / "training.json"]
    existing = [str(t) for t in targets + [directory / f for f in hf_files.TOKENIZER_FILES] if t.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{directory} already holds a checkpoint ({', '.join(existing)}); pass overwrite=True "
                              "/ --force")
    config, state = owner.export(model)
    state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    directory.mkdir(parents=True, exist_ok=True)
    with replacing(targets[0]) as tmp:  # a kill mid-write must not leave a truncated checkpoint behind
        save_file(state, str(tmp), metadata={"format": FORMAT, "family": model.family})
    meta = {
        "format": FORMAT, "version": FORMAT_VERSION, "family": model.family, "name": name or model.model_name,
        "config": config, "n_params": int(sum(v.numel() for v in state.values())),
    }
    if getattr(getattr(model, "cfg", None), "tokenizer", None) is None:
        meta["tokenizer"] = hf_files.write_tokenizer(getattr(model, "tokenizer", None), directory)
    write_text(targets[1], json.dumps(meta, indent=2) + "\n")
    if training is not None:
        write_text(targets[2], json.dumps(training, indent=2) + "\n")
    return directory


