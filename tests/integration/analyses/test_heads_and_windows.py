"""Planted truth for rope-frequencies, retrieval-heads and attention-window: models whose answer is known by
construction, and the statistics against direct computations on the same inputs."""

import numpy as np
import pytest
import torch

from analyses import get
from analyses.attention_window import attention_window, buckets
from analyses.retrieval_heads import borrowed, random_same_layers, retrieval_heads
from analyses.rope_frequencies import rope_frequencies
from interp.loading import load
from interp.tokenizers import ByteTokenizer
from tests.hf_helpers import write_tiny_hf


def _llama(tmp_path, name, **overrides):
    write_tiny_hf("llama", tmp_path / name, **overrides)
    model = load(tmp_path / name)
    model.tokenizer = ByteTokenizer()  # ids 0..256 inside the tiny vocabulary of 300
    return model


def _only_band(model, band: int):
    """Every head's queries and keys keep one rotary band (the ``band``-th fastest): the logit is that band's term."""
    spec = model.rotation(0)
    dims = spec.pairs()[spec.by_frequency()[band]].tolist()
    d = model.cfg.head_dim
    with torch.no_grad():
        for block in model.blocks:
            for proj in (block.attn.q_proj, block.attn.k_proj):
                keep = torch.zeros(proj.weight.shape[0], dtype=torch.bool)
                for h in range(proj.weight.shape[0] // d):
                    keep[[h * d + i for i in dims]] = True
                proj.weight[~keep] = 0.0
    return model


def test_rope_frequencies_finds_the_one_band_every_head_uses_and_what_removing_it_does(tmp_path):
    model = _only_band(_llama(tmp_path, "band"), band=1)  # 8 bands; band 1 is in the highest quarter, not the lowest
    df = rope_frequencies(model, n_docs=2, length=96, max_rows=32, fraction=0.25, niah_prompts=0)
    bands = df[df["part"] == "bands"]
    assert len(bands) == model.n_layers * model.n_heads * 8
    share = bands.pivot_table(index=["layer", "head"], columns="band", values="poslens_logit_share")
    np.testing.assert_allclose(share[1], 1.0)
    assert float(share.drop(columns=[1]).abs().max().max()) == 0.0
    # the norms are the cached rotated queries' band norms
    from corpora.contexts import analysis_windows

    ids = [w.ids for w in analysis_windows(model, "test", length=96, n_docs=2, seed=0)]
    _, cache = model.run_with_cache(torch.tensor(ids), names_filter=lambda n: n == "blocks.1.attn.hook_rot_q")
    spec = model.rotation(1)
    b = int(spec.by_frequency()[1])
    direct = cache["blocks.1.attn.hook_rot_q"][..., spec.pairs()[b]].norm(dim=-1).mean(dim=(0, 1))  # [head]
    got = bands[(bands["layer"] == 1) & (bands["band"] == 1)].sort_values("head")["q_norm"].to_numpy()
    np.testing.assert_allclose(got, direct.numpy(), rtol=1e-5)
    eff = df[df["part"] == "effects"].set_index("condition")
    assert eff.loc["zero-lowest", "kl"] == pytest.approx(0.0, abs=1e-9)  # the lowest bands carry nothing here
    assert eff.loc["zero-lowest", "loss"] == pytest.approx(eff.loc["none", "loss"], abs=1e-6)
    assert eff.loc["zero-highest", "kl"] > 1e-4  # the band every head uses is gone
    assert np.isnan(eff["niah_accuracy"]).all()  # no NIAH prompt was asked for


def test_rope_frequencies_effects_per_context_and_at_a_longer_length_are_the_models_own_losses(tmp_path):
    """Each context's effects row is that context's own next-token loss under the condition (checked against the
    model's loss with the intervention applied directly); the pooled effects are their token-weighted mean; the
    long contexts give ``long_effects`` at their own length, with no band usage read there."""
    from analyses.rope_frequencies import interventions_for
    from corpora.contexts import analysis_windows
    from interp import interventions

    model = _only_band(_llama(tmp_path, "long"), band=1)
    df, kept = get("rope-frequencies").tables(model, n_docs=2, length=48, max_rows=0, niah_prompts=0,
                                              long_length=120, long_docs=2)
    units = kept[kept["measure"] == "loss"]
    assert sorted(units.groupby("length").size().items()) == [(48, 10), (120, 10)]  # 2 contexts x 5 conditions each
    longs = [w.ids for w in analysis_windows(model, "rope-frequencies", length=120, n_docs=2, seed=1)]
    for condition in ("none", "zero-highest", "unrotate-highest"):
        with interventions.applied(model, *interventions_for(condition, 0.25)):
            with torch.no_grad():
                direct = [float(model(torch.tensor([ids]), return_type="loss")) for ids in longs]
        got = units[(units["length"] == 120) & (units["condition"] == condition)].sort_values("unit")["value"]
        np.testing.assert_allclose(got.to_numpy(), direct, rtol=1e-5)
        pooled = df[(df["part"] == "long_effects") & (df["condition"] == condition)]
        assert len(pooled) == 1 and int(pooled["length"].iloc[0]) == 120
        assert float(pooled["loss"].iloc[0]) == pytest.approx(np.mean(direct), rel=1e-5)  # equal lengths: plain mean
    short = units[units["length"] == 48].pivot_table(index="unit", columns="condition", values="value")
    eff = df[df["part"] == "effects"].set_index("condition")["loss"]
    np.testing.assert_allclose(eff[short.columns].to_numpy(), short.mean().to_numpy(), rtol=1e-6)
    assert (df[df["part"] == "bands"]["q_norm"] > 0).any() and int(df["long_docs"].iloc[0]) == 2
    assert kept[kept["measure"] == "positional_heads"]["value"].between(0, 1).all()
    from figures.rope_frequencies import figure  # the longer length's loss changes drawn too, as open markers

    fig = figure(df)
    long = df[df["part"] == "long_effects"].set_index("condition")["loss"]
    trace = next(t for t in fig.data if t.name == f"{model.model_name} at 120 tokens")
    np.testing.assert_allclose(trace.x, (long - long["none"]).to_numpy())
    assert trace.marker.symbol >= 100 and not [t for t in fig.data if t.name == trace.name and t.xaxis == "x4"]


def test_band_norms_and_logit_shares_of_planted_queries_and_keys(tmp_path):
    """Queries and keys replaced, before rotation, by one constant vector per head: band b of query head h is
    (a[h, b], 0) and of key head g (b[g, b], 0). Rotation keeps a band's norm, so ``q_norm`` is a and ``k_norm`` b
    exactly; the band's term between query t and key s is a b cos((t - s) w_b), so poslens' logit share is a b M_b over
    its sum over bands, M_b the mean of |cos((t - s) w_b)| over the causal pairs of the rows read (40 rows: two blocks
    of rows)."""
    model = _llama(tmp_path, "planted")
    spec = model.rotation(0)
    n_bands, d = spec.n_bands, model.cfg.head_dim
    heads, kv = model.n_heads, model.cfg.num_key_value_heads
    a = 1.0 + torch.arange(heads * n_bands, dtype=torch.float32).reshape(heads, n_bands) / 7
    b = 2.0 + torch.arange(kv * n_bands, dtype=torch.float32).reshape(kv, n_bands).flip(-1) / 5

    def planted(values):
        vec = torch.zeros(values.shape[0], d)
        for band in range(n_bands):
            vec[:, spec.pairs()[band][0]] = values[:, band]
        return lambda x, hook: vec.expand_as(x).to(x.dtype).clone()

    for layer in range(model.n_layers):
        model.add_hook(f"blocks.{layer}.attn.hook_q", planted(a))
        model.add_hook(f"blocks.{layer}.attn.hook_k", planted(b))
    n = 48
    df, units = get("rope-frequencies").tables(model, n_docs=2, length=n, max_rows=40, niah_prompts=0)
    bands = df[(df["part"] == "bands") & (df["layer"] == 1)]
    rows = np.unique(np.linspace(1, n - 1, 40).round()).astype(int)
    order = spec.by_frequency().tolist()
    omega = spec.inv_freq.double().numpy()
    m = np.array([np.mean([abs(np.cos((t - s) * omega[k])) for t in rows for s in range(t + 1)])
                  for k in range(n_bands)])
    rep = heads // kv
    for head in range(heads):
        got = bands[bands["head"] == head].set_index("band")
        want_q = a[head, order].double().numpy()
        want_k = b[head // rep, order].double().numpy()
        np.testing.assert_allclose(got["q_norm"].sort_index(), want_q, rtol=1e-5)
        np.testing.assert_allclose(got["k_norm"].sort_index(), want_k, rtol=1e-5)
        term = want_q * want_k * m[order]
        np.testing.assert_allclose(got["poslens_logit_share"].sort_index(), term / term.sum(), rtol=1e-4)
    # the unit values: each context's quarter norms, the mean over the quarter's bands and the layer's heads
    ctx = units[units["layer"] == 1].pivot_table(index=["quarter", "unit"], columns="measure", values="value")
    q = max(1, n_bands // 4)
    kv_of = [h // rep for h in range(heads)]
    for quarter, chosen in (("lowest", order[-q:]), ("highest", order[:q])):
        for c in (0, 1):
            assert ctx.loc[(quarter, c), "q_norm"] == pytest.approx(float(a[:, chosen].mean()), rel=1e-5)
            assert ctx.loc[(quarter, c), "k_norm"] == pytest.approx(float(b[kv_of][:, chosen].mean()), rel=1e-5)


def test_rope_frequencies_is_refused_for_a_model_without_rotation():
    from interp.capabilities import CapabilityError
    from tests.helpers import tiny_model

    with pytest.raises(CapabilityError, match="needs a model with rotary positions"):
        rope_frequencies(tiny_model("per-layer", max_seq_len=64, pos_encoding="selective_pope"), n_docs=1, length=32)


def test_random_heads_of_the_same_layers():
    rng = np.random.default_rng(0)
    top = [(0, 1), (0, 2), (3, 0)]
    drawn = random_same_layers(top, 4, 4, rng)
    assert sorted(l for l, _ in drawn) == [0, 0, 3] and not set(drawn) & set(top)
    drawn = random_same_layers(top, 4, 3, rng)  # layer 0 has one head left: the other comes from another layer
    assert sorted(l for l, _ in drawn).count(0) == 1 and len(drawn) == 3 and not set(drawn) & set(top)
    full = [(1, 0), (1, 1), (1, 2)]  # every head of layer 1: the three come from other layers
    drawn = random_same_layers(full, 3, 3, rng)
    assert len(drawn) == 3 and not set(drawn) & set(full) and all(l != 1 for l, _ in drawn)
    assert borrowed(full, drawn) == 3 and borrowed(top, random_same_layers(top, 4, 4, rng)) == 0


def test_an_exhausted_layer_borrows_from_its_nearest_layers():
    """Gemma 3 270M has 4 heads a layer: with all of layer 5 in the top k, a draw once took heads from layers 1, 8
    and 9; now from layers 4 and 6 first, then 3 and 7."""
    top = [(5, h) for h in range(4)] + [(2, 0)]
    for seed in range(20):
        drawn = random_same_layers(top, 18, 4, np.random.default_rng(seed))
        layers = sorted(l for l, _ in drawn)
        assert layers.count(2) >= 1 and len(drawn) == 5 and not set(drawn) & set(top)
        assert {l for l in layers if l != 2} <= {4, 6}
        assert borrowed(top, drawn) == 4
    crowded = [(l, h) for l in (4, 5, 6) for h in range(4) if (l, h) != (6, 3)]  # one head left in layers 4..6
    drawn = random_same_layers(crowded, 18, 4, np.random.default_rng(0))
    assert len(set(drawn)) == len(crowded) and {l for l, _ in drawn} <= {1, 2, 3, 6, 7, 8, 9}
    assert max(abs(l - 5) for l, _ in drawn) <= 4 and borrowed(crowded, drawn) == len(crowded) - 1


def test_retrieval_heads_masks_what_copies_the_needle():
    """The bundled repo-small retrieves every needle at 400 bytes: its poslens scores are head-profiles', the unmasked
    accuracy is niah-accuracy's on the same prompts, and masking its best retrieval head's output costs more than a
    random head's."""
    from analyses.head_profiles import head_profiles
    from analyses.niah_accuracy import niah_accuracy
    from corpora.niah import niah_samples

    model = load("repo-small")
    df = retrieval_heads(model, score="poslens", masking="output", n_docs=4, niah_prompts=4, lengths=(400,),
                         shares=(0.06,), n_random=3)
    assert set(df["score"]) == {"poslens"} and set(df["masking"]) == {"output"}
    heads = df[df["part"] == "heads"].set_index(["layer", "head"])
    profile = head_profiles(model, n_docs=1, length=64, niah_prompts=4, niah_tokens=400).set_index(["layer", "head"])
    np.testing.assert_allclose(heads["retrieval_score"], profile.loc[heads.index, "retrieval_score"], rtol=1e-9)
    masking = df[df["part"] == "masking"]
    evaluation = niah_samples(model.tokenizer, 4, 400, seed=1, preamble=False)
    assert masking.loc[masking["condition"] == "none", "niah_accuracy"].iloc[0] == \
        niah_accuracy(model, documents=evaluation)["accuracy"].iloc[0] == 1.0
    top = masking[masking["condition"] == "top"]
    random = masking[masking["condition"] == "random"]
    assert top["heads"].iloc[0] == "L{}H{}".format(*heads["rank"].idxmin())
    assert top["answer_accuracy"].iloc[0] < random["answer_accuracy"].mean()


def test_attention_window_loss_is_the_loss_of_reading_the_last_window_alone(tmp_path):
    """One layer of rotary attention sees distances only: under a window of W keys the loss at each position is the
    model's on the W tokens ending there."""
    model = _llama(tmp_path, "one", num_hidden_layers=1)
    df = attention_window(model, length=64, n_docs=2, window=8, sinks=(0,), n_buckets=4, max_rows=16)
    from corpora.contexts import analysis_windows

    docs = [w.ids for w in analysis_windows(model, "test", length=64, n_docs=2, seed=0)]
    nll = {t: [] for t in range(1, 64)}
    for ids in docs:
        x = torch.tensor(ids)
        for t in range(1, 64):
            with torch.no_grad():
                logits = model(x[max(0, t - 8):t][None])[0, -1]
            nll[t].append(float(torch.nn.functional.cross_entropy(logits[None], x[t:t + 1])))
    loss = df[(df["part"] == "loss") & (df["condition"] == "window")].set_index("bucket")["loss"]
    for a, b in buckets(64, 4):
        assert loss[f"{a}-{b - 1}"] == pytest.approx(np.mean([v for t in range(a, b) for v in nll[t]]), rel=1e-4)
    assert loss["past the window"] == pytest.approx(np.mean([v for t in range(8, 64) for v in nll[t]]), rel=1e-4)
    with pytest.raises(ValueError, match="--window 64: the window must be shorter than the documents"):
        attention_window(model, length=64, n_docs=1, window=64)


def test_attention_window_reach_is_read_off_the_patterns_and_a_sliding_layer_stays_inside_its_window(tmp_path):
    write_tiny_hf("mistral", tmp_path / "sliding", sliding_window=6)
    model = load(tmp_path / "sliding")
    model.tokenizer = ByteTokenizer()
    assert model.attention_windows == (6, 6)
    df = attention_window(model, length=40, n_docs=1, window=4, sinks=(0, 2), max_rows=40)
    reach = df[df["part"] == "reach"].set_index(["layer", "head"])
    assert float(reach["mass_beyond_own_window"].abs().max()) == 0.0  # nothing reaches past 6 keys
    assert float(reach["mass_beyond_window"].min()) > 0.0  # but past 4 it does
    from corpora.contexts import analysis_windows

    ids = torch.tensor([w.ids for w in analysis_windows(model, "test", length=40, n_docs=1, seed=0)])
    rows = torch.arange(1, 40)
    with model.query_rows(rows):
        _, cache = model.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_pattern"))
    p = cache["blocks.1.attn.hook_pattern"][0]
    far = (rows[:, None] - torch.arange(40)[None, :]) >= 4
    np.testing.assert_allclose(reach.loc[1, "mass_beyond_window"].sort_index().to_numpy(),
                               (p * far).sum(-1).mean(-1).numpy(), rtol=1e-5)
    np.testing.assert_allclose(reach.loc[1, "sink_mass"].sort_index().to_numpy(), p[..., :2].sum(-1).mean(-1).numpy(),
                               rtol=1e-5)


def test_wu_score_is_copies_over_the_needle_tokens_on_retrieved_prompts_only(monkeypatch):
    """A planted copier: head (1, 3) attends, at the steps that generate the value's first three digits, to those digits
    in the needle, and to token 0 elsewhere. Generations are planted too: prompts 0 and 1 answer right, prompt 2 gets 4
    of the 7 digits first (ROUGE-1 recall 4/7 > 0.5: counted), prompt 3 three letters and then digits 4-6 (3/7: left
    out, and its copier hits nothing); every answer is followed by a newline and the first three digits again, which Wu
    et al. never score. So the head's score is 3/7 on the 3 retrieved prompts, not 9/28 (the failed prompt counted) nor
    more (steps past the newline scored). At a second length (384 tokens) every prompt answers right: 4 counted, the
    same 3/7, ranked and kept apart by length."""
    from analyses.retrieval_heads import rouge1_recall, scored_steps, value_span
    from corpora.niah import niah_samples
    from interp.attention import current_query_rows
    from tests.repo_helpers import tiny_repo

    model = tiny_repo("rope")  # bytes, causal, 3 layers x 4 heads
    tok = model.tokenizer
    samples = niah_samples(tok, 4, 320, seed=0, preamble=False)
    wrong = "wxyz"  # no digit: recall counts only the right ones
    texts = [" " + s.value + ".\n" + s.value[:3] for s in samples[:2]]
    texts += [" " + samples[2].value[:4] + wrong[:3] + ".\n" + samples[2].value[:3],
              " " + wrong[:3] + samples[3].value[3:6] + ".\n" + samples[3].value[:3]]
    longer = niah_samples(tok, 4, 384, seed=0, preamble=False)
    samples, texts = samples + longer, texts + [" " + s.value + ".\n" + s.value[:3] for s in longer]
    planted = {tuple(s.token_ids): tok.encode(t) for s, t in zip(samples, texts)}
    spans = {p: value_span(tok, s) for p, s in zip(planted, samples)}
    for p, s in zip(planted, samples):
        assert tok.decode(list(p[spans[p][0]:spans[p][1]])) == s.value  # the span is the value, 7 byte tokens

    real_generate = model.generate

    def generate(tokens, max_new_tokens, stop_ids=()):
        return list(planted.get(tuple(tokens), None)
                    or real_generate(tokens, max_new_tokens, stop_ids))[:max_new_tokens]

    monkeypatch.setattr(model, "generate", generate)
    seen = {}
    model.register_forward_pre_hook(lambda module, args: seen.update(ids=args[0][0].tolist()))

    def copier(pattern, hook):
        rows = current_query_rows()
        prompt = next((p for p in planted if tuple(seen["ids"][:len(p)]) == p), None)
        if rows is None or prompt is None:
            return pattern
        start = spans[prompt][0]
        newline = planted[prompt].index(10)  # the newline byte
        out = torch.zeros_like(pattern[0, 3])
        out[:, 0] = 1.0
        for i, r in enumerate(rows.tolist()):
            step = r - (len(prompt) - 1)  # this row generates planted[prompt][step]
            digit = step - 1 if 1 <= step <= 3 else step - newline - 1 if 1 <= step - newline <= 3 else None
            if digit is not None:
                out[i] = 0.0
                out[i, start + digit] = 1.0
        pattern[0, 3] = out
        return pattern

    model.add_hook("blocks.1.attn.hook_pattern", copier)
    df, units = get("retrieval-heads").tables(model, n_docs=4, niah_prompts=1, lengths=(320, 384), shares=(0.1,),
                                              n_random=1)
    assert set(df["score"]) == {"wu"} and set(df["masking"]) == {"query"} and set(df["part"]) == {"heads", "masking"}
    from stats.units import matrix

    for length, n_counted in ((320, 3), (384, 4)):
        at = df[df["length"] == length]
        heads = at[at["part"] == "heads"].set_index(["layer", "head"])
        assert len(heads) == model.n_layers * model.n_heads and (at["part"] == "masking").sum() == 3
        assert heads.loc[(1, 3), "retrieval_score"] == pytest.approx(3 / 7, rel=1e-12)
        assert bool(heads.loc[(1, 3), "is_retrieval"]) and int(heads.loc[(1, 3), "rank"]) == 0
        assert int(at["n_counted"].iloc[0]) == n_counted and int(at["n_scored"].iloc[0]) == 4
        # the unit values: the planted head's hits on each of the 4 prompts, the score recomputed from the counted
        hits = matrix(units, "hits", by=("layer", "head"), length=length)
        counted = matrix(units, "counted", length=length).astype(bool)
        assert hits.shape == (4, model.n_layers, model.n_heads) and counted.sum() == n_counted
        recomputed = hits[counted].sum(0) / counted.sum()
        np.testing.assert_allclose(recomputed, heads.sort_index()["retrieval_score"].to_numpy()
                                   .reshape(hits.shape[1:]), rtol=1e-12)
    # the pieces, on their own
    assert rouge1_recall([1, 2, 2, 3], [2, 9, 2, 2, 1]) == 3 / 4
    assert scored_steps(tok, tok.encode(" 12.\n34")) == tok.encode(" 12.\n")


def test_rope_frequencies_refuses_longer_contexts_it_could_not_tell_apart(tmp_path):
    from analyses.registry import OptionError

    model = _llama(tmp_path, "refuse")
    with pytest.raises(OptionError, match="long_length 48: equals length"):
        rope_frequencies(model, n_docs=1, length=48, niah_prompts=0, long_length=48)
    with pytest.raises(OptionError, match="long_length"):
        rope_frequencies(model, niah_prompts=0, long_length=96, documents=["a text of the user's. " * 20])
