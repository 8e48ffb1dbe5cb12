"""The TransformerLens surface (``interp.tl``) on every family: a script written against TransformerLens' documented
API gives what TransformerLens' own ``TransformerBridge`` gives on the same checkpoint; its cache methods are checked
against sums computed by hand; every hook of the README's matrix is present or absent with a reason; an unknown hook
name is an error naming the closest ones."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformer_lens.utilities as utils

import interp
from interp.families import families
from interp.families.hf.checkpoints import load_generic
from interp.tl import TL_HOOKS, HookNameError, TLConfig
from tests.hf_helpers import write_tiny_hf

EXAMPLES = [m for f in families() for m in (f.examples() if f.examples else [])]
IDS = [f"{m.family}-{type(m).__name__}-{getattr(m, 'variant', '') or i}" for i, m in enumerate(EXAMPLES)]


def tokens_for(model, n: int = 7) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    low = 1 if model.family != "encoder" else 1  # encoders refuse the pad id 0
    return torch.randint(low, min(model.d_vocab, 90), (1, n), generator=g)


def attention_outputs(model, tokens) -> list[torch.Tensor]:
    """Each layer's attention output as its output projection gives it (a torch hook on that module, no poslens
    hook)."""
    got = []
    handles = [b.attn.tl_projections()[3].register_forward_hook(lambda _m, _a, out: got.append(out))
               for b in model.blocks]
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for h in handles:
            h.remove()
    return got


@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_every_transformerlens_hook_is_present_or_absent_with_a_reason(model):
    patterns = {row.pattern for row in model.hook_table()}
    reasons = model.tl_absent()
    for hook in TL_HOOKS:
        assert hook in patterns or reasons.get(hook), f"{hook}: neither present nor absent with a reason"
        assert not (hook in patterns and hook in reasons), f"{hook}: present, yet given a reason to be absent"
    assert model.undocumented_hooks() == []


@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_cfg_has_transformerlens_fields_over_the_family_config(model):
    cfg = model.cfg
    assert isinstance(cfg, TLConfig)
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_vocab, cfg.n_ctx) == \
        (model.n_layers, model.n_heads, model.d_model, model.d_vocab, model.max_seq_len)
    assert cfg.d_head and cfg.normalization_type in ("RMS", "LN") and cfg.default_prepend_bos is False
    original = model.original_cfg
    if dataclasses.is_dataclass(original):  # the family's fields read (and written) through
        first = dataclasses.fields(original)[0].name
        assert getattr(cfg, first) == getattr(original, first)
        assert dataclasses.asdict(cfg) == dataclasses.asdict(original)
    with pytest.raises(AttributeError):
        _ = cfg.no_such_field


@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_a_cache_is_transformerlens_activation_cache_and_its_sums_hold(model):
    from transformer_lens.ActivationCache import ActivationCache

    tokens = tokens_for(model)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    assert isinstance(cache, ActivationCache)
    torch.testing.assert_close(cache["pattern", 0], cache["blocks.0.attn.hook_pattern"])
    torch.testing.assert_close(cache["resid_post", -1], cache[f"blocks.{model.n_layers - 1}.hook_resid_post"])
    assert "blocks.0.hook_resid_pre" in cache and cache.get("nope") is None
    acc, labels = cache.accumulated_resid(incl_mid=True, return_labels=True)
    assert labels[-1] == "final_post" and acc.shape[0] == 2 * model.n_layers + 1 - 1 + 1
    # additive residuals: the embeddings plus every attention and MLP output are the residual (by hand, per layer)
    additive = model.family not in ("bert",) and not getattr(model, "disentangled", False) and \
        getattr(model.cfg, "residual", "prenorm") != "normalized"
    if additive:
        for layer in range(model.n_layers + 1):
            want = cache[f"blocks.{layer}.hook_resid_pre"] if layer < model.n_layers else cache["resid_post", -1]
            torch.testing.assert_close(cache.decompose_resid(layer=layer).sum(0), want, atol=1e-4, rtol=1e-4)
    if "blocks.0.attn.hook_result" in cache:
        heads = cache.stack_head_results(layer=-1)  # [layer * head, batch, pos, d_model]
        outs = attention_outputs(model, tokens)
        per_layer = heads.reshape(model.n_layers, model.n_heads, *heads.shape[1:]).sum(1)
        b_o = model.b_O
        for layer in range(model.n_layers):
            torch.testing.assert_close(per_layer[layer] + b_o[layer], outs[layer], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("model", [m for m in EXAMPLES if "blocks.0.attn.hook_result" in m.hook_dict],
                         ids=[i for i, m in zip(IDS, EXAMPLES) if "blocks.0.attn.hook_result" in m.hook_dict])
def test_per_head_results_cost_nothing_unless_hooked_and_their_edits_count(model):
    tokens = tokens_for(model)
    o_proj = model.blocks[0].attn.tl_projections()[3]
    calls = []
    handle = o_proj.register_forward_hook(lambda *_: calls.append(1))
    try:
        with torch.no_grad():
            plain = model(tokens)
            assert calls == [1]  # unhooked: the output projection itself, no per-head tensor
            calls.clear()
            same = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_result", lambda r, hook: r)])
            # hooked: the per-head results, summed (hf: transformers' projection runs, then its output is replaced)
            assert calls == ([1] if model.family == "hf" else [])
            torch.testing.assert_close(same, plain, atol=1e-4, rtol=1e-4)

            def drop_head(result, hook):
                result[:, :, 1] = 0
                return result

            def drop_z(z, hook):
                z[:, :, 1] = 0
                return z
            by_result = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_result", drop_head)])
            by_z = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", drop_z)])
    finally:
        handle.remove()
    assert (by_result - plain).abs().max() > 1e-4
    torch.testing.assert_close(by_result, by_z, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("model", [m for m in EXAMPLES if "blocks.0.ln1.hook_scale" in m.hook_dict],
                         ids=[i for i, m in zip(IDS, EXAMPLES) if "blocks.0.ln1.hook_scale" in m.hook_dict])
def test_norm_hooks_are_transformerlens_and_step_by_step_only_while_hooked(model):
    tokens = tokens_for(model)
    with torch.no_grad():
        plain = model(tokens)
        _, cache = model.run_with_cache(tokens, names_filter=["blocks.0.ln1.hook_scale", "blocks.0.ln1.hook_normalized",
                                                              "blocks.0.hook_resid_pre"])
        x = cache["blocks.0.hook_resid_pre"]
        scale, normed = cache["blocks.0.ln1.hook_scale"], cache["blocks.0.ln1.hook_normalized"]
        if model.cfg.normalization_type == "LN":
            x = x - x.mean(-1, keepdim=True)
        if model.family != "bert":  # post-LN: ln1 reads the residual after attention, not resid_pre
            torch.testing.assert_close(normed, x / scale, atol=1e-5, rtol=1e-5)
        doubled = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.ln1.hook_scale", lambda s, hook: 2 * s)])
        halved = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.ln1.hook_normalized", lambda n, hook: n / 2)])
        torch.testing.assert_close(model.run_with_cache(tokens)[0], plain, atol=1e-5, rtol=1e-5)
    assert (doubled - plain).abs().max() > 1e-4
    torch.testing.assert_close(doubled, halved, atol=1e-4, rtol=1e-4)  # dividing by 2s is halving x / s


@pytest.mark.parametrize("model", EXAMPLES[:1] + [m for m in EXAMPLES if m.family == "hf"], ids=lambda m: m.family)
def test_a_hook_name_that_matches_nothing_is_an_error_naming_the_closest(model):
    tokens = tokens_for(model)
    with pytest.raises(HookNameError, match=r"no hook 'blocks.0.attn.hook_qq'.*closest: .*blocks\.0\.attn\.hook_q"):
        model.run_with_cache(tokens, names_filter=["blocks.0.attn.hook_qq"])
    with pytest.raises(HookNameError, match="blocks.0.attn.hook_qq"):
        model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_qq")
    with pytest.raises(HookNameError, match=r"closest: .*blocks\.0\.hook_resid_pre"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_pr", lambda x, hook: x)])
    with pytest.raises(HookNameError, match="matches no hook point"):
        model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_nothing"))
    with pytest.raises(HookNameError, match="empty list"):
        model.run_with_cache(tokens, names_filter=[])
    with pytest.raises(HookNameError, match="blocks.9.hook_resid_post"):
        with model.hooks(fwd_hooks=[("blocks.9.hook_resid_post", lambda x, hook: x)]):
            pass
    with pytest.raises(HookNameError, match="closest"):
        model.add_hook("hook_embedd", lambda x, hook: x)
    _, cache = model.run_with_cache(tokens, names_filter=["blocks.0.hook_resid_pre"])
    with pytest.raises(HookNameError, match="has this hook, but it was not cached"):
        _ = cache["blocks.0.hook_resid_post"]
    assert not any(hp.has_hooks() for hp in model.hook_dict.values())  # nothing was left attached


@pytest.mark.parametrize("model", [m for m in EXAMPLES if m.has_output_head], ids=lambda m: type(m).__name__)
def test_return_type(model):
    tokens = tokens_for(model)
    with torch.no_grad():
        logits = model(tokens)
        assert torch.equal(model(tokens, return_type="logits"), logits)
        assert model(tokens, return_type=None) is None
        per_token = model(tokens, return_type="loss", loss_per_token=True)
        both = model(tokens, return_type="both")
    targets = tokens[:, 1:] if model.cfg.n_ctx and "CAUSAL_LM" in {c.name for c in model.capabilities} else tokens
    rows = logits[:, : targets.shape[1]].float().log_softmax(-1)
    want = -rows.gather(-1, targets[..., None])[..., 0]  # by hand
    torch.testing.assert_close(per_token, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(both[1], want.mean(), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="return_type='logit'"):
        model(tokens, return_type="logit")


# ---- a script written against TransformerLens' documented API, on poslens and on TransformerLens itself -----

TEXT = "The cat sat on the mat. The cat"


def byte_tokenizer(directory):
    """A byte-level Hugging Face tokenizer written offline: <pad> 0, <s> 1, </s> 2, then the 256 byte symbols."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2,
             **{ch: i + 3 for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>").save_pretrained(directory)


def tl_script(model) -> dict:
    """TransformerLens' README and main demo, call for call (the model is either library's)."""
    out = {}
    tokens = model.to_tokens(TEXT)
    out["tokens"], out["str_tokens"] = tokens, model.to_str_tokens(TEXT)
    out["string"] = model.to_string(tokens[0])
    out["single"] = model.to_single_token(" ")
    out["cfg"] = (model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_head, model.cfg.d_model, model.cfg.d_vocab)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        out["logits"] = logits
        out["loss"] = model(tokens, return_type="loss")
        out["loss_per_token"] = model(tokens, return_type="loss", loss_per_token=True)
        for name in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post", "pattern", "z", "q", "k", "v",
                     "post"):
            for layer in range(model.cfg.n_layers):
                out[f"{name}{layer}"] = cache[name, layer]
        out["ln1_normalized0"] = cache["blocks.0.ln1.hook_normalized"]
        out["ln_final_scale"] = cache["ln_final.hook_scale"]
        out["accumulated"] = cache.accumulated_resid(layer=-1, incl_mid=True, apply_ln=True)
        out["decomposed"] = cache.decompose_resid(layer=-1, return_labels=True)[0]
        heads, labels = cache.stack_head_results(layer=-1, return_labels=True)
        out["heads"], out["head_labels"] = heads, labels
        out["heads_ln"] = cache.apply_ln_to_stack(heads, layer=-1)
        # direct logit attribution of each head to the last token's next-token prediction
        answer = tokens[0, -1]
        out["dla"] = out["heads_ln"][:, 0, -2] @ model.W_U[:, answer]
        out["W_Q"], out["W_K"], out["W_O"], out["W_U"] = model.W_Q, model.W_K, model.W_O, model.W_U
        out["blocks0_W_V"] = model.blocks[0].attn.W_V

        def ablate_head(z, hook):
            z[:, :, 0] = 0.0
            return z

        out["ablated_loss"] = model.run_with_hooks(tokens, return_type="loss",
                                                   fwd_hooks=[(utils.get_act_name("z", 0), ablate_head)])

        def zero_mid(resid, hook):
            return resid * 0.5

        out["mid_edit_loss"] = model.run_with_hooks(tokens, return_type="loss",
                                                    fwd_hooks=[("blocks.0.hook_resid_mid", zero_mid)])
        # without the bridge's KV cache: on these random models its cached decoding departs from its own uncached
        # decoding (and from the argmax of its forward) after a few tokens; poslens' cache gives the uncached tokens
        out["generated"] = model.generate("The cat", max_new_tokens=5, do_sample=False, verbose=False,
                                          use_past_kv_cache=False)
        out["generated_tokens"] = model.generate(model.to_tokens("The cat"), max_new_tokens=5, do_sample=False,
                                                 verbose=False, use_past_kv_cache=False)
    return out


def _gemma3(directory):
    from tests.hf_helpers import tiny_gemma3

    hf = tiny_gemma3(1, {"rope_type": "default", "rope_theta": 1e6}, bos_token_id=1, eos_token_id=2)
    hf.save_pretrained(directory)


CHECKPOINTS = {"llama": ("llama", "hf"), "gpt2": ("hf",), "qwen2": ("hf",), "gemma3": ("hf",)}
# TransformerLens' bridge fires hook_resid_mid on the pre-MLP norm's input: an edit reaches the MLP, not the residual
# (poslens carries it on, as HookedTransformer does: test_a_resid_mid_edit_reaches_the_residual)
BRIDGE_DIFFERS = {"mid_edit_loss"}


@pytest.fixture(scope="module")
def bridges(tmp_path_factory):
    from transformer_lens.model_bridge import TransformerBridge

    out = {}
    for kind in CHECKPOINTS:
        directory = tmp_path_factory.mktemp(kind)
        if kind == "gemma3":
            _gemma3(directory)
        else:
            write_tiny_hf(kind, directory)
        byte_tokenizer(directory)
        out[kind] = (directory, TransformerBridge.boot_transformers(str(directory), device="cpu",
                                                                    dtype=torch.float32))
    return out


@pytest.mark.parametrize("kind,family", [(k, f) for k, fams in CHECKPOINTS.items() for f in fams])
def test_a_transformerlens_script_gives_what_transformerlens_gives(bridges, kind, family):
    directory, bridge = bridges[kind]
    model = load_generic(directory) if family == "hf" and kind == "llama" else interp.load(directory, family=family)
    assert model.family == family
    # TransformerLens' default for this model (True but for Qwen), which a TL script assumes (poslens': False)
    model.cfg.default_prepend_bos = bridge.cfg.default_prepend_bos
    ours, theirs = tl_script(model), tl_script(bridge)
    assert ours.keys() == theirs.keys()
    compared = 0
    for key in ours:
        if key in BRIDGE_DIFFERS:
            continue
        a, b = ours[key], theirs[key]
        if isinstance(a, torch.Tensor):
            assert a.shape == b.shape, key
            if key.startswith("pattern"):  # TransformerLens' eager attention vs the fused kernel, both in float32
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=key)
            else:
                torch.testing.assert_close(a.float(), b.float(), atol=2e-4, rtol=2e-4, msg=key)
        else:
            assert a == b, key
        compared += 1
    assert compared >= 40


def test_a_resid_mid_edit_reaches_the_residual(bridges):
    """Halving ``hook_resid_mid``: the hand-written llama (the residual is a variable of its forward) and the hf family
    (hooks on transformers' modules) agree, and differ from the bridge's MLP-input-only edit."""
    directory, bridge = bridges["llama"]
    hand, generic = interp.load(directory, family="llama"), load_generic(directory)
    tokens = hand.to_tokens(TEXT, prepend_bos=True)
    fwd = [("blocks.0.hook_resid_mid", lambda resid, hook: resid * 0.5)]
    with torch.no_grad():
        a, b = hand.run_with_hooks(tokens, fwd_hooks=fwd), generic.run_with_hooks(tokens, fwd_hooks=fwd)
        tl = bridge.run_with_hooks(tokens, fwd_hooks=fwd)
        plain = hand(tokens)
    torch.testing.assert_close(a, b, atol=2e-4, rtol=2e-4)
    assert (a - plain).abs().max() > 0.1 and (a - tl).abs().max() > 0.1
