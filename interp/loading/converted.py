"""Every GGUF file de-quantised once, into one on-disk cache of Hugging Face directories keyed by the file's sha256.

Reading a GGUF file costs tens of seconds (the ``gguf`` package builds its metadata field by field, and transformers
reads the file for the config, the tokenizer and the weights), so poslens does it once per file: the first load
de-quantises the weights with ``transformers`` (the ``gguf`` reader built once, shared by the three reads:
``one_parse``) and writes ``config.json`` + ``model.safetensors`` + the tokenizer files to
``<cache>/gguf-<first 16 hex digits of the sha256>``; every later load, in any process, reads that directory through
the family that recognises it (``llama`` for SmolLM2, the generic ``hf`` family for Gemma 3) in seconds.

- ``gguf_directory(path)``: any GGUF file (SmolLM2's, one the user names). Its sha256 is computed on each load
  (about 0.3 s per 100 MB; memoised per process by path, size and modification time), so a different file, or the
  same path rewritten, gets another directory.
- ``converted(name, spec)``: a packaged model whose GGUF is split over several packages (Gemma 3 270M's four
  ``-partN`` packages). Its sha256 is known (``interp.catalog.CHUNKED``): a cached directory is found without reading
  the chunks; the first load concatenates them (read as files, no package is imported) and checks the sha256.

The cache is ``$POSLENS_CACHE``, else ``$XDG_CACHE_HOME/poslens``, else ``~/.cache/poslens``. A directory appears
whole (written aside, then renamed) and holds ``poslens-converted.json`` naming the GGUF's full sha256 and the
converter (``converter()``: ``CONVERSION``, the transformers and gguf versions that de-quantised it), both of which
must match for the directory to be used: the converter is part of the directory's name too, so upgrading transformers
converts again beside the old copy (a process of the old version keeps reading its own). The marker also lists each
file's size: a copy whose file is missing or truncated is not used but converted again (the cache is derived data), and
a copy that still cannot be read is named with how to remove it. Only safetensors and JSON are written, so nothing read
from the cache unpickles. Deleting a directory (or the whole cache) is always safe: the next load converts again. A
cache path that is not a directory is refused, naming the path and ``POSLENS_CACHE``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from interp.loading.errors import CheckpointError

MARKER = "poslens-converted.json"
PREFIX = "gguf-"
CONVERSION = 1  # raise when ``_dequantise`` changes what it writes: every cached directory is then converted again
_HASHED: dict[tuple, str] = {}  # (resolved path, size, mtime_ns) -> sha256, for this process


def cache_root() -> Path:
    if os.environ.get("POSLENS_CACHE"):
        return Path(os.environ["POSLENS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "poslens"


def _usable_root() -> Path:
    """``cache_root()``, made if missing; a path that is not a directory (or cannot be made) is a ``CheckpointError``
    naming it and how it was chosen."""
    root = cache_root()
    how = ("POSLENS_CACHE" if os.environ.get("POSLENS_CACHE") else
           "XDG_CACHE_HOME/poslens" if os.environ.get("XDG_CACHE_HOME") else "~/.cache/poslens")
    bad = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
    if bad is not None:
        raise CheckpointError(f"poslens' GGUF cache {root} ({how}): {bad} is a file, not a directory; set "
                              "POSLENS_CACHE to a directory poslens may write its de-quantised copies to")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CheckpointError(f"poslens' GGUF cache {root} ({how}) cannot be made: {err.strerror}; set POSLENS_CACHE "
                              "to a directory poslens may write to") from None
    return root


def converter() -> dict:
    """What de-quantises here: poslens' ``CONVERSION`` and the transformers and gguf versions installed."""
    from importlib.metadata import version

    return {"conversion": CONVERSION, "transformers": version("transformers"), "gguf": version("gguf")}


def _converter_tag(conv: dict) -> str:
    return hashlib.sha256(json.dumps(conv, sort_keys=True).encode()).hexdigest()[:8]


def cache_directory(sha256: str) -> Path:
    """Where the de-quantised copy of the GGUF file with this sha256, by this ``converter()``, is (or will be)."""
    return cache_root() / f"{PREFIX}{sha256[:16]}-{_converter_tag(converter())}"


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes (memoised per process while its size and modification time stay the same)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 22):
                digest.update(block)
        _HASHED[key] = digest.hexdigest()
    return _HASHED[key]


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


def gguf_directory(gguf, *, sha256: str | None = None) -> Path:
    """The cached Hugging Face directory of any GGUF file, de-quantised on first use (``sha256``: the file's, when
    the caller knows it)."""
    gguf = Path(gguf)
    sha = sha256 or file_sha256(gguf)
    return _cached(sha, lambda work: gguf, {"gguf": str(gguf.resolve())})


def converted(name: str, spec: dict) -> Path:
    """The cached Hugging Face directory of packaged model ``name`` (``spec``: ``parts``, ``file``, ``sha256``,
    ``pip``), converted on first use."""
    return _cached(spec["sha256"], lambda work: assemble(spec["parts"], spec["sha256"], work / spec["file"],
                                                         spec["pip"]),
                   {"gguf": spec["file"], "model": name, "packages": spec["pip"]})


def _cached(sha256: str, gguf_in: Callable[[Path], Path], record: dict) -> Path:
    _usable_root()
    final = cache_directory(sha256)
    if _complete(final, sha256):
        return final
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    try:
        _dequantise(gguf_in(work), work / "hf")
        files = {p.name: p.stat().st_size for p in sorted((work / "hf").iterdir()) if p.is_file()}
        (work / "hf" / MARKER).write_text(json.dumps({"gguf_sha256": sha256, "converter": converter(), **record,
                                                      "files": files}, indent=2) + "\n", encoding="utf-8")
        if final.exists() and not _complete(final, sha256):  # left incomplete or damaged: replaced whole
            os.replace(final, work / "stale")
        try:
            os.replace(work / "hf", final)
        except OSError:  # another process finished first: its directory is the same conversion
            if not _complete(final, sha256):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def _complete(directory: Path, sha256: str) -> bool:
    try:
        found = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if found.get("gguf_sha256") != sha256 or found.get("converter") != converter():
        return False
    try:  # every file whole (a marker written before sizes were recorded lists none)
        return all((directory / name).stat().st_size == size for name, size in found.get("files", {}).items())
    except OSError:
        return False


def damaged(directory: Path, err: Exception) -> str:
    """The message for a cached copy that cannot be read although whole: ``err``, then how to remove it."""
    return (f"{err} ({directory} is poslens' de-quantised copy of a GGUF file, derived data: delete that directory, "
            "e.g. `rm -r` it, and the next load converts the GGUF again)")


def marker(directory: Path) -> dict | None:
    """What a cache directory was converted from (its ``poslens-converted.json``), or None for any other path."""
    try:
        return json.loads((Path(directory) / MARKER).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


@contextlib.contextmanager
def one_parse():
    """Within the block, ``gguf.GGUFReader`` of one path is built once and shared: transformers builds one for the
    config, another for the tokenizer and a third for the weights, each parsing the whole metadata (the vocabulary
    field by field: most of a conversion's time). Yields ``{path: reader}``."""
    import gguf

    original, readers = gguf.GGUFReader, {}

    def reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = reader
    try:
        yield readers
    finally:
        gguf.GGUFReader = original


def _dequantise(gguf: Path, directory: Path) -> None:
    import torch
    import transformers

    with one_parse():
        model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                                  dtype=torch.float32, local_files_only=True)
        tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                               local_files_only=True)
    model.hf_quantizer = None  # the weights are plain float32 tensors now; save them as such
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
