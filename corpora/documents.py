"""The two types text travels in: ``Document`` (a text with a stable id) and ``Window`` (the tokens a model reads at once,
cut from one document); the train / validation split; and ``user_inputs``, which reads what an analysis' ``documents=``
was given.

Every corpus reader (``corpora.sources``) and the user's files (``corpora.user``) give ``Document``s; tokenising and
cutting them (``corpora.user.token_windows``, ``probes.position.probe_documents``, word-boundaries' character-aligned
windows) gives ``Window``s.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

from interp import deprecated

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

    @property
    def doc_id(self) -> str:
        """Deprecated spelling of ``id``."""
        deprecated.warn("corpora.documents.Document.doc_id", "Document.id")
        return self.id


def _init_with_doc_id(init):
    """``Document(doc_id=...)``, the field's old name, until ``deprecated.REMOVAL``."""

    @functools.wraps(init)
    def __init__(self, *args, doc_id=None, **kwargs):
        if doc_id is not None:
            deprecated.keyword("corpora.documents.Document", "doc_id", "Document(id=...)")
            kwargs["id"] = doc_id
        init(self, *args, **kwargs)

    return __init__


Document.__init__ = _init_with_doc_id(Document.__init__)


@dataclass(frozen=True)
class Window:
    """Tokens a model reads at once, cut from document ``document``: ``ids`` (the model's special tokens included) and
    each token's character span in that document's text (``spans``; empty for ids given without text). ``index`` is
    the window's number in the document, ``start`` the document's first content token it holds, ``text`` the text it
    covers where an analysis reads the text too."""

    document: str
    ids: list[int]
    spans: list[tuple[int, int]] = field(default_factory=list)
    index: int = 0
    start: int = 0
    text: str = ""

    def __post_init__(self):
        if isinstance(self.ids, int) and not isinstance(self.index, int):  # the old order: document, index, start, ids, spans
            deprecated.warn("Window(document, index, start, ids, spans)",
                            "Window(document, ids, spans, index=..., start=...)", stacklevel=3)
            index, start, ids, spans = self.ids, self.spans, self.index, self.start
            for name, value in (("ids", ids), ("spans", spans), ("index", index), ("start", start)):
                object.__setattr__(self, name, value)


class Documents(list):
    """A list of ``Document`` that remembers where it was read from (``source``: ``corpora.user.input_record``)."""

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


def _kind(item) -> str:
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
    """The kind of what ``documents=`` holds (``KINDS``), read off its first item (``user_inputs`` checks them all)."""
    from pathlib import Path

    if isinstance(documents, (dict, str, Path)):
        return "texts"
    first = next(iter(documents), None)
    return "texts" if first is None else _kind(first)


def user_inputs(documents, analysis: str, accepts=("texts",)) -> Inputs:
    """Read what an analysis was given as ``documents=``: texts (strings, ``Document``s, a ``{id: text}`` dict or a path,
    as ``corpora.user.as_documents`` reads them), tokens (``Window``s or lists of ids) or NIAH prompts. One kind at a
    time, one the analysis ``accepts``; anything else is refused naming the analysis and the kind."""
    from pathlib import Path

    from corpora.user import as_documents
    from interp.base import InputError

    if isinstance(documents, (dict, str, Path)):
        kinds = {"texts"}
    else:
        documents = list(documents)
        if not documents:
            raise InputError(f"{analysis}: documents= holds nothing")
        kinds = {_kind(d) for d in documents}
    if len(kinds) > 1:
        raise InputError(f"{analysis}: documents= mixes {' and '.join(sorted(kinds))}; give one kind at a time")
    kind = kinds.pop()
    if kind not in accepts:
        what = {"texts": "texts", "tokens": "token ids", "prompts": "NIAH prompts"}.get(kind, f"{kind} objects")
        raise InputError(f"{analysis}: documents= holds {what}, and this analysis reads {' or '.join(accepts)}")
    if kind == "texts":
        return Inputs(kind, as_documents(documents))
    if kind == "tokens":
        items = [d if isinstance(d, Window) else Window(str(i), [int(v) for v in d]) for i, d in enumerate(documents)]
        for i, w in enumerate(items):
            if not w.ids:
                raise InputError(f"{analysis}: documents[{i}] holds no token ids")
        return Inputs(kind, items)
    return Inputs(kind, documents)
