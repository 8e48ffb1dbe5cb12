"""nnsight traces a poslens model of every family: a block's and an attention module's outputs read inside
``NNsight(model).trace`` are what the hooks see in the same forward pass, the saved output is the model's logits, and an
edit of either output gives the logits the matching hook edit gives (the hf family through transformers' own layers,
which are what run)."""

from __future__ import annotations

import warnings

import pytest
import torch

from interp.families import families
from tests.helpers import randomized

nnsight = pytest.importorskip("nnsight")

EXAMPLES = {f"{f.name}-{i}": (f.name, i) for f in families() for i in range(len(f.examples()))}


def _example(key):
    name, i = EXAMPLES[key]
    family = next(f for f in families() if f.name == name)
    torch.manual_seed(0)
    return name, randomized(family.examples()[i], key, 0.3)  # weights spread enough for an edit to show


def _tokens(name, model):
    if name == "encoder":  # [CLS] ... [SEP], no pads
        return torch.tensor([[2, 5, 6, 7, 8, 9, 10, 3]])
    torch.manual_seed(0)
    return torch.randint(5, model.d_vocab, (1, 8))


def _modules(name, net):
    """The block and its attention module as they run: poslens' own, or transformers' layers in the hf family."""
    if name == "hf":
        layer = net.hf.model.layers[0]
        return layer, layer.self_attn
    return net.blocks[0], net.blocks[0].attn


def _zero_attention(name, net, tokens):
    with net.trace(tokens):
        attn = _modules(name, net)[1]
        (attn.output[0] if name == "hf" else attn.output)[:] = 0
        out = nnsight.save(net.output)
    return out


@pytest.mark.parametrize("key", list(EXAMPLES))
def test_nnsight_reads_and_edits_block_and_attention_outputs(key):
    name, model = _example(key)
    tokens = _tokens(name, model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nnsight renames a submodule called "output" (BERT's) to E_output
        net = nnsight.NNsight(model)
        logits, cache = model.run_with_cache(tokens)
        with net.trace(tokens):
            block, attn = _modules(name, net)
            attn_out = nnsight.save(attn.output[0] if name == "hf" else attn.output)
            block_out = nnsight.save(block.output)
            out = nnsight.save(net.output)
        zeroed = _zero_attention(name, net, tokens)
        with net.trace(tokens):
            _modules(name, net)[0].output[:] = 0
            zero_block = nnsight.save(net.output)
        hooked_attn = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_attn_out", lambda x, hook: x * 0)])
        hooked_block = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_post", lambda x, hook: x * 0)])
    assert torch.allclose(out, logits, atol=1e-5)
    assert torch.allclose(block_out, cache["resid_post", 0], atol=1e-5)
    assert attn_out.shape == cache["attn_out", 0].shape
    assert torch.allclose(zeroed, hooked_attn, atol=1e-5) and not torch.allclose(zeroed, logits, atol=1e-3)
    assert torch.allclose(zero_block, hooked_block, atol=1e-5)
