"""The RePo family (seed 000): an OLMo-2 decoder whose heads rotate by positions they predict (``model``), read from the
authors' released ``olmo2`` directories, sharded or not, placed over devices while read (``checkpoints``)."""

from interp.families import Family, Layout, register
from interp.families.repo import checkpoints

FAMILY = register(Family(
    name="repo",
    layouts=(Layout("huggingface olmo2 directory", checkpoints.is_hf_dir, checkpoints.read_checkpoint,
                    expects="config.json of model_type olmo2 (with the RePo pe_config) and its weights",
                    placement=("device", "dtype", "device_map", "max_memory")),),
    build=checkpoints.build, export=checkpoints.export, hf_model_types=("olmo2",),
    examples=checkpoints.examples,
))
