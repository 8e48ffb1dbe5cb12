"""TransformerLens' documented behaviour for padded batches, ``forward`` on text and ``generate``, asserted on every
poslens family: each row of a padded batch gives what its text gives alone (right and left padding, float32), with
TransformerLens' own ``TransformerBridge`` as the oracle on a tiny checkpoint it boots offline (tokens, logits and
generations of texts of different lengths); ``generate``'s input kinds and return types as TransformerLens documents
them; a family that cannot do something says so, naming itself."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.capabilities import Capability, CapabilityError
from interp.families import families
from interp.families.hf.checkpoints import load_generic
from interp.padding import pad_rows
from interp.tl_batch import pad_id
from interp.tokenizers import TokenizerError

EXAMPLES = [m.eval() for f in families() for m in (f.examples() if f.examples else [])]
IDS = [f"{m.family}-{type(m).__name__}-{getattr(m, 'variant', '') or i}" for i, m in enumerate(EXAMPLES)]
TEXTS = ["The cat sat on the mat.", "Hi", "A third, middling one"]
BUNDLED = ["repo-small", "nope-small", "increments-per-layer", "increments-shared", "rope-bytes", "ap-encoder-small",
           "rope-encoder-small"]
SPECIAL_TOKEN_ENCODERS = ["dstg-small", "rp-encoder-small"]  # [CLS]/[SEP] read at each row's first and last token
F32 = dict(atol=2e-5, rtol=1e-5)


def rows_of(model, lengths=(7, 3, 5), seed=0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    hi = min(model.d_vocab, 90)
    return [torch.randint(1, hi, (n,), generator=g).tolist() for n in lengths]


def real(out: torch.Tensor, i: int, n: int, side: str) -> torch.Tensor:
    """Row ``i``'s ``n`` real positions of a padded output."""
    return out[i, :n] if side == "right" else out[i, out.shape[1] - n:]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_a_padded_batch_gives_each_row_what_it_gives_alone(model, side):
    rows = rows_of(model)
    tokens, mask = pad_rows(rows, 0, side)
    with torch.no_grad():
        out = model(tokens, attention_mask=mask)
        for i, r in enumerate(rows):
            torch.testing.assert_close(real(out, i, len(r), side), model(torch.tensor([r]))[0], **F32)


@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_a_zero_inside_a_row_gives_the_row_without_that_token(model):
    """TransformerLens' semantics of ``attention_mask``: the token is hidden and the positions after it renumbered
    (``get_offset_position_ids``), so the rest of the row is the row without it (rotary, learned, increments, decay
    and relative-bias positions alike)."""
    row = rows_of(model, (9,))[0]
    mask = torch.ones(1, 9, dtype=torch.bool)
    mask[0, [2, 5]] = False
    keep = [i for i in range(9) if mask[0, i]]
    with torch.no_grad():
        out = model(torch.tensor([row]), attention_mask=mask)[0, keep]
        torch.testing.assert_close(out, model(torch.tensor([[row[i] for i in keep]]))[0], **F32)


@pytest.mark.parametrize("model", EXAMPLES, ids=IDS)
def test_no_real_query_attends_to_padding(model):
    rows = rows_of(model)
    tokens, mask = pad_rows(rows, 0, "left")
    _, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter=lambda n: n.endswith("hook_pattern"))
    for name, pattern in cache.items():  # [batch, head, q, k]
        on_pads = pattern.masked_fill(mask[:, None, None, :], 0.0).sum(-1)
        assert float(on_pads[mask[:, None, :].expand_as(on_pads)].abs().max()) == 0.0, name
        torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern.sum(-1)), **F32)


@pytest.fixture(scope="module")
def bundled():
    return {name: interp.load(name) for name in BUNDLED + SPECIAL_TOKEN_ENCODERS}


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", BUNDLED)
def test_texts_of_different_lengths_give_each_text_alone(bundled, name, side):
    """Byte-level decoders and WordPiece encoders alike: ``model(texts)`` pads, masks, and each row's logits (and a
    causal model's per-token losses) are that text's alone."""
    model = bundled[name]
    tokens = model.to_tokens(TEXTS, padding_side=side)
    alone = [model.to_tokens(t) for t in TEXTS]
    assert tokens.shape == (len(TEXTS), max(a.shape[1] for a in alone))
    causal = Capability.CAUSAL_LM in model.capabilities
    with torch.no_grad():
        out = model(TEXTS, padding_side=side)
        losses = model(TEXTS, padding_side=side, return_type="loss", loss_per_token=True) if causal else None
        for i, a in enumerate(alone):
            n = a.shape[1]
            assert torch.equal(real(tokens, i, n, side), a[0])
            torch.testing.assert_close(real(out, i, n, side), model(a)[0], **F32)
            if causal:
                own = model(a, return_type="loss", loss_per_token=True)[0]
                torch.testing.assert_close(real(losses, i, n - 1, side)[-(n - 1):], own, **F32)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", SPECIAL_TOKEN_ENCODERS)
def test_an_encoder_reading_cls_and_sep_finds_them_in_each_padded_row(bundled, name, side):
    """DSTG and the relative-bias encoder read [CLS] / [SEP] where each row's real tokens begin and end (their thetas,
    their zeroed AP logits), so a padded row's MLM logits are its text's alone, as TransformerLens pads any model."""
    model = bundled[name]
    assert model.reads_special_tokens
    tokens = model.to_tokens(TEXTS, padding_side=side)
    alone = [model.to_tokens(t) for t in TEXTS]
    with torch.no_grad():
        out = model(TEXTS, padding_side=side)
        for i, a in enumerate(alone):
            assert torch.equal(real(tokens, i, a.shape[1], side), a[0])
            torch.testing.assert_close(real(out, i, a.shape[1], side), model(a)[0], **F32)


def test_padding_side_is_settable_on_the_tokenizer_as_in_transformerlens(bundled):
    model = bundled["repo-small"]
    assert model.tokenizer.padding_side == "right"
    right = model.to_tokens(TEXTS)
    model.tokenizer.padding_side = "left"
    try:
        assert torch.equal(model.to_tokens(TEXTS), model.to_tokens(TEXTS, padding_side="left"))
        assert not torch.equal(model.to_tokens(TEXTS), right)
    finally:
        model.tokenizer.padding_side = "right"
    with pytest.raises(ValueError, match="padding_side='middle'"):
        model.to_tokens(TEXTS, padding_side="middle")


def test_to_tokens_of_the_empty_text_is_bos(bundled):
    model = bundled["repo-small"]
    assert model.to_tokens("", prepend_bos=True).tolist() == [[model.tokenizer.eos_id]]
    assert tuple(model.to_tokens("", prepend_bos=False).shape) == (1, 0)


@pytest.mark.parametrize("name", ["repo-small", "rope-bytes", "ap-encoder-small"])
def test_forward_takes_what_call_takes(bundled, name):
    model = bundled[name]
    with torch.no_grad():
        by_call, by_forward = model(TEXTS[0]), model.forward(TEXTS[0])
        torch.testing.assert_close(by_forward, by_call, atol=0, rtol=0)
        torch.testing.assert_close(model.forward(model.to_tokens(TEXTS[0])), by_call, atol=0, rtol=0)
        torch.testing.assert_close(model.forward(TEXTS), model(TEXTS), atol=0, rtol=0)
        if model.has_output_head and Capability.CAUSAL_LM in model.capabilities:
            assert torch.equal(model.forward(TEXTS[0], return_type="loss"), model(TEXTS[0], return_type="loss"))


# -- generate ---------------------------------------------------------------------------------------------------------
CAUSAL = [m for m in EXAMPLES if Capability.CAUSAL_LM in m.capabilities]


@pytest.mark.parametrize("model", CAUSAL, ids=lambda m: m.model_name)
def test_generate_on_tokens_returns_tokens_and_each_padded_row_continues_as_alone(model):
    rows = rows_of(model)
    tokens, mask = pad_rows(rows, 0, "left")
    out = model.generate(input=tokens, attention_mask=mask, max_new_tokens=4, do_sample=False, stop_at_eos=False)
    assert isinstance(out, torch.Tensor) and out.shape == (3, tokens.shape[1] + 4)
    for i, r in enumerate(rows):
        alone = model.generate(input=torch.tensor([r]), max_new_tokens=4, do_sample=False, stop_at_eos=False)
        assert alone.shape == (1, len(r) + 4)
        assert out[i, tokens.shape[1]:].tolist() == alone[0, len(r):].tolist()
        assert alone[0, len(r):].tolist() == model.generate(r, 4)  # poslens' own greedy decoding agrees


@pytest.mark.parametrize("model", CAUSAL, ids=lambda m: m.model_name)
def test_generate_return_type_embeds_gives_the_token_embeddings(model):
    prompt = torch.tensor([rows_of(model)[0]])
    tokens = model.generate(input=prompt, max_new_tokens=3, do_sample=False, stop_at_eos=False, return_type="tokens")
    embeds = model.generate(input=prompt, max_new_tokens=3, do_sample=False, stop_at_eos=False, return_type="embeds")
    table = next(w for k, w in model.state_dict().items() if w.dim() == 2 and w.shape[0] == model.d_vocab
                 and "emb" in k)
    torch.testing.assert_close(embeds, table[tokens], atol=0, rtol=0)


@pytest.mark.parametrize("model", [m for m in EXAMPLES if Capability.CAUSAL_LM not in m.capabilities],
                         ids=lambda m: m.model_name)
def test_a_family_that_cannot_generate_says_which(model):
    with pytest.raises(CapabilityError, match=rf"\({model.family} family\) cannot generate"):
        model.generate(input=torch.tensor([[1, 2, 3]]), max_new_tokens=2)


@pytest.mark.parametrize("name", ["repo-small", "increments-shared", "rope-bytes"])
def test_generate_input_kinds_and_return_types(bundled, name):
    model = bundled[name]
    one = model.generate(input="The cat", max_new_tokens=4, do_sample=False)
    assert isinstance(one, str) and one.startswith("The cat")
    many = model.generate(input=["The cat", "A"], max_new_tokens=4, do_sample=False)
    assert isinstance(many, list) and len(many) == 2
    assert many == [model.generate(t, max_new_tokens=4, do_sample=False) for t in ["The cat", "A"]]
    tokens = model.to_tokens("The cat")
    as_str = model.generate(tokens, max_new_tokens=4, do_sample=False, return_type="str")
    assert as_str == one  # one sequence of tokens, return_type "str": a str, not a list
    assert torch.equal(model.generate(input="The cat", max_new_tokens=4, do_sample=False, return_type="tokens"),
                       model.generate(tokens, max_new_tokens=4, do_sample=False))
    with pytest.raises(ValueError, match="return_type='text'"):
        model.generate(input="The cat", return_type="text")
    torch.manual_seed(0)
    a = model.generate(input="The cat", max_new_tokens=6, top_k=5, temperature=0.7)
    torch.manual_seed(0)
    assert model.generate(input="The cat", max_new_tokens=6, top_k=5, temperature=0.7, use_past_kv_cache=False) == a


# -- TransformerLens' bridge as the oracle ----------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "hf"])
def test_padded_texts_give_what_transformerlens_gives(llama_bridge, family):
    directory, bridge = llama_bridge
    model = load_generic(directory) if family == "hf" else interp.load(directory, family=family)
    model.cfg.default_prepend_bos = bridge.cfg.default_prepend_bos
    assert model.to_tokens("").tolist() == bridge.to_tokens("").tolist() == [[bridge.tokenizer.bos_token_id]]
    with torch.no_grad():
        for side in ("right", "left"):
            ours, theirs = model.to_tokens(TEXTS, padding_side=side), bridge.to_tokens(TEXTS, padding_side=side)
            assert torch.equal(ours, theirs), side
            got, want = model(TEXTS, padding_side=side), bridge(TEXTS, padding_side=side)
            for i, t in enumerate(TEXTS):
                n = model.to_tokens(t).shape[1]
                torch.testing.assert_close(real(got, i, n, side), real(want, i, n, side), atol=2e-4, rtol=2e-4)
        for kind in (TEXTS, TEXTS[0], model.to_tokens(TEXTS[1])):
            ours = model.generate(input=kind, max_new_tokens=5, do_sample=False, use_past_kv_cache=False)
            theirs = bridge.generate(input=kind, max_new_tokens=5, do_sample=False, use_past_kv_cache=False,
                                     verbose=False)
            assert type(ours) is type(theirs)
            assert (ours.tolist() if isinstance(ours, torch.Tensor) else ours) == \
                (theirs.tolist() if isinstance(theirs, torch.Tensor) else theirs)


# -- the real pretrained peers: SmolLM2 (llama family), all-MiniLM (bert), Gemma 3 (hf) -------------------------------
REAL = ["smollm2", "minilm", "gemma3-270m"]


@pytest.mark.parametrize("name", REAL)
def test_a_real_model_pads_and_tokenizes_as_transformerlens(name):
    from transformers import PreTrainedTokenizerFast

    model = interp.load(name)
    tok = model.tokenizer
    assert isinstance(tok, PreTrainedTokenizerFast) and tok.name_or_path and tok.bos_token_id is not None
    short = tok(["a", "a b c"], padding=True)["attention_mask"][0]  # padded on the tokenizer's own side
    assert short[-1 if tok.padding_side == "right" else 0] == 0
    assert torch.equal(model.to_tokens(["a", "a b c"]), model.to_tokens(["a", "a b c"], padding_side=tok.padding_side))
    texts = ["The Eiffel Tower is in", "Paris"]
    with torch.no_grad():
        for side in ("right", "left"):
            out = model(texts, padding_side=side, prepend_bos=True)
            for i, t in enumerate(texts):
                alone = model(t, prepend_bos=True)[0]
                torch.testing.assert_close(real(out, i, alone.shape[0], side), alone, atol=1e-4, rtol=1e-4)
    if Capability.CAUSAL_LM in model.capabilities:
        many = model.generate(input=texts, max_new_tokens=4, do_sample=False, prepend_bos=True)
        assert many == [model.generate(input=t, max_new_tokens=4, do_sample=False, prepend_bos=True) for t in texts]


# -- hook_tokens on text, set_tokenizer, set_use_attn_result, one token's residual direction --------------------------
def only_tokens(name) -> bool:
    return name == "hook_tokens"


@pytest.mark.parametrize("name", ["repo-small", "rope-bytes", "ap-encoder-small"])
def test_hook_tokens_sees_and_edits_what_a_text_became(bundled, name):
    """TransformerLens: ``run_with_cache(text)`` caches at ``hook_tokens`` the tokens the text became (a list of
    texts: the padded batch), and an edit there on a text run is what the model reads."""
    model = bundled[name]
    tokens = model.to_tokens(TEXTS[0])
    edited = tokens.clone()
    edited[0, -1] = (edited[0, -1] + 1) % model.d_vocab
    with torch.no_grad():
        _, cache = model.run_with_cache(TEXTS[0], names_filter=only_tokens)
        assert torch.equal(cache["hook_tokens"], tokens)
        _, cache = model.run_with_cache(TEXTS, names_filter=only_tokens)
        assert torch.equal(cache["hook_tokens"], model.to_tokens(TEXTS))
        out = model.run_with_hooks(TEXTS[0], fwd_hooks=[("hook_tokens", lambda t, hook: edited)])
        torch.testing.assert_close(out, model(edited), **F32)
        assert not torch.allclose(out, model(tokens), **F32)


def test_tokens_to_residual_directions_of_one_token_is_one_direction(bundled):
    """TransformerLens: one token, whether an id, a string or a one-element tensor, gives ``[d_model]``."""
    model = bundled["rope-bytes"]
    one = model.to_tokens("a", prepend_bos=False)
    assert one.shape == (1, 1)
    want = model.W_U[:, int(one[0, 0])]
    for token in (one, int(one[0, 0]), "a"):
        assert torch.equal(model.tokens_to_residual_directions(token), want)
    two = model.to_tokens("ab", prepend_bos=False)
    assert torch.equal(model.tokens_to_residual_directions(two), model.W_U[:, two].movedim(0, -1))


def test_set_tokenizer_attaches_a_transformers_tokenizer():
    """TransformerLens' ``set_tokenizer(tokenizer, default_padding_side=...)``: a transformers fast tokenizer becomes
    the model's, tokenizing as it does and padding on the side given."""
    from transformers import PreTrainedTokenizerFast

    model = interp.load("rope-bytes")
    source = model.tokenizer
    tok = PreTrainedTokenizerFast(tokenizer_object=source.backend_tokenizer, name_or_path="bytes",
                                  **source.special_tokens_map)
    model.tokenizer = None
    model.set_tokenizer(tok, default_padding_side="left")
    assert model.tokenizer.padding_side == "left" and model.tokenizer.name_or_path == "bytes"
    assert model.to_tokens(TEXTS[1], prepend_bos=False)[0].tolist() == tok.encode(TEXTS[1], add_special_tokens=False)
    padded = model.to_tokens(TEXTS[:2], prepend_bos=False)
    assert padded[1, 0] == pad_id(model.tokenizer) and padded[1, -1] == tok.encode(TEXTS[1])[-1]
    with pytest.raises(ValueError, match="default_padding_side='middle'"):
        model.set_tokenizer(tok, default_padding_side="middle")


def test_set_use_attn_result_is_recorded_and_hook_result_is_cached_either_way(bundled):
    """TransformerLens' switch is kept in ``cfg.use_attn_result``; poslens caches ``hook_result`` with it off too (the
    README's documented difference), and the heads' results sum to the attention output."""
    model = bundled["rope-bytes"]
    try:
        for flag in (True, False):
            model.set_use_attn_result(flag)
            assert model.cfg.use_attn_result is flag
            with torch.no_grad():
                _, cache = model.run_with_cache(TEXTS[0])
            attn = model.blocks[0].attn
            summed = cache["blocks.0.attn.hook_result"].sum(2) + (attn.b_O if attn.b_O is not None else 0)
            torch.testing.assert_close(summed, cache["blocks.0.hook_attn_out"], atol=1e-5, rtol=1e-5)
    finally:
        model.set_use_attn_result(False)


def test_text_on_a_model_without_a_tokenizer_says_how_to_attach_one():
    model = interp.load("rope-bytes")
    model.tokenizer = None
    for run in (lambda: model(TEXTS[0]), lambda: model.generate(TEXTS[0], max_new_tokens=1),
                lambda: model.to_tokens(TEXTS)):
        with pytest.raises(TokenizerError, match="rope-bytes was loaded without a tokenizer.*set_tokenizer"):
            run()


def top_vectors(matrix: torch.Tensor, W_U: torch.Tensor, k: int) -> torch.Tensor:
    """``|W_U^T v_i|`` for ``matrix``'s top ``k`` right singular vectors (sign-free), ``[d_vocab, k]``."""
    return (W_U.T @ torch.linalg.svd(matrix.double())[2][:k].T.to(W_U.dtype)).abs()


def test_tl_parameters_are_what_transformerlens_svd_interpreter_reads():
    """TransformerLens' ``SVDInterpreter`` reads ``model.tl_parameters()``: a head's OV vectors and a layer's ``w_in``
    vectors are those computed by hand from the family's own weights (grouped values repeated per query head; ``w_in``
    scaled by the unprocessed model's ``ln2`` weight)."""
    from transformer_lens import SVDInterpreter

    model = next(m for m in EXAMPLES if m.family == "llama")
    block, h, k = model.blocks[1], model.n_heads - 1, 3
    kv = block.attn.W_V.shape[0]
    assert kv < model.n_heads  # grouped values
    params = model.tl_parameters()
    assert torch.equal(params["blocks.1.attn.W_V"][h], block.attn.W_V[h // (model.n_heads // kv)])
    assert torch.equal(params["blocks.1.ln2.w"], block.post_attention_layernorm.weight)
    svd = SVDInterpreter(model)
    with torch.no_grad():
        ov = block.attn.W_V[h // (model.n_heads // kv)] @ block.attn.W_O[h]
        got = svd.get_singular_vectors("OV", num_vectors=k, layer_index=1, head_index=h)[:, 0].abs()
        torch.testing.assert_close(got, top_vectors(ov, model.W_U, k), atol=1e-5, rtol=1e-4)
        w_in = block.mlp.W_in.T * block.post_attention_layernorm.weight
        got = svd.get_singular_vectors("w_in", num_vectors=k, layer_index=1)[:, 0].abs()
        torch.testing.assert_close(got, top_vectors(w_in, model.W_U, k), atol=1e-5, rtol=1e-4)
