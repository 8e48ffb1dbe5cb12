"""TransformerLens' batch behaviour on every poslens model: texts to padded tokens with an attention mask, ``forward``
taking what ``__call__`` takes (a text, a list of texts, tokens; ``return_type``, ``attention_mask``), and ``generate``
with TransformerLens' signature and return types.

- ``tokens_and_mask``: a text gives ``[1, pos]``; texts of different lengths are padded on ``padding_side`` (the
  argument, else ``model.tokenizer.padding_side``, "right" by default, as TransformerLens) with the tokenizer's pad id,
  beside a boolean ``[batch, pos]`` mask of the real tokens; ``""`` is ``[[bos]]`` (``[1, 0]`` without BOS);
- ``run_forward``: the family's forward inside ``interp.padding.padded(mask)``, so each row's logits are those of its
  text alone, then ``return_type`` ("logits", "loss", "both", None; the loss leaves padding out, as
  TransformerLens' ``lm_cross_entropy_loss`` does);
- ``generate``: TransformerLens' ``generate(input=..., ...)``: a text gives a text, a list of texts a list (left
  padded, as TransformerLens' bridge pads batched prompts), tokens give tokens; ``return_type`` "input", "str",
  "tokens" or "embeds" (the token embeddings of prompt and continuation, ``[batch, pos + new, d_model]``).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from interp import padding

GENERATE_RETURN_TYPES = ("input", "str", "tokens", "embeds")
FORWARD_RETURN_TYPES = ("logits", "loss", "both", None)


def is_text(input) -> bool:
    return isinstance(input, str) or (isinstance(input, (list, tuple)) and len(input) > 0
                                      and all(isinstance(t, str) for t in input))


def _bos_id(tokenizer) -> int | None:
    bos = getattr(tokenizer, "bos_id", None)
    return bos if bos is not None else getattr(tokenizer, "eos_id", None)


def pad_id(tokenizer) -> int:
    """The id padding takes: the tokenizer's pad token, else its EOS (TransformerLens sets pad to EOS), else 0."""
    for name in ("pad_id", "eos_id", "bos_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    tok = getattr(tokenizer, "tok", None)
    return int(getattr(tok, "pad_token_id", None) or 0)


def padding_side_of(model, padding_side) -> str:
    side = padding_side if padding_side is not None else getattr(model.tokenizer, "padding_side", None) or "right"
    if side not in ("right", "left"):
        raise ValueError(f"padding_side={side!r} is not 'right' or 'left'")
    return side


def _encode(model, text: str, bos: bool) -> list[int]:
    if text == "":  # TransformerLens: to_tokens("") is [[bos]]
        first = _bos_id(model.tokenizer)
        return [first] if bos and first is not None else []
    return model.tokenizer.encode(text, doc_start=bos)


def tokens_and_mask(model, input, prepend_bos=None, padding_side=None, truncate: bool = True) -> tuple[Tensor, Tensor]:
    """``([batch, pos] tokens, [batch, pos] boolean mask of real tokens)`` of a text or a list of texts, on the model's
    device; a model without a tokenizer gets a ``TokenizerError`` saying how to attach one."""
    if getattr(model, "tokenizer", None) is None:
        from interp.tokenizers import TokenizerError

        raise TokenizerError(f"{model.model_name} was loaded without a tokenizer, so it cannot turn text into "
                             "tokens: put the tokenizer files beside the checkpoint, attach one "
                             "(model.tokenizer = interp.load_tokenizer(DIR_OR_MODEL), or "
                             "model.set_tokenizer(a transformers tokenizer)), or pass --tokenizer on the command line")
    texts = [input] if isinstance(input, str) else list(input)
    if not texts:
        raise ValueError("to_tokens got an empty list of texts")
    side = padding_side_of(model, padding_side)
    rows = [_encode(model, t, model._prepend(prepend_bos)) for t in texts]
    if truncate:
        rows = [r[: model.max_seq_len] if side == "right" else r[-model.max_seq_len:] for r in rows]
    tokens, mask = padding.pad_rows(rows, pad_id(model.tokenizer), side)
    return tokens.to(model.device), mask.to(model.device)


def mask_off_pads(model, tokens: Tensor, prepend_bos, side: str) -> Tensor:
    """TransformerLens' ``get_attention_mask`` on a poslens model: the padding read off ``tokens``' pad ids on
    ``side`` (``interp.padding.mask_from_pads``; BOS kept where it shares the pad id)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"{model.model_name} has no tokenizer, so no pad id to read the padding off; pass "
                         "attention_mask=")
    pad = pad_id(tokenizer)
    bos = getattr(tokenizer, "bos_token_id", None)
    return padding.mask_from_pads(tokens, pad, side, model._prepend(prepend_bos) and bos is not None and bos == pad)


def input_tokens_and_mask(model, input, prepend_bos=None, padding_side=None, attention_mask=None):
    """``(tokens, mask or None)`` as TransformerLens' ``input_to_embed`` builds them: texts tokenized (their mask where
    the side is "left" or they are padded); tokens with ``attention_mask`` as given, else, where the padding side
    (``padding_side``, else the tokenizer's) is "left", the mask read off their leading pad ids, else None."""
    if is_text(input):
        if attention_mask is not None:
            raise ValueError("attention_mask is for tokens; texts build their own")
        tokens, mask = tokens_and_mask(model, input, prepend_bos, padding_side)
        return tokens, mask if padding_side_of(model, padding_side) == "left" or not bool(mask.all()) else None
    tokens = model.check_tokens(input)
    if attention_mask is not None:
        return tokens, padding.check_mask(attention_mask, tokens)
    if getattr(model, "tokenizer", None) is None or padding_side_of(model, padding_side) != "left":
        return tokens, None
    return tokens, mask_off_pads(model, tokens, prepend_bos, "left")


def loss_of(model, logits: Tensor, tokens: Tensor, mask: Tensor | None, per_token: bool) -> Tensor:
    """``model.loss_of`` with the padding left out: a target or its input that is padding counts for nothing
    (per token: 0 there)."""
    losses = model.loss_of(logits, tokens, per_token=True)
    if mask is None:
        return losses if per_token else losses.mean()
    from interp.capabilities import Capability

    keep = mask[:, :-1] & mask[:, 1:] if Capability.CAUSAL_LM in model.capabilities else mask
    losses = losses.masked_fill(~keep, 0.0)
    return losses if per_token else losses.sum() / keep.sum()


def run_forward(model, family_forward, input, *args, return_type="logits", loss_per_token=False, prepend_bos=None,
                padding_side=None, attention_mask=None, **kwargs):
    """``model.forward(input, ...)`` as TransformerLens' ``forward``: ``input`` a text, a list of texts (padded, with
    their mask) or tokens (with ``attention_mask`` ``[batch, pos]`` where they are padded)."""
    if return_type not in FORWARD_RETURN_TYPES:
        raise ValueError(f"return_type={return_type!r} is not one of 'logits', 'loss', 'both', None")
    mask = None
    if is_text(input):
        if attention_mask is not None:
            raise ValueError("attention_mask is for tokens; texts build their own")
        input, mask = tokens_and_mask(model, input, prepend_bos, padding_side)
        if model.hook_tokens.has_hooks():
            input = model.hook_tokens(input)
    elif attention_mask is not None:
        from interp.attention import current_kv_cache

        input = torch.as_tensor(input, device=model.device)
        input = input[None] if input.dim() == 1 else input
        cache = current_kv_cache()
        cached = cache.past(model.blocks[0].attn) if cache is not None and len(model.blocks) else 0
        mask = padding.check_mask(attention_mask, input, cached)
    with padding.padded(mask) if mask is not None else contextlib.nullcontext():
        out = family_forward(model, input, *args, **kwargs)
    if return_type == "logits":
        return out
    if return_type is None:
        return None
    if not model.has_output_head:
        from interp.capabilities import CapabilityError

        raise CapabilityError(f"return_type={return_type!r}: {model.model_name} has no output head, so no loss")
    if not isinstance(out, Tensor):
        raise TypeError(f"{model.model_name}: forward returned {type(out).__name__}, not logits")
    own = mask if mask is not None and mask.shape[-1] == out.shape[1] else None
    loss = loss_of(model, out, input, None if own is None or bool(own.all()) else own, loss_per_token)
    return (out, loss) if return_type == "both" else loss


def token_embeddings(model, tokens: Tensor) -> Tensor:
    """``[batch, pos, d_model]``: what the model's token-embedding module gives ``tokens`` (TransformerLens' ``embed``:
    the matrix's rows, scaled where the module scales them), without firing the hooks poslens hangs on it."""
    hf = getattr(model, "hf", None)
    table = hf.get_input_embeddings() if hf is not None else next(
        (m for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.num_embeddings == model.d_vocab), None)
    if table is None:
        raise AttributeError(f"{model.model_name} ({model.family} family) has no token-embedding table")
    return table.forward(tokens)
