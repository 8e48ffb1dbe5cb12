"""Deprecated path of ``interp.families.encoder.checkpoints`` (reading and writing the encoders' checkpoints); removed
on 2027-05-24."""

from interp.deprecated import Alias, moved


def _is_hf_dir(path) -> bool:
    from interp.families.encoder import checkpoints
    from interp.loading.checkpoint import Checkpoint

    return checkpoints.is_dev_dir(path if isinstance(path, Checkpoint) else Checkpoint(path))


def _save_state_pt(model, path):
    """A development-style ``state_dict.pt``: the exported state dict, no config (``interp.load`` reads it back)."""
    from pathlib import Path

    import torch

    from interp.families.encoder import checkpoints

    path = Path(path)
    torch.save(checkpoints.export(model)[1], path)
    return path


__getattr__, __dir__ = moved(__name__, "interp.families.encoder.checkpoints", {
    "FAMILY": Alias("interp.families.encoder.FAMILY.name", lambda: "encoder"),
    "is_hf_dir": Alias("interp.families.encoder.checkpoints.is_dev_dir(Checkpoint(path))", lambda: _is_hf_dir),
    "save_state_pt": Alias("interp.save(model, directory) (a poslens directory)", lambda: _save_state_pt),
})
