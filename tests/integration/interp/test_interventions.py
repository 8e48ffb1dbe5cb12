"""Interventions, each against a planted truth: an edit of the weights, the positions or the input that must give the
same numbers, or transformers' own forward where one exists."""

import pytest
import torch

from interp import interventions
from interp.capabilities import Capability, CapabilityError
from interp.interventions import (
    KeyWindow,
    MaskHeadQueries,
    MaskHeads,
    RemoveAPBands,
    RemoveRotaryBands,
    ShiftPositions,
    ShufflePositions,
    StretchPositions,
    UnrotateRotaryBands,
)
from interp.loading import load
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.helpers import tiny_model
from tests.hf_helpers import write_tiny_hf
from tests.repo_helpers import tiny_repo

pytestmark = pytest.mark.usefixtures("no_grad")


@pytest.fixture
def no_grad():
    with torch.no_grad():
        yield


def _out_proj(model, layer):
    attn = model.blocks[layer].attn
    return attn.o_proj if hasattr(attn, "o_proj") else attn.wo


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """The llama family (no QK-norm: a query band is a pair of q_proj rows), from a transformers checkpoint."""
    path = tmp_path_factory.mktemp("llama")
    write_tiny_hf("llama", path)
    return load(path)


@pytest.fixture(scope="module")
def generic(tmp_path_factory):
    """The generic family on Qwen2 (rotation inside transformers), with the transformers model beside it."""
    path = tmp_path_factory.mktemp("qwen2")
    hf = write_tiny_hf("qwen2", path)
    return load(path), hf


@pytest.mark.parametrize("make", [lambda: tiny_repo("repo"), lambda: tiny_model("per-layer", max_seq_len=64)],
                         ids=["repo", "increments"])
def test_masking_a_head_equals_zeroing_its_output_projection_columns(make):
    model = make()
    ids = torch.randint(0, 257, (2, 16))
    heads = {(1, 2), (0, 0)}
    masked = model.run_with_hooks(ids, fwd_hooks=MaskHeads(heads).fwd_hooks(model))
    d_head = model.cfg.head_dim if hasattr(model.cfg, "head_dim") else model.cfg.dim // model.cfg.n_heads
    with torch.no_grad():
        for layer, head in heads:
            _out_proj(model, layer).weight[:, head * d_head:(head + 1) * d_head] = 0.0
    torch.testing.assert_close(masked, model(ids), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(masked, make()(ids), atol=1e-4)  # and the masking did change the output


def test_applied_records_the_intervention_and_refuses_a_missing_head():
    from poslens.run.provenance import model_record

    model = tiny_repo("repo")
    ids = torch.randint(0, 257, (1, 8))
    with interventions.applied(model, MaskHeads({(2, 3)})):
        inside = model(ids)
    torch.testing.assert_close(inside, model.run_with_hooks(ids, fwd_hooks=MaskHeads({(2, 3)}).fwd_hooks(model)))
    assert model_record(model)["interventions"] == [{"intervention": "mask-heads", "heads": [[2, 3]]}]
    with pytest.raises(ValueError, match=r"MaskHeads heads: \(3, 0\) is not a head of tiny-repo "
                                         r"\(3 layers x 4 heads\)"):
        MaskHeads({(3, 0)}).fwd_hooks(model)
    assert interventions.REGISTRY["mask-heads"] is MaskHeads


def _hf(kind, tmp_path, **overrides):
    write_tiny_hf(kind, tmp_path / kind, **overrides)
    return load(tmp_path / kind)


@pytest.mark.parametrize("start", [0, 5])
@pytest.mark.parametrize("kind", ["repo", "llama", "qwen2", "gpt2", "bert", "mistral-window-6"])
def test_a_masked_query_attends_uniformly_to_the_keys_it_sees(kind, start, tmp_path):
    """Wu et al.'s masking: the head's scores are all 0, so row t of a causal model gives each of its t + 1 keys
    1 / (t + 1), a sliding window of 6 gives 1 / min(t + 1, 6), a bidirectional encoder 1 / n; rows before
    ``from_position`` and every other head are unchanged. Masking every row holds for rows read through ``query_rows``
    (the query is zeroed before any row is chosen); masking from a position is refused there."""
    if kind == "repo":
        model = tiny_repo("repo")
    elif kind == "mistral-window-6":
        model = _hf("mistral", tmp_path, sliding_window=6)
    else:
        model = _hf(kind, tmp_path)
    n = 12
    ids = torch.randint(3, 257, (1, n))
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(2)]
    iv = MaskHeadQueries({(1, 2)}, from_position=start)
    _, plain = model.run_with_cache(ids, names_filter=lambda name: name in names)
    with model.hooks(fwd_hooks=iv.fwd_hooks(model)):
        _, masked = model.run_with_cache(ids, names_filter=lambda name: name in names)
    t = torch.arange(n)[:, None].float()
    k = torch.arange(n)[None, :]
    if kind == "bert":
        expected = torch.full((n, n), 1.0 / n)
    else:
        width = 6 if kind == "mistral-window-6" else n
        seen = (k <= t) & (t - k < width)
        expected = seen.float() / seen.sum(-1, keepdim=True)
    expected[:start] = plain[names[1]][0, 2, :start].float()
    torch.testing.assert_close(masked[names[1]][0, 2].float(), expected, rtol=1e-5, atol=1e-6)
    others = [h for h in range(model.n_heads) if h != 2]
    torch.testing.assert_close(masked[names[1]][0, others], plain[names[1]][0, others])
    torch.testing.assert_close(masked[names[0]], plain[names[0]])
    if Capability.CAUSAL_LM not in model.capabilities:
        return
    rows = torch.tensor([3, 7, 11])
    with interventions.applied(model, iv):
        whole = model(ids)
        with model.query_rows(rows):
            if start:
                with pytest.raises(ValueError, match="cannot run inside model.query_rows"):
                    model(ids)
                return
            _, read = model.run_with_cache(ids, names_filter=lambda name: name == names[1])
            some = model(ids)
    torch.testing.assert_close(read[names[1]][0, 2].float(), expected[rows], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(some, whole, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_masking_queries_from_a_position_decodes_through_the_cache_as_without_it(kind, tmp_path):
    """Greedy decoding with heads masked from the last prompt token on (the authors' protocol): one token at a time
    through the KV cache, the rows are the cache's last positions; the same as re-running the whole sequence."""
    model = _hf(kind, tmp_path)
    prompt = torch.randint(3, 257, (1, 10))
    iv = MaskHeadQueries({(0, 1), (1, 2)}, from_position=9)
    with interventions.applied(model, iv):
        cached = model.generate(prompt, 6)
        seq = prompt
        for _ in range(6):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    assert cached == seq[0, 10:].tolist()
    rows = []
    with interventions.applied(model, iv), model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern",
                                                                    lambda p, hook: rows.append(p[0, 2, -1].clone()))]):
        model.generate(prompt, 4)
    assert [len(r) for r in rows] == [10, 11, 12, 13]  # the prompt, then one cached step at a time
    for r in rows:
        torch.testing.assert_close(r, torch.full_like(r, 1.0 / len(r)))


def test_masking_a_query_equals_zeroing_its_query_projection_rows(llama):
    ids = torch.randint(3, 257, (2, 16))
    heads = {(1, 2), (0, 1)}
    masked = llama.run_with_hooks(ids, fwd_hooks=MaskHeadQueries(heads).fwd_hooks(llama))
    d = llama.cfg.head_dim
    saved = {l: llama.blocks[l].attn.q_proj.weight.clone() for l, _ in heads}
    try:
        with torch.no_grad():
            for layer, head in heads:
                llama.blocks[layer].attn.q_proj.weight[head * d:(head + 1) * d] = 0.0
        torch.testing.assert_close(masked, llama(ids), rtol=1e-5, atol=1e-5)
    finally:
        with torch.no_grad():
            for layer, w in saved.items():
                llama.blocks[layer].attn.q_proj.weight.copy_(w)
    assert not torch.allclose(masked, llama(ids), atol=1e-4)  # and the masking did change the output
    with pytest.raises(ValueError, match=r"MaskHeadQueries heads: \(2, 0\) is not a head of"):
        MaskHeadQueries({(2, 0)}).fwd_hooks(llama)
    assert interventions.REGISTRY["mask-head-queries"] is MaskHeadQueries
    assert MaskHeadQueries([(1, 2)]).record() == {"intervention": "mask-head-queries", "heads": [[1, 2]],
                                                  "from_position": 0}
    with pytest.raises(ValueError, match="from_position=-1: a position"):
        MaskHeadQueries({(1, 2)}, from_position=-1)


# ---- rotary bands ------------------------------------------------------------------------------------------------


def _zero_query_rows(model, layer, head, dims, d_head, proj):
    with torch.no_grad():
        rows = [head * d_head + int(d) for d in dims]
        proj.weight[rows] = 0.0
        if proj.bias is not None:
            proj.bias[rows] = 0.0


@pytest.mark.parametrize("family", ["llama", "increments"])
def test_removing_a_band_equals_zeroing_its_query_projection_rows(family, llama):
    """Rotation mixes a band's two dims only, so a band zeroed after rotation is that band zeroed in q_proj's output:
    half-split pairs (i, i + d/2) in the llama family, interleaved (2i, 2i + 1) in the increments family."""
    import copy

    model = copy.deepcopy(llama) if family == "llama" else tiny_model("per-layer", max_seq_len=64)
    ids = torch.randint(3, 250, (2, 12))
    iv = RemoveRotaryBands(bands=(0, 2), layers=(1,), heads=(1,))
    spec = model.rotation(1)
    dims = spec.pairs()[spec.by_frequency()[[0, 2]]].flatten()
    assert spec.layout == ("half_split" if family == "llama" else "interleaved")
    removed = model.run_with_hooks(ids, fwd_hooks=iv.fwd_hooks(model))
    attn = model.blocks[1].attn
    proj, d_head = (attn.q_proj, model.cfg.head_dim) if family == "llama" else (attn.wq, model.cfg.head_dim)
    before = model(ids)
    _zero_query_rows(model, 1, 1, dims, d_head, proj)
    torch.testing.assert_close(removed, model(ids), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(removed, before, atol=1e-3)


def test_bands_are_chosen_by_frequency_per_layer(llama):
    spec = llama.rotation(0)  # 8 bands of a 16-dim head, frequencies falling with the index
    assert RemoveRotaryBands(highest=0.25).chosen(spec) == [0, 1]
    assert RemoveRotaryBands(lowest=0.25).chosen(spec) == [6, 7]
    assert RemoveRotaryBands(bands=(0,)).chosen(spec) == [0] and RemoveRotaryBands(lowest=0.01).chosen(spec) == [7]
    for bad in (dict(), dict(highest=0.5, lowest=0.5), dict(bands=(1,), highest=0.1)):
        with pytest.raises(ValueError, match="exactly one of bands=, highest= or lowest="):
            RemoveRotaryBands(**bad)
    with pytest.raises(ValueError, match="highest=1.5: a fraction"):
        RemoveRotaryBands(highest=1.5)
    with pytest.raises(ValueError, match="bands: 8 is not a band of a layer with 8 bands"):
        RemoveRotaryBands(bands=(8,)).fwd_hooks(llama)
    with pytest.raises(CapabilityError, match="intervention .RemoveRotaryBands. needs a model with rotary positions"):
        RemoveRotaryBands(highest=0.5).fwd_hooks(tiny_model("per-layer", max_seq_len=64, pos_encoding="selective_pope"))


def test_unrotating_every_band_is_attention_without_positions(llama, generic):
    """Every band turned back: each logit is q . k whatever the distance. In the llama family that is every position
    set to 0; in the generic family, transformers' own forward with position_ids all 0."""
    ids = torch.randint(3, 250, (2, 12))
    every = UnrotateRotaryBands(highest=1.0)
    torch.testing.assert_close(llama.run_with_hooks(ids, fwd_hooks=every.fwd_hooks(llama)),
                               llama.run_with_hooks(ids, fwd_hooks=StretchPositions(factor=0.0).fwd_hooks(llama)),
                               rtol=1e-4, atol=1e-4)
    model, hf = generic
    with torch.no_grad():
        want = hf(ids, position_ids=torch.zeros_like(ids)).logits
    got = model.run_with_hooks(ids, fwd_hooks=every.fwd_hooks(model))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(got, model(ids), atol=1e-3)


def test_unrotating_splits_no_key_group_and_decodes_with_the_cache(generic):
    model, _ = generic  # 4 query heads on 2 key heads
    with pytest.raises(ValueError, match="query heads 0..1 share key head 0"):
        model.run_with_hooks(torch.randint(3, 250, (1, 6)),
                             fwd_hooks=UnrotateRotaryBands(lowest=0.5, heads=(0,)).fwd_hooks(model))
    prompt = torch.randint(3, 250, (1, 10))
    with interventions.applied(model, UnrotateRotaryBands(lowest=0.5, heads=(2, 3))):
        cached = model.generate(prompt, 5)
        seq = prompt
        for _ in range(5):  # the whole sequence again at every step: no cache
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert cached == seq[0, 10:].tolist()


def test_rotary_specs_of_the_generic_family_are_read_off_the_model(tmp_path):
    """Qwen2 rotates dims i and i + d/2 of the whole head; GPT-NeoX only the first quarter of each head (rotary_pct);
    GPT-2 has no rotation."""
    from interp.capabilities import Capability

    for kind, bands in (("qwen2", 8), ("gpt_neox", 2)):
        write_tiny_hf(kind, tmp_path / kind)
        model = load(tmp_path / kind)
        spec = model.rotation(1)
        assert Capability.ROTARY in model.capabilities and spec.layout == "half_split" and spec.n_bands == bands, kind
    write_tiny_hf("gpt2", tmp_path / "gpt2")
    assert Capability.ROTARY not in load(tmp_path / "gpt2").capabilities


# ---- windows -----------------------------------------------------------------------------------------------------


def test_a_window_in_one_layer_equals_reading_the_last_window_tokens_alone(tmp_path):
    """One layer of rotary attention depends on distances only: with a window of W keys, the logits at t are those of
    the model run on tokens t-W+1..t alone."""
    write_tiny_hf("llama", tmp_path / "one", num_hidden_layers=1)
    model = load(tmp_path / "one")
    ids = torch.randint(3, 250, (1, 20))
    windowed = model.run_with_hooks(ids, fwd_hooks=KeyWindow(window=5).fwd_hooks(model))
    for t in (4, 11, 19):
        torch.testing.assert_close(windowed[0, t], model(ids[:, t - 4: t + 1])[0, -1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(model.run_with_hooks(ids, fwd_hooks=KeyWindow(window=20).fwd_hooks(model)), model(ids))


@pytest.mark.parametrize("make", [lambda: tiny_repo("repo"), lambda: tiny_encoder("rp")],
                         ids=["causal", "bidirectional"])
def test_a_window_with_sinks_leaves_no_mass_elsewhere(make):
    model = make()
    ids = token_ids(model, 1, 16) if model.family == "encoder" else torch.randint(3, 250, (1, 16))
    patterns = {}
    hooks = KeyWindow(window=3, sinks=2).fwd_hooks(model) + [
        (f"blocks.{l}.attn.hook_pattern", lambda p, hook: patterns.setdefault(hook.name, p))
        for l in range(model.n_layers)]
    model.run_with_hooks(ids, fwd_hooks=hooks)
    q, k = torch.arange(16)[:, None], torch.arange(16)[None, :]
    visible = torch.ones(16, 16, dtype=torch.bool) if model.family == "encoder" else k <= q
    near = visible & ((q - k).abs() < 3)
    allowed = near | (visible & (k < 2))
    for p in patterns.values():
        assert float(p[..., ~allowed].abs().max()) == 0.0
        assert float(p[..., visible & ~near & (k < 2)].min()) > 0.0  # the sinks are seen from afar
    with pytest.raises(ValueError, match="cannot run inside model.query_rows"), model.query_rows([3]):
        model.run_with_hooks(ids, fwd_hooks=KeyWindow(window=3).fwd_hooks(model) + hooks[-1:])


# ---- positions ---------------------------------------------------------------------------------------------------


def test_position_edits_shift_stretch_and_shuffle(llama, generic):
    ids = torch.randint(3, 250, (1, 12))
    # rotary attention sees differences of positions: a shift changes nothing
    torch.testing.assert_close(llama.run_with_hooks(ids, fwd_hooks=ShiftPositions(offset=37.0).fwd_hooks(llama)),
                               llama(ids), rtol=1e-4, atol=1e-4)
    seen = []
    shuffle = ShufflePositions(seed=3, layers=(0,))
    llama.run_with_hooks(ids, fwd_hooks=shuffle.fwd_hooks(llama)
                         + [("blocks.0.attn.hook_rot_q", lambda q, hook: seen.append(q))])
    order = torch.randperm(12, generator=torch.Generator().manual_seed(3))
    _, cache = llama.run_with_cache(ids, names_filter="blocks.0.attn.hook_q")
    torch.testing.assert_close(seen[0], llama.rotation(0).rotate(cache["blocks.0.attn.hook_q"], order[None].float()))
    assert not torch.allclose(llama.run_with_hooks(ids, fwd_hooks=StretchPositions(factor=2.0).fwd_hooks(llama)),
                              llama(ids), atol=1e-3)
    with pytest.raises(ValueError, match="positions are read-only"):
        ShiftPositions(offset=1.0).fwd_hooks(generic[0])


# ---- learned absolute positions ----------------------------------------------------------------------------------


def test_removing_every_ap_band_equals_a_zero_position_table_and_finds_shifted_rows():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, 2, 10)
    every = RemoveAPBands(above=0)
    got = model.run_with_hooks(ids, fwd_hooks=every.fwd_hooks(model), position_offset=7)
    nothing = model.run_with_hooks(ids, fwd_hooks=RemoveAPBands(bins=()).fwd_hooks(model), position_offset=7)
    torch.testing.assert_close(nothing, model(ids, position_offset=7))
    with torch.no_grad():
        model.positional_embedding.weight.zero_()
    torch.testing.assert_close(got, model(ids, position_offset=7), rtol=1e-4, atol=1e-4)


def test_removing_the_slow_ap_bands_takes_exactly_the_dct_components_away():
    """A table that is one cosine of DCT bin 5 plus a constant: removing bins below 1 leaves the cosine, above 1 the
    constant."""
    import math

    model = tiny_encoder("ap")
    n = model.ap_embedding_matrix().shape[0]
    cosine = torch.tensor([math.cos(math.pi * 5 * (i + 0.5) / n) for i in range(n)])
    with torch.no_grad():
        model.positional_embedding.weight[1:] = 0.5 + cosine[:, None] * torch.linspace(1, 2, model.cfg.hidden_size)
    rows = {}
    grab = ("hook_pos_embed", lambda r, hook: rows.setdefault("r", r))
    ids = token_ids(model, 1, 8)
    for iv, want in ((RemoveAPBands(below=1), cosine[:8, None] * torch.linspace(1, 2, model.cfg.hidden_size)),
                     (RemoveAPBands(above=1), torch.full((8, model.cfg.hidden_size), 0.5))):
        rows.clear()
        model.run_with_hooks(ids, fwd_hooks=iv.fwd_hooks(model) + [grab])
        torch.testing.assert_close(rows["r"][0], want, rtol=1e-4, atol=1e-4)
