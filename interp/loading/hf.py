"""Deprecated path of ``interp.families.hf.checkpoints`` (reading and writing the generic Hugging Face family's
directories); removed on 2027-05-24."""

from interp.deprecated import Alias, moved

__getattr__, __dir__ = moved(__name__, "interp.families.hf.checkpoints", {
    "FAMILY": Alias("interp.families.hf.FAMILY.name", lambda: "hf"),
    "TOKENIZER_FILES": Alias("interp.loading.hf_files.VOCABULARY_FILES (which leaves out tokenizer_config.json)",
                             lambda: ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                                      "tokenizer.model", "spiece.model")),
})
