"""The shortcuts behind poslens' speed give the numbers of the plain computation and follow what a user edits:
LLaMA's cached RoPE table (bypassed when a hook reads or edits the positions), and ``extract.moments``."""

import pytest
import torch

from interp import extract, rope
from interp.extract import HookNameError, moments, stream
from tests.encoder_helpers import tiny_encoder
from tests.integration.interp.test_families import _llama


def test_llama_position_hooks_still_move_the_rotation_and_untouched_positions_give_identical_logits():
    model = _llama()
    tokens = torch.randint(1, 97, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = model(tokens)
        with model.hooks(fwd_hooks=[("blocks.0.attn.hook_positions", lambda p, hook: p.clone())]):
            per_head = model(tokens)
        shifted_q = []
        with model.hooks(fwd_hooks=[("blocks.0.attn.hook_positions", lambda p, hook: p * 2),  # doubles every distance
                                    ("blocks.0.attn.hook_rot_q", lambda q, hook: shifted_q.append(q))]):
            shifted = model(tokens)
        _, cache = model.run_with_cache(tokens, names_filter=["blocks.0.attn.hook_q"])
    assert torch.equal(plain, per_head)
    want = model.blocks[0].attn.cfg
    pos = 2 * torch.arange(12, dtype=torch.float32).expand(2, want.num_attention_heads, 12)
    torch.testing.assert_close(shifted_q[0],
                               rope.rotate_half_split(cache["blocks.0.attn.hook_q"], pos, want.rope_theta),
                               atol=0, rtol=0)
    assert not torch.allclose(shifted, plain, atol=1e-4)


def test_llama_weights_edited_in_place_and_a_new_dtype_take_effect():
    model = _llama()
    tokens = torch.randint(1, 97, (1, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = model(tokens)
        model.blocks[0].attn.q_proj.weight.mul_(2.0)
        edited = model(tokens)
        model.to(torch.bfloat16)
        low = model(tokens)
        with model.hooks(fwd_hooks=[("blocks.1.attn.hook_positions", lambda p, hook: p.clone())]):
            low_per_head = model(tokens)
    assert not torch.allclose(before, edited, atol=1e-4)
    assert low.dtype == torch.bfloat16 and torch.equal(low, low_per_head)
    torch.testing.assert_close(low.float(), edited, atol=0.1, rtol=0.05)


def _reference(model, seqs, names, batch_size):
    """float64 count, sum and X^T X from the per-sequence activations ``stream`` yields."""
    ref = {n: [0, 0, 0] for n in names}
    for _, acts in stream(model, seqs, names, batch_size=batch_size):
        for n in names:
            x = acts[n].double()
            ref[n][0] += len(x)
            ref[n][1] = ref[n][1] + x.sum(0)
            ref[n][2] = ref[n][2] + x.T @ x
    return ref


@pytest.mark.parametrize("make", [_llama, lambda: tiny_encoder("rope")], ids=["llama-causal", "encoder-bidirectional"])
def test_moments_equal_the_statistics_of_streamed_activations_without_padding(make, monkeypatch):
    monkeypatch.setattr(extract, "GRAM_BLOCK", 7)  # several block rows, the last one narrower, on a 32-wide residual
    model = make()
    g = torch.Generator().manual_seed(2)
    lengths = [9, 4, 9, 13, 6]  # unequal: padding (causal) or per-length batches (bidirectional) must not count
    seqs = [torch.randint(1, min(model.d_vocab, 90), (n,), generator=g).tolist() for n in lengths]
    names = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_mid"]
    later = []
    model.add_hook(f"blocks.{model.n_layers - 1}.hook_resid_post", lambda t, hook: later.append(hook.name))
    got = moments(model, seqs, names, batch_size=3)
    model.reset_hooks()
    assert later == []  # the pass stopped after blocks.1.hook_resid_mid
    ref = _reference(model, seqs, names, batch_size=3)
    for n in names:
        assert got[n].n == sum(lengths) == ref[n][0]
        assert got[n].gram.dtype == torch.float64
        torch.testing.assert_close(got[n].sum, ref[n][1], atol=1e-9, rtol=1e-12)
        torch.testing.assert_close(got[n].gram, ref[n][2], atol=1e-9, rtol=1e-12)
        x = torch.cat([a[n].double() for _, a in stream(model, seqs, [n])])
        torch.testing.assert_close(got[n].covariance(), torch.cov(x.T, correction=0), atol=1e-9, rtol=1e-9)


def test_moments_refuse_hooks_that_are_not_token_vectors_and_unknown_names():
    model = _llama()
    with pytest.raises(ValueError, match=r"blocks.0.attn.hook_pattern is \[batch, head, q, k\]"):
        moments(model, [[1, 2, 3]], ["blocks.0.attn.hook_pattern"])
    with pytest.raises(HookNameError, match="no hook 'blocks.0.hook_resid'"):
        moments(model, [[1, 2, 3]], ["blocks.0.hook_resid"])
    with pytest.raises(ValueError, match="no sequences"):
        moments(model, [], ["blocks.0.hook_resid_post"])


@pytest.mark.parametrize("n_q,n_k", [(9, 9), (3, 10)])  # a whole sequence, and new tokens against a KV cache
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_materialised_causal_pattern_equals_a_masked_softmax_and_hides_a_blown_up_future_key(n_q, n_k, dtype):
    import math

    from transformer_lens.hook_points import HookPoint

    from interp.attention import attend, causal_mask

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g).to(dtype) for n in (n_q, n_k, n_k))
    k[:, :, -1] = float("inf")  # only the last query row may see it
    seen = []
    hook = HookPoint()
    hook.name = "blocks.0.attn.hook_pattern"
    hook.add_hook(lambda p, hook: seen.append(p))
    z = attend(q, k, v, causal=True, hook_pattern=hook)
    scores = (q @ k.transpose(-1, -2) * (1 / math.sqrt(16))).masked_fill(~causal_mask(n_q, n_k, q.device),
                                                                         float("-inf"))
    want = torch.softmax(scores.float(), -1).to(dtype)
    torch.testing.assert_close(seen[0], want, atol=0, rtol=0, equal_nan=True)
    torch.testing.assert_close(z, want @ v, atol=0, rtol=0, equal_nan=True)
    assert not seen[0][:, :, :-1].isnan().any() and seen[0][:, :, -1].isnan().all()


def test_scores_kept_by_a_hook_are_not_overwritten_by_the_in_place_softmax():
    model = _llama()
    tokens = torch.randint(1, 97, (1, 11), generator=torch.Generator().manual_seed(5))
    kept = []
    # plain torch
    handle = model.blocks[0].attn.hook_attn_scores.register_forward_hook(lambda m, i, out: kept.append(out))
    with torch.no_grad():  # where the softmax may run in place
        _, cache = model.run_with_cache(tokens, names_filter=["blocks.1.attn.hook_attn_scores",
                                                              "blocks.1.attn.hook_pattern",
                                                              "blocks.0.attn.hook_pattern"])
    handle.remove()
    for scores, pattern in ((kept[0], cache["blocks.0.attn.hook_pattern"]),
                            (cache["blocks.1.attn.hook_attn_scores"], cache["blocks.1.attn.hook_pattern"])):
        assert torch.isinf(scores).any() and (scores.max() > 1 or scores.min() < 0)  # still scores, not probabilities
        torch.testing.assert_close(torch.softmax(scores, -1), pattern, atol=0, rtol=0)


@pytest.mark.parametrize("n_q,n_k", [(9, 9), (3, 10)])
def test_grouped_keys_and_values_give_the_bits_of_repeated_ones_fused_or_materialised(n_q, n_k):
    from transformer_lens.hook_points import HookPoint

    from interp.attention import attend

    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 6, n_q, 16, generator=g), torch.randn(2, 2, n_k, 16, generator=g),
               torch.randn(2, 2, n_k, 16, generator=g))
    k3, v3 = k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)
    assert torch.equal(attend(q, k, v, causal=True), attend(q, k3, v3, causal=True))
    hook = HookPoint()
    hook.add_hook(lambda p, hook: p)
    assert torch.equal(attend(q, k, v, causal=True, hook_pattern=hook),
                       attend(q, k3, v3, causal=True, hook_pattern=hook))
