"""The user's own documents: read from a file or folder, checked, and cut into model-sized windows.

- ``read_documents(path)``: a ``.txt`` file is one document; a ``.jsonl`` file one document per line
  (a ``text`` field, an optional ``id``; the default id is the line number); a directory one document per
  ``.txt`` file, in sorted order. Errors name the file (and line).
- ``as_documents(items)``: strings, ``Document`` objects or a ``{id: text}`` dict -> documents (strings get ids "0",
  "1", ...). The types are ``corpora.documents``'.
- ``user_inputs(documents, analysis, accepts)``: what an analysis' ``documents=`` holds, read and checked: texts (as
  ``as_documents``), token ids or NIAH prompts, one kind at a time, one the analysis accepts.
- ``input_record(path)``: path, size in bytes and sha256, for provenance.
- ``token_windows(tokenizer, documents, max_tokens)``: each document tokenised once and split into
  consecutive non-overlapping windows of at most ``max_tokens`` tokens; every window starts with the
  tokenizer's document-start token(s) (and an encoder's ends with [SEP]), so each is a well-formed
  input. Nothing is dropped: the last window holds the remainder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from corpora.documents import Document, Documents, Inputs, Window, kind_of
from interp.base import InputError


def _text(path: Path, data: bytes, line: int | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        where = f"{path}:{line}" if line is not None else str(path)
        raise InputError(f"{where}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") from None


def _jsonl(path: Path) -> list[Document]:
    docs, seen = [], set()
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        line = _text(path, raw, n)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        if not isinstance(record, dict) or "text" not in record:
            raise InputError(f"{path}:{n}: a line needs a 'text' field")
        if not isinstance(record["text"], str):
            raise InputError(f"{path}:{n}: 'text' must be a string, not {type(record['text']).__name__}")
        doc_id = str(record.get("id", n))
        if doc_id in seen:
            raise InputError(f"{path}:{n}: duplicate id {doc_id!r}")
        seen.add(doc_id)
        docs.append(Document(doc_id, record["text"]))
    return docs


def read_documents(path) -> Documents:
    """Documents from a ``.txt`` file, a ``.jsonl`` file or a directory of ``.txt`` files."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".txt")
        if not files:
            raise InputError(f"{path}: the directory holds no .txt files")
        docs = [Document(p.name, _text(p, p.read_bytes())) for p in files]
    elif path.suffix == ".txt":
        docs = [Document(path.name, _text(path, path.read_bytes()))]
    elif path.suffix == ".jsonl":
        docs = _jsonl(path)
    else:
        raise InputError(f"{path}: unknown suffix {path.suffix!r} (use .txt, .jsonl or a directory of .txt files)")
    for d in docs:
        if not d.text.strip():
            raise InputError(f"{path}: document {d.id!r} is empty")
    if not docs:
        raise InputError(f"{path}: no documents")
    out = Documents(docs)
    out.source = input_record(path)
    return out


def input_record(path) -> dict:
    """``{path, bytes, sha256}`` of a file, or of a directory's ``.txt`` files (names and contents, sorted)."""
    path = Path(path)
    h = hashlib.sha256()
    if path.is_dir():
        size = 0
        for p in sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".txt"):
            data = p.read_bytes()
            h.update(p.name.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
            size += len(data)
    else:
        data = path.read_bytes()
        h.update(data)
        size = len(data)
    return dict(path=str(path), bytes=size, sha256=h.hexdigest())


def as_documents(items, what: str = "documents") -> Documents:
    """Strings or ``Document`` objects, a ``{id: text}`` dict, or a path -> checked ``Documents`` (``Documents`` already
    read come back as they are)."""
    if isinstance(items, Documents) and all(isinstance(d, Document) for d in items) and items:
        return items
    if isinstance(items, Path):
        return read_documents(items)
    if isinstance(items, str):
        raise InputError(f"{what}= expects a list of strings or Document objects (use read_documents(path) for a file)")
    if isinstance(items, dict):
        items = [Document(str(k), v) if isinstance(v, str) else v for k, v in items.items()]
    docs = []
    for i, item in enumerate(items):
        if isinstance(item, Document):
            docs.append(item)
        elif isinstance(item, str):
            docs.append(Document(str(i), item))
        else:
            raise InputError(f"{what}[{i}] is a {type(item).__name__}, not a string or Document")
        if not docs[-1].text.strip():
            raise InputError(f"{what}[{i}] ({docs[-1].id!r}) is empty")
    if not docs:
        raise InputError(f"{what}= holds no documents")
    out = Documents(docs)
    out.source = getattr(items, "source", None)
    return out


def documents_record(docs) -> dict:
    """What provenance keeps of what ``documents=`` held: the input file's record, or the kind and a hash of the texts,
    token ids or prompts given in Python."""
    source = getattr(docs, "source", None)
    if source is not None:
        return dict(input=source, n_documents=len(docs))
    items = list(docs.values()) if isinstance(docs, dict) else list(docs)
    kind = kind_of(items[0]) if items else "texts"
    h = hashlib.sha256()
    for d in items:
        if kind == "tokens":
            data = " ".join(map(str, d.ids if isinstance(d, Window) else d))
        else:
            data = d.text if hasattr(d, "text") else str(d)
        h.update(hashlib.sha256(data.encode("utf-8")).digest())
    return dict(input="python", kind=kind, n_documents=len(items), sha256=h.hexdigest())


def user_inputs(documents, analysis: str, accepts=("texts",)) -> Inputs:
    """Read what an analysis was given as ``documents=``: texts (strings, ``Document``s, a ``{id: text}`` dict or a
    path, as ``as_documents`` reads them), tokens (``Window``s or lists of ids) or NIAH prompts. One kind at a time, one
    the analysis ``accepts``; anything else is refused naming the analysis and the kind. ``Documents`` already read (by
    ``read_documents`` for ``--input``) are not checked again."""
    if isinstance(documents, (dict, str, Path)):
        kinds = {"texts"}
    else:
        documents = list(documents) if not isinstance(documents, Documents) else documents
        if not documents:
            raise InputError(f"{analysis}: documents= holds nothing")
        kinds = {kind_of(d) for d in documents}
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


def _frame(tokenizer, text: str):
    """(prefix ids, content ids, content spans, suffix ids) of ``text`` in the model's input format."""
    if hasattr(tokenizer, "cls_id"):
        enc = tokenizer.encode_with_spans(text)
        return [enc.ids[0]], enc.ids[1:-1], enc.spans[1:-1], [enc.ids[-1]]
    full = tokenizer.encode_with_spans(text, doc_start=True)
    bare = tokenizer.encode_with_spans(text)
    k = len(full.ids) - len(bare.ids)
    return full.ids[:k], full.ids[k:], full.spans[k:], []


def encode_document(tokenizer, text: str):
    """The whole document as the model would read it (specials included), with spans."""
    prefix, ids, spans, suffix = _frame(tokenizer, text)
    end = len(text)
    return prefix + ids, [(0, 0)] * len(prefix) + spans + [(end, end)] * len(suffix), suffix


def token_windows(tokenizer, documents, max_tokens: int) -> list[Window]:
    """Every document split into consecutive windows of at most ``max_tokens`` tokens, specials included."""
    out = []
    for doc in documents:
        prefix, ids, spans, suffix = _frame(tokenizer, doc.text)
        room = max_tokens - len(prefix) - len(suffix)
        if room < 1:
            raise InputError(f"windows of {max_tokens} tokens leave no room for text")
        if not ids:
            raise InputError(f"document {doc.id!r} has no tokens")
        for w, start in enumerate(range(0, len(ids), room)):
            chunk, cspans = ids[start : start + room], spans[start : start + room]
            a, b = cspans[0][0], cspans[-1][1]
            out.append(Window(doc.id, prefix + chunk + suffix,
                              [(a, a)] * len(prefix) + list(cspans) + [(b, b)] * len(suffix), index=w, start=start))
    return out


def longer_than(tokenizer, documents, max_tokens: int, analysis: str) -> None:
    """Refuse documents that do not fit in ``max_tokens`` tokens (for analyses whose targets span a document)."""
    for doc in documents:
        n = len(encode_document(tokenizer, doc.text)[0])
        if n > max_tokens:
            raise InputError(f"{analysis}: document {doc.id!r} has {n} tokens, more than {max_tokens}; "
                             "split it into shorter documents (this analysis reads each document whole)")

