"""Every analysis that reads documents takes the user's: planted structure in user text is recovered."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from analyses.attention_mass import attention_mass
from analyses.kl_ablation import kl_ablation
from analyses.loss_neutrality import loss_neutrality
from analyses.niah_accuracy import niah_accuracy
from analyses.position_probes import position_probes
from analyses.positions import position_patterns, position_ranges
from analyses.registry import OptionError
from corpora.niah import niah_samples
from corpora.user import read_documents, token_windows
from interp.base import InputError
from tests.encoder_helpers import tiny_encoder
from tests.helpers import tiny_model
from tests.repo_helpers import tiny_repo

TEXT = ("The river runs past the old mill. Children play on the bank in summer. " * 8).strip()


@pytest.fixture
def files(tmp_path):
    txt = tmp_path / "story.txt"
    txt.write_text(TEXT, encoding="utf-8")
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(json.dumps({"id": f"d{i}", "text": TEXT[: 100 + 60 * i]}) for i in range(3)) + "\n",
                     encoding="utf-8")
    return txt, jsonl


def test_position_ranges_on_user_files_give_rope_ranges_per_window(files):
    model = tiny_repo("nope")  # layer 0 integer RoPE, later layers NoPE (position 0)
    for path in files:
        docs = read_documents(path)
        df = position_ranges(model, documents=docs, length=128)
        windows = token_windows(model.tokenizer, docs, 128)
        assert df["context"].nunique() == len(windows) > len(docs)  # long documents were split, not cut
        assert df.groupby("document")["n_tokens"].sum().div(model.n_heads * model.n_layers).to_dict() == {
            d.id: len(model.tokenizer.encode(d.text)) + sum(w.document == d.id for w in windows) for d in docs}
        l0 = df[df.layer == 0]
        assert (l0["d"] == l0["n_tokens"] - 1).all() and (df[df.layer > 0]["d"] == 0).all()


def test_position_patterns_on_user_jsonl_are_the_token_index_for_rope(files):
    model = tiny_repo("rope")
    df = position_patterns(model, documents=read_documents(files[1]), length=128, layers=[1], heads=[2])
    assert set(df["document"]) == {"d0", "d1", "d2"}
    for _, g in df.groupby(["document", "window"]):
        np.testing.assert_allclose(g["position"], np.arange(len(g)), atol=1e-4)
        assert g["n_jumps"].iloc[0] == 0


def test_kl_ablation_on_user_text_equals_the_same_tokens_passed_directly(files):
    from interp.tokenizers import WordPieceTokenizer

    model = tiny_encoder("disentangled", vocab_size=30522, max_length=48)
    model.tokenizer = WordPieceTokenizer()
    docs = read_documents(files[0])
    got = kl_ablation(model, documents=docs, length=48)
    windows = token_windows(model.tokenizer, docs, 48)
    assert len(windows) > 1 and got["n_docs"].iloc[0] == len(windows)
    direct = kl_ablation(model, documents=[w.ids for w in windows])
    cols = ["kl_ap", "kl_sem", "kl_rp", "influence_ap", "influence_sem", "influence_rp"]
    np.testing.assert_allclose(got[cols].to_numpy(), direct[cols].to_numpy(), rtol=1e-6)
    assert (got["group"] == direct["group"]).all()
    single = kl_ablation(model, documents=[windows[0].ids])  # and they are not all the same document
    assert not np.allclose(single[cols].to_numpy(), got[cols].to_numpy())


def _segments_of(ids):
    """Segment index per token of byte ids, by the probes' rule (a '. ' ends a segment)."""
    seg, out, pending = 0, [], False
    for i, t in enumerate(ids):
        if pending and t != 32:
            seg, pending = seg + 1, False
        out.append(seg)
        if t == 46 and (i + 1 == len(ids) or ids[i + 1] == 32):
            pending = True
    return out


def test_position_probes_recover_planted_segment_structure():
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    docs = [" ".join(" ".join(rng.choice(words, rng.integers(2, 6))) + "." for _ in range(rng.integers(2, 7)))
            for _ in range(30)]
    model = tiny_model("per-layer", max_seq_len=256)
    seen = {}
    handle = model.register_forward_pre_hook(lambda mod, args: seen.__setitem__("ids", args[0]))

    def plant(t, hook):  # layer 1 writes the segment index into dimension 0
        t = t.clone()
        for row in range(t.shape[0]):
            t[row, :, 0] = torch.tensor(_segments_of(seen["ids"][row].tolist()), dtype=t.dtype) * 3.0
        return t

    model.add_hook("blocks.1.hook_resid_post", plant)
    try:
        df = position_probes(model, documents=docs, n_train=20, n_test=10, n_seeds=2, cv_folds=4)
    finally:
        handle.remove()
        model.reset_hooks()
    r2 = df.set_index(["layer", "subspace", "target", "control"])["r2_mean"]
    assert r2[1, "full", "segment", "none"] > 0.999
    assert r2[0, "full", "segment", "none"] < 0.9  # layer 0 was not planted
    assert r2[1, "full", "segment", "shuffled"] < 0.5
    with pytest.raises(InputError, match="document '0' has 5.. tokens"):
        position_probes(model, documents=["x. " * 180], n_train=1, n_test=1, cv_folds=2)


def test_loss_on_a_user_file_equals_the_hand_computed_loss(tmp_path):
    model = tiny_model("per-layer", max_seq_len=64)
    path = tmp_path / "short.txt"
    path.write_text("Learned positions, small text.", encoding="utf-8")
    ids = torch.tensor([model.tokenizer.encode(path.read_text(encoding="utf-8"), doc_start=True)])
    with torch.no_grad():
        hand = F.cross_entropy(model(ids[:, :-1])[0].float(), ids[0, 1:]).item()
    df = loss_neutrality(model, documents=read_documents(path), length=48, n_boot=50)
    assert df["loss"].iloc[0] == pytest.approx(hand, rel=1e-6) and df["n_bytes"].iloc[0] == ids.shape[1] - 1
    long = tmp_path / "long.txt"
    long.write_text(TEXT[:150], encoding="utf-8")  # 151 ids: windows of 17 ids starting every 16
    ids = model.tokenizer.encode(TEXT[:150], doc_start=True)
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, 16):
            w = torch.tensor([ids[start : start + 17]])
            total += F.cross_entropy(model(w[:, :-1])[0], w[0, 1:], reduction="sum").item()
    df = loss_neutrality(model, documents=read_documents(long), length=16, n_boot=50)
    assert df["n_docs"].iloc[0] == 10 and df["n_bytes"].iloc[0] == 150
    assert df["loss"].iloc[0] == pytest.approx(total / 150, rel=1e-6)


def test_attention_mass_uses_the_samples_own_length():
    model = tiny_repo("repo")
    samples = niah_samples(model.tokenizer, 2, 300, seed=0, preamble=False)
    model.max_seq_len = 340  # 512 + 16 would not fit: the samples must be what is checked
    df = attention_mass(model, documents=samples, modes=("teacher",))
    assert (df["length"] == max(len(s.token_ids) for s in samples)).all()
    model.max_seq_len = len(samples[0].token_ids) + 5
    with pytest.raises(ValueError, match=r"samples\[0\]: .* do not fit"):
        attention_mass(model, documents=samples)


def test_niah_haystack_from_user_documents():
    model = tiny_repo("repo")
    mine = ["Zebras graze quietly near the purple lake. Owls watch from the birch trees."]
    s = niah_samples(model.tokenizer, 1, 300, seed=0, haystack=mine, preamble=False)[0]
    assert "Zebras graze quietly" in s.text and "Owls watch" in s.text
    df = niah_accuracy(model, documents=mine, lengths=(300,), n_docs=2)
    assert df["haystack"].iloc[0] == "input" and df["n_docs"].iloc[0] == 2
    df = niah_accuracy(model, documents=[s])
    assert df["length"].iloc[0] == len(s.token_ids)


def test_cli_input_runs_on_user_jsonl_and_records_it(files, tmp_path, capsys):
    from corpora.user import input_record
    from poslens.cli import main

    out = tmp_path / "out"
    assert main(["analyze", "position-ranges", "--model", "rope-small", "--input", str(files[1]),
                 "--length", "64", "--out", str(out)]) == 0
    import pandas as pd

    df = pd.read_csv(out / "position-ranges.csv")
    assert set(df["document"]) == {"d0", "d1", "d2"} and (df["d"] == df["n_tokens"] - 1).all()  # RoPE: d = N - 1
    prov = json.loads((out / "position-ranges.provenance.json").read_text())
    assert prov["arguments"]["documents"] == dict(input=input_record(files[1]), n_documents=3)
    # what ran: the built-in corpus' size and source did not, and the record says so
    assert prov["arguments"]["n_docs"] is None and prov["arguments"]["source"] is None
    assert prov["arguments"]["not_applied"] == {"n_docs": "replaced by documents", "source": "replaced by documents"}
    assert main(["analyze", "position-ranges", "--model", "rope-small", "--input", str(files[1]), "--n-docs",
                 "8", "--out", str(tmp_path / "o3")]) == 2
    assert "--n-docs 8: does not apply with your documents (--input)" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{oops}\n', encoding="utf-8")
    assert main(["analyze", "kl-ablation", "--model", "dstg-small", "--input", str(bad),
                 "--out", str(tmp_path / "o2")]) != 0
    assert "bad.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_word_boundaries_on_user_chinese_recover_planted_jieba_boundaries(tmp_path):
    from analyses.word_boundaries import char_windows, jieba_words, lead_bytes, word_boundaries, word_final_indices
    from tests.planting import planted_increments

    texts = ["人工智能是计算机科学的一个分支。研究人员希望机器能够理解语言。" * 3, "今天的天气很好，我们去公园散步吧。"]
    path = tmp_path / "zh.jsonl"
    path.write_text("\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in texts) + "\n", encoding="utf-8")
    table = {}
    for text in texts:
        ends = word_final_indices(jieba_words(text))
        for w in char_windows(text, 64):
            values = np.ones(len(w.ids))
            for i in range(1, len(w.text)):
                if w.spans[0][0] + i - 1 in ends:
                    values[lead_bytes(w)[i]] = 2.0
            table[tuple(w.ids)] = values
    model = tiny_model("per-layer", max_seq_len=128)
    with planted_increments(model, "blocks.0.hook_delta", lambda ids: table[tuple(ids)]):
        with pytest.raises(ValueError, match=r"n_docs 1: does not apply with your documents \(--input\)"):
            word_boundaries(model, documents=read_documents(path), length=64, n_docs=1, n_boot=20)
        df = word_boundaries(model, documents=read_documents(path), length=64, n_boot=20)
    row = df.set_index(["layer", "reference"])
    assert set(df["reference"]) == {"jieba"}  # user text has no gold segmentation
    assert row.loc[("L0", "jieba"), "auc"] == 1.0 and row.loc[("L1", "jieba"), "auc"] < 0.9
    assert (df["n_docs"] == 2).all() and (df["n_gaps"] > 5).all()  # every document read


def test_char_spacing_input_is_recorded_by_path_size_and_sha256(tmp_path):
    from corpora.user import input_record
    from interp.loading import save
    from poslens.cli import main

    save(tiny_model("per-layer", max_seq_len=128), tmp_path / "m")
    txt = tmp_path / "mine.txt"
    txt.write_text("Ada Lovelace wrote notes.", encoding="utf-8")
    assert main(["analyze", "char-spacing", "--model", str(tmp_path / "m"), "--input", str(txt),
                 "--out", str(tmp_path / "o")]) == 0
    import pandas as pd

    df = pd.read_csv(tmp_path / "o" / "char-spacing.csv")
    assert set(df["text_id"]) == {"mine.txt"}
    prov = json.loads((tmp_path / "o" / "char-spacing.provenance.json").read_text())
    assert prov["arguments"]["documents"] == dict(input=input_record(txt), n_documents=1)


def test_documents_is_the_one_keyword_and_the_old_ones_are_refused_by_name(files):
    """documents= takes every kind (texts, token ids, NIAH prompts); the unreleased tree's other names for it (docs=,
    token_ids=, samples=, texts=) are refused before any work, naming the option to use."""
    from analyses.char_spacing import char_spacing

    model = tiny_repo("rope")
    ids = [model.tokenizer.encode(TEXT[:200], doc_start=True)]
    assert position_ranges(model, documents=ids, length=128)["n_tokens"].iloc[0] == len(ids[0])
    s = niah_samples(model.tokenizer, 1, 300, seed=2, preamble=False)
    inc = tiny_model("per-layer", max_seq_len=256)
    for call, old in ((lambda: position_ranges(model, token_ids=ids, length=128), "token_ids"),
                      (lambda: niah_accuracy(model, samples=s), "samples"),
                      (lambda: char_spacing(inc, texts={"x": "ab c"}), "texts"),
                      (lambda: kl_ablation(tiny_encoder("disentangled"), docs=ids), "docs")):
        with pytest.raises(OptionError, match=rf"no option '{old}'.*documents"):
            call()
    with pytest.raises(InputError, match="documents= mixes texts and tokens"):
        position_ranges(model, documents=["a text", [1, 2, 3]], length=128)
    with pytest.raises(InputError, match="documents= holds NIAH prompts, and this analysis reads texts or tokens"):
        position_ranges(model, documents=s, length=128)


def test_input_is_read_checked_and_bound_once_on_its_way_to_the_windows(files, tmp_path, monkeypatch):
    """--input PATH: read_documents checks the file; the options are bound once per model; the documents that reach
    the windows are the very object read (nothing read or checked again), and provenance records the file."""
    import corpora.contexts
    import corpora.user
    from analyses.registry import Analysis, get
    from poslens.run.execute import run_analysis

    calls = {"bind": 0, "as_documents": 0}
    seen = []
    # a run binds through bind_checked (its options were checked once by the plan: poslens.run.plan)
    bind, as_documents, windows = Analysis.bind_checked, corpora.user.as_documents, corpora.contexts.analysis_windows

    def counting_bind(self, *a, **k):
        calls["bind"] += 1
        return bind(self, *a, **k)

    def counting_as_documents(items, *a, **k):
        calls["as_documents"] += 1
        out = as_documents(items, *a, **k)
        assert out is items  # already read: given back, not checked again
        return out

    def spying_windows(model, analysis, documents=None, **k):
        seen.append(documents)
        return windows(model, analysis, documents, **k)

    monkeypatch.setattr(Analysis, "bind_checked", counting_bind)
    monkeypatch.setattr(corpora.user, "as_documents", counting_as_documents)
    monkeypatch.setattr(corpora.contexts, "analysis_windows", spying_windows)
    options = get("sink-rate").parse_cli({"documents": str(files[1])})
    run_analysis("sink-rate", [tiny_repo("rope")], tmp_path / "out", options={**options, "lengths": (32,)},
                 formats=("html",))
    assert calls == {"bind": 1, "as_documents": 1} and seen == [options["documents"]]
    assert seen[0] is options["documents"] and [d.id for d in seen[0]] == ["d0", "d1", "d2"]
    record = json.loads((tmp_path / "out" / "sink-rate.provenance.json").read_text(encoding="utf-8"))
    assert record["arguments"]["documents"]["input"]["path"] == str(files[1])
