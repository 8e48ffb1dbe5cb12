"""Do the hand-written ``llama`` and ``bert`` families earn their place next to the generic ``hf`` family?

The same real checkpoints run through both: SmolLM2-135M (the packaged GGUF de-quantised by transformers and
saved as a Hugging Face directory for the generic family) and all-MiniLM-L6-v2 (the package's own directory).
One process, the two families interleaved, the median of ``REPEATS`` timings each:

- agreement: logits (SmolLM2) or last hidden states (MiniLM), relative to the largest entry; attention mass;
- bare forward;
- NIAH decoding: greedy continuation of a needle prompt with the KV cache of each family;
- attention-mass (``answer_attention``, query-row streaming).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

REPEATS = 3
SMOLLM2_TOKENS, NEW_TOKENS, MINILM_TOKENS = 1024, 8, 256


def _timed(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


def smollm2_dir(directory: Path) -> Path:
    """The packaged GGUF, de-quantised by transformers, as a float32 Hugging Face directory with its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.catalog import SMOLLM2
    from interp.package_files import package_file

    path = package_file(*SMOLLM2)
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(directory)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    config = loaded.config
    config.__dict__.pop("quantization_config", None)  # transformers will not write a GGUF-quantised model back
    plain = type(loaded)(config)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(directory)
    return directory


def smollm2(directory: Path) -> dict:
    import interp
    from analyses.attention_mass import answer_attention
    from corpora.niah import niah_samples

    hand, generic = interp.load("smollm2"), interp.load(smollm2_dir(directory))
    s = niah_samples(hand.tokenizer, 1, SMOLLM2_TOKENS, seed=0)[0]
    seq = torch.tensor([s.token_ids])
    out = {"tokens": seq.shape[1]}
    with torch.no_grad():
        out["logits_rel"] = _rel(generic(seq), hand(seq))
        masses = [answer_attention(m, s.token_ids, s.answer_ids, s.parts) for m in (hand, generic)]
        out["mass_abs"] = float((masses[0] - masses[1]).abs().max())
        gens = [m.generate(s.token_ids, NEW_TOKENS) for m in (hand, generic)]
        out["same_generation"] = gens[0] == gens[1]
        for name, m in (("hand", hand), ("generic", generic)):
            out[f"{name}_forward"] = _timed(lambda: m(seq))
            out[f"{name}_decode"] = _timed(lambda: m.generate(s.token_ids, NEW_TOKENS))
            out[f"{name}_mass"] = _timed(lambda: answer_attention(m, s.token_ids, s.answer_ids, s.parts))
    return out


def minilm() -> dict:
    import interp
    from interp.catalog import MINILM
    from interp.package_files import package_file

    hand, generic = interp.load("minilm"), interp.load(package_file(*MINILM))
    ids = hand.tokenizer.encode("The quick brown fox jumps over the lazy dog near the river bank. "
                                * 40)[: MINILM_TOKENS]
    seq = torch.tensor([ids])
    out = {"tokens": seq.shape[1]}
    with torch.no_grad():
        out["hidden_rel"] = _rel(generic(seq), hand(seq))
        out["ap_equal"] = bool(torch.equal(generic.ap_embedding_matrix(), hand.ap_embedding_matrix()))
        for name, m in (("hand", hand), ("generic", generic)):
            out[f"{name}_forward"] = _timed(lambda: m(seq))
    return out


def main() -> str:
    from bench.report import machine, write_section

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        s = smollm2(Path(tmp))
    b = minilm()
    rows = [
        ("SmolLM2 forward", s["hand_forward"], s["generic_forward"]),
        (f"SmolLM2 NIAH decoding ({NEW_TOKENS} tokens, KV cache)", s["hand_decode"], s["generic_decode"]),
        ("SmolLM2 attention-mass (answer rows)", s["hand_mass"], s["generic_mass"]),
        ("MiniLM forward", b["hand_forward"], b["generic_forward"]),
    ]
    lines = ["| workload | hand-written | generic `hf` | generic / hand-written |", "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {h:.3f} s | {g:.3f} s | {g / h:.2f}x |" for name, h, g in rows]
    body = (f"SmolLM2-135M at {s['tokens']} tokens (one NIAH prompt), MiniLM at {b['tokens']} tokens; medians of "
            f"{REPEATS}, both families interleaved in one process; {machine()}.\n\n" + "\n".join(lines) +
            f"\n\nAgreement: SmolLM2 logits {s['logits_rel']:.1e} relative, attention mass {s['mass_abs']:.1e} "
            f"absolute, greedy continuations {'identical' if s['same_generation'] else 'DIFFERENT'}; MiniLM hidden "
            f"states {b['hidden_rel']:.1e} relative, position table {'identical' if b['ap_equal'] else 'DIFFERENT'}.\n")
    write_section("families", "Hand-written llama / bert families vs the generic family", body)
    return body


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(main())
