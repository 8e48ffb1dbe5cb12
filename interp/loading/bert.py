"""Deprecated path of ``interp.families.bert.checkpoints`` (reading and writing the bert family's checkpoints); removed
on 2027-05-24."""

from interp.deprecated import Alias, moved


def _load_hf_dir(path):
    from interp.families.bert import checkpoints
    from interp.loading.checkpoint import Checkpoint

    return checkpoints.read_hf(Checkpoint(path), {})


def _from_hf_state(raw_config: dict, state: dict, where: str):
    from interp.families.bert import checkpoints

    return checkpoints._build(checkpoints.config_from_hf(raw_config, where), state, where)


__getattr__, __dir__ = moved(__name__, "interp.families.bert.checkpoints", {
    "FAMILY": Alias("interp.families.bert.FAMILY.name", lambda: "bert"),
    "load_hf_dir": Alias("interp.load(path, family='bert')", lambda: _load_hf_dir),
    "from_hf_state": Alias("interp.load(transformers_model, family='bert')", lambda: _from_hf_state),
})
