"""Planted truth: attention patterns written into a tiny model's heads are what induction and sink-rate report."""

import re

import numpy as np
import pytest
import torch

from analyses.induction import induction
from analyses.sink_rate import sink_rate
from interp.controls import shuffled_weights
from tests.repo_helpers import tiny_repo

HALF = 40


@pytest.fixture
def model():
    return tiny_repo("rope")  # bytes, causal, with a start token: 2 layers x 4 heads


def _plant(model, layer, head, build):
    """Replace head ``head`` of ``layer``'s pattern by ``build(query_positions, n_keys)``."""
    def hook(pattern, hook):
        from interp.attention import current_query_rows

        rows = current_query_rows()
        q = torch.arange(pattern.shape[-2]) if rows is None else rows.cpu()
        pattern[:, head] = build(q, pattern.shape[-1]).to(pattern.dtype)
        return pattern
    return model.add_hook(f"blocks.{layer}.attn.hook_pattern", hook)


def _one_hot(q, n, key):
    p = torch.zeros(len(q), n)
    p[torch.arange(len(q)), key] = 1.0
    return p


def test_planted_induction_and_previous_token_heads_are_recovered(model):
    offset = 1  # the start token
    _plant(model, 1, 2, lambda q, n: _one_hot(q, n, torch.where(q >= offset + HALF, q - HALF + 1, q - 1)))
    _plant(model, 0, 3, lambda q, n: _one_hot(q, n, q - 1))
    df = induction(model, half=HALF, n_docs=3).set_index(["layer", "head"])
    assert df.loc[(1, 2), "induction_score"] == pytest.approx(1.0)
    assert df.loc[(0, 3), "previous_token_score"] == pytest.approx(1.0)
    assert df.loc[(0, 3), "induction_score"] == pytest.approx(0.0)
    others = df.drop([(1, 2), (0, 3)])
    assert others["induction_score"].max() < 0.3 and others["previous_token_score"].max() < 0.5
    # the previous-token score of the induction head: its first-copy rows attend to the previous token
    assert df.loc[(1, 2), "previous_token_score"] == pytest.approx((HALF) / (2 * HALF), abs=0.02)


def test_unit_values_are_kept_per_sequence_and_text_reads_the_previous_token_head(model):
    from analyses import get
    from stats.units import matrix

    _plant(model, 0, 3, lambda q, n: _one_hot(q, n, q - 1))
    df, units = get("induction").tables(model, half=HALF, n_docs=3)
    assert not df.map(lambda v: isinstance(v, str) and ";" in v).any().any()  # no per-unit strings in a cell
    for score, measure in (("induction_score", "induction"), ("previous_token_score", "previous"),
                           ("wiki_previous_token_score", "wiki_previous")):
        values = matrix(units, measure, by=("layer", "head"), model=model.model_name)
        assert values.shape == (3, model.n_layers, model.n_heads)
        np.testing.assert_allclose(values.mean(0).ravel(), df.sort_values(["layer", "head"])[score], atol=1e-12)
    loss = matrix(units, "second_copy_loss", model=model.model_name)
    assert loss.shape == (3,) and loss.mean() == pytest.approx(df["second_copy_loss"].iloc[0], abs=1e-12)
    d = df.set_index(["layer", "head"])
    assert d.loc[(0, 3), "wiki_previous_token_score"] == pytest.approx(1.0)  # on text as on random tokens
    assert d.drop([(0, 3)])["wiki_previous_token_score"].max() < 0.9
    assert (d["n_wiki"] == 3).all()


def test_a_planted_sink_is_counted_and_uniform_heads_are_not(model):
    _plant(model, 1, 0, lambda q, n: _one_hot(q, n, torch.zeros_like(q)))
    for head in (1, 2, 3):
        _plant(model, 1, head, lambda q, n: torch.tril(torch.ones(n, n))[q] / (q[:, None] + 1.0))
    df = sink_rate(model, lengths=(32, 128), n_docs=2, max_rows=64)
    assert set(df["estimator"]) == {"gu"}
    layer1 = df[df["layer"] == 1].set_index(["input", "start_token", "length", "head"])
    assert layer1.xs(0, level="head")["sink_share"].eq(1.0).all()
    assert layer1.xs(0, level="head")["first_token_mass"].eq(1.0).all()
    assert layer1.xs(0, level="head")["alpha_1"].eq(1.0).all()
    uniform = layer1.drop(0, level="head")
    # mean over rows 1..N-1 of 1 / (q + 1): above epsilon only for short contexts, as the harmonic sum says
    for (inp, start, n), g in uniform.groupby(level=[0, 1, 2]):
        rows = np.unique(np.linspace(1, n - 1, min(64, n - 1)).round())
        expected = np.mean(1.0 / (rows + 1))
        assert g["first_token_mass"].to_numpy() == pytest.approx(expected, rel=1e-5)
        # Gu's alpha_1 counts row 0 (A_00 = 1): at 32 tokens every row is read and it is the mean of 1 / (t + 1),
        # t = 0..31
        alpha = np.mean(1.0 / np.arange(1, n + 1)) if n == 32 else (1 + (n - 1) * expected) / n
        assert g["alpha_1"].to_numpy() == pytest.approx(alpha, rel=1e-5)
        assert (g["sink_share"] == float(alpha > 0.3)).all()
    assert set(df["input"]) == {"text", "random"} and set(df["start_token"]) == {True, False}


MARK = 200  # a byte that marks the sequences in which the planted heads sink more


def _mass_pattern(q, n, m):
    """Rows ``q`` of a causal pattern giving key 0 the mass ``m`` on every row t >= 1 and the rest evenly to keys 1..t;
    row 0 all on key 0."""
    p = torch.tril(torch.ones(n, n))[q].clone()
    p[:, 0] = 0.0
    p = p / p.sum(-1, keepdim=True).clamp(min=1.0) * (1 - m)
    p[:, 0] = m
    p[q == 0, 0] = 1.0
    return p


def _plant_by_sequence(model, masses):
    """Layer 1's head h reads as ``_mass_pattern`` with the mass ``masses[h][marked]``, where ``marked`` says whether
    the sequence holds ``MARK``."""
    seen = {}
    model.register_forward_pre_hook(lambda module, args: seen.update(ids=args[0]))
    for head, (low, high) in masses.items():
        _plant(model, 1, head, lambda q, n, low=low, high=high: _mass_pattern(
            q, n, high if bool((seen["ids"] == MARK).any()) else low))


def _gu_reference(pattern: torch.Tensor) -> float:
    """The authors' importance of key 0 from a full ``[T, T]`` pattern: each key's column summed with every row divided
    by T - key (``eval_sink_open_source.py``'s ratios), key 0's entry."""
    t = pattern.shape[-1]
    return float((pattern / torch.arange(t, 0, -1)[None, :]).sum(0)[0])


def test_gu_thresholds_each_sequence_and_counts_row_0_where_poslens_averages_first(model):
    """Two of four sequences marked: head 0 gives key 0 0.4 of every row in them and 0.1 elsewhere, so each sequence's
    alpha_1 = (1 + 63 m) / 64 is 0.409 or 0.114 (a sink in half the sequences under Gu) while the mean mass 0.25 is
    no sink under poslens; head 1 (0.35 / 0.26) is a sink in half the sequences under Gu and always under poslens (mean
    0.305); head 2 gives 0.29 everywhere: poslens' 0.29 < 0.3, Gu's (1 + 63 * 0.29) / 64 = 0.301 > 0.3."""
    masses = {0: (0.1, 0.4), 1: (0.26, 0.35), 2: (0.29, 0.29)}
    _plant_by_sequence(model, masses)
    rng = np.random.default_rng(0)
    docs = [rng.integers(97, 123, size=65).tolist() for _ in range(4)]
    for d in docs[:2]:
        d[5] = MARK
    runs = {e: sink_rate(model, estimator=e, lengths=(64,), documents=docs) for e in ("gu", "poslens")}
    q = torch.arange(64)
    for head, (low, high) in masses.items():
        alphas = [_gu_reference(_mass_pattern(q, 64, m)) for m in (high, high, low, low)]
        assert alphas[0] == pytest.approx((1 + 63 * high) / 64, rel=1e-6)
        for estimator, df in runs.items():
            rows = df[(df["layer"] == 1) & (df["head"] == head) & (df["input"] == "text")]
            assert len(rows) == 2 and set(rows["estimator"]) == {estimator}  # with and without the start token
            assert rows["alpha_1"].to_numpy() == pytest.approx(np.mean(alphas), rel=1e-6)
            assert rows["first_token_mass"].to_numpy() == pytest.approx((low + high) / 2, rel=1e-6)
            expected = np.mean([a > 0.3 for a in alphas]) if estimator == "gu" else float((low + high) / 2 > 0.3)
            assert rows["sink_share"].to_numpy() == pytest.approx(expected), (estimator, head)
    gu, pl = (runs[e][(runs[e]["layer"] == 1)
                      & (runs[e]["input"] == "text")].set_index(["start_token", "head"])["sink_share"]
              for e in ("gu", "poslens"))
    assert gu.xs(0, level="head").eq(0.5).all() and pl.xs(0, level="head").eq(0.0).all()
    assert gu.xs(1, level="head").eq(0.5).all() and pl.xs(1, level="head").eq(1.0).all()
    assert gu.xs(2, level="head").eq(1.0).all() and pl.xs(2, level="head").eq(0.0).all()


def test_the_estimator_sets_the_default_lengths_and_is_checked(model):
    from analyses.registry import OptionError

    spec = sink_rate.analysis
    assert spec.bind(model, {})["lengths"] == (64,)
    assert spec.bind(model, {"estimator": "poslens"})["lengths"] == (64, 256, 1024)
    assert spec.bind(model, {"estimator": "poslens", "lengths": (32,)})["lengths"] == (32,)
    with pytest.raises(OptionError, match="estimator gauss: must be one of gu, poslens"):
        sink_rate(model, estimator="gauss")


def test_shuffled_weights_keep_each_tensors_values_and_lose_their_order(model):
    control = shuffled_weights(model, seed=3)
    for (name, a), b in zip(model.named_parameters(), control.parameters()):
        assert torch.equal(a.flatten().sort().values, b.flatten().sort().values), name
    changed = [n for (n, a), b in zip(model.named_parameters(), control.parameters())
               if a.numel() > 8 and not torch.equal(a, b)]
    assert len(changed) >= len([p for p in model.parameters() if p.numel() > 8 and p.unique().numel() > 1])
    assert control.source["control"].startswith("every weight tensor") \
        and control.model_name.endswith("(shuffled weights)")
    assert control.source["weights_sha256"] != model.source.get("weights_sha256", "")


def test_options_that_do_not_fit_are_refused_by_name(model):
    from analyses.registry import OptionError

    with pytest.raises(OptionError, match=r"half 5000: longer than .* allows \(2 times the value\) "
                                          r"\(max_seq_len=\d+ less 1 for the start token\)"):
        induction(model, half=5000)
    with pytest.raises(OptionError, match="lengths 99999: longer than"):
        sink_rate(model, lengths=(99999,))


def test_planted_second_token_sink_unit_values_and_new_conditions(model):
    """A head planted to attend to key 1 (position 2) is Sink_2 and not Sink_1 in every condition; the per-sequence
    indicators average to the per-head shares; the repeat and start-second conditions are built as stated."""
    from analyses import get
    from analyses.sink_rate import CONDITIONS, _contexts
    from corpora.random_tokens import start_token
    from stats.units import matrix

    _plant(model, 1, 1, lambda q, n: _one_hot(q, n, torch.clamp(q, max=1)))  # every row t >= 1 to key 1
    df, units = get("sink-rate").tables(model, lengths=(32, 64), n_docs=3, conditions=CONDITIONS,
                                        long_conditions=("text",), separator="<eos>")
    assert set(df[df.length == 32]["input"]) == {"text", "random", "repeat", "start-second", "separator-first"}
    assert set(df["separator_text"]) == {"<eos>"}
    assert set(zip(*df[df.length == 64][["input", "start_token"]].values.T)) == {("text", False)}
    h = df[(df.layer == 1) & (df["head"] == 1)]
    assert (h["sink_2_share"] == 1.0).all() and (h["sink_share"] == 0.0).all()
    assert h["alpha_2"].to_numpy() == pytest.approx(1.0)
    head = units[(units.layer == 1) & (units["head"] == 1)]
    assert (head[head.measure == "sink_2"]["value"] == 1).all() and (head[head.measure == "sink"]["value"] == 0).all()
    # the unit-level values agree with the per-head shares everywhere
    for (inp, start, n), g in df.groupby(["input", "start_token", "length"]):
        g = g.sort_values(["layer", "head"])
        for measure, share in (("sink", "sink_share"), ("sink_2", "sink_2_share")):
            x = matrix(units, measure, by=("layer", "head"), input=inp, start_token=start, length=n)
            assert x.shape == (3, model.n_layers, model.n_heads)
            assert x.mean(axis=0).ravel() == pytest.approx(g[share].to_numpy())
    bos, built = start_token(model), _contexts(model, 3, 16, 0, None, CONDITIONS, separator=7)
    assert [ids[1:] for ids in built[("separator-first", True)]] == [ids[:15] for ids in built[("text", False)]]
    assert {ids[0] for ids in built[("separator-first", True)]} == {7}
    assert all(len(set(ids)) == 1 and len(ids) == 16 for ids in built[("repeat", False)])
    assert all(ids[0] == bos and len(set(ids[1:])) == 1 for ids in built[("repeat", True)])
    assert all(ids[1] == bos and ids[0] != bos and len(ids) == 16 for ids in built[("start-second", True)])
    assert [ids[0] for ids in built[("start-second", True)]] == [ids[0] for ids in built[("text", False)]]
    assert set(df["key_window"]) == {0}
    assert list(units.columns) == ["model", "measure", "input", "start_token", "length", "layer", "head", "unit",
                                   "value"]


def test_the_separator_first_condition_names_its_separator_or_is_refused(model):
    from analyses import get

    with pytest.raises(ValueError, match="separator-first: name the separator it puts first"):
        get("sink-rate").tables(model, lengths=(32,), n_docs=1, conditions=("text", "separator-first"))
    with pytest.raises(ValueError, match=re.escape("--separator '<|endoftext|>': not a token of") + ".*e.g. '<eos>'"):
        get("sink-rate").tables(model, lengths=(32,), n_docs=1, conditions=("separator-first",),
                                separator="<|endoftext|>")


def test_a_separator_that_is_also_the_unknown_token_is_found():
    """SmolLM2's <|endoftext|> (id 0) is its document separator and its unk token too; the bench's run on it once
    refused it as unknown."""
    from analyses.sink_rate import separator_id

    class Tok:
        unk_token_id, eos_token_id = 0, 2
        names = {0: "<|endoftext|>", 2: "<|im_end|>"}

        def convert_tokens_to_ids(self, text):
            return next((i for i, t in self.names.items() if t == text), self.unk_token_id)

        def decode(self, ids):
            return self.names.get(ids[0], "?")

    class Model:
        model_name = "stub"

        def require_tokenizer(self, analysis):
            return Tok()

    assert separator_id(Model(), "<|endoftext|>") == 0 and separator_id(Model(), "") is None
    with pytest.raises(ValueError, match="not a token of stub's vocabulary .*e.g. '<\\|im_end\\|>'"):
        separator_id(Model(), "<bos>")


def test_a_separator_first_run_without_its_separator_is_refused_before_a_model_loads(tmp_path):
    from poslens.run.plan import plan

    with pytest.raises(ValueError, match="separator-first: name the separator it puts first"):
        plan("sink-rate", ["repo-small"], tmp_path, options=dict(conditions=("text", "separator-first")))
    plan("sink-rate", ["repo-small"], tmp_path, options=dict(conditions=("separator-first",), separator="<eos>"))


def test_the_position_claim_reads_the_separator_first_rows_sink_rate_writes(model, tmp_path):
    """The known-results position row judges SmolLM2 on sink-rate's separator-first condition: the CSV and unit-level
    values the analysis writes (here a tiny model's, named smollm2) are the ones the row reads, with the separator as
    the run wrote it and the run's number of sequences."""
    from analyses import get
    from poslens.known_results.claims.sinks import position
    from poslens.known_results.types import Results

    df, units = get("sink-rate").tables(model, lengths=(64,), n_docs=8, conditions=("text", "separator-first"),
                                        separator="<eos>")
    df.assign(model="smollm2").to_csv(tmp_path / "sink-rate.csv", index=False)
    units.assign(model="smollm2").to_csv(tmp_path / "sink-rate.units.csv", index=False)
    r = Results(tmp_path)
    rate = position.separator_rate(r, "smollm2")
    sep = df[df["input"] == "separator-first"]
    assert rate.n == 8 and rate.estimate == pytest.approx(sep["sink_share"].mean())
    assert position.measure(r, "smollm2").startswith("Sink_1 at T = 64 (text): `<eos>` first (the token before each "
                                                     f"pretraining document) {100 * rate.estimate:.1f}% [")
    assert "`<eos>` first, then its text (sink-rate's separator-first condition, 8 sequences)" in \
        position.ROW.protocol_text(r)
