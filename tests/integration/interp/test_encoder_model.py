import math

import pytest
import torch

from interp.base import InputError
from interp.capabilities import Capability, CapabilityError, require
from interp.families.encoder.checkpoints import export
from interp.families.encoder.model import EncoderConfig, EncoderModel, t5_buckets
from tests.encoder_helpers import SMALL, reference_logits, t5_reference_buckets, tiny_encoder, token_ids

CASES = {
    "dstg-normalized": ("disentangled", {}),
    "dstg-prenorm": ("disentangled", dict(residual="prenorm")),
    "dstg-per-layer-rp-at-special": ("disentangled", dict(rp_per_layer=True, rp_at_special=True)),
    "dstg-full-head-no-thetas": ("disentangled", dict(mlm_input="full", untie_cls=False)),
    "dstg-no-rp": ("disentangled", dict(rp_bias=False, untie_cls=False)),
    "ap": ("ap", {}),
    "ap-normalized": ("ap", dict(residual="normalized")),
    "rp": ("rp", {}),
    "rp-no-thetas": ("rp", dict(untie_cls=False)),
    "rope-half-split": ("rope", {}),
    "rope-interleaved": ("rope", dict(rope_style="interleaved", rope_theta=500.0)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_an_independent_reference_of_the_development_forward(case):
    variant, overrides = CASES[case]
    model = tiny_encoder(variant, **overrides)
    config, state = export(model)
    ids = token_ids(model, batch=2, n=13)
    offset = 5 if variant != "rp" else 0
    with torch.no_grad():
        torch.testing.assert_close(model(ids, position_offset=offset),
                                   reference_logits(state, config, ids, offset=offset), atol=1e-4, rtol=1e-4)


def test_residual_modes_and_rotary_layouts_really_differ():
    ids = token_ids(tiny_encoder(), n=9)
    a, b = tiny_encoder("disentangled"), tiny_encoder("disentangled", residual="prenorm")
    assert not torch.allclose(a(ids), b(ids), atol=1e-3)
    c, d = tiny_encoder("rope"), tiny_encoder("rope", rope_style="interleaved")
    assert not torch.allclose(c(ids), d(ids), atol=1e-3)


def test_default_residual_is_normalized_for_dstg_and_prenorm_for_baselines():
    assert EncoderConfig(**SMALL, pos_size=8).residual == "normalized"
    assert EncoderConfig(**SMALL, variant="rp").residual == "prenorm"
    assert EncoderConfig(**SMALL, pos_size=8).d_qk == 8  # (hidden + pos) / heads = 32 / 4


def test_t5_buckets_match_transformers_on_a_grid():
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-700, 701)
    for nb, md in ((32, 128), (16, 64), (8, 20)):
        want = T5Attention._relative_position_bucket(rel, bidirectional=True, num_buckets=nb, max_distance=md)
        assert torch.equal(t5_buckets(rel, nb, md), want)


def test_bucket_buffer_is_t5_of_key_minus_query():
    model = tiny_encoder("disentangled")
    buf = model.relative_pos_bias.bucket_indices
    assert buf.dtype == torch.long and tuple(buf.shape) == (48, 48)
    assert torch.equal(buf, t5_reference_buckets(48))
    assert "relative_pos_bias.bucket_indices" in model.state_dict()  # persistent
    # a key after its query lands in the upper half (T5: relative_position = memory - context > 0)
    assert int(buf[0, 1]) == 17 and int(buf[1, 0]) == 1 and int(buf[5, 5]) == 0
    assert int(buf[0, 47]) == 16 + 8 + int(math.log(47 / 8) / math.log(128 / 8) * 8)


def _planted_thetas(model):
    h = model.cfg.num_attention_heads
    with torch.no_grad():
        model.cls_sep_override.thetas.copy_(torch.tensor([[10.0], [20.0], [30.0], [40.0]]) + torch.arange(h))
    return model


def test_special_rows_and_columns_get_their_theta_in_the_rp_component_and_no_ap_logit():
    model = _planted_thetas(tiny_encoder("disentangled"))
    ids = token_ids(model, batch=1, n=9)
    n = 9
    _, cache = model.run_with_cache(ids)
    rp, ap = cache["blocks.1.attn.hook_logits_rp"][0], cache["blocks.1.attn.hook_logits_ap"][0]
    th = model.cls_sep_override.thetas.detach()
    inner = torch.arange(1, n - 1)
    for h in range(model.cfg.num_attention_heads):
        assert torch.all(rp[h, 0, inner] == th[0, h]) and torch.all(rp[h, n - 1, inner] == th[1, h])
        # columns win at the corners
        assert torch.all(rp[h, :, 0] == th[2, h]) and torch.all(rp[h, :, n - 1] == th[3, h])
    buckets = t5_reference_buckets(n)
    table = model.relative_pos_bias.relative_attention_bias.detach()
    torch.testing.assert_close(rp[:, 1:-1, 1:-1], table[buckets].permute(2, 0, 1)[:, 1:-1, 1:-1])
    assert torch.all(ap[:, [0, n - 1], :] == 0) and torch.all(ap[:, :, [0, n - 1]] == 0)
    q, k = cache["blocks.1.attn.hook_q_ap"][0], cache["blocks.1.attn.hook_k_ap"][0]
    torch.testing.assert_close(ap[:, 1:-1, 1:-1], (torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(8))[:, 1:-1, 1:-1])
    total = (cache["blocks.1.attn.hook_logits_ap"] + cache["blocks.1.attn.hook_logits_sem"]
             + cache["blocks.1.attn.hook_logits_rp"])
    torch.testing.assert_close(cache["blocks.1.attn.hook_attn_scores"], total)
    torch.testing.assert_close(cache["blocks.1.attn.hook_pattern"], total.softmax(-1))


def test_rp_at_special_adds_the_buckets_under_the_thetas():
    model = _planted_thetas(tiny_encoder("disentangled", rp_at_special=True))
    _, cache = model.run_with_cache(token_ids(model, batch=1, n=7))
    table = model.relative_pos_bias.relative_attention_bias.detach()
    bucketed = table[t5_reference_buckets(7)].permute(2, 0, 1)
    th = model.cls_sep_override.thetas.detach()
    torch.testing.assert_close(cache["blocks.0.attn.hook_logits_rp"][0, :, 0, 3], th[0] + bucketed[:, 0, 3])
    torch.testing.assert_close(cache["blocks.0.attn.hook_logits_rp"][0, :, 2, 6], th[3] + bucketed[:, 2, 6])


def test_rp_baseline_thetas_are_rp_and_the_content_logit_stays():
    model = _planted_thetas(tiny_encoder("rp"))
    _, cache = model.run_with_cache(token_ids(model, batch=1, n=6))
    assert torch.all(cache["blocks.0.attn.hook_logits_rp"][0, 2, 0, 1:5] == 12.0)
    sem = cache["blocks.0.attn.hook_logits_sem"][0]
    assert sem[:, 0, 3].abs().min() > 0  # not overwritten
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"][0],
                               sem + cache["blocks.0.attn.hook_logits_rp"][0])


def test_planted_zero_sem_and_rp_leave_the_softmax_of_the_ap_logits():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, batch=2, n=10)
    zero = lambda t, hook: torch.zeros_like(t)  # noqa: E731
    hooks = [(f"blocks.{l}.attn.hook_logits_{c}", zero) for l in range(2) for c in ("sem", "rp")]
    seen = {}
    hooks += [(f"blocks.{l}.attn.hook_{what}", lambda t, hook: seen.__setitem__(hook.name, t.detach()))
              for l in range(2) for what in ("logits_ap", "pattern")]
    with model.hooks(fwd_hooks=hooks):
        model(ids)
    for l in range(2):
        ap = seen[f"blocks.{l}.attn.hook_logits_ap"]
        torch.testing.assert_close(seen[f"blocks.{l}.attn.hook_pattern"], ap.softmax(-1))
        # the CLS row has no AP logit: uniform
        assert torch.allclose(ap[:, :, 0].softmax(-1), torch.full_like(ap[:, :, 0], 0.1))


@pytest.mark.parametrize("component", ["ap", "sem", "rp"])
def test_editing_a_component_hook_changes_the_output(component):
    model = tiny_encoder("disentangled")
    ids = token_ids(model, n=8)
    base = model(ids)
    with model.hooks(fwd_hooks=[(f"blocks.0.attn.hook_logits_{component}",
                                 lambda t, hook: t + 3 * torch.randn_like(t))]):
        edited = model(ids)
    assert not torch.allclose(base, edited, atol=1e-3)


def test_hook_resid_ap_edits_propagate():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, n=8)
    base = model(ids)
    seen = {}
    hooks = [("blocks.0.hook_resid_ap", lambda t, hook: torch.zeros_like(t)),
             ("blocks.1.hook_resid_pre", lambda t, hook: seen.__setitem__("pre", t.detach()))]
    with model.hooks(fwd_hooks=hooks):
        edited = model(ids)
    assert torch.all(seen["pre"][..., :8] == 0) and seen["pre"][..., 8:].abs().sum() > 0
    assert not torch.allclose(base, edited, atol=1e-3)


def test_the_mlm_head_reads_the_semantic_stream_only():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, n=8)
    base = model(ids)
    with model.hooks(fwd_hooks=[("hook_final_ap", lambda t, hook: t + 100.0)]):
        torch.testing.assert_close(model(ids), base)
    with model.hooks(fwd_hooks=[("hook_final_sem", lambda t, hook: t + 0.5)]):
        assert not torch.allclose(model(ids), base, atol=1e-3)
    full = tiny_encoder("disentangled", mlm_input="full")
    out = full(ids)
    with full.hooks(fwd_hooks=[("hook_final_ap", lambda t, hook: t + 1.0)]):
        assert not torch.allclose(full(ids), out, atol=1e-3)


def test_ap_shifting_uses_rows_k_plus_one_to_k_plus_n():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, batch=2, n=6)
    table = model.positional_embedding.weight.detach()
    _, cache = model.run_with_cache(ids, position_offset=torch.tensor([0, 7]))
    torch.testing.assert_close(cache["hook_embed_ap"][0], table[1:7])
    torch.testing.assert_close(cache["hook_embed_ap"][1], table[8:14])
    _, cache = model.run_with_cache(ids, position_offset=42)  # 42 + 6 = max_length 48: the last rows
    torch.testing.assert_close(cache["hook_embed_ap"][1], table[43:49])
    ap = tiny_encoder("ap")
    _, cache = ap.run_with_cache(ids, position_offset=3)
    torch.testing.assert_close(cache["hook_pos_embed"][0], ap.positional_embedding.weight.detach()[4:10])


def test_position_offset_errors():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, batch=2, n=6)
    with pytest.raises(InputError, match=r"position_offset 43 \+ 6 tokens = 49 exceeds max_length 48"):
        model(ids, position_offset=43)
    with pytest.raises(InputError, match="must be >= 0, got -1"):
        model(ids, position_offset=-1)
    with pytest.raises(InputError, match=r"an int or a \[batch\] tensor \(\[2\]\), got shape \(3,\)"):
        model(ids, position_offset=torch.tensor([1, 2, 3]))
    with pytest.raises(InputError, match="integer"):
        model(ids, position_offset=1.5)
    with pytest.raises(InputError, match="the rp variant has no absolute positions to shift"):
        tiny_encoder("rp")(ids, position_offset=2)


def test_padded_or_ragged_input_is_refused_with_the_reason():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, batch=2, n=6)
    ids[1, 4] = 0
    with pytest.raises(InputError, match=r"pad id 0 at batch row 1, position 4: "
                                         r"this encoder takes unpadded sequences only"):
        model(ids)
    with pytest.raises(InputError, match=r"same length, got lengths \[3, 2\]"):
        model([[5, 6, 7], [5, 6]])
    with pytest.raises(InputError, match="outside the vocabulary"):
        model([[5, 64]])
    torch.testing.assert_close(model([[5, 6, 7], [8, 9, 10]]), model(torch.tensor([[5, 6, 7], [8, 9, 10]])))


HOOK_SHAPES = {  # b=2, n=7, hidden 24, pos 8, heads 4, d_qk 8, d_head 6
    "hook_tokens": (2, 7),
    "hook_embed_sem": (2, 7, 24), "hook_embed": (2, 7, 24), "hook_embed_ap": (2, 7, 8), "hook_pos_embed": (2, 7, 24),
    "blocks.1.hook_resid_pre": None, "blocks.1.hook_attn_in": None, "blocks.1.hook_attn_out": None,
    "blocks.1.hook_resid_mid": None, "blocks.1.hook_mlp_in": None, "blocks.1.hook_mlp_out": None,
    "blocks.1.hook_resid_post": None, "blocks.1.hook_resid_ap": (2, 7, 8), "blocks.1.hook_resid_sem": (2, 7, 24),
    "blocks.1.attn.hook_q_ap": (2, 7, 4, 8), "blocks.1.attn.hook_k_ap": (2, 7, 4, 8),
    "blocks.1.attn.hook_v_ap": (2, 7, 4, 2),
    "blocks.1.attn.hook_q_sem": (2, 7, 4, 8), "blocks.1.attn.hook_k_sem": (2, 7, 4, 8),
    "blocks.1.attn.hook_v_sem": (2, 7, 4, 6),
    "blocks.1.attn.hook_q": (2, 7, 4, 6), "blocks.1.attn.hook_k": (2, 7, 4, 6), "blocks.1.attn.hook_v": (2, 7, 4, 6),
    "blocks.1.attn.hook_rot_q": (2, 7, 4, 6), "blocks.1.attn.hook_rot_k": (2, 7, 4, 6),
    "blocks.1.attn.hook_logits_ap": (2, 4, 7, 7), "blocks.1.attn.hook_logits_sem": (2, 4, 7, 7),
    "blocks.1.attn.hook_logits_rp": (2, 4, 7, 7), "blocks.1.attn.hook_attn_scores": (2, 4, 7, 7),
    "blocks.1.attn.hook_pattern": (2, 4, 7, 7), "blocks.1.attn.hook_z_ap": (2, 7, 4, 2),
    "blocks.1.attn.hook_z_sem": (2, 7, 4, 6),
    "blocks.1.attn.hook_z": (2, 7, 4, 6), "hook_final_ap": (2, 7, 8), "hook_final_sem": (2, 7, 24),
    "hook_final": (2, 7, 24),
    # TransformerLens' names (interp.tl): norms, MLP hidden layer, per-head results
    "blocks.1.ln1.hook_normalized": None, "blocks.1.ln2.hook_normalized": None, "blocks.1.ln1.hook_scale": (2, 7, 1),
    "blocks.1.ln2.hook_scale": (2, 7, 1), "blocks.1.mlp.hook_pre": (2, 7, 40), "blocks.1.mlp.hook_post": (2, 7, 40),
    "blocks.1.attn.hook_result": (2, 7, 4, 24), "ln_final.hook_scale": (2, 7, 1),
    "ln_final.hook_normalized": (2, 7, 24),
}
SINGLE = {"hook_embed", "blocks.1.ln1.hook_scale", "blocks.1.ln2.hook_scale", "blocks.1.attn.hook_result",
          "ln_final.hook_scale", "ln_final.hook_normalized"}  # one stream: one scale, one wo
PRESENT = {
    "disentangled": {"hook_embed_sem", "hook_embed_ap", "hook_final_ap", "hook_final_sem", "blocks.1.hook_resid_ap",
                     "blocks.1.hook_resid_sem"} | {f"blocks.1.attn.hook_{n}" for n in
                                                    ("q_ap", "k_ap", "v_ap", "q_sem", "k_sem", "v_sem", "logits_ap",
                                                     "logits_sem", "logits_rp", "z_ap", "z_sem")},
    "ap": SINGLE | {"hook_embed_sem", "hook_pos_embed", "hook_final"} | {f"blocks.1.attn.hook_{n}" for n in
                                                                ("q", "k", "v", "logits_sem", "z")},
    "rp": SINGLE | {"hook_embed_sem", "hook_final"} | {f"blocks.1.attn.hook_{n}" for n in
                                              ("q", "k", "v", "logits_sem", "logits_rp", "z")},
    "rope": SINGLE | {"hook_embed_sem", "hook_final"} | {f"blocks.1.attn.hook_{n}" for n in
                                                ("q", "k", "v", "rot_q", "rot_k", "logits_sem", "z")},
}
COMMON = {k for k in HOOK_SHAPES if HOOK_SHAPES[k] is None} | {
    "hook_tokens", "blocks.1.attn.hook_attn_scores", "blocks.1.attn.hook_pattern", "blocks.1.mlp.hook_pre",
    "blocks.1.mlp.hook_post"}


@pytest.mark.parametrize("variant", list(PRESENT))
def test_every_hook_has_its_documented_shape_and_only_documented_hooks_exist(variant):
    model = tiny_encoder(variant)
    d_model = 32 if variant == "disentangled" else 24
    _, cache = model.run_with_cache(token_ids(model, batch=2, n=7))
    layer1 = {k for k in cache if not k.startswith("blocks.0.")}
    assert layer1 == PRESENT[variant] | COMMON
    for name in layer1:
        assert tuple(cache[name].shape) == (HOOK_SHAPES[name] or (2, 7, d_model)), name
    assert model.undocumented_hooks() == []


def test_each_variant_class_documents_exactly_the_hooks_it_has():
    import re

    tables = {}
    for variant in PRESENT:
        model = tiny_encoder(variant)
        tables[variant] = {h.pattern for h in model.hook_table()}
        assert tables[variant] == {re.sub(r"^blocks\.\d+", "blocks.{l}", n) for n in model.hook_dict}, variant
    assert "blocks.{l}.attn.hook_q_ap" in tables["disentangled"] \
        and "blocks.{l}.attn.hook_q" not in tables["disentangled"]
    assert "blocks.{l}.attn.hook_rot_q" in tables["rope"] and "blocks.{l}.attn.hook_rot_q" not in tables["ap"]
    assert "blocks.{l}.attn.hook_logits_rp" in tables["rp"] and "blocks.{l}.attn.hook_logits_rp" not in tables["rope"]


def test_capabilities_and_their_methods():
    caps = {v: tiny_encoder(v).capabilities for v in PRESENT}
    for v, c in caps.items():
        assert {Capability.HIDDEN_STATES, Capability.ATTENTION} <= c
        assert Capability.CAUSAL_LM not in c and Capability.POSITIONS not in c
    assert [v for v in caps if Capability.AP_STREAM in caps[v]] == ["disentangled", "ap"]
    assert [v for v in caps if Capability.LOGIT_COMPONENTS in caps[v]] == ["disentangled", "rp"]
    dstg, rp, ap = tiny_encoder("disentangled"), tiny_encoder("rp"), tiny_encoder("ap")
    assert dstg.logit_components() == ("ap", "sem", "rp") and rp.logit_components() == ("sem", "rp")
    assert tiny_encoder("disentangled", rp_bias=False, untie_cls=False).logit_components() == ("ap", "sem")
    assert dstg.residual_subspaces() == {"full": slice(0, 32), "ap": slice(0, 8), "semantic": slice(8, 32)}
    assert ap.residual_subspaces() == {"full": slice(0, 24)}
    torch.testing.assert_close(dstg.ap_embedding_matrix(), dstg.positional_embedding.weight[1:].detach())
    assert tuple(dstg.ap_embedding_matrix().shape) == (48, 8) and tuple(ap.ap_embedding_matrix().shape) == (48, 24)
    with pytest.raises(CapabilityError, match="next-token logits"):
        require(dstg, Capability.CAUSAL_LM, "generate")
    assert (dstg.family, dstg.max_seq_len, dstg.d_vocab, dstg.n_layers, dstg.n_heads, dstg.d_model) \
        == ("encoder", 48, 64, 2, 4, 32)
    assert "DSTG (AP 8 | semantic 24" in dstg.describe() and "shared by all layers" in dstg.describe()
    assert "per layer" in tiny_encoder("rp", rp_per_layer=True).describe()


def test_query_rows_restricts_the_q_k_hooks_and_edits_still_apply():
    model = tiny_encoder("disentangled")
    ids = token_ids(model, batch=1, n=9)
    full, cache = model.run_with_cache(ids)
    rows = [2, 8]
    seen = {}
    hooks = [(f"blocks.0.attn.hook_{w}", lambda t, hook: seen.__setitem__(hook.name, t.detach()))
             for w in ("logits_rp", "pattern")]
    with model.query_rows(rows), model.hooks(fwd_hooks=hooks):
        out = model(ids)
    torch.testing.assert_close(out, full)
    assert tuple(seen["blocks.0.attn.hook_pattern"].shape) == (1, 4, 2, 9)
    torch.testing.assert_close(seen["blocks.0.attn.hook_pattern"], cache["blocks.0.attn.hook_pattern"][:, :, rows])
    torch.testing.assert_close(seen["blocks.0.attn.hook_logits_rp"], cache["blocks.0.attn.hook_logits_rp"][:, :, rows])
    with model.query_rows([3]), model.hooks(fwd_hooks=[("blocks.1.attn.hook_pattern",
                                                        lambda t, hook: torch.full_like(t, 1 / 9))]):
        edited = model(ids)
    assert not torch.allclose(edited[0, 3], full[0, 3], atol=1e-4)
    torch.testing.assert_close(edited[0, 0], full[0, 0])  # rows of the last layer other than 3 are untouched


def test_tied_and_headless_models():
    tied = tiny_encoder("disentangled", tie_word_embeddings=True)
    assert "decoder.weight" not in tied.state_dict() and "decoder.bias" in tied.state_dict()
    ids = token_ids(tied, n=6)
    logits, cache = tied.run_with_cache(ids)
    torch.testing.assert_close(logits, cache["hook_final_sem"] @ tied.encoder.weight.T + tied.decoder.bias)
    headless = tiny_encoder("disentangled", mlm_head=False)
    out, cache = headless.run_with_cache(ids)
    torch.testing.assert_close(out, torch.cat([cache["hook_final_ap"], cache["hook_final_sem"]], -1))
    assert "no MLM head" in headless.describe()


@pytest.mark.parametrize("overrides, message", [
    (dict(variant="nope"), r"variant='nope' is not one of"),
    (dict(pos_size=6), r"pos_size \(6\) must be a positive multiple of num_attention_heads \(4\)"),
    (dict(variant="ap", pos_size=8), "only the disentangled variant has an AP stream"),
    (dict(variant="rp", rp_bias=False), "contradicts variant='rp'"),
    (dict(variant="rope", untie_cls=True), "has no RP bias and no CLS/SEP thetas"),
    (dict(pos_size=8, residual="post"), r"residual='post' is not one of"),
    (dict(pos_size=8, mlm_input="full", tie_word_embeddings=True), "tie_word_embeddings needs"),
    (dict(pos_size=8, pos_size_extra=1), "unexpected keyword"),
    (dict(pos_size=8, tokenizer="gpt2"), r"tokenizer='gpt2' is not one of"),
    (dict(variant="ap", rp_skip_special=True), r"rp_skip_special=True needs the bucketed bias"),
    (dict(variant="rp", rp_at_special=True, rp_skip_special=True), r"contradicts rp_at_special=True"),
])
def test_config_validation(overrides, message):
    with pytest.raises((ValueError, TypeError), match=message):
        EncoderConfig(**{**SMALL, **overrides})


def test_a_bert_uncased_config_attaches_the_wordpiece_tokenizer():
    from interp.tokenizers import WordPieceTokenizer

    model = EncoderModel(EncoderConfig(**{**SMALL, "vocab_size": 30522, "hidden_size": 8, "num_hidden_layers": 1},
                                       pos_size=4, tokenizer="bert-uncased"))
    assert isinstance(model.tokenizer, WordPieceTokenizer)
    tokens = model.to_tokens("Hello world")
    assert tokens[0].tolist() == [101, 7592, 2088, 102]
    assert model(tokens).shape == (1, 4, 30522)
    assert tiny_encoder("ap").tokenizer is None


@pytest.mark.parametrize("variant, overrides", [("disentangled", {}),
                                                ("disentangled", dict(rp_per_layer=True, rp_at_special=True)),
                                                ("ap", {}), ("rp", {}), ("rope", dict(rope_style="interleaved"))])
def test_the_fused_path_attends_as_the_hooked_components_do(variant, overrides):
    """Without a component hook the logits are one dot product ([q_ap | q_sem].[k_ap | k_sem], the AP part zeroed at the
    special rows / columns) plus the RP bias, run by the fused kernel; the outputs and each layer's attention mass per
    key span (read by span_masses, no pattern built) equal what the hooked, materialised components give."""
    from interp.attention import model_span_masses

    model = tiny_encoder(variant, **overrides)
    ids = token_ids(model, batch=2, n=11)
    identity = [(f"blocks.{l}.attn.hook_logits_sem", lambda t, hook: t) for l in range(2)]
    with torch.no_grad():
        fused = model(ids)
        with model.hooks(fwd_hooks=identity):
            materialised = model(ids)
        _, cache = model.run_with_cache(ids)
        parts = torch.tensor([0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 0])  # [CLS] and [SEP] in part 0
        masses = model_span_masses(model, ids, [0, 3, 10], parts, 3)
    torch.testing.assert_close(fused, materialised, atol=2e-5, rtol=2e-5)
    one_hot = torch.nn.functional.one_hot(parts, 3).float()
    expected = torch.stack([cache[f"blocks.{l}.attn.hook_pattern"][:, :, [0, 3, 10]] @ one_hot for l in range(2)])
    torch.testing.assert_close(masses, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(expected[:, :, :, 0], expected[:, :, :, 1], atol=1e-2)  # the spans really differ
