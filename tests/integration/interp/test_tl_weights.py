"""TransformerLens' weight processing, modules and helpers on poslens models, checked against what they must give: the
model's own log-probabilities (processing changes none), its own logits (TransformerLens' logit-lens and direct
logit attribution lines on a processed model), its own cached activations (neuron results summing to the MLP output,
``stop_at_layer`` giving the residual the cache holds), and TransformerLens' ``TransformerBridge`` processing the same
transformers checkpoint."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pytest
import torch

import interp
from interp.families import get as get_family
from interp.weight_processing import WeightProcessingError
from tests.helpers import tiny_model
from tests.hf_helpers import tiny_hf
from tests.integration.interp.test_tl_surface import byte_tokenizer
from tests.repo_helpers import tiny_repo

ALL = dict(fold_ln=True, center_writing_weights=True, center_unembed=True, fold_value_biases=True)


def _spread_vectors(model, seed: int = 1):
    """Every 1-d parameter (norm weights, biases) moved off its initial value, so each fold has something to move."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model


def _hf(kind: str, **overrides):
    from interp.families.hf.checkpoints import load_generic

    directory = Path(tempfile.mkdtemp())
    _spread_vectors(tiny_hf(kind, **overrides)).save_pretrained(directory)
    return load_generic(directory)


def _encoder(variant: str, **overrides):
    """A single-stream (or DSTG) encoder of the family's example size, every weight spread (its own initialisation
    leaves the logits nearly uniform, where a wrong fold would hardly show)."""
    from interp.families.encoder.model import EncoderConfig, EncoderModel
    from tests.hf_helpers import spread_weights

    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_length=32, variant=variant, **overrides)
    return _spread_vectors(spread_weights(EncoderModel(cfg)))


def _bigcode():
    """GPT-BigCode with one key head (multi-query) and learned positions."""
    import transformers as T

    from interp.families.hf.checkpoints import load_generic
    from tests.hf_helpers import spread_weights

    directory = Path(tempfile.mkdtemp())
    torch.manual_seed(0)
    config = T.GPTBigCodeConfig(n_embd=64, n_layer=2, n_head=4, vocab_size=300, n_positions=64, multi_query=True,
                                bos_token_id=1, eos_token_id=2)
    _spread_vectors(spread_weights(T.GPTBigCodeForCausalLM(config))).save_pretrained(directory)
    return load_generic(directory)


FOLDABLE = {  # family models whose norms fold: name -> builder
    "increments-shared": lambda: tiny_model("shared"),
    "increments-per-layer": lambda: tiny_model("per-layer"),
    "increments-layernorm": lambda: tiny_model("rope", norm_type="layernorm", activation="gelu"),
    "llama": lambda: _spread_vectors(interp.load(tiny_hf("llama"))),
    "hf-llama": lambda: _hf("llama"),
    "hf-qwen2": lambda: _hf("qwen2"),
    "hf-gpt2": lambda: _hf("gpt2"),
    "hf-gpt_neox": lambda: _hf("gpt_neox"),  # fused qkv laid out head by head, with biases
    "hf-gemma2": lambda: _hf("gemma2", final_logit_softcapping=None),
    "hf-phi3": lambda: _hf("phi3"),  # fused qkv and fused [gate | up]
    "encoder-ap": lambda: _encoder("ap"),
    "encoder-rp": lambda: _encoder("rp", untie_cls=True),
    "encoder-rope": lambda: _encoder("rope"),
    "encoder-tied": lambda: _encoder("ap", tie_word_embeddings=True),
}


def _tokens(model, n: int = 10):
    torch.manual_seed(3)
    return torch.randint(3, model.d_vocab, (2, n))


def _options(model) -> dict:
    """Every option the model's family does not refuse."""
    refuse = model.tl_weight_plan().refuse
    return {k: k not in refuse for k in ALL}


@pytest.mark.parametrize("name", list(FOLDABLE))
def test_processing_leaves_the_log_probabilities_as_they_were(name):
    model = FOLDABLE[name]()
    tokens = _tokens(model)
    with torch.no_grad():
        before = model(tokens).log_softmax(-1)
        w_e = model.W_E.clone()
        model.process_weights_(**_options(model))
        after = model(tokens).log_softmax(-1)
    assert torch.allclose(after, before, atol=5e-5, rtol=1e-5), (after - before).abs().max()
    assert set(model.weights_processed) >= {"fold_ln", "center_unembed"}
    assert torch.allclose(model.ln_final.w, torch.ones_like(model.ln_final.w))  # the final norm's weight is in W_U
    for block in model.blocks:  # and each block's norms in the weights reading them (the log-probs say correctly)
        for norm in (block._modules.get(k) for k in ("ln1", "ln2")):
            assert norm is None or torch.equal(norm.w, torch.ones_like(norm.w))
    assert torch.allclose(model.W_U.sum(-1), torch.zeros(model.d_model), atol=1e-4)  # centred over the vocabulary
    if "center_writing_weights" not in model.weights_processed:  # RMSNorm: the embeddings are only untied, not moved
        assert torch.equal(model.W_E, w_e)
    else:
        assert torch.allclose(model.W_E.mean(-1), torch.zeros(model.d_vocab), atol=1e-5)


def test_layer_norm_models_have_their_writing_weights_centred_and_rms_models_not():
    ln = FOLDABLE["increments-layernorm"]().process_weights_()
    rms = FOLDABLE["increments-shared"]().process_weights_()
    assert "center_writing_weights" in ln.weights_processed and ln.cfg.normalization_type == "LNPre"
    assert "center_writing_weights" not in rms.weights_processed and rms.cfg.normalization_type == "RMSPre"
    assert torch.allclose(ln.W_O.sum(-1), torch.zeros_like(ln.W_O.sum(-1)), atol=1e-5)


def _logit_lens(model, tokens):
    logits, cache = model.run_with_cache(tokens)
    lens = cache.apply_ln_to_stack(cache["resid_post", -1], layer=-1) @ model.W_U + model.b_U
    return logits, lens, cache


@pytest.mark.parametrize("name", ["llama", "increments-layernorm", "hf-gpt2", "hf-qwen2", "hf-phi3", "encoder-rp"])
def test_transformer_lens_logit_lens_and_attribution_give_the_logits_of_a_processed_model(name):
    model = FOLDABLE[name]().process_weights_()
    tokens = _tokens(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a processed model draws no warning
        logits, lens, cache = _logit_lens(model, tokens)
        stack = cache.get_full_resid_decomposition(expand_neurons=False, apply_ln=True)
        direct = (stack @ model.W_U).sum(0) + model.b_U
    scale = logits.abs().max()
    assert torch.allclose(lens, logits, atol=1e-4 * scale)
    assert torch.allclose(direct, logits, atol=1e-4 * scale)


def test_on_an_unprocessed_model_the_logit_lens_line_is_off_and_says_so_once():
    model = FOLDABLE["llama"]()
    tokens = _tokens(model)
    with torch.no_grad(), pytest.warns(UserWarning, match="not folded into W_U.*fold_ln=True"):
        logits, lens, cache = _logit_lens(model, tokens)
    assert not torch.allclose(lens, logits, atol=1e-2)
    normed = cache.apply_ln_to_stack(cache["resid_post", -1], layer=-1) * model.ln_final.w
    assert torch.allclose(model.unembed(normed), logits, atol=1e-4)  # what the docstring says a lens needs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.apply_ln_to_stack(cache["resid_post", -1], layer=-1)  # once per model


@pytest.mark.parametrize("name,option,why", [
    ("repo", "fold_ln", "post-norm"),
    ("encoder", "fold_ln", "DSTG"),
    ("bert", "center_writing_weights", "post-LayerNorm"),
    ("hf-olmo2", "fold_ln", "post-norm"),
    ("hf-gemma2-softcap", "center_unembed", "soft-capped"),
    ("encoder-normalized", "fold_ln", "residual='normalized' adds each norm's output to the residual"),
    ("encoder-headless", "center_unembed", "no MLM head"),
    ("bert", "fold_ln", "post-LayerNorm"),
    ("llama", "refactor_factored_attn_matrices", r"rotary positions.*TransformerLens refuses rotary models"),
    ("increments", "refactor_factored_attn_matrices", r"\(pope positions\)"),
    ("encoder", "refactor_factored_attn_matrices", "DSTG"),
    ("hf-bigcode", "refactor_factored_attn_matrices", "grouped-query attention"),
])
def test_an_option_a_family_cannot_apply_is_an_error_naming_family_and_option_before_any_weight_changes(name, option,
                                                                                                       why):
    from interp.families import get

    model = {"repo": lambda: tiny_repo("repo"), "encoder": lambda: get("encoder").examples()[0],
             "bert": lambda: get("bert").examples()[0], "hf-olmo2": lambda: _hf("olmo2"),
             "hf-gemma2-softcap": lambda: _hf("gemma2", final_logit_softcapping=3.0),
             "encoder-normalized": lambda: _encoder("ap", residual="normalized"),
             "encoder-headless": lambda: _encoder("rp", mlm_head=False), "llama": FOLDABLE["llama"],
             "increments": lambda: tiny_model("pope"), "hf-bigcode": _bigcode}[name]()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(WeightProcessingError, match=rf"\({model.family} family\): {option}=True .*{why}"):
        model.process_weights_(**{k: k == option for k in (*ALL, "refactor_factored_attn_matrices")})
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert not getattr(model, "weights_processed", None)


def test_post_norm_repo_processes_what_it_can_and_keeps_its_log_probabilities():
    model = tiny_repo("repo", attention_bias=True)
    _spread_vectors(model)
    tokens = _tokens(model)
    with torch.no_grad():
        before = model(tokens).log_softmax(-1)
        model.process_weights_(fold_ln=False)
        assert torch.allclose(model(tokens).log_softmax(-1), before, atol=5e-5)
    assert model.weights_processed == {"center_unembed": True, "fold_value_biases": True}
    assert torch.count_nonzero(model.b_V) == 0


def test_load_processes_on_request_records_it_and_checks_the_options_first(tmp_path):
    tiny_hf("llama").save_pretrained(tmp_path)
    plain = interp.load(tmp_path)
    folded = interp.load(tmp_path, fold_ln=True, center_unembed=True)
    tokens = _tokens(plain)
    with torch.no_grad():
        assert torch.allclose(folded(tokens).log_softmax(-1), plain(tokens).log_softmax(-1), atol=5e-5)
    assert folded.source["processed"] == ["center_unembed", "fold_ln"] and "processed" not in plain.source
    assert folded.source["weights_sha256"] != plain.source["weights_sha256"]
    with pytest.raises(TypeError, match="fold_ln='yes'"):
        interp.load(tmp_path / "missing", fold_ln="yes")  # refused before the path is read
    with pytest.raises(WeightProcessingError, match="refactor_factored_attn_matrices=True .*rotary"):
        interp.load(tmp_path, refactor_factored_attn_matrices=True)


def test_load_refactors_the_attention_matrices_on_request(tmp_path):
    _spread_vectors(tiny_hf("gpt2")).save_pretrained(tmp_path)
    plain = interp.load(tmp_path)
    refactored = interp.load(tmp_path, refactor_factored_attn_matrices=True)
    tokens = _tokens(plain)
    with torch.no_grad():
        assert torch.allclose(refactored(tokens).log_softmax(-1), plain(tokens).log_softmax(-1), atol=1e-4)
    assert refactored.source["processed"] == ["refactor_factored_attn_matrices"]
    assert not torch.allclose(refactored.W_V, plain.W_V, atol=1e-2)


def test_a_second_processing_warns_and_changes_nothing():
    model = FOLDABLE["llama"]().process_weights_()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.warns(UserWarning, match="already processed"):
        model.process_weights_()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


BRIDGE_CASES = {  # checkpoint kind, options beyond TransformerLens' defaults, the weights compared
    "gpt2": ("gpt2", {}, ("W_U", "b_U", "W_E", "W_Q", "W_O", "b_O", "W_in", "W_out")),
    "gpt_neox": ("gpt_neox", {}, ("W_U", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_O", "b_O", "W_in", "W_out")),
    "phi3": ("phi3", {}, ("W_U", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_gate", "W_out")),
    "gpt2-refactored": ("gpt2", {"refactor_factored_attn_matrices": True},
                        ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")),
}


@pytest.mark.parametrize("case", list(BRIDGE_CASES))
def test_transformer_lens_bridge_processes_a_checkpoint_to_the_same_weights(case, tmp_path, monkeypatch):
    """The oracle: TransformerLens' own ``TransformerBridge.process_weights`` on the same transformers checkpoint. A
    refactored head's singular vectors are defined up to sign, so there the magnitudes are compared (the circuits
    themselves are the refactoring test's)."""
    bridge_module = pytest.importorskip("transformer_lens.model_bridge")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    kind, options, names = BRIDGE_CASES[case]
    _spread_vectors(tiny_hf(kind)).save_pretrained(tmp_path)
    byte_tokenizer(tmp_path)  # the bridge reads one for some architectures (Phi-3)
    from interp.families.hf.checkpoints import load_generic

    ours = load_generic(tmp_path).process_weights_(**options)
    bridge = bridge_module.TransformerBridge.boot_transformers(str(tmp_path), device="cpu", dtype=torch.float32)
    bridge.process_weights(**{**ALL, **options})
    same = (lambda a, b: (a.abs(), b.abs())) if options else (lambda a, b: (a, b))
    for name in names:
        mine, theirs = same(getattr(ours, name), getattr(bridge, name))
        assert torch.allclose(mine, theirs, atol=1e-4 * max(1.0, float(theirs.abs().max()))), name
    tokens = _tokens(ours)
    with torch.no_grad():
        mine, theirs = ours(tokens).log_softmax(-1), bridge(tokens).log_softmax(-1)
    assert torch.allclose(mine, theirs, atol=1e-4 * float(theirs.abs().max())), (mine - theirs).abs().max()


def test_refactoring_a_rotary_model_is_refused_as_transformer_lens_refuses_it(tmp_path, monkeypatch):
    bridge_module = pytest.importorskip("transformer_lens.model_bridge")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny_hf("gpt_neox").save_pretrained(tmp_path)
    byte_tokenizer(tmp_path)
    bridge = bridge_module.TransformerBridge.boot_transformers(str(tmp_path), device="cpu", dtype=torch.float32)
    with pytest.raises(AssertionError, match="rotary"):
        bridge.process_weights(refactor_factored_attn_matrices=True)
    ours = interp.load(tmp_path)
    state = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(WeightProcessingError, match=r"\(hf family\): refactor_factored_attn_matrices=True .*rotary"):
        ours.process_weights_(refactor_factored_attn_matrices=True)
    assert all(torch.equal(state[k], v) for k, v in ours.state_dict().items())


def test_gpt_neox_head_by_head_qkv_views_give_the_hooked_queries_keys_and_values():
    """GPT-NeoX lays its fused query_key_value out ``[head, q|k|v, d_head]``: ``residual @ W_Q + b_Q`` (and K, V) must
    be what its attention computes (queries and keys seen before rotation: at position 0, and in the dimensions
    the partial rotary factor leaves alone); then its value biases fold into b_O."""
    model = FOLDABLE["hf-gpt_neox"]()
    tokens = _tokens(model)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        x = model.blocks[0].parts["ln1"](cache["blocks.0.hook_resid_pre"])
        q, k, v = (torch.einsum("bpm,hmd->bphd", x, w[0]) + b[0]
                   for w, b in ((model.W_Q, model.b_Q), (model.W_K, model.b_K), (model.W_V, model.b_V)))
    turned = int(model.d_head * model.hf.config.rope_parameters["partial_rotary_factor"])
    assert torch.allclose(v, cache["blocks.0.attn.hook_v"], atol=1e-5)
    for ours, name in ((q, "hook_rot_q"), (k, "hook_rot_k")):
        hooked = cache[f"blocks.0.attn.{name}"]
        assert torch.allclose(ours[:, 0], hooked[:, 0], atol=1e-5)
        assert torch.allclose(ours[..., turned:], hooked[..., turned:], atol=1e-5)
        assert not torch.allclose(ours[:, 1:, :, :turned], hooked[:, 1:, :, :turned], atol=1e-3)  # rotated there
    assert model.b_V.abs().max() > 0.05
    with torch.no_grad():
        before = model(tokens).log_softmax(-1)
        model.process_weights_(fold_ln=False, center_writing_weights=False, center_unembed=False)
        assert torch.allclose(model(tokens).log_softmax(-1), before, atol=5e-5)
    assert model.weights_processed == {"fold_value_biases": True} and not model.b_V.any()


def _circuits(model) -> dict:
    """QK (with the biases as a last input coordinate) and OV circuits of every head, in float64."""
    w_q, w_k = (torch.cat([w, b[:, :, None]], 2).double() for w, b in ((model.W_Q, model.b_Q), (model.W_K, model.b_K)))
    return {"QK": w_q @ w_k.transpose(-1, -2), "OV": model.W_V.double() @ model.W_O.double(),
            "b": model.b_O.double() + torch.einsum("lhd,lhdm->lm", model.b_V.double(), model.W_O.double())}


REFACTORABLE = {"hf-gpt2": FOLDABLE["hf-gpt2"], "encoder-ap": FOLDABLE["encoder-ap"],
                "encoder-rp": FOLDABLE["encoder-rp"], "bert": lambda: _spread_vectors(get_family("bert").examples()[0])}


@pytest.mark.parametrize("name", list(REFACTORABLE))
def test_refactoring_the_factored_attention_matrices_keeps_each_heads_circuits_and_the_outputs(name):
    model = REFACTORABLE[name]()
    tokens = _tokens(model)
    with torch.no_grad():
        before, circuits = model(tokens), _circuits(model)
        w_q = model.W_Q.clone()
        model.process_weights_(fold_ln=False, center_writing_weights=False, center_unembed=False,
                               fold_value_biases=False, refactor_factored_attn_matrices=True)
        after = model(tokens)
    out = (lambda t: t.log_softmax(-1)) if model.has_output_head else (lambda t: t)
    assert torch.allclose(out(after), out(before), atol=5e-5 * max(1.0, before.abs().max() / 10)), \
        (out(after) - out(before)).abs().max()
    for key, value in _circuits(model).items():
        assert torch.allclose(value, circuits[key], atol=1e-4 * circuits[key].abs().max()), key
    assert not torch.allclose(model.W_Q, w_q, atol=1e-2)  # the factors did change
    w_o = model.W_O.double()  # [layer, head, d_head, d_model]: orthonormal rows
    assert torch.allclose(w_o @ w_o.transpose(-1, -2), torch.eye(w_o.shape[-2], dtype=w_o.dtype), atol=1e-5)
    assert not model.b_V.any() and model.weights_processed == {"refactor_factored_attn_matrices": True}


def test_process_weights_defaults_are_transformer_lens_own():
    import inspect

    bridge = pytest.importorskip("transformer_lens.model_bridge").TransformerBridge
    theirs = inspect.signature(bridge.process_weights).parameters
    ours = inspect.signature(FOLDABLE["llama"]().process_weights_).parameters
    options = ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases",
               "refactor_factored_attn_matrices")
    assert {k: ours[k].default for k in options} == {k: theirs[k].default for k in options}
    assert set(options) == set(ours)


# -- modules and helpers -----------------------------------------------------------------------------------------------
def test_embed_unembed_ln_final_and_pos_embed_are_views_of_the_model_with_transformer_lens_names():
    model = FOLDABLE["llama"]()
    tokens = _tokens(model)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        assert torch.equal(model.embed(tokens), cache["hook_embed"])
        assert torch.equal(model.embed.W_E, model.W_E) and torch.equal(model.unembed.W_U, model.W_U)
        assert torch.allclose(model.unembed(cache["hook_final"]), logits)
        assert torch.allclose(model.ln_final(cache["resid_post", -1]), cache["hook_final"])
    assert torch.equal(model.ln_final.w, model.norm.weight) and not model.ln_final.b.any()
    with pytest.raises(AttributeError, match="has no pos_embed: no learned position table"):
        model.pos_embed
    gpt2 = FOLDABLE["hf-gpt2"]()
    with torch.no_grad():
        _, cache = gpt2.run_with_cache(tokens)
        assert torch.equal(gpt2.pos_embed(tokens), cache["hook_pos_embed"])
    assert tuple(gpt2.W_pos.shape) == (gpt2.max_seq_len, gpt2.d_model)


def test_pos_embed_takes_transformer_lens_offset_and_attention_mask():
    """TL's ``PosEmbed(tokens, past_kv_pos_offset, attention_mask)``: rows offset..offset+pos-1; with a mask each row's
    real tokens from 0 (an interior zero renumbers what follows) and zeros at its padding; what the model itself adds
    (``hook_pos_embed``) on a padded batch at its real tokens."""
    gpt2 = FOLDABLE["hf-gpt2"]()
    w = gpt2.W_pos
    tokens = torch.tensor([[5, 6, 7, 8], [0, 0, 9, 10], [11, 0, 12, 13]])
    mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1], [1, 0, 1, 1]])
    with torch.no_grad():
        assert torch.equal(gpt2.pos_embed(tokens[:, 1:], 2)[0], w[2:5])
        out = gpt2.pos_embed(tokens, attention_mask=mask)
        assert torch.equal(out[0], w[:4]) and torch.equal(out[1, 2:], w[:2]) and not out[1, :2].any()
        assert torch.equal(out[2, [0, 2, 3]], w[:3]) and not out[2, 1].any()
        tail = gpt2.pos_embed(tokens[:, 2:], 2, attention_mask=mask)  # the last two after two cached
        assert torch.equal(tail, out[:, 2:])
        _, cache = gpt2.run_with_cache(tokens, attention_mask=mask.bool())
        real = mask.bool()
        assert torch.equal(cache["hook_pos_embed"][real], out[real])
    with pytest.raises(ValueError, match=r"attention_mask of shape \(3, 3\) for tokens of shape \(3, 4\)"):
        gpt2.pos_embed(tokens, attention_mask=mask[:, 1:])


@pytest.mark.parametrize("name", ["llama", "increments-layernorm", "hf-gpt2", "bert"])
def test_neuron_results_sum_to_the_mlp_output(name):
    from interp.families import get

    model = get("bert").examples()[0] if name == "bert" else FOLDABLE[name]()
    tokens = _tokens(model)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        for layer in range(model.n_layers):
            neurons = cache.get_neuron_results(layer)  # [batch, pos, d_mlp, d_model]
            assert torch.allclose(neurons.sum(-2) + model.b_out[layer], cache["mlp_out", layer], atol=1e-4)
        stack = cache.stack_neuron_results(layer=model.n_layers)
    assert stack.shape[0] == model.n_layers * model.cfg.d_mlp
    assert model.W_in.shape == (model.n_layers, model.d_model, model.cfg.d_mlp)
    assert model.W_out.shape == (model.n_layers, model.cfg.d_mlp, model.d_model)


@pytest.mark.parametrize("name", ["llama", "hf-gpt2", "increments-layernorm"])
def test_the_full_decomposition_with_neurons_and_accumulated_bias_sums_to_the_residual(name):
    model = FOLDABLE[name]()
    tokens = _tokens(model)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        stack = cache.get_full_resid_decomposition(expand_neurons=True)
    assert torch.allclose(stack.sum(0), cache["resid_post", -1], atol=1e-3)
    biases = sum(model.b_O[l] + model.b_out[l] for l in range(model.n_layers))
    assert torch.allclose(model.accumulated_bias(model.n_layers), biases.float(), atol=1e-6)
    assert torch.allclose(model.accumulated_bias(1, mlp_input=True),
                          (model.b_O[0] + model.b_out[0] + model.b_O[1]).float(), atol=1e-6)


def test_token_helpers_find_positions_strings_and_unembedding_directions():
    model = tiny_model("shared")  # bytes: one token per character
    assert model.get_token_position("b", "abcb") == 1 and model.get_token_position("b", "abcb", mode="last") == 3
    assert model.get_token_position(model.to_single_token("c"), model.to_tokens("abc")) == 2
    with pytest.raises(ValueError, match="does not occur"):
        model.get_token_position("z", "abc")
    assert model.to_single_str_token(model.to_single_token("q")) == "q"
    t = model.to_tokens("ab")[0]
    assert torch.equal(model.tokens_to_residual_directions("a"), model.W_U[:, t[0]])
    assert torch.equal(model.tokens_to_residual_directions(t), model.W_U[:, t].T)


@pytest.mark.parametrize("name", ["llama", "increments-shared", "hf-gpt2"])
def test_hook_tokens_sees_and_edits_the_tokens(name):
    model = FOLDABLE[name]()
    tokens = _tokens(model)
    other = tokens.flip(-1)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter="hook_tokens")
        edited = model.run_with_hooks(tokens, fwd_hooks=[("hook_tokens", lambda t, hook: other)])
        assert torch.allclose(edited, model(other))
    assert torch.equal(cache["hook_tokens"], tokens)


@pytest.mark.parametrize("name", ["llama", "hf-gpt2", "increments-per-layer"])
def test_stop_and_start_at_layer_split_the_forward_pass_at_a_block(name):
    model = FOLDABLE[name]()
    tokens = _tokens(model)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        close = lambda a, b: torch.allclose(a, b, atol=1e-5 * b.abs().max())  # noqa: E731 (cached runs hook more)
        assert close(model(tokens, stop_at_layer=1), cache["resid_pre", 1])
        assert close(model(tokens, stop_at_layer=-1), cache["resid_pre", model.n_layers - 1])
        assert close(model(tokens, stop_at_layer=model.n_layers), cache["resid_post", -1])
        resumed = model(cache["resid_pre", 1], start_at_layer=1)
        assert torch.allclose(resumed, logits, atol=1e-5)
    with pytest.raises(ValueError, match="stop_at_layer=7 is not a layer index"):
        model(tokens, stop_at_layer=7)


def test_start_at_layer_needs_the_tokens_where_the_blocks_read_them():
    model = FOLDABLE["increments-shared"]()
    tokens = _tokens(model)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        with pytest.raises(ValueError, match="increments family.*start_at_layer needs tokens="):
            model(cache["resid_pre", 1], start_at_layer=1)
        assert torch.allclose(model(cache["resid_pre", 1], start_at_layer=1, tokens=tokens), logits, atol=1e-5)

