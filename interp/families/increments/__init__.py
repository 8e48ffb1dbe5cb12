"""The learned-increments family (seed 001): a byte-level decoder whose positions are the cumulative sum of learned
per-token increments (``model``), read from upstream's ``step_N.pt`` (``checkpoints``)."""

from interp.families import Family, Layout, register
from interp.families.increments import checkpoints

FAMILY = register(Family(
    name="increments",
    layouts=(Layout("upstream step_N.pt", checkpoints.is_step_pt, checkpoints.read_checkpoint, kind="torch file",
                    expects="a dict with 'model_state_dict' and 'model_config'"),),
    build=checkpoints.build, export=checkpoints.export, examples=checkpoints.examples,
))
