"""The types text travels in: ``Document`` (a text with a stable id), ``Documents`` (checked documents and where they
were read from), ``Window`` (the tokens a model reads at once, cut from one document) and ``Inputs`` (what an
analysis' ``documents=`` held, of one kind: ``kind_of`` / ``input_kind``); and the train / validation split.

Types only: reading the user's input is ``corpora.user``'s (``read_documents``, ``as_documents``, ``user_inputs``),
which imports this module and is imported by nothing here. Every corpus reader (``corpora.sources``) and the user's
files give ``Document``s; tokenising and cutting them (``corpora.user.token_windows``,
``corpora.contexts.wikipedia_windows``, word-boundaries' character-aligned windows) gives ``Window``s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

VALIDATION_FRACTION = 0.05
KINDS = ("texts", "tokens", "prompts")


@dataclass(frozen=True)
class Document:
    """A text and its stable id. ``source`` says where it came from ("enwiki", "people_daily", "reviews", or "user" for
    the user's own); ``words`` is a gold segmentation where the corpus has one (``"".join(words) == text``)."""

    id: str
    text: str
    source: str = "user"
    words: tuple[str, ...] | None = None

    @property
    def split(self) -> str:
        return split_of(self.id)


@dataclass(frozen=True)
class Window:
    """Tokens a model reads at once, cut from document ``document``: ``ids`` (the model's special tokens included) and
    each token's character span in that document's text (``spans``; empty for ids given without text). ``index`` is
    the window's number in the document, ``start`` the document's first content token it holds, ``text`` the text it
    covers where an analysis reads the text too, ``sources`` the ids of the documents a built-in window joins."""

    document: str
    ids: list[int]
    spans: list[tuple[int, int]] = field(default_factory=list)
    index: int = 0
    start: int = 0
    text: str = ""
    sources: tuple[str, ...] = ()


class Documents(list):
    """A list of ``Document``, read and checked (``corpora.user.read_documents`` / ``as_documents`` make them, and take
    them back as they are), that remembers where it was read from (``source``: ``corpora.user.input_record``)."""

    source: dict | None = None


def split_of(doc_id: str, validation_fraction: float = VALIDATION_FRACTION) -> str:
    """'validation' for a stable pseudo-random ``validation_fraction`` of ids, else 'train'."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")
    return "validation" if h / 2**64 < validation_fraction else "train"


@dataclass
class Inputs:
    """What ``documents=`` held, of one kind: ``texts`` (``Documents``), ``tokens`` (``Window``s: ids read as given) or
    ``prompts`` (``corpora.niah.NiahSample``: ready NIAH prompts)."""

    kind: str
    items: list

    def __len__(self) -> int:
        return len(self.items)


def kind_of(item) -> str:
    """The kind (``KINDS``) one item of ``documents=`` is: a text (a string, ``Document`` or path), token ids (a
    ``Window`` or a sequence of integers) or a NIAH prompt; anything else by its type's name."""
    from pathlib import Path

    if isinstance(item, (str, Document, Path)):
        return "texts"
    if isinstance(item, Window) or (hasattr(item, "__len__") and not isinstance(item, dict)
                                    and all(isinstance(v, int) or hasattr(v, "__index__") for v in list(item)[:4])):
        return "tokens"
    if type(item).__name__ == "NiahSample":
        return "prompts"
    return type(item).__name__


def input_kind(documents) -> str:
    """The kind of what ``documents=`` holds (``KINDS``), read off its first item (``corpora.user.user_inputs`` checks
    them all)."""
    from pathlib import Path

    if isinstance(documents, (dict, str, Path)):
        return "texts"
    first = next(iter(documents), None)
    return "texts" if first is None else kind_of(first)
