import numpy as np
import pytest
import torch

from analyses.attention_mass import PART_NAMES, answer_attention, attention_mass
from corpora.niah import niah_samples
from tests.repo_helpers import tiny_repo


def test_matches_a_full_pattern_computation():
    model = tiny_repo("repo")
    s = niah_samples(model.tokenizer, 1, 400, seed=0, preamble=False)[0]
    seq = s.token_ids + s.answer_ids
    _, cache = model.run_with_cache(torch.tensor([seq]), names_filter=lambda n: n.endswith("hook_pattern"))
    parts = np.concatenate([s.parts, np.full(len(s.answer_ids), -1)])
    rows = np.arange(len(s.token_ids) - 1, len(seq) - 1)
    got = answer_attention(model, s.token_ids, s.answer_ids, s.parts)
    for layer in range(model.n_layers):
        full = cache[f"blocks.{layer}.attn.hook_pattern"][0][:, rows]  # [head, rows, keys]
        for p, code in enumerate((0, 1, 2, -1)):
            expected = full[..., parts == code].sum(-1).mean(-1)
            torch.testing.assert_close(got[layer, :, p], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.sum(-1), torch.ones(model.n_layers, model.n_heads))


def test_streaming_holds_only_the_answer_rows_of_one_layer():
    model = tiny_repo("rope")
    s = niah_samples(model.tokenizer, 1, 600, seed=1, preamble=False)[0]
    shapes = []
    model.add_hook(lambda n: n.endswith("hook_pattern"), lambda t, hook: shapes.append(tuple(t.shape)))
    answer_attention(model, s.token_ids, s.answer_ids, s.parts)
    model.reset_hooks()
    assert shapes == [(1, 4, len(s.answer_ids), len(s.token_ids) + len(s.answer_ids))] * model.n_layers


def test_attention_forced_onto_the_needle_gives_needle_share_one():
    model = tiny_repo("repo")
    samples = niah_samples(model.tokenizer, 2, 400, seed=0, preamble=False)
    needle = {}

    def onto_needle(pattern, hook):
        out = torch.zeros_like(pattern)
        a, b = needle["span"]
        out[..., a:b] = 1.0 / (b - a)
        return out

    model.add_hook(lambda n: n.endswith("hook_pattern"), onto_needle)
    rows = []
    for s in samples:
        needle["span"] = s.span("needle")
        rows.append(attention_mass(model, documents=[s]))
    model.reset_hooks()
    for s, df in zip(samples, rows):
        agg = df[(df.layer == "all") & (df["mode"] == "teacher")].set_index("part")
        assert agg.loc["needle", "total_share"] == pytest.approx(1.0)
        assert agg.loc[["rest", "query", "other"], "total_share"].abs().max() < 1e-7
        a, b = s.span("needle")
        assert agg.loc["needle", "mean_per_token"] == pytest.approx(1.0 / (b - a))
    per_head = rows[0][(rows[0].layer != "all")]
    assert len(per_head) == 2 * model.n_layers * model.n_heads * len(PART_NAMES)


def test_context_longer_than_the_model_allows():
    with pytest.raises(ValueError, match="length 1190: longer than .* allows"):
        attention_mass(tiny_repo("repo"), n_docs=1, length=1190)
