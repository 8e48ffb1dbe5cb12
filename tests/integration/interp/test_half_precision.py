"""Half precision, every family: ``interp.load(..., dtype=)`` in bfloat16 and float16 keeps the capabilities and the
rotations that float32 finds, runs, and stays as close to exact arithmetic as transformers' own half-precision forward
of the same weights; attention statistics, accumulated in float32, are the float64 reductions of the exact patterns of
the half-precision model's own queries and keys, to float32's rounding. The family-wide tests take every registered
family's ``examples``, so a new family enters them by registering."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import transformers as T

from interp import families
from interp.capabilities import Capability
from interp.loading import load, save
from tests.hf_helpers import CONFIGS, gemma3_config, spread_weights, tiny_hf

HALF = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16")]
FAMILIES = [f.name for f in families.families()]


def _tokens(model, n: int, batch: int = 2, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, min(model.d_vocab, 250), (batch, n), generator=g)


def _floats(model) -> set:
    return {p.dtype for p in model.parameters() if p.is_floating_point()}


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.double() - ref.double()).norm() / ref.double().norm())


# ---- every registered family: loads, keeps its capabilities and rotations, runs --------------------------------


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_and_runs_in_half_precision(family, dtype, tmp_path):
    """Each example of the family, saved and loaded back with ``dtype=``: every weight in that dtype, the same
    capabilities and the same rotation per layer (frequencies in float32, bit for bit) as the float32 load, a finite
    output in that dtype, and ``run_with_cache`` equal to the forward pass as in float32 (to the dtype's rounding)."""
    for i, example in enumerate(families.get(family).examples()):
        directory = save(example, tmp_path / f"{i}")
        full, half = load(directory), load(directory, dtype=dtype)
        assert _floats(half) == {dtype}, (family, i)
        assert half.capabilities == full.capabilities, (family, i)
        assert getattr(half, "head_separable", True) == getattr(full, "head_separable", True)
        if Capability.ROTARY in full.capabilities:
            for layer in range(full.n_layers):
                a, b = full.rotation(layer), half.rotation(layer)
                assert (a is None) == (b is None)
                if a is not None:
                    assert b.layout == a.layout and b.inv_freq.dtype == torch.float32
                    assert torch.equal(b.inv_freq, a.inv_freq), (family, i, layer)
        tokens = _tokens(full, min(24, full.max_seq_len))
        with torch.no_grad():
            out = half(tokens)
            cached, cache = half.run_with_cache(tokens)
        assert out.dtype == dtype and torch.isfinite(out).all(), (family, i)
        # the hooked (materialised) attention against the fused one: both round to the dtype, in different orders
        assert _rel(cached, out) < 8 * torch.finfo(dtype).eps, (family, i)
        patterns = [v for k, v in cache.items() if k.endswith("hook_pattern")]
        assert patterns and all(torch.isfinite(p).all() for p in patterns)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_half_precision_copy_keeps_its_rotary_frequencies_in_float32(family, dtype):
    """``model.to(dtype)`` (what ``load`` does for the families that build in float32, and what a user does) leaves
    each layer's rotation as it was: frequencies rounded to the dtype would turn late positions radians off."""
    for example in families.get(family).examples():
        if Capability.ROTARY not in example.capabilities:
            continue
        before = [example.rotation(l) for l in range(example.n_layers)]
        half = copy.deepcopy(example).to(dtype)
        with torch.no_grad():
            half(_tokens(half, 8))
        for layer, spec in enumerate(before):
            if spec is not None:
                assert torch.equal(half.rotation(layer).inv_freq, spec.inv_freq), (family, layer)
        buffers = {n: b.dtype for n, b in half.named_buffers() if n.endswith("inv_freq")}
        assert set(buffers.values()) <= {torch.float32}, buffers


# ---- attention statistics of a half-precision model ------------------------------------------------------------

STATISTICS = ("first_mass", "self_mass", "previous_mass", "window_mass", "far_mass", "distance_mean", "distance_std",
              "entropy", "top_mass")
WINDOW = 4


def _reductions(patterns: torch.Tensor) -> dict[str, torch.Tensor]:
    """``STATISTICS`` (k = 1, w = ``WINDOW``) of ``patterns [..., q, k]`` reduced in float64, and ``E[d^2]``."""
    p = patterns.double()
    n_q, n_k = p.shape[-2:]
    q, k = torch.arange(n_q)[:, None] + (n_k - n_q), torch.arange(n_k)[None]
    d = (q - k).abs().double()
    mean, square = (p * d).sum(-1), (p * d * d).sum(-1)
    return {"first_mass": p[..., 0], "self_mass": (p * (k == q)).sum(-1), "previous_mass": (p * (k == q - 1)).sum(-1),
            "window_mass": (p * (d <= WINDOW)).sum(-1), "far_mass": (p * (d > WINDOW)).sum(-1),
            "distance_mean": mean, "distance_std": (square - mean ** 2).clamp(min=0).sqrt(), "square": square,
            "entropy": -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1),
            "top_mass": p.max(-1).values}


def _errors(values: dict, exact: dict) -> dict[str, torch.Tensor]:
    """Per statistic, ``|value - exact|`` over its scale (entry by entry): 1 for a mass, the largest probability for
    ``top_mass``, E[d] for ``distance_mean``, H + 1 for the entropy and 3 E[d^2] for the variance behind
    ``distance_std`` (compared as a variance): when every probability of a row moves by a factor 1 + delta_j,
    |delta_j| <= delta, each statistic moves by at most delta times its scale (p log p by delta p (|log p| + 1); E[d^2]
    by delta E[d^2] and E[d]^2 by 2 delta E[d]^2)."""
    out = {}
    for name in STATISTICS:
        value = values[name].double()
        value = value[..., 0] if value.dim() == exact["first_mass"].dim() + 1 else value
        assert value.shape == exact[name].shape, name
        if name == "distance_std":
            diff, scale = (value ** 2 - exact[name] ** 2).abs(), 3 * exact["square"]
        else:
            diff = (value - exact[name]).abs()
            scale = {"distance_mean": exact[name], "entropy": exact[name] + 1,
                     "top_mass": exact[name]}.get(name, torch.ones_like(diff))
        out[name] = torch.where(diff == 0, 0.0, diff / scale)
    return out


def _own_patterns(run) -> tuple[object, dict[str, tuple[torch.Tensor, float, int]]]:
    """``run()`` with every attention call recorded at dispatch (``bench.exactness.recording``, as the exactness bench
    takes its ``own`` reference): per ``hook_pattern`` name, the float64 pattern of the queries, keys and mask that
    attention was handed (rotations, RePo positions, norms, both DSTG streams and its RP bias, soft-caps, masks and
    key windows already applied: whatever the family did, the attention received), ``M``: a bound on every visible
    logit (``scale |q| |k|`` over any query and key, Cauchy-Schwarz, plus the largest additive bias on a visible key;
    the largest given score), and the head dimension."""
    from bench.exactness import own_pattern, recording

    own = {}

    def record(call):
        if call.name is None:
            return
        p = own_pattern(call)
        if call.scores is not None:
            largest = float(call.scores.double()[p > 0].abs().max())
        else:
            q, k = call.q.double(), call.k.double()
            largest = call.scale * float(q.norm(dim=-1).max() * k.norm(dim=-1).max())
            if call.bias is not None and call.bias.dtype != torch.bool:
                bias = call.bias[..., :p.shape[-1]].double().expand_as(p)
                largest += float(bias[p > 0].abs().max())
        own[call.name] = (p, largest, call.q.shape[-1])

    with recording(record):
        out = run()
    return out, own


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("family", FAMILIES)
def test_half_precision_statistics_are_the_float64_reductions_of_the_exact_patterns_of_its_queries_and_keys(family,
                                                                                                           dtype):
    """``model_statistics`` of each example in ``dtype`` against float64 reductions of the float64 pattern of the very
    queries and keys (and mask) that each of its attentions was handed in that pass, every row of every layer and
    head: the statistics accumulate in float32 whatever the model's dtype (the chunked backend widens the
    half-precision q and k, exactly, and builds each pattern row in float32), so they are the exact statistics of the
    half-precision model's own attention up to float32's rounding, u32 = 2^-24.

    The bound, from the arithmetic (first order in u32): with d the head dimension, n the keys and M a bound on every
    visible logit (``_own_patterns``), a float32 logit misses the exact one by at most u32 (d + 6) M (the d-term dot
    product and the scale, u32 (d + 1) M; the soft-cap's division, tanh and product, 3 u32 M; the bias's addition,
    u32 M; M bounds the logit before and after each), which moves each probability by a factor 1 + 2 that; the
    softmax's shift (|s - max| <= 2 M), exponent, n-term sum and division add u32 (2 M + n + 2), and the statistic's
    own n-term float32 sum and products u32 (n + 2): each statistic within eps = u32 (2 (d + 7) M + 2 n + 8) times its
    scale (``_errors``). On these models eps is 4.4e-6 to 1.7e-5 (M up to 7, on RePo); measured, the statistics sit
    at most 1.9e-7 to 3.6e-7 of their scale from the exact ones (3 to 6 u32; 1% to 6% of eps).

    Second: the statistics are closer to that exact pattern than the pattern the same model hands ``hook_pattern`` is
    to the exact pattern of its own queries and keys (the materialised path: logits and probabilities rounded to
    ``dtype``: measured 0.95 to 1 u = eps(dtype) / 2 of the largest scale, up to 4 u where the half-precision q.k rounds
    logits of up to 7), every statistic, which is the point of accumulating in float32: measured, at least 370 times
    closer in float16 and 3,800 times in bfloat16."""
    from interp.attention import model_statistics

    u32 = torch.finfo(torch.float32).eps / 2
    for example in families.get(family).examples():
        model = copy.deepcopy(example).to(dtype)
        tokens = _tokens(model, min(48, model.max_seq_len))
        names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.n_layers)]
        seen = {}
        hooks = [(name, lambda p, hook: seen.__setitem__(hook.name, p.clone())) for name in names]
        with torch.no_grad():
            got, own = _own_patterns(lambda: model_statistics(model, tokens, STATISTICS, first=(1,),
                                                             windows=(WINDOW,)))
            _, hooked_own = _own_patterns(lambda: model.run_with_hooks(tokens, fwd_hooks=hooks))
        assert set(own) >= set(names) and set(hooked_own) >= set(names), (family, sorted(own))
        hooked = torch.stack([seen[name] for name in names])
        assert hooked.dtype == dtype
        label = (family, type(example).__name__)
        stats = _errors(got, _reductions(torch.stack([own[name][0] for name in names])))
        rounded = _errors(_reductions(hooked), _reductions(torch.stack([hooked_own[name][0] for name in names])))
        for layer, name in enumerate(names):
            _, m, d = own[name]
            eps = u32 * (2 * (d + 7) * m + 2 * tokens.shape[-1] + 8)
            for statistic, error in stats.items():
                assert float(error[layer].max()) <= eps, (*label, layer, statistic, float(error[layer].max()) / eps)
        for statistic in STATISTICS:
            assert float(stats[statistic].max()) < float(rounded[statistic].max()), (
                *label, statistic, float(stats[statistic].max()), float(rounded[statistic].max()))


# ---- the forward pass against transformers' own, where transformers has the model -----------------------------

GEMMA3 = (T.Gemma3TextConfig, T.Gemma3ForCausalLM,
          gemma3_config(2, {"rope_type": "default", "rope_theta": 1e6}, intermediate_size=96, sliding_window=64,
                        final_logit_softcapping=30.0))
# every architecture of tests.hf_helpers (the llama, bert and olmo2 directories are read by the llama, bert and repo
# families, the others by the generic one) and Gemma 3 with its two kinds of layer
ARCHITECTURES = {**CONFIGS, "gemma3": GEMMA3}
LENGTH = 256  # positions up to 255: rotations far from the identity in every fast band


def _output(out):
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("kind", list(ARCHITECTURES))
def test_the_half_precision_forward_is_as_close_to_exact_as_transformers_own(kind, dtype, tmp_path):
    """poslens' forward in ``dtype`` against transformers' forward in ``dtype`` of the same checkpoint, both measured
    against the float64 forward (transformers, eager) of the very weights the half-precision models hold (the weights
    rounded to ``dtype``, then widened): the error then is the arithmetic's alone, not the weights' rounding.

    The bound: poslens' relative error is at most twice the larger of transformers' two (eager and sdpa attention,
    where the architecture has sdpa). transformers' own implementations differ by about 20% (eager's separate softmax
    rounds once more); poslens runs transformers' modules (generic family) or its own float32-rotating layers (llama,
    bert, repo), so the same arithmetic in the same dtype, and its error should be of the same order (measured: 0.67
    to 1.00 times transformers' larger one, 0.6% to 4% relative in bfloat16). A forward that loses precision
    transformers keeps (a rotation or an accumulation in the half dtype, weights rounded twice) lands above it; one
    that computes in float32 where transformers does not lands below, which the bound allows."""
    config_cls, model_cls, kwargs = ARCHITECTURES[kind]
    torch.manual_seed(0)
    spread_weights(model_cls(config_cls(**kwargs))).save_pretrained(tmp_path)
    tokens = torch.randint(4, 250, (2, LENGTH), generator=torch.Generator().manual_seed(0))
    eager = model_cls.from_pretrained(tmp_path, dtype=dtype, attn_implementation="eager").eval()
    theirs = [eager]
    try:
        theirs.append(model_cls.from_pretrained(tmp_path, dtype=dtype, attn_implementation="sdpa").eval())
    except ValueError:  # Gemma 2: transformers has no sdpa path for it
        pass
    ours, full = [load(tmp_path, dtype=dtype)], load(tmp_path)
    assert ours[0].capabilities == full.capabilities  # a bf16 Gemma 3 keeps ROTARY
    assert getattr(ours[0], "head_separable", True) == getattr(full, "head_separable", True)
    if ours[0].family == "hf":  # and a transformers model in memory, cast by load
        ours.append(load(copy.deepcopy(eager).float(), dtype=dtype))
    with torch.no_grad():
        exact = _output(copy.deepcopy(eager).to(torch.float64)(tokens))
        their_error = max(_rel(_output(m(tokens)), exact) for m in theirs)
        for model in ours:
            assert _floats(model) == {dtype}
            out = model(tokens)
            assert out.dtype == dtype
            assert 0 < _rel(out, exact) <= 2 * their_error, (kind, model.family, _rel(out, exact), their_error)


# ---- the rotary layout probe in half precision -----------------------------------------------------------------


def _planted(monkeypatch, rotate):
    """Qwen2's attention rotating its queries and keys by ``rotate(x, cos, sin)`` (cos / sin ``[batch, 1, pos, d]``
    as transformers builds them: the band angles twice over) instead of transformers' ``rotate_half`` rotation."""
    import transformers.models.qwen2.modeling_qwen2 as qwen2

    def apply(q, k, cos, sin, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return rotate(q, cos, sin), rotate(k, cos, sin)

    monkeypatch.setattr(qwen2, "apply_rotary_pos_emb", apply)


def _interleaved(x, cos, sin):
    """GPT-J's layout: dims 2i and 2i + 1 turn together by band i's angle."""
    half = x.shape[-1] // 2
    c, s = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)
    pairs = x.unflatten(-1, (half, 2))
    turned = torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)
    return x * c + turned * s


def _mirrored(x, cos, sin):
    """A layout no model uses: dim i turns with dim d - 1 - i (band angles as ``rotate_half`` has them)."""
    d = x.shape[-1]
    partner = x.flip(-1)
    sign = torch.cat((-torch.ones(d // 2), torch.ones(d - d // 2))).to(x.dtype)
    return x * cos + partner * sign * sin


def _faster(monkeypatch):
    """Qwen2's rotary embedding turning 2% faster than the frequencies it holds (a frequency scaling that the config
    does not state): cos and sin of 1.02 p inv_freq at position p."""
    import transformers.models.qwen2.modeling_qwen2 as qwen2

    real = qwen2.Qwen2RotaryEmbedding.forward
    monkeypatch.setattr(qwen2.Qwen2RotaryEmbedding, "forward",
                        lambda self, x, position_ids, *a, **k: real(self, x, position_ids * 1.02, *a, **k))


@pytest.mark.parametrize("dtype", [pytest.param(torch.float32, id="fp32"), *HALF])
def test_the_layout_probe_keeps_rotary_in_half_precision_and_still_rejects_a_wrong_layout(dtype, tmp_path,
                                                                                         monkeypatch):
    """A rotary model loaded in ``dtype`` keeps ``ROTARY`` with the layout float32 finds; one that turns its queries in
    GPT-J's interleaved layout is found to; one that pairs dims as no layout of ``interp.rope`` does, or turns 2%
    faster than its stated frequencies, loads without ``ROTARY`` (its positions still per head) in every dtype.

    The probe's bound (``layout_tolerance``: 4 epsilons of the dtype) sits between the two: the right layout misses
    by 0.2 to 0.75 epsilons (rounding of the rotated query), a wrong pairing by 73% to 146% of the query's norm, and
    turning 2% too fast by 30% (at the probe's last position, 31 positions of turning), whatever the dtype."""
    from interp.families.hf.checkpoints import layout_errors, layout_tolerance

    tiny_hf("qwen2").save_pretrained(tmp_path)
    right = load(tmp_path, dtype=dtype)
    assert right.family == "hf" and Capability.ROTARY in right.capabilities
    assert [right.rotation(l).layout for l in range(right.n_layers)] == ["half_split"] * right.n_layers
    seen = []
    real = layout_errors

    def spy(q, inv_freq):
        seen.append(real(q, inv_freq))
        return seen[-1]

    monkeypatch.setattr("interp.families.hf.checkpoints.layout_errors", spy)
    plants = ((lambda m: _planted(m, _interleaved), "interleaved"), (lambda m: _planted(m, _mirrored), None),
              (_faster, None))
    for i, (plant, layout) in enumerate(plants):
        with monkeypatch.context() as m:
            plant(m)
            model = load(tmp_path, dtype=dtype)
        errors = seen[-1]
        assert Capability.POSITIONS in model.capabilities
        if layout is None:
            assert Capability.ROTARY not in model.capabilities, (i, errors)
            assert min(errors.values()) > 3 * layout_tolerance(dtype), (i, errors)
        else:
            assert Capability.ROTARY in model.capabilities and model.rotation(0).layout == layout, errors
            assert errors[layout] < layout_tolerance(dtype) / 3, errors


def test_the_layout_tolerance_is_four_epsilons_of_the_dtype_and_float32s_own_bound_above():
    from interp.families.hf.checkpoints import layout_tolerance

    assert layout_tolerance(torch.float32) == layout_tolerance(torch.float64) == 1e-3
    assert layout_tolerance(torch.bfloat16) == 4 * 2.0 ** -7
    assert layout_tolerance(torch.float16) == 4 * 2.0 ** -10
    assert math.isclose(layout_tolerance(torch.bfloat16), 0.03125)


@pytest.mark.parametrize("dtype", HALF)
def test_every_intervention_a_half_precision_rotary_model_takes_acts_as_in_float32(dtype, tmp_path):
    """Each registered intervention (its ``example``) that a generic-family rotary model in ``dtype`` has the
    capabilities for (the rotary ones need ``ROTARY``, which half precision used to lose): the intervened output is as
    close to the intervened float32 output as the plain outputs are to each other, twice over (the same edit, made in
    another precision; an edit lost or misplaced in half precision differs by the edit's own size)."""
    from interp import interventions
    from interp.interventions import applied

    tiny_hf("qwen2").save_pretrained(tmp_path)
    full, half = load(tmp_path), load(tmp_path, dtype=dtype)
    tokens = _tokens(full, 64, batch=1)
    ran = []
    with torch.no_grad():
        noise = float((half(tokens).double() - full(tokens).double()).norm())
        for name, cls in interventions.registered().items():
            if cls.example is None or not set(cls.needs) <= half.capabilities:
                continue
            edit = cls(**cls.example)
            try:
                with applied(full, edit):
                    want = full(tokens).double()
            except ValueError:  # refused in float32 (positions of the generic family are read-only): in half too
                with pytest.raises(ValueError), applied(half, edit):
                    half(tokens)
                continue
            with applied(half, edit):
                got = half(tokens).double()
            assert float((got - want).norm()) <= 2 * noise, name
            ran.append(name)
    assert {"remove-rotary-bands", "unrotate-rotary-bands"} <= set(ran), ran


def test_a_float16_forward_that_overflows_is_refused_by_name_unless_allowed(tmp_path):
    """Finite weights whose logits pass float16's 65,504 (Gemma 3 in float16 where a document starts, as in
    transformers' own float16 forward): ``load(..., dtype=torch.float16)`` says so and names bfloat16, from a
    directory and from memory; ``allow_nonfinite=True`` loads it; bfloat16 (float32's range) runs it."""
    from interp.loading.errors import CheckpointError

    hf = tiny_hf("qwen2")
    with torch.no_grad():
        hf.lm_head.weight.mul_(3e4)  # at most 3.5e4: representable in float16; logits of about 7e4
    hf.save_pretrained(tmp_path)
    for source in (tmp_path, hf):
        with pytest.raises(CheckpointError, match=r"in float16 its forward pass gives non-finite outputs .* load it in "
                                                  r"bfloat16"):
            load(source, dtype=torch.float16)
    assert _floats(load(tmp_path, dtype=torch.float16, allow_nonfinite=True)) == {torch.float16}
    half = load(tmp_path, dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch.isfinite(half(_tokens(half, 8))).all()
