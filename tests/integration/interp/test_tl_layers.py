"""TransformerLens' ``start_at_layer`` / ``stop_at_layer`` / ``input_to_embed``, ``generate`` from token embeddings with
its penalties, and the padding it reads off pad tokens, asserted on every poslens family: a pass stopped before block k
and resumed there gives the whole pass's logits, and nothing before the start (embeddings, blocks, their hooks) runs;
TransformerLens' own ``TransformerBridge`` (installed, booted offline on a tiny Llama checkpoint) and
``get_attention_mask`` are the oracles for the residuals, logits, generations and masks."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.capabilities import Capability, CapabilityError
from interp.families import families
from interp.families.hf.checkpoints import load_generic
from interp.padding import mask_from_pads, pad_rows
from tests.hf_helpers import tiny_hf

EXAMPLES = [m.eval() for f in families() for m in (f.examples() if f.examples else [])]
HF_KINDS = ["llama", "qwen2", "gemma2", "gpt2", "gpt_neox", "opt", "bert-mlm"]
TEXTS = ["The cat sat on the mat.", "Hi", "A third, middling one"]
F32 = dict(atol=2e-5, rtol=1e-5)


def _hf(kind: str, tmp_path_factory):
    directory = tmp_path_factory.mktemp(kind)
    tiny_hf(kind).save_pretrained(directory)
    return load_generic(directory).eval()


@pytest.fixture(scope="module", params=list(range(len(EXAMPLES))) + HF_KINDS,
                ids=[f"{m.family}-{type(m).__name__}-{getattr(m, 'variant', '') or i}" for i, m in
                     enumerate(EXAMPLES)] + [f"hf-{k}" for k in HF_KINDS])
def model(request, tmp_path_factory):
    return EXAMPLES[request.param] if isinstance(request.param, int) else _hf(request.param, tmp_path_factory)


def _tokens(model, n: int = 7):
    g = torch.Generator().manual_seed(5)
    return torch.randint(3, min(model.d_vocab, 90), (2, n), generator=g)


def _ids(model, tokens):
    """``tokens=`` for a family whose blocks read the ids besides the residual, else nothing."""
    return {"tokens": tokens} if model.tl_blocks_read_tokens else {}


def test_stopping_before_a_block_and_starting_there_gives_the_whole_pass(model):
    tokens = _tokens(model)
    with torch.no_grad():
        whole = model(tokens)
        for k in range(model.n_layers + 1):
            residual = model(tokens, stop_at_layer=k)
            assert residual.shape == (*tokens.shape, model.d_model)
            torch.testing.assert_close(model(residual, start_at_layer=k, **_ids(model, tokens)), whole, atol=1e-6,
                                       rtol=1e-6)
        nudge = torch.randn(residual.shape, generator=torch.Generator().manual_seed(0))
        moved = model(residual + nudge * residual.std(), start_at_layer=model.n_layers, **_ids(model, tokens))
        assert not torch.allclose(moved, whole, atol=1e-3)  # the residual given is the one the rest reads


def test_blocks_before_the_start_do_not_run_and_their_hooks_stay_silent(model):
    tokens = _tokens(model)
    k = 1
    with torch.no_grad():
        residual = model(tokens, stop_at_layer=k)
        _, cache = model.run_with_cache(residual, start_at_layer=k, **_ids(model, tokens))
    names = set(cache.keys())
    before = {n for n in names if not n.startswith("blocks.") and not n.startswith(("ln_final", "hook_final"))}
    assert before <= {"hook_delta", "hook_decay_bias"}, before  # increments: read off the tokens' rows (tokens=)
    assert not any(n.startswith("blocks.0.") for n in names)
    assert f"blocks.{k}.hook_resid_pre" in names and f"blocks.{model.n_layers - 1}.hook_resid_post" in names
    calls = []
    for name in ("blocks.0.hook_resid_post", f"blocks.{k}.hook_resid_pre", "hook_embed"):
        if name in model.hook_dict:
            model.hook_dict[name].add_hook(lambda x, hook: calls.append(hook.name))
    try:
        with torch.no_grad():
            model(residual, start_at_layer=k, **_ids(model, tokens))
    finally:
        model.reset_hooks()
    assert calls == [f"blocks.{k}.hook_resid_pre"]


def test_stop_at_layer_fires_nothing_of_the_block_it_stops_before(model):
    tokens = _tokens(model)
    with torch.no_grad():
        _, whole = model.run_with_cache(tokens)
        out, cache = model.run_with_cache(tokens, stop_at_layer=1)
    assert not any(n.startswith(("blocks.1.", "ln_final")) for n in cache.keys())
    assert "blocks.0.hook_resid_post" in cache.keys()
    torch.testing.assert_close(out, whole["blocks.0.hook_resid_post"], atol=0, rtol=0)


def test_layer_indices_out_of_range_are_named():
    model = EXAMPLES[0]
    n = model.n_layers
    with pytest.raises(ValueError, match=f"start_at_layer={n + 1} is not a layer index in -{n}..{n}"):
        model(torch.zeros(1, 3, model.d_model), start_at_layer=n + 1)
    with pytest.raises(ValueError, match=r"with start_at_layer the input is a residual \[batch, pos"):
        model(torch.tensor([[1, 2, 3]]), start_at_layer=1)
    with pytest.raises(ValueError, match="shortformer_pos_embed"):
        model(torch.zeros(1, 3, model.d_model), start_at_layer=0, shortformer_pos_embed=torch.zeros(1, 3, 4))


@pytest.fixture(scope="module")
def bundled():
    return {name: interp.load(name) for name in ("repo-small", "rope-bytes", "dstg-small")}


@pytest.mark.parametrize("name", ["repo-small", "dstg-small"])
def test_input_to_embed_gives_transformerlens_four_values_and_resumes_the_pass(bundled, name):
    model = bundled[name]
    causal = Capability.CAUSAL_LM in model.capabilities
    with torch.no_grad():
        residual, tokens, shortformer, mask = model.input_to_embed(TEXTS, padding_side="left")
        assert shortformer is None and torch.equal(tokens, model.to_tokens(TEXTS, padding_side="left"))
        assert mask.dtype == torch.bool and not bool(mask.all()) and torch.equal(mask, tokens != model.tokenizer.pad_id)
        torch.testing.assert_close(residual, model(TEXTS, padding_side="left", stop_at_layer=0), atol=0, rtol=0)
        resumed = model(residual, start_at_layer=0, tokens=tokens, attention_mask=mask,
                        return_type="loss" if causal else "logits")
        whole = model(TEXTS, padding_side="left", return_type="loss" if causal else "logits")
        torch.testing.assert_close(resumed, whole, **F32)
        _, _, _, none = model.input_to_embed(TEXTS[0], padding_side="right")
        assert none is None  # one text, right side: TransformerLens builds no mask


@pytest.mark.parametrize("prepend_bos", [True, False])
@pytest.mark.parametrize("side", ["left", "right"])
def test_the_mask_read_off_pad_tokens_is_transformerlens(bundled, side, prepend_bos):
    """On a byte-level model BOS, EOS and pad share one id, so TransformerLens keeps the last leading pad as the BOS."""
    from transformer_lens.utilities import get_attention_mask

    model = bundled["rope-bytes"]
    tokens = model.to_tokens(TEXTS, padding_side=side, prepend_bos=prepend_bos)
    tokens[0, 3] = model.tokenizer.pad_token_id  # a pad id among real tokens is real
    want = get_attention_mask(model.tokenizer, tokens, prepend_bos, padding_side=side).bool()
    assert torch.equal(mask_from_pads(tokens, model.tokenizer.pad_token_id, side,
                                      prepend_bos and model.tokenizer.bos_token_id == model.tokenizer.pad_token_id),
                       want)


def test_generate_reads_the_padding_off_tokens_only_when_given_a_side(bundled):
    model = bundled["repo-small"]
    rows = [model.to_tokens(t)[0].tolist() for t in TEXTS]
    tokens, mask = pad_rows(rows, model.tokenizer.pad_id, "left")
    options = dict(max_new_tokens=4, do_sample=False, stop_at_eos=False)
    masked = model.generate(input=tokens, attention_mask=mask, **options)
    assert torch.equal(model.generate(input=tokens, padding_side="left", **options), masked)
    assert not torch.equal(model.generate(input=tokens, **options), masked)  # no side, no mask: pads are context


def test_generate_from_token_embeddings_continues_as_from_the_tokens(model):
    tokens = _tokens(model, 5)
    options = dict(max_new_tokens=4, do_sample=False, stop_at_eos=False)
    if Capability.CAUSAL_LM not in model.capabilities:
        with pytest.raises(CapabilityError, match=rf"\({model.family} family\) cannot generate"):
            model.generate(input=model.embed(tokens), **options)
        return
    with torch.no_grad():
        embeds = model.embed(tokens)
        for cache in (True, False):
            from_tokens = model.generate(input=tokens, use_past_kv_cache=cache, **options)
            new = model.generate(input=embeds, return_type="tokens", use_past_kv_cache=cache, **options)
            assert torch.equal(new, from_tokens[:, 5:])  # from embeddings: the new tokens alone
            out = model.generate(input=embeds, use_past_kv_cache=cache, **options)  # "input": embeddings
            torch.testing.assert_close(out, model.embed(from_tokens), atol=0, rtol=0)
        other = model.embed(tokens.flip(-1))
        assert torch.equal(model.generate(input=other, return_type="tokens", **options),
                           model.generate(input=tokens.flip(-1), **options)[:, 5:])
    with pytest.raises(ValueError, match=rf"token embeddings \[batch, pos, {model.d_model}\]"):
        model.generate(input=torch.zeros(1, 3, model.d_model + 1), **options)


def test_repetition_penalty_is_transformerlens_sample_logits(bundled):
    from transformer_lens.utilities import sample_logits

    model = bundled["repo-small"]
    tokens = model.to_tokens("The cat sat on the mat. The cat")
    options = dict(max_new_tokens=6, do_sample=False, stop_at_eos=False, use_past_kv_cache=False)
    out = model.generate(input=tokens, repetition_penalty=2.0, **options)
    seq = tokens
    with torch.no_grad():
        for _ in range(6):
            logits = model(seq)[:, -1].float()
            seq = torch.cat([seq, sample_logits(logits, temperature=0.0, repetition_penalty=2.0, tokens=seq)[:, None]],
                            dim=1)
    assert torch.equal(out, seq)
    assert not torch.equal(out, model.generate(input=tokens, **options))  # the penalty changed the continuation
    with pytest.raises(ValueError, match="freq_penalty=-1"):
        model.generate(input=tokens, freq_penalty=-1.0)


# -- TransformerLens' bridge as the oracle ----------------------------------------------------------------------------
def _ours(directory, family, bridge):
    model = load_generic(directory) if family == "hf" else interp.load(directory, family=family)
    model.cfg.default_prepend_bos = bridge.cfg.default_prepend_bos
    return model


@pytest.mark.parametrize("family", ["llama", "hf"])
def test_start_and_stop_at_layer_give_what_transformerlens_gives(llama_bridge, family):
    directory, bridge = llama_bridge
    model = _ours(directory, family, bridge)
    tokens = model.to_tokens(TEXTS[0])
    with torch.no_grad():
        for k in range(model.n_layers):
            theirs = bridge(tokens, stop_at_layer=k)
            torch.testing.assert_close(model(tokens, stop_at_layer=k), theirs, atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(model(theirs, start_at_layer=k),
                                       bridge(theirs, start_at_layer=k), atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("family", ["llama", "hf"])
def test_input_to_embed_gives_what_transformerlens_gives(llama_bridge, family):
    directory, bridge = llama_bridge
    model = _ours(directory, family, bridge)
    bridge.tokenizer.padding_side = model.tokenizer.padding_side = "left"
    try:
        with torch.no_grad():
            ours, theirs = model.input_to_embed(TEXTS), bridge.input_to_embed(TEXTS)
            padded = bridge.to_tokens(TEXTS)
            mask_ours, mask_theirs = model.input_to_embed(padded)[3], bridge.input_to_embed(padded)[3]
    finally:
        bridge.tokenizer.padding_side = model.tokenizer.padding_side = "right"
    assert torch.equal(ours[1], theirs[1]) and ours[2] is None and theirs[2] is None
    assert torch.equal(ours[3], theirs[3].bool()) and torch.equal(mask_ours, mask_theirs.bool())
    real = ours[3]
    torch.testing.assert_close(ours[0][real], theirs[0][real], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("family", ["llama", "hf"])
def test_generate_from_embeddings_and_with_penalties_gives_what_transformerlens_gives(llama_bridge, family):
    directory, bridge = llama_bridge
    model = _ours(directory, family, bridge)
    tokens = model.to_tokens(TEXTS[0])
    options = dict(max_new_tokens=5, do_sample=False, use_past_kv_cache=False)
    with torch.no_grad():
        embeds = bridge.original_model.get_input_embeddings()(tokens)
        torch.testing.assert_close(model.embed(tokens), embeds, atol=0, rtol=0)
        assert model.generate(input=embeds, return_type="tokens", **options).tolist() == \
            bridge.generate(input=embeds, return_type="tokens", verbose=False, **options).tolist()
        assert model.generate(input=embeds, return_type="str", **options) == \
            bridge.generate(input=embeds, return_type="str", verbose=False, **options)
        for penalty in (1.0, 1.8):
            assert model.generate(input=tokens, repetition_penalty=penalty, **options).tolist() == \
                bridge.generate(input=tokens, repetition_penalty=penalty, verbose=False, **options).tolist()
        padded = bridge.to_tokens(TEXTS, padding_side="left")
        assert model.generate(input=padded, padding_side="left", **options).tolist() == \
            bridge.generate(input=padded, padding_side="left", verbose=False, **options).tolist()
