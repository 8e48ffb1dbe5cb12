import torch
from transformer_lens.hook_points import HookPoint

from interp.attention import attend, query_rows


def _qkv(n=9):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(2, 3, n, 8, generator=g) for _ in range(3)]


def test_eager_path_matches_fused_kernel_and_pattern_is_causal():
    q, k, v = _qkv()
    fused = attend(q, k, v, causal=True)
    hook = HookPoint()
    seen = {}
    hook.add_hook(lambda t, hook: seen.setdefault("p", t))
    eager = attend(q, k, v, causal=True, hook_pattern=hook)
    torch.testing.assert_close(eager, fused, atol=1e-5, rtol=1e-5)
    p = seen["p"]
    assert p.shape == (2, 3, 9, 9)
    assert torch.all(p.triu(1) == 0)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 3, 9))


def test_query_rows_give_exactly_the_full_pattern_rows():
    q, k, v = _qkv()
    hook = HookPoint()
    seen = []
    hook.add_hook(lambda t, hook: seen.append(t))
    full_out = attend(q, k, v, causal=True, hook_pattern=hook)
    rows = torch.tensor([2, 7, 8])
    with query_rows(rows):
        rows_out = attend(q, k, v, causal=True, hook_pattern=hook)
    assert seen[1].shape == (2, 3, 3, 9)
    torch.testing.assert_close(seen[1], seen[0][:, :, rows])
    torch.testing.assert_close(rows_out, full_out, atol=1e-5, rtol=1e-5)


def test_editing_pattern_rows_changes_exactly_those_outputs():
    q, k, v = _qkv()
    hook = HookPoint()

    def onto_first_key(t, hook):
        out = torch.zeros_like(t)
        out[..., 0] = 1.0
        return out

    hook.add_hook(onto_first_key)
    base = attend(q, k, v, causal=True)
    with query_rows([4]):
        edited = attend(q, k, v, causal=True, hook_pattern=hook)
    torch.testing.assert_close(edited[:, :, 4], v[:, :, 0])
    keep = [i for i in range(9) if i != 4]
    torch.testing.assert_close(edited[:, :, keep], base[:, :, keep], atol=1e-5, rtol=1e-5)


def test_bias_enters_scores_and_is_masked_above_the_diagonal():
    q, k, v = _qkv(5)
    bias = torch.randn(1, 3, 5, 5)
    hook = HookPoint()
    seen = {}
    hook.add_hook(lambda t, hook: seen.setdefault("s", t))
    out = attend(q, k, v, causal=True, bias=bias, hook_scores=hook)
    expected = (q @ k.transpose(-1, -2)) / 8**0.5 + bias
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    torch.testing.assert_close(seen["s"][..., mask], expected.expand(2, -1, -1, -1)[..., mask])
    assert torch.isinf(seen["s"][..., ~mask]).all()
    torch.testing.assert_close(out, attend(q, k, v, causal=True, bias=bias), atol=1e-5, rtol=1e-5)


def test_recording_calls_hands_each_attention_call_and_nothing_outside_the_block():
    """``recording_calls``: one ``AttentionCall`` per attention of the pass, with its name, queries, keys and the
    unfolded ``Mask``; after the block nothing is recorded."""
    from interp.attention import AttentionCall, recording_calls
    from tests.repo_helpers import tiny_repo

    model = tiny_repo("rope")
    tokens = torch.randint(1, 250, (1, 12), generator=torch.Generator().manual_seed(0))
    seen = []
    with torch.no_grad(), recording_calls(seen.append):
        model(tokens)
    assert [c.name for c in seen] == [f"blocks.{l}.attn.hook_pattern" for l in range(model.n_layers)]
    assert all(isinstance(c, AttentionCall) and c.q.shape[-2] == 12 and c.mask.causal and c.mask.bias is None
               for c in seen)
    with torch.no_grad():
        model(tokens)
    assert len(seen) == model.n_layers
