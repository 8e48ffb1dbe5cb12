"""TransformerLens' ``generate`` on a poslens model (``model.generate(input=..., ...)``): its signature, its input kinds
(a text, a list of texts, ``[batch, pos]`` tokens with an optional ``attention_mask``) and return types, its sampling
(``transformer_lens.utilities.sample_logits``: ``temperature``, ``top_k``, ``top_p``, ``freq_penalty``; greedy with
``do_sample=False``), rows that finish at EOS padded with EOS. A list of texts is left padded, as TransformerLens'
bridge pads batched prompts, and its mask grows by one real column per new token, so each row continues as it would
alone. A family that cannot generate (an encoder) is an error naming it."""

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


def _prompt(model, input, prepend_bos, padding_side, attention_mask) -> tuple[Tensor, Tensor | None, str]:
    """``(tokens, mask or None, input kind)`` of what ``generate`` was given."""
    from interp import padding

    if is_text(input):
        if attention_mask is not None:
            raise ValueError("attention_mask is for tokens; texts build their own")
        many = not isinstance(input, str)
        side = "left" if many and len(input) > 1 else padding_side
        tokens, mask = tokens_and_mask(model, input, prepend_bos, side, truncate=False)
        return tokens, mask, "list" if many else "str"
    if isinstance(input, Tensor) and input.is_floating_point():
        raise TypeError(f"generate: {model.model_name} ({model.family} family) takes token ids, not embeddings "
                        f"(a float tensor of shape {tuple(input.shape)}); pass tokens or text")
    tokens = model.check_tokens(input)
    mask = padding.check_mask(attention_mask, tokens) if attention_mask is not None else None
    return tokens, mask, "tokens"


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


@torch.no_grad()
def _continue(model, tokens: Tensor, mask: Tensor | None, max_new_tokens: int, pick, stops: set[int],
              pad: int, use_cache: bool) -> Tensor:
    """``[batch, new]`` tokens: ``pick(logits, seq)`` each step, finished rows padded with ``pad``."""
    from interp.tl_batch import run_forward

    cache = attention.KVCache() if use_cache and model.supports_kv_cache else None
    seq, step, new = tokens, tokens, []
    done = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
    with attention.decoding(cache) if cache is not None else contextlib.nullcontext():
        for _ in range(max_new_tokens):
            if seq.shape[1] >= model.max_seq_len or bool(done.all()):
                break
            logits = run_forward(model, type(model).forward.__wrapped__, step, attention_mask=mask)[:, -1]
            nxt = pick(logits.float(), seq).to(seq.device)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            done |= torch.isin(nxt, torch.tensor(sorted(stops), dtype=nxt.dtype, device=nxt.device))
            new.append(nxt[:, None])
            seq = torch.cat([seq, nxt[:, None]], dim=1)
            mask = None if mask is None else torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            step = nxt[:, None] if cache is not None else seq
    return torch.cat(new, dim=1) if new else seq[:, :0]


def generate(model, input="", max_new_tokens: int = 10, stop_at_eos: bool = True, eos_token_id=None,
             do_sample: bool = True, top_k=None, top_p=None, temperature: float = 1.0, freq_penalty: float = 0.0,
             use_past_kv_cache: bool = True, prepend_bos=None, padding_side=None, return_type="input",
             verbose: bool = True, attention_mask=None):
    """TransformerLens' ``generate``: the prompt and its continuation as ``return_type`` says ("input": a text for a
    text, a list of texts for a list, tokens for tokens; "str": one text for one sequence, else a list; "tokens":
    ``[batch, pos + new]``; "embeds": their token embeddings)."""
    from transformer_lens.utilities import sample_logits

    if return_type not in GENERATE_RETURN_TYPES:
        raise ValueError(f"return_type={return_type!r} is not one of {', '.join(map(repr, GENERATE_RETURN_TYPES))}")
    check_can_generate(model)
    tokens, mask, kind = _prompt(model, input, prepend_bos, padding_side, attention_mask)
    stops, pad = _stops(model, stop_at_eos, eos_token_id)

    def pick(logits, seq):
        if not do_sample:
            return logits.argmax(-1)
        return sample_logits(logits, top_k=top_k, top_p=top_p, temperature=temperature, freq_penalty=freq_penalty,
                             tokens=seq)

    out = torch.cat([tokens, _continue(model, tokens, mask, int(max_new_tokens), pick, stops, pad,
                                       use_past_kv_cache)], dim=1)
    if return_type == "input":
        return_type = "str" if kind in ("str", "list") else "tokens"
    if return_type == "tokens":
        return out
    if return_type == "embeds":
        return token_embeddings(model, out)
    texts = [model._decode_text(row) for row in out.tolist()]
    return texts[0] if kind == "str" or len(texts) == 1 else texts
