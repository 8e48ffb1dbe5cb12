"""TransformerLens' ``generate`` on a poslens model (``model.generate(input=..., ...)``): its signature, its input kinds
(a text, a list of texts, ``[batch, pos]`` tokens with an optional ``attention_mask``, or ``[batch, pos, d_model]``
token embeddings) and return types, its sampling (``transformer_lens.utilities.sample_logits``: ``temperature``,
``top_k``, ``top_p``, ``freq_penalty``, ``repetition_penalty``; greedy with ``do_sample=False``), rows that finish at
EOS padded with EOS. A list of texts is left padded, as TransformerLens' bridge pads batched prompts, and its mask grows
by one real column per new token, so each row continues as it would alone. A family that cannot generate (an encoder)
is an error naming it."""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from interp import attention
from interp.tl_batch import GENERATE_RETURN_TYPES, is_text, token_embeddings, tokens_and_mask


def check_can_generate(model) -> None:
    from interp.capabilities import Capability, CapabilityError

    if Capability.CAUSAL_LM not in model.capabilities:
        head = "a masked-LM head" if Capability.MASKED_LM in model.capabilities else "no language-model head"
        raise CapabilityError(f"{model.model_name} ({model.family} family) cannot generate: it is not a causal "
                              f"language model ({head}); generate needs next-token logits")


def _prompt(model, input, prepend_bos, padding_side, attention_mask) -> tuple[Tensor, Tensor | None, str,
                                                                              Tensor | None]:
    """``(tokens, mask or None, input kind, embeddings or None)`` of what ``generate`` was given. Tokens padded
    without a mask have their padding read off the pad ids where ``padding_side`` is given (as TransformerLens' bridge
    does); a float ``[batch, pos, d_model]`` input is the prompt's token embeddings (its tokens stand in as filler)."""
    from interp import padding

    if is_text(input):
        if attention_mask is not None:
            raise ValueError("attention_mask is for tokens; texts build their own")
        many = not isinstance(input, str)
        side = "left" if many and len(input) > 1 else padding_side
        tokens, mask = tokens_and_mask(model, input, prepend_bos, side, truncate=False)
        return tokens, mask, "list" if many else "str", None
    if isinstance(input, Tensor) and input.is_floating_point():
        embeds = _check_embeds(model, input)
        tokens = torch.full(embeds.shape[:2], model.tl_filler_id(), dtype=torch.long, device=model.device)
        mask = padding.check_mask(attention_mask, tokens) if attention_mask is not None else None
        return tokens, mask, "embeds", embeds
    tokens = model.check_tokens(input)
    if attention_mask is not None:
        return tokens, padding.check_mask(attention_mask, tokens), "tokens", None
    if padding_side is not None:
        from interp.tl_batch import mask_off_pads, padding_side_of

        mask = mask_off_pads(model, tokens, prepend_bos, padding_side_of(model, padding_side))
        return tokens, None if bool(mask.all()) else padding.check_mask(mask, tokens), "tokens", None
    return tokens, None, "tokens", None


def _check_embeds(model, input: Tensor) -> Tensor:
    if not model.tl_layer_range:
        from interp.capabilities import CapabilityError

        raise CapabilityError(f"generate: {model.model_name} ({model.family} family) cannot take token embeddings: its "
                              "forward does not read interp.layer_range (tl_token_rows); pass tokens")
    if input.dim() != 3 or input.shape[-1] != model.d_model:
        raise ValueError(f"generate: a float input is the prompt's token embeddings [batch, pos, {model.d_model}], "
                         f"got shape {tuple(input.shape)}")
    if input.shape[1] == 0 or input.shape[1] > model.max_seq_len:
        raise ValueError(f"generate: embeddings of {input.shape[1]} positions (1..{model.max_seq_len})")
    first = next(model.parameters())
    return input.to(first.device, first.dtype)


def _stops(model, stop_at_eos: bool, eos_token_id) -> tuple[set[int], int]:
    """The ids that end a row, and the id finished rows are padded with."""
    if not stop_at_eos:
        return set(), 0
    eos = eos_token_id if eos_token_id is not None else getattr(model.tokenizer, "eos_id", None)
    if eos is None:
        raise ValueError(f"{model.model_name}: stop_at_eos needs an EOS id; its tokenizer has none, so pass "
                         "eos_token_id= or stop_at_eos=False")
    ids = [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]
    return set(ids), ids[0]


def _step(model, step: Tensor, mask, embeds: Tensor | None) -> Tensor:
    """The last position's logits ``[batch, d_vocab]`` of one forward pass (from ``embeds`` where given)."""
    from interp import layer_range
    from interp.tl_batch import run_forward

    forward = type(model).forward.__wrapped__
    if embeds is None:
        return run_forward(model, forward, step, attention_mask=mask)[:, -1]
    with layer_range.running(model, embeds=embeds):
        return run_forward(model, forward, step, attention_mask=mask)[:, -1]


@torch.no_grad()
def _continue(model, tokens: Tensor, mask: Tensor | None, max_new_tokens: int, pick, stops: set[int],
              pad: int, use_cache: bool, embeds: Tensor | None = None) -> Tensor:
    """``[batch, new]`` tokens: ``pick(logits, tokens so far)`` each step (from embeddings: the tokens generated so
    far), finished rows padded with ``pad``."""
    cache = attention.KVCache() if use_cache and model.supports_kv_cache else None
    seq, step, new = tokens, tokens, []
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    with attention.decoding(cache) if cache is not None else contextlib.nullcontext():
        for _ in range(max_new_tokens):
            if seq.shape[1] >= model.max_seq_len or bool(done.all()):
                break
            logits = _step(model, step, mask, embeds)
            seen = seq if embeds is None else (torch.cat(new, dim=1) if new else None)
            nxt = pick(logits.float(), seen).to(seq.device)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            done |= torch.isin(nxt, torch.tensor(sorted(stops), dtype=nxt.dtype, device=nxt.device))
            new.append(nxt[:, None])
            seq = torch.cat([seq, nxt[:, None]], dim=1)
            mask = None if mask is None else torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            if embeds is not None and cache is None:
                embeds = torch.cat([embeds, token_embeddings(model, nxt[:, None]).to(embeds.dtype)], dim=1)
            elif cache is not None:
                embeds = None
            step = nxt[:, None] if cache is not None else seq
    return torch.cat(new, dim=1) if new else seq[:, :0]


def generate(model, input="", max_new_tokens: int = 10, stop_at_eos: bool = True, eos_token_id=None,
             do_sample: bool = True, top_k=None, top_p=None, temperature: float = 1.0, freq_penalty: float = 0.0,
             repetition_penalty: float = 1.0, use_past_kv_cache: bool = True, prepend_bos=None, padding_side=None,
             return_type="input", verbose: bool = True, attention_mask=None):
    """TransformerLens' ``generate``: the prompt and its continuation as ``return_type`` says ("input": a text for a
    text, a list of texts for a list, tokens for tokens, embeddings for embeddings; "str": one text for one sequence,
    else a list; "tokens": ``[batch, pos + new]``; "embeds": their token embeddings). From embeddings the prompt has no
    tokens: "tokens" and "str" are the new tokens alone, as TransformerLens returns them. ``freq_penalty`` and
    ``repetition_penalty`` are TransformerLens' ``sample_logits``' (the repetition penalty also before a greedy pick),
    counted over the prompt's tokens and the new ones (from embeddings: the new ones)."""
    from transformer_lens.utilities import sample_logits

    if return_type not in GENERATE_RETURN_TYPES:
        raise ValueError(f"return_type={return_type!r} is not one of {', '.join(map(repr, GENERATE_RETURN_TYPES))}")
    if freq_penalty < 0 or repetition_penalty <= 0:
        raise ValueError(f"freq_penalty={freq_penalty} must be >= 0 and repetition_penalty={repetition_penalty} > 0")
    check_can_generate(model)
    tokens, mask, kind, embeds = _prompt(model, input, prepend_bos, padding_side, attention_mask)
    stops, pad = _stops(model, stop_at_eos, eos_token_id)

    def pick(logits, seen):
        options = dict(freq_penalty=freq_penalty if seen is not None else 0.0, repetition_penalty=repetition_penalty,
                       tokens=seen)  # nothing seen yet (from embeddings): nothing to penalise
        if not do_sample:
            return sample_logits(logits, temperature=0.0, **options)
        return sample_logits(logits, top_k=top_k, top_p=top_p, temperature=temperature, **options)

    new = _continue(model, tokens, mask, int(max_new_tokens), pick, stops, pad, use_past_kv_cache, embeds)
    return _returned(model, tokens, new, kind, embeds, return_type)


def _returned(model, prompt: Tensor, new: Tensor, kind: str, embeds: Tensor | None, return_type: str):
    if return_type == "input":
        return_type = {"str": "str", "list": "str", "tokens": "tokens", "embeds": "embeds"}[kind]
    out = new if kind == "embeds" else torch.cat([prompt, new], dim=1)
    if return_type == "tokens":
        return out
    if return_type == "embeds":
        if embeds is None:
            return token_embeddings(model, out)
        return torch.cat([embeds, token_embeddings(model, new).to(embeds.dtype)], dim=1)
    texts = [model._decode_text(row) for row in out.tolist()]
    return texts[0] if kind == "str" or len(texts) == 1 else texts
