"""The generic family: any Hugging Face architecture TransformerLens' bridge has an adapter for, run by transformers'
own modules under poslens' hooks and attention (``model``), read from its directory or taken from memory
(``checkpoints``); asked after every other family, so a family of its own wins for the types it claims."""

from interp.families import Family, Layout, register
from interp.families.hf import checkpoints

FAMILY = register(Family(
    name="hf",
    layouts=(Layout("huggingface directory (generic family)", checkpoints.is_generic, checkpoints.read_checkpoint,
                    expects="config.json of an architecture transformers and TransformerLens' bridge know, and every "
                            "weight of its model class",
                    format=lambda checkpoint, model: f"huggingface {model.architecture} directory (generic family)",
                    fallback=True),),
    save=checkpoints.save, examples=checkpoints.examples,
))
