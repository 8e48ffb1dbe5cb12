import unicodedata

import numpy as np

from corpora import chinese_reviews, english_wikipedia, people_daily, split_of
from corpora.streams import ByteStream


def test_people_daily_gold_words_rebuild_each_article():
    docs = people_daily()
    assert len(docs) > 3000
    for doc in docs[:200]:
        assert "".join(doc.words) == doc.text
        assert all(w for w in doc.words)
    # full-width digits are NFKC-normalised; headlines start new articles
    assert docs[0].words[:6] == ("迈向", "充满", "希望", "的", "新", "世纪")
    assert "１" not in "".join(d.text for d in docs[:50])
    assert all(unicodedata.normalize("NFKC", w) == w for w in docs[1].words)


def test_splits_are_by_document_stable_and_about_five_percent():
    for docs in (english_wikipedia(), people_daily(), chinese_reviews()):
        ids = [d.id for d in docs]
        assert len(set(ids)) == len(ids)
        share = np.mean([d.split == "validation" for d in docs])
        assert 0.03 < share < 0.07
    assert split_of("enwiki:Albert Einstein") == split_of("enwiki:Albert Einstein")


def test_byte_stream_puts_eos_after_every_document_and_samples_reproducibly():
    docs = english_wikipedia()[:5]
    stream = ByteStream(docs, seed=1)
    assert (stream.ids == 256).sum() == 5 and stream.ids[-1] == 256
    assert len(stream) == sum(len(d.text.encode()) for d in docs) + 5
    a = stream.windows(np.random.default_rng(3), 4, 50)
    b = stream.windows(np.random.default_rng(3), 4, 50)
    assert a.shape == (4, 50) and (a == b).all()
