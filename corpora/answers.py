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
