"""A checkpoint as the families' layouts see it: a local path (a file or a directory) or a ``transformers`` model in
memory, with what a layout may ask of it read once and only when asked (its ``config.json``, its torch object, its
tensors)."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from interp.loading.errors import CheckpointError

TORCH_SUFFIXES = (".pt", ".pth", ".bin")


class Checkpoint:
    """``path`` (with a ``format`` when the catalog says what the file is), or ``module``: a transformers model."""

    def __init__(self, path: Path | None = None, *, format: str | None = None, module=None):
        self.path, self.format, self.module = (Path(path) if path is not None else None), format, module

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else type(self.module).__name__

    @property
    def config_where(self) -> str:
        """Where the config comes from, for errors about it: the directory's config.json, or the in-memory model."""
        return str(self.path / "config.json") if self.module is None and self.path is not None else self.where

    @property
    def is_dir(self) -> bool:
        return self.path is not None and self.path.is_dir()

    @property
    def is_torch_file(self) -> bool:
        return self.path is not None and self.path.is_file() and self.path.suffix in TORCH_SUFFIXES

    def has(self, name: str) -> bool:
        """A file of that name in the checkpoint's directory."""
        return self.is_dir and (self.path / name).is_file()

    @functools.cached_property
    def config(self) -> dict | None:
        """``config.json`` of a directory (or the in-memory model's config), or None where there is none."""
        if self.module is not None:
            config = self.module.config.to_dict()
            config["architectures"] = config.get("architectures") or [type(self.module).__name__]
            return config
        if not self.has("config.json"):
            return None
        from interp.loading.hf_files import read_config

        return read_config(self.path)

    @property
    def model_type(self) -> str | None:
        try:
            config = self.config
        except CheckpointError:
            return None
        return config.get("model_type") if config else None

    @functools.cached_property
    def torch_object(self):
        """A torch file's content, read with ``weights_only`` (nothing it holds can run code)."""
        try:
            return torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as err:  # torch raises several types for truncated or foreign files
            raise CheckpointError(f"{self.path}: cannot be read as a torch checkpoint (truncated or "
                                  f"corrupt?): {err}") from None

    def state(self) -> tuple[str, dict[str, torch.Tensor]]:
        """(where the tensors came from, every tensor by its key): a Hugging Face directory's weights, or the in-memory
        model's state dict."""
        if self.module is not None:
            return type(self.module).__name__, dict(self.module.state_dict())
        from interp.loading.hf_files import read_state

        file, state = read_state(self.path)
        return str(file), state

    def read_hf(self, parse_config, build):
        """A Hugging Face layout read as the hand-written families read one: ``parse_config(config, where)`` first (a
        config they cannot run is refused before any weight is read), then ``build(config, state, where)``, then the
        tokenizer beside the weights."""
        cfg = parse_config(self.config, self.config_where)
        where, state = self.state()
        model = build(cfg, state, where)
        if self.path is not None:
            from interp.loading.hf_files import read_tokenizer

            model.tokenizer = read_tokenizer(self.path)
            model.model_name = self.path.name
        return model
