import unicodedata

import pytest

from interp.package_files import package_file
from interp.tokenizers import TokenizerError, WordPieceTokenizer

SENTENCES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Unaffable tokenization of DSTG-NeoBERT's positional streams (2026).",
    "Café Müller naïve résumé — ÉCOLE",
    "東京は日本の首都です。 and 北京",
    "numbers 3.14159 and 1,000,000; emails a.b@c.org\ttabs\nnew lines",
    "antidisestablishmentarianism supercalifragilisticexpialidocious",
]


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer()


@pytest.fixture(scope="module")
def references():
    """transformers' fast BERT tokenizer and its pure-Python legacy one (independent of the Rust library).

    transformers 5 made ``BertTokenizerFast`` an alias of ``BertTokenizer``, which takes ``vocab=`` and silently
    ignores ``vocab_file=`` (it then builds an empty vocabulary): pass ``vocab=``.
    """
    from transformers import BertTokenizerFast
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    vocab = str(package_file(*WordPieceTokenizer.VOCAB))
    return BertTokenizerFast(vocab=vocab, do_lower_case=True), BertTokenizerLegacy(vocab_file=vocab, do_lower_case=True)


@pytest.mark.parametrize("text", SENTENCES)
def test_ids_equal_transformers_bert_tokenizers(tok, references, text):
    fast, legacy = references
    ids = tok.encode(text)
    assert ids == fast(text)["input_ids"] == legacy(text)["input_ids"]
    assert len(ids) > 4 and ids.count(100) <= 1  # a real vocabulary: at most the one unknown CJK character


def _fold(s: str) -> str:
    """Lower-case and strip accents, as uncased BERT does to the text a token covers."""
    return "".join(c for c in unicodedata.normalize("NFD", s.lower()) if unicodedata.category(c) != "Mn")


@pytest.mark.parametrize("text", SENTENCES)
def test_spans_map_back_to_the_text(tok, text):
    enc = tok.encode_with_spans(text)
    assert len(enc.ids) == len(enc.spans)
    assert enc.spans[0] == (0, 0) and enc.spans[-1] == (len(text), len(text))
    pieces = tok.token_strings(enc.ids)[1:-1]
    for piece, (start, end) in zip(pieces, enc.spans[1:-1]):
        assert 0 <= start < end <= len(text)
        if piece != "[UNK]":
            assert _fold(text[start:end]) == piece.removeprefix("##"), (piece, text[start:end])
    starts = [s for s, _ in enc.spans[1:-1]]
    assert starts == sorted(starts)


def test_special_ids_and_wrapping(tok):
    assert (tok.cls_id, tok.sep_id, tok.mask_id, tok.pad_id, tok.vocab_size) == (101, 102, 103, 0, 30522)
    ids = tok.encode("Hello world", doc_start=True)
    assert ids == [101, 7592, 2088, 102] and tok.encode("Hello world") == ids  # doc_start changes nothing
    assert tok.token_strings(ids) == ["[CLS]", "hello", "world", "[SEP]"]
    assert tok.decode(ids) == "[CLS] hello world [SEP]"
    assert tok.decode(tok.encode("tokenization")[1:-1]) == "tokenization"
    assert tok.encode("   ") == [101, 102]  # whitespace only: no content tokens


def test_max_tokens_truncates_the_content_and_keeps_the_markers(tok):
    text = SENTENCES[1]
    full = tok.encode_with_spans(text)
    cut = tok.encode_with_spans(text, max_tokens=5)
    assert cut.ids == full.ids[:4] + [102] and len(cut.ids) == 5
    assert cut.spans[:4] == full.spans[:4] and cut.spans[-1] == (full.spans[3][1], full.spans[3][1])
    assert tok.encode(text, max_tokens=len(full.ids)) == full.ids
    assert tok.encode(text, max_tokens=2) == [101, 102]
    with pytest.raises(TokenizerError, match="max_tokens=1 leaves no room for"):
        tok.encode(text, max_tokens=1)


def test_empty_and_invalid_text(tok):
    with pytest.raises(TokenizerError, match="text is empty"):
        tok.encode("")
    with pytest.raises(TokenizerError, match="not valid UTF-8: byte 0xff at offset 2"):
        tok.encode(b"ab\xffcd")
    with pytest.raises(TokenizerError, match="undecodable byte"):
        tok.encode("ab\udcffcd")
    with pytest.raises(TokenizerError, match="must be a string, got int"):
        tok.encode(12)
    assert tok.encode(b"Hello world") == [101, 7592, 2088, 102]
