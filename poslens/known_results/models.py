"""The models of the known-results table: their labels (``LABELS``, in every row's per-model cell and verdict, and the
header's order), the two pretrained models the claims are judged on (``PRETRAINED``) and
what the header says about each (``MODEL_NOTES``)."""

# the models as they are, in every row's per-model cell (the table's header says more: ``poslens.known_results.render``)
LABELS = {"smollm2": "SmolLM2-135M-Instruct (Q4_1)", "gemma3-270m": "Gemma 3 270M base (Q4_K_M)",
          "minilm": "all-MiniLM-L6-v2"}

PRETRAINED = ("smollm2", "gemma3-270m")

# the table's header (``poslens.known_results.render.models_header``): what each model is, beyond its provenance, and
# why it matters for the rows; "" is the note under the models
MODEL_NOTES = {
    "smollm2": "The instruction-tuned variant, not the base model. Its start token `<|im_start|>` (id 1, the "
               "tokenizer's BOS) is the chat-turn opener, not a document start of pretraining: \"with its start "
               "token\" means with `<|im_start|>` prepended. Gu et al.'s code (`tokenizer(prompt)`) adds no BOS for "
               "this tokenizer, so its Gu-comparable cells are those without a start token.",
    "gemma3-270m": "The pretrained (base) model. Its tokenizer adds `<bos>` (id 2), as Gu et al.'s "
                   "`tokenizer(prompt)` would: its Gu-comparable cells are those with `<bos>` first. 15 of its 18 "
                   "layers attend within a sliding window of 512 keys; layers 5, 11 and 17 are global.",
    "": "Both are 4-bit GGUFs de-quantised to float32, which no paper covers: heads near a threshold are what "
        "quantisation can move. Using an Instruct model for SmolLM2 is a tolerable departure for the sink rows: Gu "
        "et al.'s Table 1 (Right) finds chat variants sink like their base models (e.g. LLaMA2-7B 92.47% base, "
        "92.88% chat), and Wu et al. find chat variants keep their retrieval heads; for the other rows it is "
        "untested.",
}
