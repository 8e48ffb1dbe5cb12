"""Errors raised while reading checkpoints: each names the file, and the key and shapes where relevant."""


class CheckpointError(ValueError):
    pass


def shape_str(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"
