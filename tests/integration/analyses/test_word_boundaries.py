import numpy as np
import pytest
from sklearn.metrics import precision_score, recall_score, roc_auc_score

from analyses.word_boundaries import (
    char_windows,
    gap_table,
    lead_bytes,
    validation_documents,
    word_boundaries,
    word_final_indices,
)
from corpora import Document
from tests.helpers import tiny_model
from tests.planting import planted_increments


def test_windows_are_character_aligned_contiguous_and_bounded():
    text = "人工智能是计算机科学的一个分支。Marie Curie 说：“科学”。" * 7
    windows = list(char_windows(text, 40))
    assert "".join(w.text for w in windows) == text
    assert all(len(w.ids) <= 40 for w in windows)
    for w in windows:
        assert bytes(w.ids).decode("utf-8") == w.text
        assert [w.ids[b] for b in lead_bytes(w)] == [c.encode()[0] for c in w.text]
    assert [w.spans[0][0] for w in windows] == list(np.cumsum([0] + [len(w.text) for w in windows[:-1]]))


def test_gap_labels_and_lead_bytes_on_a_hand_checked_document():
    doc = Document("t:1", "人工智能是计算机科学的，一个分支", "test",
                   ("人工智能", "是", "计算机", "科学", "的", "，", "一个", "分支"))
    gaps = gap_table([doc], max_bytes=512, max_gaps=10)
    # CJK-CJK pairs: 人工 工智 智能 能是 是计 计算 算机 机科 科学 学的 | (的， and ，一 are skipped) | 一个 个分 分支
    assert list(gaps.labels["gold"]) == [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0]
    assert list(gaps.lead_byte) == [3 * i for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15)]
    assert word_final_indices(["ab", "c"]) == {1, 2}


def _gold_plant(docs, max_bytes, noise=False):
    """Increment 2 at the lead byte of every character that starts a gold word, 1 elsewhere."""
    table = {}
    for doc in docs:
        ends = word_final_indices(doc.words)
        for w in char_windows(doc.text, max_bytes):
            values = np.ones(len(w.ids))
            for i in range(1, len(w.text)):
                if w.spans[0][0] + i - 1 in ends:
                    values[lead_bytes(w)[i]] = 2.0
            table[tuple(w.ids)] = values
    rng = np.random.default_rng(0)
    return lambda ids: rng.uniform(0.5, 2, len(ids)) if noise else table[tuple(ids)]


@pytest.fixture(scope="module")
def docs():
    return validation_documents(40)


def test_planted_gold_boundaries_give_auc_one_in_that_layer_only(docs):
    model = tiny_model("per-layer", max_seq_len=512)
    with planted_increments(model, "blocks.1.hook_delta", _gold_plant(docs, 256)):
        df = word_boundaries(model, documents=docs, length=256, n_boot=50)
    row = df.set_index(["layer", "reference"])
    assert row.loc[("L1", "gold"), "auc"] == 1.0
    assert row.loc[("L1", "gold"), "ci_low"] == 1.0
    assert 0.85 < row.loc[("L1", "jieba"), "auc"] < 0.99  # jieba disagrees with gold on some gaps
    assert row.loc[("L0", "gold"), "auc"] < 0.7
    gaps = gap_table(docs, 256, np.inf)  # documents given are read whole
    jieba = row.loc[("jieba", "gold")]
    assert jieba["auc"] == pytest.approx(roc_auc_score(gaps.labels["gold"], gaps.labels["jieba"]), abs=1e-12)
    assert jieba["precision"] == pytest.approx(precision_score(gaps.labels["gold"], gaps.labels["jieba"]))
    assert jieba["recall"] == pytest.approx(recall_score(gaps.labels["gold"], gaps.labels["jieba"]))
    assert set(df.columns) >= {"layer", "reference", "auc", "ci_low", "ci_high", "n_gaps", "positive_rate"}
    assert (df["n_gaps"] >= 6000).all()


def test_planted_noise_gives_chance(docs):
    model = tiny_model("per-layer", max_seq_len=512)
    with planted_increments(model, "blocks.0.hook_delta", _gold_plant(docs, 256, noise=True)):
        df = word_boundaries(model, documents=docs, length=256, n_boot=50)
    auc = df.set_index(["layer", "reference"]).loc[("L0", "gold"), "auc"]
    assert abs(auc - 0.5) < 0.03


def test_stops_after_the_document_that_reaches_max_gaps(docs):
    gaps = gap_table(docs, 512, 2000)
    before = gap_table(docs[: gaps.n_read - 1], 512, 10**9)
    assert len(before.lead_byte) < 2000 <= len(gaps.lead_byte)


def test_window_longer_than_the_model_allows():
    with pytest.raises(ValueError, match="length 512: longer than .* allows \\(max_seq_len=64\\)"):
        word_boundaries(tiny_model("per-layer"), length=512)


def test_models_without_increments_are_refused():
    with pytest.raises(TypeError, match="needs a model with learned increments"):
        word_boundaries(tiny_model("rope", max_seq_len=512))


def test_only_documents_with_gaps_count_and_a_missing_interval_says_why():
    """Five documents of which one has gaps between CJK characters: the AUC rests on one document, which the table
    says (n_docs 1 of n_docs_read 5), and its interval is missing for a stated reason."""
    docs = [Document(f"t:{i}", "plain English only, no CJK here", "test", None) for i in range(4)]
    docs.insert(2, Document("t:cjk", "人工智能是计算机科学的一个分支", "test",
                            ("人工智能", "是", "计算机", "科学", "的", "一个", "分支")))
    model = tiny_model("per-layer", max_seq_len=256)
    df = word_boundaries(model, documents=docs, length=128, n_boot=20)
    assert (df["n_docs"] == 1).all() and (df["n_docs_read"] == 5).all()
    assert df["ci_low"].isna().all() and df["ci_high"].isna().all()
    assert df["ci_missing"].str.contains("only 1 of the 5 documents read has gaps").all()
    two = word_boundaries(model, documents=docs + [docs[2]], length=128, n_boot=20)
    assert (two["n_docs"] == 2).all() and (two["n_docs_read"] == 6).all()
    assert (two["ci_missing"] == "").all() == two["ci_low"].notna().all()
