"""Hugging Face decoder key layout <-> poslens module names (``model.layers.{i}.self_attn`` <-> ``blocks.{i}.attn``)."""

import re


def to_native(key: str) -> str:
    key = key.removeprefix("model.")
    key = re.sub(r"^layers\.(\d+)\.self_attn\.", r"blocks.\1.attn.", key)
    return re.sub(r"^layers\.(\d+)\.", r"blocks.\1.", key)


def to_file(key: str) -> str:
    if key.startswith("lm_head."):
        return key
    key = re.sub(r"^blocks\.(\d+)\.attn\.", r"layers.\1.self_attn.", key)
    return "model." + re.sub(r"^blocks\.(\d+)\.", r"layers.\1.", key)
