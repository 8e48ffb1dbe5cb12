"""Packaged GGUF weights split over several packages, converted once into a cached Hugging Face directory.

Gemma 3 270M ships as four ``-partN`` packages of one GGUF file. The first load concatenates the chunks (read
as files, no package is imported), checks the whole file's sha256, de-quantises it with ``transformers`` and
writes ``config.json`` + ``model.safetensors`` + the tokenizer to the cache; every later load reads that
directory through the generic ``hf`` family in seconds. The cache is ``$POSLENS_CACHE``, else
``$XDG_CACHE_HOME/poslens``, else ``~/.cache/poslens``; a directory appears whole (written aside, then renamed)
and holds ``poslens-converted.json`` naming the GGUF it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from interp.loading.errors import CheckpointError

MARKER = "poslens-converted.json"


def cache_root() -> Path:
    if os.environ.get("POSLENS_CACHE"):
        return Path(os.environ["POSLENS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "poslens"


def _chunks(parts, pip: str) -> list[Path]:
    from interp.package_files import PackageFileMissing, package_file

    try:
        return [package_file(package, relative, pip) for package, relative in parts]
    except PackageFileMissing as err:
        raise CheckpointError(str(err)) from None


def assemble(parts, sha256: str, target: Path, pip: str) -> Path:
    """Concatenate the chunk files into ``target`` and check the result's sha256."""
    digest = hashlib.sha256()
    with open(target, "wb") as out:
        for chunk in _chunks(parts, pip):
            with open(chunk, "rb") as f:
                while block := f.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha256:
        target.unlink(missing_ok=True)
        raise CheckpointError(f"{target.name} assembled from {pip.split()[0]}'s chunks has "
                              f"sha256 {digest.hexdigest()}, expected {sha256}: reinstall the packages ({pip})")
    return target


def converted(name: str, spec: dict) -> Path:
    """The cached Hugging Face directory of packaged model ``name`` (``spec``: ``parts``, ``file``, ``sha256``,
    ``pip``), converted on first use."""
    final = cache_root() / f"{name}-{spec['sha256'][:12]}"
    if _complete(final, spec):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        gguf = assemble(spec["parts"], spec["sha256"], work / spec["file"], spec["pip"])
        _dequantise(gguf, work / "hf")
        gguf.unlink()
        (work / "hf" / MARKER).write_text(json.dumps({"gguf": spec["file"], "gguf_sha256": spec["sha256"],
                                                      "packages": spec["pip"]}, indent=2) + "\n", encoding="utf-8")
        try:
            os.replace(work / "hf", final)
        except OSError:  # another process finished first: its directory is the same conversion
            if not _complete(final, spec):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def _complete(directory: Path, spec: dict) -> bool:
    try:
        return json.loads((directory / MARKER).read_text(encoding="utf-8")).get("gguf_sha256") == spec["sha256"]
    except (OSError, json.JSONDecodeError):
        return False


def _dequantise(gguf: Path, directory: Path) -> None:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.hf_quantizer = None  # the weights are plain float32 tensors now; save them as such
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
