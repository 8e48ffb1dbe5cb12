"""Held-out units: the built-in corpora split between pilot runs and the judged known-results run, so a verdict is
judged on units no pilot saw.

A run draws its units under a *stage* (an analysis' ``stage=`` option, ``--stage`` on the command line):

- ``any`` (the default): every article, in the draw order poslens always had (validation articles first, then the
  training articles in the order the seed draws). Every run before 0.2.0 drew this way, pilots included.
- ``pilot``: the articles pilots may read: the first ``LEGACY_ARTICLES`` of the seed-0 ``any`` order (every run
  before 0.2.0, pilot or judged, read only from these: the longest, attention-window's 34,816-token stream, used
  the first 329 articles with SmolLM2's tokenizer and 338 with Gemma 3's, measured 2026-11-29), and one article in
  ``PILOT_ONE_IN`` of the rest, picked by a hash of its title.
- ``judged``: every other article. No article is in both; the known-results run (``poslens reproduce
  --real-models``) draws under ``judged``.

Random units (random-token sequences, needle keys and values, a haystack's starting sentence) are drawn from a
generator seeded by the seed and the stage (``stage_seed``), so a pilot's and the judged run's draws are different
streams; the NIAH haystack of a stage is made of that stage's articles only (``stage_articles``).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from corpora.documents import Document

STAGES = ("any", "pilot", "judged")
LEGACY_ARTICLES = 1000
PILOT_ONE_IN = 8
_STREAM = {"pilot": 0x9110, "judged": 0x7D6ED}  # the second word of a staged generator's seed


def check(stage: str) -> str:
    if stage not in STAGES:
        raise ValueError(f"stage={stage!r}: choose one of {', '.join(STAGES)}")
    return stage


def legacy_order(articles: tuple[Document, ...], seed: int = 0) -> list[Document]:
    """The ``any`` draw order: validation articles in the file's order, then training articles in ``seed``'s order."""
    first = [d for d in articles if d.split == "validation"]
    rest = [d for d in articles if d.split != "validation"]
    return first + [rest[i] for i in np.random.default_rng(seed).permutation(len(rest))]


def _hashed_pilot(doc_id: str) -> bool:
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") % PILOT_ONE_IN == 0


@functools.lru_cache(maxsize=None)
def _partition() -> dict[str, frozenset[str]]:
    from corpora.sources import english_wikipedia

    wiki = english_wikipedia()
    legacy = {d.id for d in legacy_order(wiki)[:LEGACY_ARTICLES]}
    pilot = frozenset(d.id for d in wiki if d.id in legacy or _hashed_pilot(d.id))
    return {"pilot": pilot, "judged": frozenset(d.id for d in wiki if d.id not in pilot)}


def stage_of(doc_id: str) -> str:
    """``pilot`` or ``judged``: the stage whose runs may read the built-in article ``doc_id``."""
    return "pilot" if doc_id in _partition()["pilot"] else "judged"


def stage_articles(stage: str) -> tuple[Document, ...]:
    """The English Wikipedia articles a run under ``stage`` may read, in the file's order."""
    from corpora.sources import english_wikipedia

    if check(stage) == "any":
        return english_wikipedia()
    keep = _partition()[stage]
    return tuple(d for d in english_wikipedia() if d.id in keep)


def draw_order(stage: str, seed: int) -> list[Document]:
    """The articles a run under ``stage`` reads, in the order it reads them: the ``any`` order, or the stage's
    articles in the order ``stage_seed(seed, stage)`` draws."""
    if check(stage) == "any":
        from corpora.sources import english_wikipedia

        return legacy_order(english_wikipedia(), seed)
    articles = stage_articles(stage)
    return [articles[i] for i in np.random.default_rng(stage_seed(seed, stage)).permutation(len(articles))]


def stage_seed(seed, stage: str):
    """The seed a generator of random units takes under ``stage``: ``seed`` itself under ``any`` (the draws poslens
    always made), else ``[seed, the stage's word]``, a stream no other stage draws from."""
    if check(stage) == "any":
        return seed
    return [*np.atleast_1d(seed).tolist(), _STREAM[stage]]
