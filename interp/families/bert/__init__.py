"""The bert family: a hand-written post-LayerNorm BERT encoder with a learned absolute-position table (``model``), read
from Hugging Face ``BertModel`` directories such as all-MiniLM-L6-v2 and from transformers models in memory
(``checkpoints``)."""

from interp.families import Family, Layout, register
from interp.families.bert import checkpoints

FAMILY = register(Family(
    name="bert",
    layouts=(Layout("huggingface bert directory", checkpoints.is_hf, checkpoints.read_hf,
                    expects="config.json of model_type bert for a plain BertModel (no head: one with a head is the "
                            "generic family's) and its weights"),),
    build=checkpoints.build, export=checkpoints.export, hf_model_types=checkpoints.HF_MODEL_TYPES,
    examples=checkpoints.examples,
))
