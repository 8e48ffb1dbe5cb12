"""Scoring a generated NIAH answer: RULER lets the model generate freely and string-matches the value."""

from __future__ import annotations

ANSWER_SLACK = 8  # tokens allowed beyond the gold answer's length (a leading ':' or newline, a trailing '.')


def answer_budget(answer_ids) -> int:
    return len(answer_ids) + ANSWER_SLACK


def stop_ids(tokenizer) -> tuple[int, ...]:
    eos = getattr(tokenizer, "eos_id", None)
    return (eos,) if eos is not None else ()


def answered_prefix(tokenizer, generated: list[int], value: str) -> int | None:
    """Number of generated tokens up to the one that completes ``value``, or None if it never appears."""
    for k in range(1, len(generated) + 1):
        if value in tokenizer.decode(generated[:k]):
            return k
    return None


def fitting_samples(model, samples) -> list:
    """``samples`` as a list, refused when empty or when a prompt plus its answer budget exceeds the model's context
    (named by index), so no prompt is ever cut."""
    samples = list(samples)
    if not samples:
        raise ValueError("samples= holds no prompts")
    for i, s in enumerate(samples):
        if len(s.token_ids) + answer_budget(s.answer_ids) > model.max_seq_len:
            raise ValueError(f"samples[{i}]: {len(s.token_ids)} prompt tokens plus the answer do not fit in "
                             f"{model.model_name} (max_seq_len={model.max_seq_len})")
    return samples


def retrieved(model, batch) -> list[bool]:
    """RULER's score of each prompt of ``batch`` (one length): greedy generation, up to ``answer_budget`` tokens or EOS,
    and whether the decoded text holds the value."""
    tokenizer = model.require_tokenizer("NIAH scoring")
    outs = model.generate_batch([s.token_ids for s in batch], 0, stop_ids(tokenizer),
                                budgets=[answer_budget(s.answer_ids) for s in batch])
    return [s.value in tokenizer.decode(o) for s, o in zip(batch, outs)]


def equal_length_batches(samples, size: int = 8):
    """``samples`` in batches of at most ``size`` prompts of one length (generation runs a batch at once)."""
    by_length: dict[int, list] = {}
    for s in samples:
        by_length.setdefault(len(s.token_ids), []).append(s)
    for group in by_length.values():
        for i in range(0, len(group), size):
            yield group[i: i + size]


def teacher_forced(model, sample) -> tuple[float, float]:
    """(share of the answer's tokens that are the greedy choice, mean NLL of the answer in nats) with the gold answer
    fed in: a continuous measure of retrieval that needs one forward pass."""
    import torch

    seq = list(sample.token_ids) + list(sample.answer_ids)
    rows = torch.arange(len(sample.token_ids) - 1, len(seq) - 1)
    logits = model(torch.tensor([seq], device=model.device))[0, rows.to(model.device)].float()
    gold = torch.tensor(list(sample.answer_ids), device=logits.device)
    nll = torch.nn.functional.cross_entropy(logits, gold)
    return float((logits.argmax(-1) == gold).float().mean()), float(nll)
