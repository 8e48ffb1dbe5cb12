"""Deprecated path of ``interp.families.llama.checkpoints`` (reading and writing the llama family's checkpoints);
removed on 2027-05-24."""

from interp.deprecated import Alias, moved


def _load_hf_dir(path):
    from interp.families.llama import checkpoints
    from interp.loading.checkpoint import Checkpoint

    return checkpoints.read_hf(Checkpoint(path), {})


__getattr__, __dir__ = moved(__name__, "interp.families.llama.checkpoints", {
    "FAMILY": Alias("interp.families.llama.FAMILY.name", lambda: "llama"),
    "load_hf_dir": Alias("interp.load(path, family='llama')", lambda: _load_hf_dir),
})
