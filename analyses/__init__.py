"""Analyses of positional mechanisms. Each is a function ``f(model, **options) -> DataFrame``, also
runnable as ``poslens analyze NAME`` (CSV + figure + provenance). Analyses rely on model capabilities
(``interp.base.Capability``), never on concrete model classes."""

from analyses import headlines
from analyses.ap_spectrum import ap_spectrum
from analyses.attention_mass import attention_mass
from analyses.byte_increments import byte_increments
from analyses.char_spacing import DEFAULT_TEXTS, SCALES, char_spacing
from analyses.entity_spacing import entity_spacing
from analyses.kl_ablation import compare_heads, kl_ablation
from analyses.loss_neutrality import loss_neutrality
from analyses.niah_accuracy import niah_accuracy
from analyses.position_probes import position_probes
from analyses.positions import position_patterns, position_ranges
from analyses.registry import Analysis, Option, all_analyses, get, register
from analyses.word_boundaries import word_boundaries
from interp.base import Capability

INC = (Capability.INCREMENTS,)


def _texts(items):
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--text expects ID=TEXT, got {item!r}")
        out[key] = text
    return out


def _entity_file(path):
    from pathlib import Path

    pairs = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
                         "save the entities file as UTF-8") from None
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) != 2:
            raise ValueError(f"{path}:{n}: expected two words, got {line!r}")
        pairs.append(tuple(words))
    return tuple(pairs)


register(Analysis(
    "byte-increments", byte_increments, "byte_increments",
    "Increment each byte gets from its identity alone (the shared DeltaMLP, or layer 0 of the per-layer model): "
    "boundary bytes (space, newline, punctuation, EOS, capitals) should get larger steps than word-internal bytes.",
    headline=headlines.byte_increments,
    needs=INC))
register(Analysis(
    "word-boundaries", word_boundaries, "word_boundaries",
    "ROC-AUC with which each layer's increment at the next character separates Chinese word boundaries from "
    "word-internal gaps (0.5 = chance), against jieba and the PKU gold segmentation on held-out People's Daily.",
    headline=headlines.word_boundaries,
    needs=INC, seeded=True, options=(
        Option("max_docs", int, 300, "documents read at most"),
        Option("max_gaps", int, 40_000, "stop after the document that brings the gap count to this"),
        Option("max_bytes", int, 512, "window length in bytes (must not exceed the model's context)"),
        Option("n_boot", int, 1000, "bootstrap resamples (of documents) for the 95% interval"),
    )))
register(Analysis(
    "entity-spacing", entity_spacing, "entity_spacing",
    "Increment at the space inside two-word names, real order vs reversed, with per-layer Wilcoxon p-values: "
    "a smaller real-order space means the first word made the model expect the second; invented names are the control.",
    headline=headlines.entity_spacing,
    needs=INC, options=(Option("entities", str, None, "file of two-word entities, one per line (default: the built-in 82)"),),
    convert={"entities": lambda v: {"real": _entity_file(v)} if v else {}}))
register(Analysis(
    "char-spacing", char_spacing, "char_spacing",
    "Each character placed at its cumulative learned position, one row per layer: tight clusters are units the "
    "layer packs together, wide gaps are boundaries it expands.",
    headline=headlines.char_spacing,
    needs=INC, options=(
        Option("text", str, None, "ID=TEXT to plot (repeatable; default: the blog's English and Chinese sentences)", multiple=True),
        Option("scale", str, None, "per-row or shared (default: both)", multiple=True, choices=SCALES),
    ), convert={"text": lambda v: {"texts": _texts(v)} if v else {}, "scale": lambda v: {"scales": tuple(v)} if v else {}}))
register(Analysis(
    "loss-neutrality", loss_neutrality, "loss_neutrality",
    "Held-out next-byte loss of each model on the same English and Chinese windows: learned increments are "
    "loss-neutral if their loss matches the integer-RoPE baseline trained on the same data for the same steps.",
    headline=headlines.loss_neutrality,
    needs=(Capability.CAUSAL_LM,), seeded=True, options=(
        Option("n_windows", int, 64, "held-out windows per language"),
        Option("context", int, 512, "window length in bytes"),
    )))

def _ints(values):
    return [int(v) for item in values for v in str(item).split(",") if v.strip()]


ATTN = (Capability.ATTENTION, Capability.CAUSAL_LM)
register(Analysis(
    "attention-mass", attention_mass, "attention_mass",
    "Attention from the answer tokens of needle-in-a-haystack prompts to the needle, the query and the rest of the "
    "context (mean weight per token, the seed's Table 4, and total share), per layer and head and averaged; "
    "answers are the model's greedy output or the gold value teacher-forced, and retrieval accuracy is reported.",
    headline=headlines.attention_mass, needs=ATTN, seeded=True, options=(
        Option("n_samples", int, 16, "NIAH prompts"),
        Option("context_tokens", int, 512, "prompt length in the model's tokens"),
        Option("depth", float, None, "needle depth in [0, 1] (default: spread evenly)"),
        Option("haystack", str, "wiki", "wiki (English prose) or noise (RULER's repeated sentences)", choices=("wiki", "noise")),
        Option("no_preamble", bool, False, "drop RULER's opening instruction"),
    ), convert={"no_preamble": lambda v: {"preamble": not v}}))
register(Analysis(
    "position-ranges", position_ranges, "position_ranges",
    "Range d = max - min of the positions each head assigns within a context, across heads: small d means a head "
    "packs the context into a narrow span (local re-organisation), large d a wide one; integer RoPE gives d = N - 1.",
    headline=headlines.position_ranges, needs=(Capability.POSITIONS,), seeded=True, options=(
        Option("n_contexts", int, 8, "contexts"), Option("context_tokens", int, 512, "tokens per context"),
        Option("source", str, "niah", "niah prompts or wiki windows", choices=("niah", "wiki")),
    )))
register(Analysis(
    "position-patterns", position_patterns, "position_patterns",
    "Assigned position against token index for chosen layers and heads, with jumps (steps above k times the median "
    "step) and plateaus (runs of near-zero steps) counted per head: a straight line is plain RoPE.",
    headline=headlines.position_patterns, needs=(Capability.POSITIONS,), seeded=True, options=(
        Option("layer", str, None, "layer(s) to plot, comma-separated or repeated (default: all)", multiple=True),
        Option("head", str, None, "head(s) to plot (default: all)", multiple=True),
        Option("context_tokens", int, 256, "tokens in the context"),
        Option("source", str, "niah", "niah prompt or wiki window", choices=("niah", "wiki")),
        Option("jump_factor", float, 5.0, "a jump is a step above this many median steps"),
        Option("plateau_factor", float, 0.1, "a plateau step is at most this many median steps"),
    ), convert={"layer": lambda v: {"layers": _ints(v)} if v else {}, "head": lambda v: {"heads": _ints(v)} if v else {}}))
register(Analysis(
    "niah-accuracy", niah_accuracy, "niah_accuracy",
    "Needle-in-a-haystack retrieval accuracy (greedy exact match) at several context lengths, beyond the training "
    "length included: where a position scheme stops extrapolating.",
    headline=headlines.niah_accuracy, needs=(Capability.CAUSAL_LM,), seeded=True, options=(
        Option("length", str, None, "context length(s), comma-separated or repeated (default: 512,1024,2048)", multiple=True),
        Option("n_samples", int, 32, "prompts per length"),
    ), convert={"length": lambda v: {"lengths": tuple(_ints(v))} if v else {}}))
register(Analysis(
    "ap-spectrum", ap_spectrum, "ap_spectrum",
    "PCA of the absolute-position embedding table (cumulative explained variance) and the DCT-II of each leading "
    "component (share of power in the first 4 bins): a disentangled AP stream collapses onto a few smooth, "
    "low-frequency components; an entangled one stays high-dimensional.",
    headline=headlines.ap_spectrum, needs=(Capability.AP_STREAM,), options=(
        Option("n_components", int, 8, "leading components to report"),
        Option("low_bins", int, 4, "DCT bins counted as low frequency"),
    )))
KL_OPTIONS = (
    Option("n_docs", int, 500, "documents (English Wikipedia leads joined up to the input length)"),
    Option("max_tokens", int, 512, "tokens per document"),
    Option("rp_support", float, 0.25, "RP influence from which a semantic head counts as RP-supported"),
)
register(Analysis(
    "kl-ablation", kl_ablation, "kl_ablation",
    "For each head, the KL divergence between its attention and the attention with one logit component (AP, "
    "semantic, relative bias) removed, normalised into an influence vector (ternary plot), and the head taxonomy "
    "it implies (AP-oriented, semantic-oriented, RP-supported).",
    headline=headlines.kl_ablation, needs=(Capability.LOGIT_COMPONENTS,), seeded=True, options=KL_OPTIONS))
register(Analysis(
    "compare-heads", compare_heads, "compare_heads",
    "The KL-ablation taxonomies of several models side by side, with the number of heads in each group.",
    headline=headlines.kl_ablation, needs=(Capability.LOGIT_COMPONENTS,), seeded=True, options=KL_OPTIONS))
register(Analysis(
    "position-probes", position_probes, "position_probes",
    "Held-out R^2 of ridge probes reading the normalised token index, the segment index and the progress inside "
    "the segment from each layer's hidden state (and from the AP-only and semantic-only subspaces where a model has "
    "them); shuffled targets are the control.",
    headline=headlines.position_probes, needs=(Capability.HIDDEN_STATES,), seeded=True, options=(
        Option("n_docs", int, 500, "documents"), Option("n_train", int, 400, "training documents per seed"),
        Option("n_test", int, 100, "test documents per seed"), Option("n_seeds", int, 5, "train/test splits"),
        Option("max_tokens", int, 512, "tokens per document (at most the model's context)"),
        Option("cv_folds", int, 5, "folds of training documents for choosing alpha"),
    )))

__all__ = ["ap_spectrum", "kl_ablation", "compare_heads", "position_probes", "attention_mass", "position_ranges", "position_patterns", "niah_accuracy", "loss_neutrality", "byte_increments", "word_boundaries", "entity_spacing", "char_spacing", "get", "all_analyses",
           "Analysis", "Option", "DEFAULT_TEXTS"]


# --input PATH: the user's own documents (corpora.user.read_documents), one block for every analysis that reads text.
def _with_input(name: str, help: str, argument: str = "documents"):
    import dataclasses

    from corpora.user import Texts, read_documents

    def convert(path):
        if not path:
            return {}
        docs = read_documents(path)
        if argument == "texts":
            texts = Texts({d.id: d.text for d in docs})
            texts.source = docs.source
            return {"texts": texts}
        return {argument: docs}

    a = get(name)
    register(dataclasses.replace(a, options=a.options + (Option("input", str, None, help),), convert={**a.convert, "input": convert}))


_DOCS = "your documents: a .txt file (one document), a .jsonl file ('text' and optional 'id' per line) or a directory of .txt files"
for _name in ("position-ranges", "position-patterns", "kl-ablation", "compare-heads", "loss-neutrality", "word-boundaries"):
    _with_input(_name, _DOCS + "; longer ones are split into windows")
_with_input("position-probes", _DOCS + "; each read whole (a longer one than --max-tokens is refused)")
for _name in ("attention-mass", "niah-accuracy"):
    _with_input(_name, "haystack from " + _DOCS)
_with_input("char-spacing", "texts to plot from " + _DOCS, "texts")


# head-profiles (issue 9 item 2)
from analyses import head_profiles as _head_profiles_module  # noqa: E402

head_profiles = _head_profiles_module.head_profiles
register(Analysis(
    "head-profiles", head_profiles, "head_profiles",
    "Per head of each model, on one normalised-depth axis: attention on the previous token, the first token (sink) "
    "and a local window, the range of its positions, its attention to the needle while answering and its "
    "retrieval score (top attention on the needle token being copied), KL influences where logits decompose, "
    "and the dominant behaviour as a group.",
    headline=_head_profiles_module.headline, needs=(Capability.ATTENTION,), seeded=True, options=(
        Option("n_contexts", int, 8, "contexts for the attention masses (built-in Wikipedia windows)"),
        Option("context_tokens", int, 512, "tokens per context (at most the model's context)"),
        Option("max_rows", int, 256, "query rows read per context, evenly spaced"),
        Option("local_window", int, 8, "keys within this distance (token itself excluded) count as local"),
        Option("n_samples", int, 8, "NIAH prompts for needle mass and retrieval score (causal LMs)"),
        Option("niah_tokens", int, 512, "NIAH prompt length in the model's tokens"),
    )))
_with_input("head-profiles", _DOCS + "; split into windows of --context-tokens, and the NIAH haystack")
__all__.append("head_profiles")
