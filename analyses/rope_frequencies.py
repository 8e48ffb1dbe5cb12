"""Which rotary frequencies each head uses, and what removing them does (Barbero et al., ICLR 2025, "Round and Round We
Go! What makes Rotary Positional Encodings useful?").

RoPE turns each pair of a head's query and key dims (a band) by ``position * frequency``; the logit is the sum of the
bands' terms ``q_b . k_b`` after rotation (``q_b R(p_k - p_q) k_b``). Barbero et al. measure usage by norms: in Gemma 7B
they take "the mean 2-norm for each k-th chunk" of the queries and keys, "over 10 different Shakespeare quotes and the
16 attention heads at each layer", and find "much higher norm on average to the lowest frequencies" (semantic channels,
stable over distance), while positional heads (layer 1's heads 5, diagonal, and 8, previous-token) use the highest; the
same in Llama 3.1 8B (appendix). The paper gives these as figures, not numbers. p-RoPE leaves the lowest frequencies
unrotated: their Gemma 2B trained from scratch with 0.75-RoPE (the lowest 25% unrotated) reaches Wiki / FlanV2
perplexity 4.4414 / 6.4422 against RoPE's 4.4627 / 6.4429 (Table 2); they ablate no band of a trained model.

Protocol, on text contexts of ``length`` tokens (``corpora.contexts``) and NIAH prompts of ``niah_tokens``:

1. Usage, per layer that rotates, head and band (``interp.rope.RotarySpec``; ``band`` 0 is the highest frequency), from
   the queries and keys after rotation (``hook_rot_q`` / ``hook_rot_k``):
   - ``q_norm`` / ``k_norm``: the band's 2-norm, mean over the context's tokens and over contexts (Barbero et al.'s
     measure; the headline and the figure's first panel). A key head that grouped-query heads share gives each of them
     its norm;
   - ``poslens_logit_share``: poslens' own measure, not the paper's: the band's share of the logit, mean ``|q_b . k_b|``
     over every causal (query, key) pair of every query row 1..N-1 (given ``max_rows``, of that many evenly spaced
     rows: the protocol before all-row statistics, whose default was 128) over the sum of that mean over the layer's
     bands. A band with a large norm may still add little to the logit (its q and k orthogonal), so the two can
     disagree; the terms are summed over blocks of query rows sized to ``BLOCK_BYTES``, so memory is one block's
     whatever the length;
   - ``previous_token_mass``: the head's attention on the token before (head-profiles' statistic), over the same rows
     (``interp.attention.forward_statistics``, in the pass that gives the loss).
2. Effects, under five conditions: ``none``; ``zero-highest`` / ``zero-lowest``: the highest or lowest ``fraction`` of
   every layer's bands removed in every head (``interventions.RemoveRotaryBands``: they add nothing to the logit);
   ``unrotate-lowest`` / ``unrotate-highest``: those bands turned back to position 0 (``UnrotateRotaryBands``: content
   without position; ``unrotate-lowest`` is p-RoPE's truncation, 0.75-RoPE at the default fraction, applied to a trained
   model without training, which the paper does not do):
   - ``loss``: next-token loss (nats per token), ``kl``: KL(none || condition) per token;
   - ``positional_heads``: the mean previous-token mass, under the condition, of the positional heads found without
     intervention (previous-token mass >= 0.5, or the 3 highest where none reaches it);
   - ``niah_accuracy``: RULER's greedy score on ``niah_prompts`` prompts.

3. The same effects at a longer length (``long_length``, e.g. the trained length: SmolLM2's lowest quarter turns
   through 0.09 rad over 512 tokens, 1.5 rad over 8,192; a sliding layer's bands turn only within its window), on
   ``long_docs`` contexts of that length (no band usage there; ``n_docs`` counts the shorter ones): rows
   ``part=long_effects``. Built-in contexts only: the user's documents would give both lengths the same windows.
   Every context's own effects, at either length, are kept as unit-level values (``UNITS``: ``loss``, ``kl``,
   ``positional_heads`` per ``condition`` and ``length``): the units the known-results row bootstraps over.

Frequencies are the model's own, never recomputed from ``rope_theta``: each layer's ``RotarySpec`` (for the generic
family, read off transformers' rotary module). ``frequency`` is the band's inverse frequency after any rope scaling, in
the forward passes the usage was measured on (transformers' ``dynamic`` scaling recomputes it from the sequence length
and ``longrope`` switches sets past its original length, so it is read during each context's pass; the mean over
contexts); ``attention_scaling`` the factor the model multiplies its rotated queries and keys by (yarn's mscale,
longrope's attention factor; 1 for plain RoPE: ``q_norm`` and ``k_norm`` include it); ``rope_type`` the scaling that
ran (``default``, ``linear``, ``llama3``, ``yarn``, ``longrope``, ``dynamic``, ...), per layer, so Gemma 3's two
kinds of layer keep their own.

Rows: ``part`` = ``bands`` (layer, head, band, frequency, usage), ``effects`` or ``long_effects`` (condition,
measures). The unit values behind Barbero et al.'s statistic (``UNITS``, ``rope-frequencies.units.csv``): per context,
layer and ``quarter`` (``lowest`` / ``highest`` frequencies: the layer's bands ordered by its own frequencies, a
quarter of them, at least one), ``q_norm`` / ``k_norm`` the mean over the quarter's bands and the layer's heads on that
context alone; the known-results row bootstraps the per-layer low / high ratio over contexts. Every context and prompt
adds its float64 sums (``interp.runtime.parallel.fold_items``; a context's own norms in its own slot).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import integer_columns, may_be_nan
from analyses.registry import Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from analyses.units import Tables, Units
from interp.capabilities import Capability

if TYPE_CHECKING:
    pass


CONDITIONS = ("none", "zero-highest", "zero-lowest", "unrotate-lowest", "unrotate-highest")
POSITIONAL = 0.5  # previous-token mass that makes a head positional (head-profiles' group rule)


def interventions_for(condition: str, fraction: float):
    from interp.interventions import RemoveRotaryBands, UnrotateRotaryBands

    if condition == "none":
        return ()
    kind, end = condition.split("-")
    cls = RemoveRotaryBands if kind == "zero" else UnrotateRotaryBands
    return (cls(**{end: fraction}),)


def _rows(n: int, max_rows: int):
    from analyses.head_profiles import sampled_rows

    return sampled_rows(n, max_rows)


BLOCK_BYTES = 32 << 20  # the [head, rows, keys, band] terms of one block of query rows (einsum may copy them once)


def _band_usage(q, k, rows, spec, block_bytes: int = BLOCK_BYTES):
    """``[head, band]`` mean band norms of q and k and mean ``|q_b . k_b|`` over the causal pairs of ``rows`` (summed in
    float64 over blocks of rows, each against only the keys it sees, a block's terms at most ``block_bytes``)."""
    import torch

    pairs = spec.pairs()
    qb = q[0].float()[..., pairs].transpose(0, 1)  # [head, pos, band, 2]
    kb = k[0].float()[..., pairs].transpose(0, 1)  # [kv_head, pos, band, 2]
    heads, kv = qb.shape[0], kb.shape[0]
    q_norm = qb.norm(dim=-1).mean(1)
    k_norm = kb.norm(dim=-1).mean(1).repeat_interleave(heads // kv, 0)
    logit = torch.zeros(kv, heads // kv, spec.n_bands, dtype=torch.float64)
    pairs_seen = 0
    budget = max(1, block_bytes // (4 * heads * spec.n_bands))  # rows x keys of one block
    start = 0
    while start < len(rows):
        first = int(rows[start]) + 1  # contiguous rows from here: size * (first + size - 1) keys at most
        size = max(1, int((math.sqrt(first * first + 4 * budget) - first) / 2))
        while size > 1 and size * (int(rows[min(start + size, len(rows)) - 1]) + 1) > budget:
            size //= 2
        block = rows[start:start + size]
        keys = int(block.max()) + 1
        sel = qb[:, block].reshape(kv, heads // kv, len(block), spec.n_bands, 2)
        terms = torch.einsum("gtrbc,gnbc->gtrnb", sel, kb[:, :keys]).abs_()  # [kv, rep, rows, keys, band]
        visible = (torch.arange(keys)[None, :] <= block[:, None]).to(terms.dtype)  # [rows, keys]
        logit += torch.einsum("gtrnb,rn->gtb", terms, visible).double()
        pairs_seen += int(visible.sum())
        start += len(block)
        del terms
    return q_norm, k_norm, (logit / pairs_seen).reshape(heads, spec.n_bands)


def _rope_type(model, spec) -> str:
    """The scaling that made a layer's frequencies: the spec's word, else the hand-written config's ``rope_scaling``."""
    if spec.rope_type is not None:
        return spec.rope_type
    return (getattr(getattr(model, "cfg", None), "rope_scaling", None) or {}).get("rope_type", "default")


@no_grad
def context_statistics(model, ids, max_rows: int, fraction: float, n_bands: int, bands: bool = True) -> dict:
    """One context's additive share: band usage (unless not ``bands``), and loss, KL and previous-token masses under
    every condition."""
    import numpy as np
    import torch

    from interp import interventions
    from interp.attention import forward_statistics

    n_layers, n_heads = model.n_layers, model.n_heads
    tokens = torch.tensor([ids], device=model.device)
    rows = _rows(len(ids), max_rows)
    every = rows.numel() == len(ids) - 1
    read = slice(1, None) if every else slice(None)  # every row: 0..N-1 come back, row 0 is left out
    out = {k: np.zeros((n_layers, n_heads, n_bands)) for k in ("q_norm", "k_norm", "logit")}
    out["frequency"] = np.zeros((n_layers, n_bands))
    held = {}

    def keep_q(layer):
        def hook(q, hook):
            held[layer] = q.detach()
        return hook

    def usage(layer, spec):
        def hook(k, hook):
            qn, kn, lg = _band_usage(held.pop(layer).cpu(), k.detach().cpu(), rows, spec)
            for key, v in (("q_norm", qn), ("k_norm", kn), ("logit", lg)):
                out[key][layer, :, : spec.n_bands] = v.double().numpy()
            out["frequency"][layer, : spec.n_bands] = spec.inv_freq.detach().double().cpu().numpy()  # this pass's
        return hook

    rotating = [(l, s) for l in range(n_layers) if (s := model.rotation(l)) is not None]
    usage_hooks = [h for l, s in rotating for h in ((f"blocks.{l}.attn.hook_rot_q", keep_q(l)),
                                                    (f"blocks.{l}.attn.hook_rot_k", usage(l, s)))]
    nll = torch.nn.functional.cross_entropy
    gold = tokens[0, 1:]
    base = None
    for c, condition in enumerate(CONDITIONS):
        with interventions.applied(model, *interventions_for(condition, fraction)), \
                model.hooks(fwd_hooks=usage_hooks if condition == "none" and bands else []):
            hidden, stats = forward_statistics(model, tokens, ("previous_mass",),
                                               run=lambda: model.final_hidden(tokens), rows=None if every else rows)
        hidden = hidden[0, :-1]
        out[f"prev|{condition}"] = stats["previous_mass"][:, 0, :, read].double().mean(-1).numpy()
        loss = kl = 0.0
        for start, logits in model.logit_chunks(hidden):  # one chunk of positions' logits at a time, the base's too
            end = start + logits.shape[0]
            loss += float(nll(logits, gold[start:end], reduction="sum"))
            if base is not None:
                lp = torch.log_softmax(logits, dim=-1)
                lb = torch.log_softmax(model.head_logits(base[start:end]).float(), dim=-1)
                kl += float((lb.exp() * (lb - lp)).sum())
                del lp, lb
            del logits  # before the next chunk's are built
        base = hidden if base is None else base
        out[f"loss|{condition}"] = np.array([loss])
        out[f"kl|{condition}"] = np.array([kl])
    out["tokens"] = np.array([float(len(ids) - 1)])
    if not bands:
        out = {k: v for k, v in out.items() if k.startswith(EFFECTS)}
    return out


EFFECTS = ("loss|", "kl|", "prev|", "tokens")  # the keys of a context's effects (its usage aside)


@no_grad
def prompt_statistics(model, sample, fraction: float) -> dict:
    """One NIAH prompt's retrieval (1 or 0) under every condition."""
    import numpy as np

    from corpora.answers import retrieved
    from interp import interventions

    out = {"prompts": np.ones(1)}
    for condition in CONDITIONS:
        with interventions.applied(model, *interventions_for(condition, fraction)):
            out[f"niah|{condition}"] = np.array([float(retrieved(model, [sample])[0])])
    return out


def quarters(df):
    """Per model, the lowest and the highest quarter of the bands: mean query and key norm over their bands and heads
    (Barbero et al.'s measure) and the logit share they carry together (poslens')."""
    import pandas as pd

    rows = []
    for model, g in df[df["part"] == "bands"].groupby("model", sort=False):
        n = int(g["n_bands"].max())
        q = max(1, int(round(n / 4)))
        per_band = g.groupby("band")[["q_norm", "k_norm", "poslens_logit_share"]].mean()
        for which, part in (("lowest", per_band.iloc[-q:]), ("highest", per_band.iloc[:q])):
            rows.append(dict(model=model, bands=f"{which} {q} of {n}", mean_q_norm=part["q_norm"].mean(),
                             mean_k_norm=part["k_norm"].mean(),
                             poslens_logit_share_of_bands=part["poslens_logit_share"].sum()))
    return pd.DataFrame(rows)


def headline(df) -> str:
    parts = []
    usage = quarters(df)
    for model, g in df.groupby("model", sort=False):
        eff = g[g["part"] == "effects"].set_index("condition")
        low, high = (usage[(usage["model"] == model) & usage["bands"].str.startswith(w)].iloc[0]
                     for w in ("lowest", "highest"))
        base = eff.loc["none", "loss"]
        parts.append(f"{model}: mean query / key norm {low['mean_q_norm']:.2f} / {low['mean_k_norm']:.2f} in the "
                     f"lowest quarter of the bands, {high['mean_q_norm']:.2f} / {high['mean_k_norm']:.2f} in the "
                     f"highest; poslens' logit share {low['poslens_logit_share_of_bands']:.0%} "
                     f"lowest, {high['poslens_logit_share_of_bands']:.0%} highest; loss {base:.2f} nats, "
                     f"zero-highest {eff.loc['zero-highest', 'loss'] - base:+.2f}, "
                     f"zero-lowest {eff.loc['zero-lowest', 'loss'] - base:+.2f}, unrotate-lowest "
                     f"(p-RoPE) {eff.loc['unrotate-lowest', 'loss'] - base:+.2f}; previous-token "
                     f"heads {eff.loc['none', 'positional_heads']:.2f} "
                     f"-> {eff.loc['zero-highest', 'positional_heads']:.2f} without the highest bands")
    return "Rotary frequencies (Barbero et al.'s band norms; poslens' logit share): " + "; ".join(parts) + "."


def summary(df):
    """The band quarters' norms and logit shares (``quarters``), then the effects of each condition."""
    import pandas as pd

    eff = df[df["part"] == "effects"]
    effects = eff[["model", "condition", "fraction", "loss", "kl", "positional_heads", "niah_accuracy", "n_docs",
                   "niah_prompts"]]
    out = pd.concat([quarters(df), effects], ignore_index=True)
    for column in ("n_docs", "niah_prompts"):  # counts stay whole numbers beside the quarter rows that have none
        out[column] = [int(v) if v == v else "" for v in out[column]]
    return out


def precheck(options: dict, label) -> None:
    """Before any model loads: the longer contexts' rows are told apart from the others by their length."""
    from analyses.registry import OptionError

    if options["long_length"] and options["long_length"] == options["length"]:
        raise OptionError(f"{label('long_length')} {options['long_length']}: equals {label('length')}; give a longer "
                          f"length or 0")


UNITS = Units("context", keys=("condition", "length", "layer", "quarter"), measures={
    "q_norm": "the mean query norm of the layer's lowest or highest quarter of bands on one context (every head)",
    "k_norm": "the same for the keys",
    "loss": "one context's next-token loss under the condition (nats per token; no layer or quarter)",
    "kl": "one context's KL(none || condition) per token",
    "positional_heads": "the positional heads' mean previous-token mass on one context under the condition"})


@analysis("rope-frequencies", needs=[Capability.ROTARY, Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline,
          summary=summary, units=UNITS,
          small=Run(("repo-small", "rope-small"),
                    dict(n_docs=1, length=64, max_rows=16, niah_prompts=1, niah_tokens=224)),
          main=Run(DECODERS, dict(n_docs=4, length=512, niah_prompts=8, niah_tokens=480),
                   quick=dict(n_docs=1, length=128, max_rows=16, niah_prompts=1, niah_tokens=224), section=HEADS),
          real=Run(PRETRAINED, dict(n_docs=12, length=512, niah_prompts=8, niah_tokens=512, long_docs=12,
                                    stage="judged"),
                   per_model={"smollm2": dict(long_length=8192), "gemma3-270m": dict(long_length=32768)},
                   quick=dict(n_docs=1, length=64, max_rows=16, niah_prompts=1, niah_tokens=128, long_length=96,
                              long_docs=1), section=KNOWN),
          memory=Run(("rope-small",), dict(length=128, niah_prompts=0)),
          builds_logits=False, precheck=precheck)
@may_be_nan(**dict.fromkeys(("layer", "head", "depth", "band", "frequency", "wavelength", "n_bands", "q_norm", "k_norm",
                              "poslens_logit_share", "previous_token_mass", "attention_scaling"),
                            "an effects row is of the whole model"),
            **dict.fromkeys(("loss", "kl", "positional_heads", "n_positional_heads", "fraction"),
                            "a bands row is of one head and band"),
            niah_accuracy="a bands or long_effects row, or no NIAH prompt was asked for",
            attention="an effects row is of the whole model", rope_type="an effects row is of the whole model",
            condition="a bands row")
def rope_frequencies(model, *,
                     n_docs: Annotated[int, Help("text contexts"), Range(1), NotWith(("texts", "tokens"))] = 4,
                     length: Annotated[int, Help("tokens per context"), Range(8), Fits()] = 512,
                     max_rows: Annotated[int, Help("query rows per context for the logit shares and attention "
                                                   "masses: 0 (default) every row 1..N-1; a number, that many "
                                                   "evenly spaced"),
                                         Range(0)] = 0,
                     fraction: Annotated[float, Help("share of each layer's bands removed or unrotated"),
                                         Range(0.01, 1)] = 0.25,
                     niah_prompts: Annotated[int, Help("NIAH prompts for retrieval under each condition (0: none)"),
                                             Range(0)] = 8,
                     niah_tokens: Annotated[int, Help("NIAH prompt length in the model's tokens (16 more must fit "
                                                      "for the answer)"), Range(32), Fits(margin=16)] = 512,
                     long_length: Annotated[int, Help("tokens per context for the effects at a longer length, e.g. "
                                                      "the trained length (0: none)"), Range(0), Fits(),
                                           NotWith(("texts", "tokens"))] = 0,
                     long_docs: Annotated[int, Help("contexts of long_length"), Range(1)] = 2,
                     stage: STAGE = "any", seed: int = 0, documents=None) -> Tables:
    """Per head and rotary band, the mean query and key norm of the band (Barbero et al.'s measure) and the share of the
    attention logit it carries (poslens' measure); and the next-token loss, KL, previous-token heads and NIAH accuracy
    with the highest or lowest bands removed or unrotated.

    Rows ``part=bands`` (layer, head, band: 0 the highest frequency, with the frequency, ``rope_type`` and
    ``attention_scaling`` that ran) and ``part=effects`` (one per condition); each context's own values (``UNITS``)."""
    import pandas as pd

    from analyses import units

    specs = {l: s for l in range(model.n_layers) if (s := model.rotation(l)) is not None}
    n_bands = max(s.n_bands for s in specs.values())
    contexts, samples, longs = _inputs(model, documents, n_docs, length, niah_prompts, niah_tokens, long_length,
                                       long_docs, seed, stage)
    state = _fold(model, contexts, longs, samples, max_rows, fraction, n_bands)
    n_ctx = len(contexts)
    positional = _positional(state, n_ctx)
    rows = _band_rows(model, specs, state, n_ctx) + _effect_rows(state, contexts, longs, fraction, positional)
    df = integer_columns(pd.DataFrame(rows), "layer", "head", "band", "n_bands", "n_positional_heads")
    df.insert(0, "model", model.model_name)
    df["n_docs"], df["niah_prompts"] = n_ctx, len(samples)
    df["length"] = df["length"].fillna(max(len(c) for c in contexts)).astype(int) if "length" in df else \
        max(len(c) for c in contexts)
    df["long_docs"] = len(longs)
    return Tables(df, units.frame(UNITS, _context_units(model.model_name, specs, state, n_ctx)
                                  + _effect_units(model.model_name, state, contexts, longs, positional)))


def _inputs(model, documents, n_docs: int, length: int, niah_prompts: int, niah_tokens: int, long_length: int,
            long_docs: int, seed: int, stage: str = "any") -> tuple[list, list, list]:
    """The text contexts, the NIAH prompts and the contexts at ``long_length`` (none where it is 0)."""
    from corpora.contexts import analysis_windows

    contexts = [w.ids for w in analysis_windows(model, "rope-frequencies", documents, length=length, n_docs=n_docs,
                                                seed=seed, stage=stage)]
    samples = []
    if niah_prompts:
        from corpora.answers import fitting_samples
        from corpora.niah import niah_samples

        samples = fitting_samples(model, niah_samples(model.require_tokenizer("rope-frequencies"), niah_prompts,
                                                      niah_tokens, seed=seed,
                                                      haystack="wiki" if documents is None else documents,
                                                      preamble=False, stage=stage))
    longs = [w.ids for w in analysis_windows(model, "rope-frequencies", documents, length=long_length,
                                             n_docs=long_docs, seed=seed + 1, stage=stage)] if long_length else []
    return contexts, samples, longs


def _fold(model, contexts, longs, samples, max_rows: int, fraction: float, n_bands: int) -> dict:
    """Every context's, long context's and prompt's float64 sums added up: the usage and effects over all of them,
    and each context's own norms and effects in its own slot (the units the intervals resample)."""
    import numpy as np

    from interp.runtime import parallel

    items = [("context", ids) for ids in contexts] + [("long", ids) for ids in longs] + \
        [("prompt", s) for s in samples]
    shape = (model.n_layers, model.n_heads)
    state = {k: np.zeros(shape + (n_bands,)) for k in ("q_norm", "k_norm", "logit")}
    state["frequency"] = np.zeros((model.n_layers, n_bands))
    state |= {f"prev|{c}": np.zeros(shape) for c in CONDITIONS}
    state |= {f"{m}|{c}": np.zeros(1) for m in ("loss", "kl", "niah") for c in CONDITIONS}
    state |= {"tokens": np.zeros(1), "prompts": np.zeros(1)}
    state |= {f"long {k}": np.zeros_like(v) for k, v in state.items() if k.startswith(EFFECTS)}
    state |= {f"unit_{k}": np.zeros((len(contexts),) + shape + (n_bands,)) for k in ("q_norm", "k_norm")}
    n_units = len(contexts) + len(longs)
    state |= {f"unit {k}": np.zeros((n_units,) + v.shape) for k, v in state.items() if k.startswith(EFFECTS)}

    def one(item):
        kind, x = item
        if kind == "context":
            return context_statistics(model, x, max_rows, fraction, n_bands)
        if kind == "long":
            return {f"long {k}": v for k, v in context_statistics(model, x, max_rows, fraction, n_bands,
                                                                   bands=False).items()}
        return prompt_statistics(model, x, fraction)

    def add(state, i, stats):
        for k, v in stats.items():
            state[k] += v
            if k in ("q_norm", "k_norm"):  # a context's own norms in its slot
                state[f"unit_{k}"][i] += v
            if i < n_units and k.removeprefix("long ").startswith(EFFECTS):  # a context's own effects in its slot
                state[f"unit {k.removeprefix('long ')}"][i] += v

    return parallel.fold_items(one, items, state, add, model=model, desc=f"rope-frequencies {model.model_name}")


def _band_rows(model, specs: dict, state: dict, n_ctx: int) -> list[dict]:
    """Rows ``part=bands`` (per layer, head and band, fastest first), from the summed usage."""
    import numpy as np

    windows = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    rows = []
    for layer, spec in specs.items():
        frequency = state["frequency"][layer, : spec.n_bands] / n_ctx
        order = np.argsort(-frequency, kind="stable").tolist()
        logit = state["logit"][layer][:, order]
        shares = logit / logit.sum(-1, keepdims=True)
        kind = _rope_type(model, spec)
        for head in range(model.n_heads):
            for rank, b in enumerate(order):
                rows.append(dict(part="bands", layer=layer, head=head, depth=layer / max(1, model.n_layers - 1),
                                 attention=f"sliding {windows[layer]}" if windows[layer] else "full", band=rank,
                                 frequency=float(frequency[b]), wavelength=float(2 * np.pi / frequency[b]),
                                 n_bands=spec.n_bands, rope_type=kind, attention_scaling=float(spec.attention_scaling),
                                 q_norm=state["q_norm"][layer, head, b] / n_ctx,
                                 k_norm=state["k_norm"][layer, head, b] / n_ctx,
                                 poslens_logit_share=float(shares[head, rank]),
                                 previous_token_mass=state["prev|none"][layer, head] / n_ctx))
    return rows


def _quarters(state: dict, spec, layer: int) -> dict[str, list[int]]:
    """The layer's lowest and highest quarter of bands (by its own frequencies, at least one band each)."""
    import numpy as np

    order = np.argsort(-state["frequency"][layer, : spec.n_bands], kind="stable").tolist()
    q = max(1, spec.n_bands // 4)
    return {"lowest": order[-q:], "highest": order[:q]}


def _context_units(name: str, specs: dict, state: dict, n_ctx: int) -> list:
    """``q_norm`` / ``k_norm`` of each context, layer and quarter (``UNITS``)."""
    import numpy as np

    from analyses import units

    quarters = {layer: _quarters(state, spec, layer) for layer, spec in specs.items()}
    return [units.long(name, measure, np.array([[[state[f"unit_{measure}"][c, layer][:, bands].mean()
                                                  for bands in quarters[layer].values()] for layer in specs]
                                                for c in range(n_ctx)]),
                       {"layer": list(specs), "quarter": ("lowest", "highest")}) for measure in ("q_norm", "k_norm")]


def _positional(state: dict, n_ctx: int):
    """The positional heads, found without intervention at the first length: previous-token mass >= POSITIONAL,
    or the 3 highest where none reaches it."""
    import numpy as np

    base_prev = state["prev|none"] / n_ctx
    positional = base_prev >= POSITIONAL
    return positional if positional.any() else base_prev >= np.sort(base_prev.ravel())[-3]


def _effect_rows(state: dict, contexts: list, longs: list, fraction: float, positional) -> list[dict]:
    """Per condition, the rows ``part=effects`` (over the contexts and prompts) and ``long_effects`` (over the long
    contexts, where any)."""
    n_ctx, tokens, prompts = len(contexts), float(state["tokens"][0]), float(state["prompts"][0])
    rows = []
    for condition in CONDITIONS:
        rows.append(dict(part="effects", condition=condition, fraction=0.0 if condition == "none" else fraction,
                         loss=float(state[f"loss|{condition}"][0]) / tokens,
                         kl=float(state[f"kl|{condition}"][0]) / tokens,
                         positional_heads=float((state[f"prev|{condition}"] / n_ctx)[positional].mean()),
                         n_positional_heads=int(positional.sum()),
                         niah_accuracy=float(state[f"niah|{condition}"][0]) / prompts if prompts else float("nan"),
                         length=max(len(c) for c in contexts)))
        if longs:
            n_tok = float(state["long tokens"][0])
            rows.append(dict(part="long_effects", condition=condition,
                             fraction=0.0 if condition == "none" else fraction,
                             loss=float(state[f"long loss|{condition}"][0]) / n_tok,
                             kl=float(state[f"long kl|{condition}"][0]) / n_tok,
                             positional_heads=float((state[f"long prev|{condition}"] / len(longs))[positional].mean()),
                             n_positional_heads=int(positional.sum()), length=max(len(c) for c in longs)))
    return rows


def _effect_units(name: str, state: dict, contexts: list, longs: list, positional) -> list:
    """Each context's own ``loss``, ``kl`` and ``positional_heads`` under each condition, at its length (``UNITS``)."""
    import numpy as np

    from analyses import units

    out = []
    for group, first in ((contexts, 0), (longs, len(contexts))):
        if not group:
            continue
        length, span = max(len(c) for c in group), range(first, first + len(group))
        n_tok = np.array([float(state["unit tokens"][u][0]) for u in span])
        for condition in CONDITIONS:
            values = {"loss": np.array([float(state[f"unit loss|{condition}"][u][0]) for u in span]) / n_tok,
                      "kl": np.array([float(state[f"unit kl|{condition}"][u][0]) for u in span]) / n_tok,
                      "positional_heads": [float(state[f"unit prev|{condition}"][u][positional].mean()) for u in span]}
            out += [units.long(name, measure, v, condition=condition, length=length) for measure, v in values.items()]
    return out
