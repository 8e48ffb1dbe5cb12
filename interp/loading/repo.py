"""Deprecated path of ``interp.families.repo.checkpoints`` (reading and writing the RePo family's checkpoints); removed
on 2027-05-24."""

from interp.deprecated import Alias, moved


def _is_hf_dir(path) -> bool:
    from interp.families.repo import checkpoints
    from interp.loading.checkpoint import Checkpoint

    return checkpoints.is_hf_dir(path if isinstance(path, Checkpoint) else Checkpoint(path))


__getattr__, __dir__ = moved(__name__, "interp.families.repo.checkpoints", {
    "FAMILY": Alias("interp.families.repo.FAMILY.name", lambda: "repo"),
    "is_hf_dir": Alias("interp.families.repo.checkpoints.is_hf_dir(Checkpoint(path))", lambda: _is_hf_dir),
    "hf_tokenizer": Alias("interp.loading.hf_files.read_tokenizer"),
})
