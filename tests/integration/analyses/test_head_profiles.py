import numpy as np
import pandas as pd
import pytest
import torch

from analyses.head_profiles import head_profiles
from corpora.niah import PARTS, niah_samples
from interp.attention import current_query_rows
from tests.repo_helpers import tiny_repo


def _plant(model, layer, seq, needle):
    """Layer ``layer``: head 0 attends only to the previous token, head 1 only to the first token, and head 2,
    on the NIAH prompt ``seq``, puts all its weight on the needle token that the row is about to produce."""
    seen = {}
    handle = model.register_forward_pre_hook(lambda mod, args: seen.__setitem__("ids", args[0]))

    def hook(pattern, hook):
        ids = torch.as_tensor(seen["ids"])[0].tolist()
        rows = current_query_rows()
        rows = torch.arange(pattern.shape[-2]) if rows is None else rows.cpu()
        p = pattern.clone()
        for j, q in enumerate(rows.tolist()):
            p[0, 0, j] = 0
            p[0, 0, j, max(q - 1, 0)] = 1
            p[0, 1, j] = 0
            p[0, 1, j, 0] = 1
            if ids[: len(seq)] == seq and q + 1 < len(ids):
                where = [k for k in needle if ids[k] == ids[q + 1]]
                if where:
                    p[0, 2, j] = 0
                    p[0, 2, j, where[0]] = 1
        return p

    model.add_hook(f"blocks.{layer}.attn.hook_pattern", hook)
    return handle


def test_planted_heads_are_classified_as_planted():
    model = tiny_repo("rope")
    samples = niah_samples(model.tokenizer, 2, 300, seed=3, preamble=False)
    s = samples[0]
    needle = list(np.flatnonzero(s.parts == PARTS.index("needle")))
    handle = _plant(model, 1, list(s.token_ids) + list(s.answer_ids), needle)
    try:
        df = head_profiles(model, n_docs=2, length=128, max_rows=64, documents=[s])
    finally:
        handle.remove()
        model.reset_hooks()
    g = df.set_index(["layer", "head"])
    assert g.loc[(1, 0), "previous_token_mass"] == pytest.approx(1.0) and g.loc[(1, 0), "group"] == "previous-token"
    assert g.loc[(1, 1), "first_token_mass"] == pytest.approx(1.0) and g.loc[(1, 1), "group"] == "sink"
    assert g.loc[(1, 2), "retrieval_score"] == pytest.approx(1.0) and g.loc[(1, 2), "group"] == "retrieval"
    assert g.loc[(1, 2), "needle_mass"] > 0.8  # every answer row but the one producing a token the needle lacks
    others = df[~((df.layer == 1) & df["head"].isin([0, 1, 2]))]
    assert (others["retrieval_score"] < 0.5).all() and (others["previous_token_mass"] < 0.5).all()
    assert (df["position_range"] == df["length"] - 1).all()  # integer RoPE: d = N - 1
    assert df["depth"].tolist() == [l / 2 for l in df["layer"]]


def test_head_profiles_of_six_families_in_one_call(tmp_path):
    from poslens.run.execute import run_analysis

    names = ["repo-small", "rope-small", "increments-per-layer", "dstg-small", "smollm2", "minilm"]
    result = run_analysis("head-profiles", names, tmp_path, options=dict(n_docs=1, length=48, max_rows=16,
                                                                        niah_prompts=1, niah_tokens=224))
    df = result.table
    assert list(dict.fromkeys(df["model"])) == names
    per = df.groupby("model")
    assert (per["depth"].min() == 0).all() and (per["depth"].max() == 1).all()
    causal = df["model"].isin(names[:3] + ["smollm2"])
    assert df[causal]["retrieval_score"].notna().all() and df[~causal]["needle_mass"].isna().all()
    assert df[df.model == "dstg-small"][["influence_ap", "influence_sem", "influence_rp"]].sum(1).round(6).eq(1).all()
    assert df[df.model != "dstg-small"]["influence_ap"].isna().all()
    assert df[df.model.isin(["dstg-small", "minilm"])]["position_range"].isna().all()
    assert (df[df.model == "rope-small"]["position_range"] == 47).all()
    for col in ("previous_token_mass", "first_token_mass", "local_mass"):
        assert df[col].between(0, 1 + 1e-5).all()
    assert df.groupby("model").size().to_dict() == {m: n for m, n in zip(names, [16, 16, 16, 16, 30 * 9, 6 * 12])}
    from figures.head_profiles import figure

    fig = figure(df)  # one normalised-depth axis: a 4-layer and a 30-layer model both span [0, 1]
    spans = {t.legendgroup: (min(t.x), max(t.x)) for t in fig.data if t.mode == "markers"}
    assert spans == {m: (0.0, 1.0) for m in names}
    assert (tmp_path / "head-profiles.html").exists() and (tmp_path / "head-profiles.csv").exists()


def test_attention_mass_figure_uses_normalised_depth_for_models_of_different_depth():
    from figures.attention_mass import figure

    def table(model, n_layers):
        rows = [dict(model=model, mode="teacher", layer=l, head=0, part=p, mean_per_token=0.1, total_share=l / 10,
                     accuracy=1.0, n_docs=1) for l in range(n_layers) for p in ("needle", "query", "rest")]
        rows += [dict(model=model, mode="teacher", layer="all", head="all", part=p, mean_per_token=0.1, total_share=0.1,
                      accuracy=1.0, n_docs=1) for p in ("needle", "query", "rest")]
        return pd.DataFrame(rows)

    fig = figure(pd.concat([table("a", 4), table("b", 30)]))
    lines = [t for t in fig.data if t.type == "scatter"]
    assert [max(t.x) for t in lines] == [1.0, 1.0] and len(lines[1].x) == 30
    same = figure(pd.concat([table("a", 4), table("b", 4)]))
    assert [max(t.x) for t in same.data if t.type == "scatter"] == [3, 3]


def test_needle_mass_equals_attention_mass_teacher_share_and_bad_options_are_named():
    from analyses.attention_mass import attention_mass

    model = tiny_repo("repo")
    samples = niah_samples(model.tokenizer, 2, 260, seed=5, preamble=False)
    hp = head_profiles(model, n_docs=1, length=64, max_rows=8, documents=samples).set_index(["layer", "head"])
    am = attention_mass(model, documents=samples, modes=("teacher",))
    am = am[(am.part == "needle")
            & (am.layer.astype(str) != "all")].astype({"layer": int, "head": int}).set_index(["layer", "head"])
    np.testing.assert_allclose(hp["needle_mass"], am.loc[hp.index, "total_share"], rtol=1e-5)
    with pytest.raises(ValueError, match=r"niah_tokens 2000: longer than tiny-repo allows "
                                         r"\(max_seq_len=1200 less 16 for the answer\)"):
        head_profiles(model, niah_tokens=2000)
    with pytest.raises(ValueError, match="local_window 0: must be at least 1"):
        head_profiles(model, local_window=0)
