"""Streaming extraction stops the forward pass once the requested hooks fired, without changing them."""

import pytest
import torch

from interp.extract import run_and_collect, stream
from tests.encoder_helpers import tiny_encoder
from tests.helpers import tiny_model
from tests.repo_helpers import tiny_repo

MODELS = {"repo": lambda: tiny_repo("repo"), "increments": lambda: tiny_model("per-layer"),
          "encoder": lambda: tiny_encoder("rope")}


@pytest.mark.parametrize("family", MODELS)
def test_collected_hooks_equal_a_full_cached_run_and_later_layers_never_run(family):
    model = MODELS[family]()
    tokens = torch.randint(5, min(model.d_vocab, 200), (2, 24), generator=torch.Generator().manual_seed(0))
    names = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern",
             "blocks.0.attn.hook_z" if family != "encoder" else "blocks.0.hook_resid_pre"]
    last = f"blocks.{model.n_layers - 1}.hook_resid_post"
    _, cache = model.run_with_cache(tokens, names_filter=names + [last])  # what stream read before it stopped early
    later = []
    model.add_hook(last, lambda t, hook: later.append(hook.name))
    got = run_and_collect(model, tokens, names)
    assert later == []
    for n in names:
        torch.testing.assert_close(got[n], cache[n], atol=0, rtol=0)
    # fused vs materialised layer 1
    torch.testing.assert_close(run_and_collect(model, tokens, [last])[last], cache[last], atol=1e-5, rtol=1e-4)
    assert later == [last]
    model.reset_hooks()


def test_stream_sees_edits_made_by_attached_hooks_and_trims_each_sequence():
    model = tiny_repo("rope")
    model.add_hook("blocks.0.hook_resid_post", lambda t, hook: t * 0 + 1)
    seqs = [list(range(10, 30)), list(range(40, 52))]
    out = dict(stream(model, seqs, ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"], batch_size=2))
    model.reset_hooks()
    assert out[1]["blocks.0.hook_resid_post"].shape == (12, model.d_model)
    assert torch.all(out[0]["blocks.0.hook_resid_post"] == 1)
    _, cache = model.run_with_cache(torch.tensor([seqs[1]]))
    assert not torch.allclose(out[1]["blocks.1.hook_resid_post"], cache["blocks.1.hook_resid_post"][0], atol=1e-3)


def test_activations_can_stay_where_the_model_ran_in_float32():
    model = tiny_repo("rope").to(torch.bfloat16)
    seqs = [list(range(10, 30)), list(range(40, 52))]
    names = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_pattern"]
    moved = dict(stream(model, seqs, names, batch_size=2))
    kept = dict(stream(model, seqs, names, batch_size=2, to=None))
    _, cache = model.run_with_cache(torch.tensor([seqs[0]]), names_filter=names)
    for n in names:
        assert kept[0][n].dtype == moved[0][n].dtype == torch.float32 \
            and kept[0][n].device == next(model.parameters()).device
        torch.testing.assert_close(kept[1][n], moved[1][n], atol=0, rtol=0)
        torch.testing.assert_close(kept[0][n], cache[n][0].float(), atol=0, rtol=0)
