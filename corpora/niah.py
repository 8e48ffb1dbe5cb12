"""Needle-in-a-haystack prompts in RULER's format: ``Rest ... Needle ... Rest ... Query``.

The haystack is English prose (Wikipedia lead sections of the chosen split) or RULER's repeated noise
sentences; the needle is "One of the special magic numbers for {key} is: {value}."; the query asks for
it and ends with the answer prefix, so the next tokens should be the value. Length is counted in the
model's own tokens; the needle sits at a chosen depth (fraction of the haystack before it). Every token
of the prompt is labelled with the part it belongs to, from character spans, so the labels are exact for
byte-level and BPE tokenizers alike. ``haystack`` may also be the user's own documents (strings or
``corpora.user.Document``): their sentences, in order, are the haystack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
PREAMBLE = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
            "I will quiz you about the numbers afterwards.\n")
NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUERY = "\nWhat is the special magic number for {key} mentioned in the provided text? " \
        "The special magic number for {key} mentioned in the provided text is"

PARTS = ("rest", "needle", "query")
OTHER = -1  # document-start token (and, in analyses, generated tokens)

ADJECTIVES = ("ancient", "brave", "calm", "damp", "eager", "faint", "gentle", "hollow", "icy", "jolly", "keen", "lucky",
              "mellow", "narrow", "odd", "proud", "quiet", "rapid", "silent", "tidy", "urban", "vivid", "wild", "young",
              "zealous", "amber", "bitter", "crisp", "dusty", "early", "fuzzy", "grand", "hasty", "ivory", "jagged")
NOUNS = ("apple", "bridge", "candle", "desert", "engine", "falcon", "garden", "harbor", "island", "jacket", "kettle",
         "ladder", "meadow", "needle", "orchard", "pepper", "quarry", "river", "saddle", "tunnel", "umbrella", "valley",
         "window", "yacht", "zebra", "anchor", "barrel", "castle", "dragon", "feather", "glacier", "hammer", "lantern")


@dataclass
class NiahSample:
    text: str  # the prompt: context and query, ending with the answer prefix
    answer: str  # what should follow: " " + value
    key: str
    value: str
    depth: float
    token_ids: list[int]  # prompt tokens (with the tokenizer's document-start token)
    parts: np.ndarray  # per prompt token: 0 rest, 1 needle, 2 query, -1 other
    answer_ids: list[int]

    def span(self, part: str) -> tuple[int, int]:
        """First and one-past-last token index of a contiguous part (needle or query)."""
        idx = np.flatnonzero(self.parts == PARTS.index(part))
        return int(idx[0]), int(idx[-1]) + 1


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


class Haystack:
    """An endless supply of sentences: Wikipedia lead sections of a split (under ``stage`` ``any``) or of a stage's
    articles (``corpora.stages``), or RULER's noise. ``sources`` names each sentence's article."""

    def __init__(self, kind="wiki", split: str = "validation", stage: str = "any"):
        if not isinstance(kind, str):
            from corpora.user import as_documents

            self.sentences = [s for d in as_documents(kind, "haystack") for s in _sentences(d.text)]
            self.sources = []
            self.kind = "documents"
            return
        self.sources = []
        if kind == "noise":
            self.sentences = _sentences(NOISE)
        elif kind == "wiki":
            from corpora.stages import stage_articles

            articles = [d for d in stage_articles(stage) if stage != "any" or d.split == split]
            pairs = [(s, d.id) for d in articles for s in _sentences(d.text)]
            self.sentences, self.sources = [s for s, _ in pairs], [i for _, i in pairs]
        else:
            raise ValueError(f"haystack must be 'wiki' or 'noise', not {kind!r}")
        self.kind = kind

    def run(self, rng: np.random.Generator, count: int) -> list[str]:
        if self.kind == "noise":
            return [self.sentences[i % len(self.sentences)] for i in range(count)]
        start = int(rng.integers(0, len(self.sentences)))
        return [self.sentences[(start + i) % len(self.sentences)] for i in range(count)]


def _assemble(pieces: list[tuple[str, int]]) -> tuple[str, list[tuple[int, int, int]]]:
    """Join (text, part) pieces; returns the text and (start, end, part) character ranges."""
    text, ranges = "", []
    for piece, part in pieces:
        ranges.append((len(text), len(text) + len(piece), part))
        text += piece
    return text, ranges


def make_sample(tokenizer, rng: np.random.Generator, haystack: Haystack, context_tokens: int, *,
                depth: float | None = None, preamble: bool = True) -> NiahSample:
    """One prompt of at most ``context_tokens`` tokens (document-start token included)."""
    key = f"{ADJECTIVES[rng.integers(len(ADJECTIVES))]}-{NOUNS[rng.integers(len(NOUNS))]}"
    value = str(int(rng.integers(1_000_000, 10_000_000)))
    depth = float(rng.uniform(0, 1)) if depth is None else float(depth)
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    needle, query = NEEDLE.format(key=key, value=value), QUERY.format(key=key)
    head = PREAMBLE if preamble else ""

    def build(sentences):
        cut = int(round(depth * len(sentences)))
        before = " ".join(sentences[:cut])
        after = " ".join(sentences[cut:])
        # separators go with the piece that follows them, so a BPE token " One" belongs to the needle
        pieces = [(head, 0), (before, 0), ((" " if before else "") + needle, 1), ((" " if after else "") + after, 0),
                  (query, 2)]
        return _assemble([p for p in pieces if p[0]])

    fixed = len(tokenizer.encode(head + needle + query, doc_start=True))
    if fixed > context_tokens:
        raise NeedleTooLong(context_tokens, fixed)
    def fits(sentences) -> bool:
        return len(tokenizer.encode(build(sentences)[0], doc_start=True)) <= context_tokens

    pool = haystack.run(rng, 8)
    sentences: list[str] = []
    while True:  # whole sentences while they fit, then as many words of the next one as fit
        if len(pool) == 0:
            pool = haystack.run(rng, 8)
        nxt = pool.pop(0)
        if fits(sentences + [nxt]):
            sentences.append(nxt)
            continue
        words = nxt.split()
        lo, hi = 0, len(words)  # largest prefix of words that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(sentences + [" ".join(words[:mid])]):
                lo = mid
            else:
                hi = mid - 1
        if lo:
            sentences.append(" ".join(words[:lo]))
        break
    text, ranges = build(sentences)
    enc = tokenizer.encode_with_spans(text, doc_start=True)
    parts = np.full(len(enc.ids), OTHER)
    starts = np.array([r[0] for r in ranges])
    for t, (start, end) in enumerate(enc.spans):
        if end > start:
            parts[t] = ranges[int(np.searchsorted(starts, start, side="right") - 1)][2]
    answer = " " + value
    return NiahSample(text, answer, key, value, depth, enc.ids, parts, tokenizer.encode(answer, doc_start=False))


def niah_samples(tokenizer, n: int, context_tokens: int, *, seed: int = 0, depth: float | None = None,
                 haystack="wiki", split: str = "validation", preamble: bool = True,
                 stage: str = "any") -> list[NiahSample]:
    """``n`` seeded prompts; ``depth=None`` spreads needles evenly over [0, 1]. Under a ``stage`` other than ``any``
    the haystack is the stage's articles and the keys, values and haystack starts a stream of the stage's own
    (``corpora.stages``)."""
    from corpora.stages import stage_seed

    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    hay = Haystack(haystack, split, stage)
    rng = np.random.default_rng(stage_seed(seed, stage))
    depths = [depth] * n if depth is not None else list(np.linspace(0, 1, n)) if n > 1 else [0.5] * n
    return [make_sample(tokenizer, rng, hay, context_tokens, depth=d, preamble=preamble) for d in depths]


class NeedleTooLong(ValueError):
    """NIAH prompts of ``context_tokens`` tokens cannot hold the needle and the query (``fixed`` tokens).
    ``poslens.run.execute.run_analysis`` names the option that set the length."""

    def __init__(self, context_tokens: int, fixed: int):
        self.context_tokens, self.fixed = context_tokens, fixed
        super().__init__(f"context of {context_tokens} tokens cannot hold the needle and the query ({fixed} tokens)")


def prompts_for(model, analysis: str, documents, n: int, length: int, *, seed: int = 0, depth: float | None = None,
                haystack: str = "wiki", preamble: bool = False, stage: str = "any") -> list[NiahSample]:
    """The NIAH prompts an analysis reads: ``documents=`` NIAH prompts as given (each checked to fit the model with its
    answer), or ``n`` seeded prompts of ``length`` tokens whose haystack is ``documents=`` texts, else ``haystack``."""
    from corpora.documents import input_kind
    from corpora.user import user_inputs

    if documents is not None and input_kind(documents) == "prompts":
        from corpora.answers import fitting_samples

        return fitting_samples(model, user_inputs(documents, analysis, ("prompts",)).items)
    hay = haystack if documents is None else user_inputs(documents, analysis, ("texts",)).items
    return niah_samples(model.require_tokenizer(analysis), n, length, seed=seed, depth=depth, haystack=hay,
                        preamble=preamble, stage=stage)
