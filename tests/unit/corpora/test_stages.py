"""Held-out units (corpora.stages): a pilot and the judged known-results run never read the same unit.

Checked at the sizes the known-results run draws (analyses' ``real`` declarations) and on every unit kind: built-in
windows (the articles each window joins), NIAH haystacks (the article of each sentence), needle keys and values, and
random-token sequences; ``any`` keeps giving what every earlier run drew (tests/unit/corpora/test_windows.py holds the
digests)."""

from __future__ import annotations

import numpy as np
import pytest

from analyses import get
from analyses.runs import Run, check
from corpora import stages
from corpora.contexts import wikipedia_windows
from corpora.niah import Haystack, niah_samples
from corpora.random_tokens import random_sequences
from corpora.sources import english_wikipedia
from interp.tokenizers import ByteTokenizer
from poslens.reproduce import real_plan


class Vocab:
    """What random_sequences reads of a model: its vocabulary size (no tokenizer: no special ids to leave out)."""

    d_vocab, tokenizer = 49_152, None


def test_every_article_belongs_to_exactly_one_stage_and_the_legacy_ones_to_the_pilots():
    wiki = english_wikipedia()
    pilot, judged = ({d.id for d in stages.stage_articles(s)} for s in ("pilot", "judged"))
    assert not pilot & judged
    assert pilot | judged == {d.id for d in wiki}
    legacy = stages.legacy_order(wiki)[: stages.LEGACY_ARTICLES]
    assert {d.id for d in legacy} <= pilot
    assert all(d.split == "validation" for d in legacy[:488])  # every run before 0.2.0 began with these
    assert 0.75 * len(wiki) < len(judged) < 0.85 * len(wiki)  # about 7 in 8 of the articles past the legacy ones
    assert {stages.stage_of(i) for i in list(pilot)[:50]} == {"pilot"}
    assert {stages.stage_of(i) for i in list(judged)[:50]} == {"judged"}


def test_windows_of_a_stage_join_only_its_articles_and_share_none_with_the_other_stage():
    tok = ByteTokenizer()
    drawn = {s: wikipedia_windows(tok, 12, 8192, seed=0, stage=s) for s in ("pilot", "judged")}
    sources = {s: {a for w in ws for a in w.sources} for s, ws in drawn.items()}
    assert all(w.sources for ws in drawn.values() for w in ws)
    assert {stages.stage_of(a) for a in sources["judged"]} == {"judged"}
    assert {stages.stage_of(a) for a in sources["pilot"]} == {"pilot"}
    assert not sources["judged"] & sources["pilot"]
    legacy = {d.id for d in stages.legacy_order(english_wikipedia())[: stages.LEGACY_ARTICLES]}
    assert not sources["judged"] & legacy
    other_seed = {a for w in wikipedia_windows(tok, 12, 8192, seed=1, stage="judged") for a in w.sources}
    assert other_seed != sources["judged"] and {stages.stage_of(a) for a in other_seed} == {"judged"}


def test_any_draws_the_articles_in_the_order_every_earlier_run_did():
    tok = ByteTokenizer()
    order = stages.legacy_order(english_wikipedia())
    windows = wikipedia_windows(tok, 3, 2048, seed=0)
    joined = [a for w in windows for a in w.sources]
    assert joined == [d.id for d in order[: len(joined)]]


def test_haystacks_are_made_of_their_stage_s_articles():
    judged, pilot = Haystack("wiki", stage="judged"), Haystack("wiki", stage="pilot")
    assert {stages.stage_of(a) for a in set(judged.sources)} == {"judged"}
    assert {stages.stage_of(a) for a in set(pilot.sources)} == {"pilot"}
    legacy = Haystack("wiki")  # what every earlier NIAH prompt was made of: the validation articles
    assert not set(judged.sources) & set(legacy.sources)
    assert len(judged.sources) == len(judged.sentences)


def test_needles_of_the_judged_run_are_drawn_apart_from_the_pilots():
    tok = ByteTokenizer()
    runs = {s: niah_samples(tok, 16, 512, seed=0, stage=s, preamble=False) for s in ("any", "pilot", "judged")}
    keys = {s: [(p.key, p.value) for p in ps] for s, ps in runs.items()}
    assert keys["judged"] != keys["any"] and keys["judged"] != keys["pilot"]
    texts = {s: {p.text for p in ps} for s, ps in runs.items()}
    assert not texts["judged"] & (texts["any"] | texts["pilot"])


@pytest.mark.parametrize("n, length", [(100, 64), (50, 256), (16, 256)])  # sink-rate's and induction's real draws
def test_random_sequences_of_the_stages_share_none(n, length):
    drawn = {s: {tuple(x) for x in random_sequences(Vocab(), n, length, 0, s)} for s in stages.STAGES}
    assert all(len(v) == n for v in drawn.values())
    assert not drawn["judged"] & (drawn["pilot"] | drawn["any"])
    assert drawn["any"] == {tuple(x) for x in random_sequences(Vocab(), n, length, 0)}


def test_stage_seeds_are_distinct_streams_and_any_keeps_the_seed():
    assert stages.stage_seed(5, "any") == 5
    assert stages.stage_seed(5, "judged") != stages.stage_seed(5, "pilot")
    assert stages.stage_seed([5, 1], "judged")[:2] == [5, 1]
    a = np.random.default_rng(stages.stage_seed(0, "judged")).integers(0, 2**31, 8)
    b = np.random.default_rng(stages.stage_seed(0, "pilot")).integers(0, 2**31, 8)
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match="stage='held-out'.*any, pilot, judged"):
        stages.check("held-out")


def test_the_known_results_run_draws_judged_units():
    steps = {s.analysis: s for s in real_plan()}
    staged = [a for a in steps if any(o.name == "stage" for o in get(a).options)]
    assert set(staged) == {"sink-rate", "massive-activations", "induction", "rope-frequencies", "retrieval-heads",
                           "attention-window"}
    assert {steps[a].options["stage"] for a in staged} == {"judged"}
    with pytest.raises(ValueError, match="declare stage='judged'.*not 'any'"):
        check(get("sink-rate"), "real", Run(("smollm2",), dict(n_docs=4), section="x"))
