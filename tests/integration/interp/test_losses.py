"""Losses without the logits of every position: ``final_hidden`` stops before the output head, ``unembed`` applies it to
a chunk of rows, and ``token_losses`` equals cross-entropy over the whole forward's logits, on every family (tiny random
models of each, transformers architectures with their own post-head steps, and the bundled checkpoints)."""

import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import transformers as T

import interp
from interp.base import Capability
from tests.encoder_helpers import tiny_encoder
from tests.helpers import tiny_model
from tests.hf_helpers import _DECODER, CONFIGS, tiny_hf
from tests.repo_helpers import tiny_repo

BUNDLED = sorted(p for p in (Path(interp.__file__).parent / "checkpoints").iterdir() if p.is_dir())
HF_KINDS = ["llama", "gemma2", "gpt2", "opt", "bert-mlm", "gemma3", "cohere", "granite"]
EXTRA = {  # architectures whose forward does something after the output embedding
    "gemma3": (T.Gemma3TextConfig, T.Gemma3ForCausalLM, {**_DECODER, "head_dim": 16, "final_logit_softcapping": 3.0,
                                                         "sliding_window": 4,
                                                         "layer_types": ["sliding_attention", "full_attention"]}),
    "cohere": (T.CohereConfig, T.CohereForCausalLM, {**_DECODER, "logit_scale": 0.37}),
    "granite": (T.GraniteConfig, T.GraniteForCausalLM, {**_DECODER, "logits_scaling": 4.0}),
}


def _hf(kind):
    """A tiny random transformers model of ``kind``, saved and read back by the generic family."""
    from interp.families.hf.checkpoints import load_generic

    if kind in EXTRA:
        CONFIGS[kind] = EXTRA[kind]
    try:
        directory = Path(tempfile.mkdtemp())
        tiny_hf(kind).save_pretrained(directory)
    finally:
        CONFIGS.pop(kind) if kind in EXTRA else None
    return load_generic(directory)


def _models():
    yield "increments-shared", lambda: tiny_model("shared")
    yield "increments-per-layer", lambda: tiny_model("per-layer")
    yield "repo", lambda: tiny_repo("repo")
    yield "llama", lambda: interp.load(tiny_hf("llama"))
    for variant in ("disentangled", "ap", "rp", "rope"):
        yield f"encoder-{variant}", lambda v=variant: tiny_encoder(v)
    yield "encoder-disentangled-full", lambda: tiny_encoder("disentangled", mlm_input="full")
    for kind in HF_KINDS:
        yield f"hf-{kind}", lambda k=kind: _hf(k)
    for path in BUNDLED:
        yield f"bundled-{path.name}", lambda p=path: interp.load(p)


MODELS = dict(_models())


def _tokens(model, n=23, batch=2):
    g = torch.Generator().manual_seed(3)
    return torch.randint(5, min(model.d_vocab, 250), (batch, n), generator=g)


@pytest.mark.parametrize("name", list(MODELS))
def test_unembedding_the_final_hidden_state_gives_the_forward_logits(name):
    model = MODELS[name]()
    assert model.has_output_head
    tokens = _tokens(model)
    with torch.no_grad():
        whole = model(tokens).float()
        hidden = model.final_hidden(tokens)
        apart = model.unembed(hidden).float()
    assert hidden.shape[:2] == tokens.shape and apart.shape == whole.shape
    assert torch.allclose(apart, whole, rtol=1e-5, atol=1e-5), float((apart - whole).abs().max())
    assert getattr(model, "head_separable", True)
    causal = Capability.CAUSAL_LM in model.capabilities
    with torch.no_grad():
        if causal:
            losses = model.token_losses(tokens, chunk=5)
            ref = F.cross_entropy(whole[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        else:  # a masked LM: a loss at every position, of targets given
            targets = tokens.roll(1, 1)
            losses = model.token_losses(tokens, targets, chunk=5)
            ref = F.cross_entropy(whole.transpose(1, 2), targets, reduction="none")
    assert losses.dtype == torch.float32 and losses.shape == ref.shape
    assert torch.allclose(losses, ref, rtol=1e-5, atol=1e-5), float((losses - ref).abs().max())


@pytest.mark.parametrize("name", ["repo", "encoder-disentangled", "hf-gemma3", "hf-gpt2"])
def test_final_hidden_never_runs_the_head_and_fires_the_hooks_below_it(name):
    model = MODELS[name]()
    tokens = _tokens(model)
    seen = {}

    def keep(x, hook):
        seen.setdefault(hook.name, []).append(x.detach().clone())

    hooks = [(f"blocks.{l}.hook_resid_post", keep) for l in range(model.n_layers)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        model(tokens)
    model.head_logits = lambda h: (_ for _ in ()).throw(AssertionError("the output head ran"))
    if name.startswith("hf-"):
        model._head_module().register_forward_hook(lambda *a: (_ for _ in ()).throw(AssertionError("lm_head ran")))
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        model.final_hidden(tokens)
    for values in seen.values():
        assert len(values) == 2 and torch.equal(values[0], values[1])


def test_targets_of_another_shape_are_refused_naming_both():
    model = MODELS["repo"]()
    tokens = _tokens(model)
    with pytest.raises(ValueError, match=r"targets of shape \(2, 22\).*\[2, 23\]"):
        model.token_losses(tokens, tokens[:, 1:])


def test_an_architecture_whose_head_cannot_be_split_falls_back_to_the_whole_forward(monkeypatch):
    model = MODELS["hf-granite"]()
    real = model.head_logits
    monkeypatch.setattr(model, "head_logits", lambda h: real(h) * 2)  # a forward doing more than head_logits
    assert model.check_head() is False
    model.head_separable = False
    tokens = _tokens(model)
    with torch.no_grad():
        ref = F.cross_entropy(model(tokens)[:, :-1].float().transpose(1, 2), tokens[:, 1:], reduction="none")
        assert torch.allclose(model.token_losses(tokens), ref, atol=1e-6)
    with pytest.raises(interp.base.CapabilityError, match="cannot apply"):
        model.final_hidden(tokens)


def test_chunk_size_does_not_change_the_losses():
    model = MODELS["increments-shared"]()
    tokens = _tokens(model, n=40, batch=1)
    with torch.no_grad():
        a, b = model.token_losses(tokens, chunk=1), model.token_losses(tokens, chunk=1000)
    assert torch.allclose(a, b, atol=1e-6)
