"""The disentangled encoders (seed 002): DSTG and its AP, RP and RoPE baselines, one model class whose config picks the
variant (``config``, ``model``), read from the development code's ``state_dict.pt`` and ``save_pretrained`` directories
(``checkpoints``)."""

from interp.families import Family, Layout, register
from interp.families.encoder import checkpoints

FAMILY = register(Family(
    name="encoder",
    layouts=(Layout("development state_dict.pt", checkpoints.is_state_pt, checkpoints.read_state_pt, kind="torch file",
                    expects="'encoder.weight' or 'transformer_encoder.{i}.*' keys, optionally under 'model.'"),
             Layout("huggingface neobert directory", checkpoints.is_dev_dir, checkpoints.read_dev_dir,
                    expects="config.json of model_type " + " / ".join(checkpoints.HF_MODEL_TYPES) + " and its weights",
                    format=lambda checkpoint, model: f"huggingface {checkpoint.model_type} directory")),
    build=checkpoints.build, export=checkpoints.export, hf_model_types=checkpoints.HF_MODEL_TYPES,
    examples=checkpoints.examples,
))
