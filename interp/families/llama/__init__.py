"""The llama family: a hand-written LLaMA decoder with integer RoPE whose positions hooks can edit (``model``), read
from Hugging Face ``llama`` directories, transformers models in memory and GGUF files such as SmolLM2's
(``checkpoints``)."""

from interp.families import Family, Layout, register
from interp.families.llama import checkpoints

FAMILY = register(Family(
    name="llama",
    layouts=(Layout("gguf de-quantised by transformers", checkpoints.is_gguf, checkpoints.read_gguf, kind="gguf file",
                    expects="a LLaMA-architecture GGUF file"),
             Layout("huggingface llama directory", checkpoints.is_hf, checkpoints.read_hf,
                    expects="config.json of model_type llama (rope_type default, linear or llama3) and its weights",
                    declines=checkpoints.declines_hf)),
    build=checkpoints.build, export=checkpoints.export, hf_model_types=checkpoints.HF_MODEL_TYPES,
    examples=checkpoints.examples,
))
