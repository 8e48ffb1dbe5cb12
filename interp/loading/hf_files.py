"""Reading a Hugging Face ``save_pretrained`` directory without ``transformers``: its config and its tensors.

Weights are ``model.safetensors``, shards listed in ``model.safetensors.index.json``, or (read with
``weights_only=True``, no arbitrary unpickling) ``pytorch_model.bin``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from interp.loading.errors import CheckpointError

INDEX = "model.safetensors.index.json"


def read_config(path: Path) -> dict:
    return read_json(Path(path) / "config.json")


def read_json(file: Path) -> dict:
    """A JSON object from a file, or a ``CheckpointError`` naming the file."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{file}: cannot be read as JSON: {err}") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{file}: holds a {type(raw).__name__}, not a JSON object")
    return raw


def header_shapes(file: Path) -> dict[str, tuple]:
    """``{key: shape}`` from a safetensors header, no tensor read; a truncated or corrupt file is named."""
    try:
        with safe_open(str(file), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{file}: cannot be read as safetensors (truncated or corrupt?): {err}") from None


def _safetensors(file: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{file}: cannot be read as safetensors (truncated or corrupt?): {err}") from None


def read_state(path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """(the weights file or index read, every tensor by its key in the file)."""
    path = Path(path)
    if (path / "model.safetensors").is_file():
        return path / "model.safetensors", _safetensors(path / "model.safetensors")
    if (path / INDEX).is_file():
        try:
            weight_map = json.loads((path / INDEX).read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise CheckpointError(f"{path / INDEX}: not a safetensors index ({err})") from None
        state = {}
        for shard in sorted(set(weight_map.values())):
            if not (path / shard).is_file():
                raise CheckpointError(f"{path / INDEX}: lists shard '{shard}', which is missing from {path}")
            for key, value in _safetensors(path / shard).items():
                if weight_map.get(key) != shard:
                    raise CheckpointError(f"{path / shard}: holds key '{key}' that {INDEX} does not list there")
                state[key] = value
        return path / INDEX, state
    if (path / "pytorch_model.bin").is_file():
        file = path / "pytorch_model.bin"
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises several types for truncated or foreign files
            raise CheckpointError(f"{file}: cannot be read as a torch checkpoint (truncated or "
                                  f"corrupt?): {err}") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"{file}: holds a {type(state).__name__}, not a state dict")
        return file, state
    raise CheckpointError(f"{path}: has config.json but no model.safetensors, {INDEX} or pytorch_model.bin")


# one makes a tokenizer
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model")
TOKENIZER_FILES = VOCABULARY_FILES + ("tokenizer_config.json", "special_tokens_map.json")  # what saving one may write


def read_tokenizer(path: Path, *, wordpiece: bool = True):
    """The tokenizer saved in a directory, or None where it holds no vocabulary: uncased BERT WordPiece for a
    ``vocab.txt`` that says so (poslens' own, with character spans; unless ``wordpiece=False``), else whatever
    ``transformers.AutoTokenizer`` reads there."""
    path = Path(path)
    if not any((path / f).is_file() for f in VOCABULARY_FILES):
        return None
    from interp.tokenizers import HFTokenizer, WordPieceTokenizer

    settings = {}
    if (path / "tokenizer_config.json").is_file():
        try:
            settings = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{path / 'tokenizer_config.json'}: cannot be read as JSON: {err}") from None
    bert = str(settings.get("tokenizer_class", "BertTokenizer")).startswith("BertTokenizer")
    if wordpiece and (path / "vocab.txt").is_file() and bert and settings.get("do_lower_case", True):
        return WordPieceTokenizer(path / "vocab.txt")
    from transformers import AutoTokenizer

    try:
        return HFTokenizer(AutoTokenizer.from_pretrained(path, local_files_only=True), path.name)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: has tokenizer files that cannot be loaded: {err}") from None


def writable_tokenizer(tokenizer) -> bool:
    """Whether ``write_tokenizer`` can save it."""
    from interp.tokenizers import HFTokenizer, WordPieceTokenizer

    return isinstance(tokenizer, (HFTokenizer, WordPieceTokenizer))


def write_tokenizer(tokenizer, directory: Path) -> str | None:
    """Save a tokenizer beside a checkpoint so ``read_tokenizer`` finds it again; the kind written, or None."""
    from interp.tokenizers import HFTokenizer, WordPieceTokenizer

    if isinstance(tokenizer, WordPieceTokenizer):
        (directory / "vocab.txt").write_bytes(Path(tokenizer.vocab_file).read_bytes())
        settings = {"tokenizer_class": "BertTokenizer", "do_lower_case": True}
        (directory / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return "wordpiece"
    if isinstance(tokenizer, HFTokenizer):
        tokenizer.tok.save_pretrained(directory)
        return "huggingface"
    return None


