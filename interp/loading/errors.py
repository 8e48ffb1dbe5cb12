"""Errors raised while reading checkpoints: each names the file, and the key and shapes where relevant."""

import dataclasses


class CheckpointError(ValueError):
    pass


def shape_str(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def build_config(cls, raw, where: str, what: str, *, family: str | None = None):
    """``cls(**raw)`` for a family's dataclass config read from a checkpoint, or a ``CheckpointError`` naming ``where``
    and ``what`` (``"llama config"``, ``"model_config"``): ``raw`` not a dict, whatever ``cls`` refuses, and with
    ``family`` fields that ``cls`` does not have (named, with the hint that it may be another family's checkpoint)."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where}: {what} must be a dict, found {type(raw).__name__}")
    if family is not None:
        unknown = sorted(set(raw) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise CheckpointError(f"{where}: {what} has fields {unknown} that no {family} config has "
                                  "(is this a checkpoint of another family?)")
    try:
        return cls(**raw)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: invalid {what}: {err}") from None
