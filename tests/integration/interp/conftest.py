"""Fixtures the TransformerLens conformance tests share."""

import pytest
import torch

from tests.hf_helpers import write_tiny_hf
from tests.integration.interp.test_tl_surface import byte_tokenizer


@pytest.fixture(scope="module")
def llama_bridge(tmp_path_factory):
    """A tiny Llama checkpoint and TransformerLens' bridge on it: the oracle of TL's behaviour."""
    from transformer_lens.model_bridge import TransformerBridge

    directory = tmp_path_factory.mktemp("llama")
    write_tiny_hf("llama", directory)
    byte_tokenizer(directory)
    return directory, TransformerBridge.boot_transformers(str(directory), device="cpu", dtype=torch.float32)
