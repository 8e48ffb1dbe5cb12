import pytest
import torch

from interp.base import InputError
from interp.capabilities import Capability
from interp.families.increments.checkpoints import export
from tests.helpers import VARIANTS, reference_logits, tiny_model


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_match_an_independent_upstream_reference(variant):
    model = tiny_model(variant)
    config, state = export(model)
    ids = torch.randint(0, 257, (2, 23))
    torch.testing.assert_close(model(ids), reference_logits(state, config, ids), atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_hook_is_documented_and_hooks_do_not_change_the_output(variant):
    model = tiny_model(variant)
    assert model.undocumented_hooks() == []
    ids = torch.randint(0, 257, (1, 11))
    logits, cache = model.run_with_cache(ids)
    torch.testing.assert_close(logits, model(ids), atol=1e-5, rtol=1e-5)
    assert cache["blocks.1.attn.hook_pattern"].shape == (1, 4, 11, 11)
    assert cache["blocks.0.attn.hook_positions"].shape == (1, 4, 11)
    assert cache["blocks.1.hook_resid_post"].shape == (1, 11, 32)


def test_positions_are_the_inclusive_cumsum_of_increments_per_layer():
    model = tiny_model("per-layer")
    ids = torch.randint(0, 257, (2, 9))
    _, cache = model.run_with_cache(ids, names_filter=lambda n: "delta" in n or "positions" in n)
    for layer in range(2):
        delta = cache[f"blocks.{layer}.hook_delta"]
        assert delta.shape == (2, 9)
        assert (delta > 0).all() and (delta < 10).all()
        pos = cache[f"blocks.{layer}.attn.hook_positions"]
        torch.testing.assert_close(pos, delta.cumsum(-1)[:, None].expand(-1, 4, -1))
        torch.testing.assert_close(pos[:, 0, 0], delta[:, 0])  # inclusive: the first token sits at delta_0


def test_per_layer_increments_read_the_residual_entering_the_layer():
    model = tiny_model("per-layer")
    ids = torch.randint(0, 257, (1, 7))
    _, cache = model.run_with_cache(ids)
    resid = cache["blocks.1.hook_resid_pre"]
    torch.testing.assert_close(cache["blocks.1.hook_delta"], model.blocks[1].delta_mlp(resid))
    torch.testing.assert_close(resid, cache["blocks.0.hook_resid_post"])


def test_rope_baseline_uses_integer_positions_and_has_no_increments():
    model = tiny_model("rope")
    _, cache = model.run_with_cache(torch.randint(0, 257, (1, 6)), names_filter="blocks.1.attn.hook_positions")
    torch.testing.assert_close(cache["blocks.1.attn.hook_positions"][0, 2], torch.arange(6).float())
    assert Capability.INCREMENTS not in model.capabilities
    assert model.increment_sources() == []


def test_overwriting_increments_in_a_hook_moves_the_positions_attention_uses():
    model = tiny_model("shared")
    ids = torch.randint(0, 257, (1, 8))
    planted = torch.full((1, 8), 2.0)
    with model.hooks(fwd_hooks=[("hook_delta", lambda t, hook: planted)]):
        _, cache = model.run_with_cache(ids, names_filter="blocks.1.attn.hook_positions")
        edited = model(ids)
    torch.testing.assert_close(cache["blocks.1.attn.hook_positions"][0, 0], 2.0 * torch.arange(1, 9).float())
    assert not torch.allclose(edited, model(ids))


def test_shifting_all_positions_by_a_constant_changes_nothing():
    model = tiny_model("per-layer")
    ids = torch.randint(0, 257, (1, 10))
    shift = lambda t, hook: t + 37.5  # noqa: E731
    with model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_positions", shift) for l in range(2)]):
        shifted = model(ids)
    torch.testing.assert_close(shifted, model(ids), atol=2e-4, rtol=2e-4)


def test_per_head_variant_gives_each_head_its_own_positions():
    model = tiny_model("per-layer-per-head")
    _, cache = model.run_with_cache(torch.randint(0, 257, (1, 6)))
    delta = cache["blocks.0.hook_delta"]
    assert delta.shape == (1, 4, 6)
    torch.testing.assert_close(cache["blocks.0.attn.hook_positions"], delta.cumsum(-1))
    assert not torch.allclose(delta[:, 0], delta[:, 1])


def test_context_free_increments_are_the_delta_of_each_embedding_alone():
    model = tiny_model("shared")
    table = model.context_free_increments()["shared"]
    _, cache = model.run_with_cache(torch.tensor([[65, 32, 256]]), names_filter="hook_delta")
    torch.testing.assert_close(cache["hook_delta"][0], table[[65, 32, 256]])
    assert tiny_model("per-layer").context_free_increments().keys() == {"L0"}


@pytest.mark.parametrize("bad, message", [
    (torch.zeros(1, 0, dtype=torch.long), "empty"),
    (torch.zeros(1, 65, dtype=torch.long), "longer than"),
    (torch.full((1, 3), 257), "outside the vocabulary"),
    (torch.zeros(1, 3), "integer ids"),
    (torch.zeros(1, 2, 3, dtype=torch.long), r"\[batch, pos\]"),
])
def test_bad_tokens_raise_clear_errors(bad, message):
    with pytest.raises(InputError, match=message):
        tiny_model("rope")(bad)


@pytest.mark.parametrize("variant", ["shared", "per-layer"])
def test_positions_stay_float32_under_bf16_autocast(variant):
    """bf16 sums of ~1.0 increments stall above 256 (adjacent tokens 0 or 2 apart); upstream sums in fp32."""
    model = tiny_model(variant, max_seq_len=600)
    ids = torch.randint(0, 257, (1, 600))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, cache = model.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_positions")
                                        or n.endswith("hook_delta"))
    pos = cache["blocks.1.attn.hook_positions"][0, 0]
    assert pos.dtype == torch.float32
    delta = cache["blocks.1.hook_delta" if variant == "per-layer" else "hook_delta"][0]
    assert delta.dtype == torch.float32
    torch.testing.assert_close(pos, delta.cumsum(-1))
    assert (pos.diff() > 0).all()
