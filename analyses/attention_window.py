"""Window attention and attention sinks (Xiao et al., ICLR 2024, "Efficient Streaming Language Models with Attention
Sinks", StreamingLLM), in two settings.

``setting=window`` (the default): ``n_docs`` documents of ``length`` tokens (English Wikipedia lead sections joined, or
the user's documents cut into windows of that length), each starting with the document-start token, inside the trained
length. Each is read with full attention and, for every count in ``sinks``, with every layer's queries restricted to the
``window`` nearest keys plus the first that many tokens (``interventions.KeyWindow``; 0 sinks is plain window
attention). Per condition, the next-token loss in ``n_buckets`` position buckets and over the positions past the window
(where the window binds). The window is a condition of the attention itself, one chunk of query rows against only the
keys it may see, so no ``[query, key]`` mask is built at any length. With full attention the same pass reads, for
**every** query row 1..N-1 of each document (``interp.attention.forward_statistics``: exact over every key, one chunk of
rows at a time; given ``max_rows``, that many evenly spaced rows, the protocol before all-row statistics, whose default
was 64), where each head looks (``part=reach``), averaged over rows: its attention mass on keys at least ``window``
tokens back, on the first ``max(sinks)`` tokens, and on keys past the layer's own attention window where the model has
one (Gemma 3's sliding layers: exactly 0), and its mean attended distance. Every document adds its float64 sums
(``interp.runtime.parallel.fold_items``). Tokens keep their own positions here (see ``KeyWindow``): this is not the
paper's experiment, which streams past the trained length.

``setting=streaming`` is the paper's experiment (§3.2, §4.1; their ``eval_long_ppl.py``): one stream of
``stream_tokens`` tokens (the built-in lead sections joined into one text with the start token first, or the user's
documents joined by newlines), possibly longer than the model's context, read token after token, each token's loss
from what it sees:

- ``window`` / ``window + k sinks``: a rolling KV cache of ``cache_size`` tokens, the first ``k`` and the most recent
  ``cache_size - k`` (``interp.streaming.RollingCache``), positions re-indexed within the cache ("StreamingLLM focuses
  on positions within the cache rather than those in the original text"; for RoPE, keys cached before rotation and
  rotated by their in-cache positions at each step). 0 sinks is the paper's window attention;
- ``dense``: every earlier token at its own position, over the first ``dense_tokens`` tokens (the whole stream by
  default: past the trained length this is the paper's failing dense row; its keys and values for every token are
  held, which is what caps it);
- ``re-computation``: sliding window with re-computation, each token predicted by a fresh forward pass over the
  ``cache_size + 1`` tokens before it at positions 0..cache_size (the tokens a full rolling cache without sinks shows
  it, the token itself included). It costs a forward pass of ``cache_size + 1`` tokens per token, so only every
  ``recompute_stride``-th token is evaluated (by default ``stream_tokens // 64``: 64 tokens evenly spread);
- ``re-computation, start token first``: the same, each pass reading the model's start token and then the ``cache_size``
  tokens before the target (where the model has a start token): the oracle for a model whose sink needs it (Gemma 3),
  as a rolling cache with one sink shows it the start token.

Rows ``part=stream``: per condition the mean loss (nats per token) in ``n_buckets`` buckets of stream positions and over
``all`` its tokens, the tokens ``past the trained length`` (``model.max_seq_len``) and the ``re-computed tokens`` (the
tokens re-computation evaluated, for a paired comparison), with ``n_tokens``. The unit values behind a paired interval
(``UNITS``, ``attention-window.units.csv``): each re-computed token's ``loss`` under every condition that computed it,
``unit`` the token's stream position.
The trained length is what the model
declares (``max_seq_len``: SmolLM2 8192, Gemma 3 32768; the bundled byte models declare 2304 but read 512-byte windows
in training).

The paper's numbers (perplexity, token by token, cache 1024): Llama-2-13B on 65K tokens of PG19 (Table 1): window
0+1024 5158.07, 4+1020 5.40 (four linebreak tokens as sinks: 5.60); on 400K tokens (Table 2, window / +1 / +4 first
tokens): Falcon-7B 17.90 / 12.12 / 12.12, MPT-7B 460.29 / 14.99 / 14.99, Pythia-12B 21.62 / 11.95 / 12.09, Llama-2-7B
3359.95 / 11.88 / 9.59; dense attention fails past the pre-training length and re-computation is the oracle it
matches (Figure 3). poslens reports nats per token, the log of perplexity (5.40 is 1.69 nats, 5158.07 is 8.55, 9.59 is
2.26, 3359.95 is 8.12). Where poslens departs: small models on this CPU (SmolLM2-135M, Gemma 3 270M) and Wikipedia lead
sections instead of PG19 books; chunks of 64 tokens per forward pass give the token-by-token numbers exactly (see
``interp.streaming``); re-computation is sampled; Gemma 3's sliding layers (512 keys) mask by in-cache distance, so with
a cache longer than their window they never see the sinks, as in the model's own dense attention, and only its global
layers meet the re-indexed sinks.

Control (``control=True``): the same text without its document-start token, through the window and the window with
the most sinks (conditions "..., no start token", ``start_token`` False; each token counted at its position in the
stream with the start token, so that every span holds the same tokens). Gemma 3's sinks form only on its BOS (sink-rate:
0% sink heads when the first token is an ordinary one) while SmolLM2 sinks on whatever comes first, so without BOS Gemma
3 is a language model with rotary positions and no first-token sink: if the window fails because the sinks are evicted,
keeping the first tokens should then help Gemma 3 little and SmolLM2 as much as with BOS. The bundled rope-small,
trained on 512-byte windows, is another: its window and window + sinks agree while its dense attention fails past 512
bytes. Unlike a shuffled model (hundreds of nats), these controls predict text, so an effect would show if there were
one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from analyses.nan_policy import integer_columns, may_be_nan
from analyses.registry import Adapts, Choices, Fits, Help, NotWith, Range, analysis, no_grad
from analyses.runs import DECODERS, HEADS, KNOWN, PRETRAINED, Run
from analyses.stage import STAGE
from analyses.units import Tables, Units
from interp.capabilities import Capability

if TYPE_CHECKING:
    pass



def conditions(sinks) -> list[tuple[str, int | None]]:
    return [("full", None)] + [("window" if s == 0 else f"window + {s} sink{'s' * (s > 1)}", s) for s in sinks]


def buckets(length: int, n: int) -> list[tuple[int, int]]:
    """``n`` ranges of target positions (1..length-1) of about equal size."""
    import numpy as np

    edges = np.unique(np.linspace(1, length, n + 1).round().astype(int))
    return list(zip(edges[:-1], edges[1:]))


@no_grad
def document_statistics(model, ids, window: int, sinks, spans, max_rows: int) -> dict:
    """One document's additive share: per condition the loss summed in each bucket and past the window; with full
    attention, each head's mass far back, on the first tokens and past its layer's own window, and its mean distance,
    over query rows 1..N-1 (every one, or ``max_rows`` evenly spaced: ``head_profiles.sampled_rows``), read in the
    pass that gives the full-attention loss (``interp.attention.forward_statistics``)."""
    import numpy as np
    import torch

    from analyses.head_profiles import sampled_rows
    from interp import interventions
    from interp.attention import forward_statistics

    n = len(ids)
    tokens = torch.tensor([ids], device=model.device)
    # the positions predicted; ``spans`` are of the full length (a short last window fills fewer)
    target = torch.arange(1, n)
    rows = sampled_rows(n, max_rows)
    every = rows.numel() == n - 1
    first = max(sinks) if sinks else 0
    own = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    shape = (model.n_layers, model.n_heads)
    out = {k: np.zeros(shape) for k in ("distance", "beyond", "sink", "beyond_own")}
    near = tuple(sorted({window - 1} | {w - 1 for w in own if w}))  # distance >= w is far_mass past w - 1
    wanted = ("distance_mean", "far_mass") + (("first_mass",) if first else ())  # the first 0 tokens hold nothing

    for c, (name, s) in enumerate(conditions(sinks)):
        if s is None:
            nll, stats = forward_statistics(model, tokens, wanted,
                                            run=lambda: model.token_losses(tokens)[0].cpu().double(),
                                            first=(max(first, 1),), windows=near, rows=None if every else rows)
            read = slice(1, None) if every else slice(None)  # every row: 0..N-1 came back, row 0 is left out
            far = {w: stats["far_mass"][:, 0, :, read, i].double() for i, w in enumerate(near)}
            out["distance"] = stats["distance_mean"][:, 0, :, read].double().mean(-1).numpy()
            out["beyond"] = far[window - 1].mean(-1).numpy()
            if first:
                out["sink"] = stats["first_mass"][:, 0, :, read, 0].double().mean(-1).numpy()
            for layer, w in enumerate(own):
                if w:
                    out["beyond_own"][layer] = far[w - 1][layer].mean(-1).numpy()
        else:
            with interventions.applied(model, interventions.KeyWindow(window, s)):
                nll = model.token_losses(tokens)[0].cpu().double()
        out[f"loss|{c}"] = np.array([float(nll[(target >= a) & (target < b)].sum()) for a, b in spans])
        out[f"beyond|{c}"] = np.array([float(nll[target >= window].sum())])
    out["tokens"] = np.array([float(((target >= a) & (target < b)).sum()) for a, b in spans])
    out["beyond_tokens"] = np.array([float((target >= window).sum())])
    return out


SETTINGS = ("window", "streaming")
WINDOW_ONLY = ("length", "n_docs", "window", "max_rows")
STREAMING_ONLY = ("stream_tokens", "cache_size", "dense_tokens", "recompute_stride", "control")
CHUNK = 64  # stream tokens per forward pass (the numbers are token-by-token streaming's whatever the chunk)
DENSE, RECOMPUTE = "dense", "re-computation"
RECOMPUTE_START = "re-computation, start token first"
ALL, PAST, RECOMPUTED = "all", "past the trained length", "re-computed tokens"


def _for(setting: str, value):
    """An option's default in ``setting``; None in the other (where it does not apply, and a value given is refused)."""
    return lambda model, options: value if options.get("setting", "window") == setting else None


def _recompute_stride(model, options):
    if options.get("setting", "window") != "streaming":
        return None
    return max(1, (options.get("stream_tokens") or 4096) // 64)


def headline(df) -> str:
    stream = df[df["part"] == "stream"] if "part" in df else df.iloc[:0]
    if len(stream):
        return _stream_headline(stream)
    parts = []
    for model, g in df.groupby("model", sort=False):
        past = g[(g["part"] == "loss") & (g["bucket"] == "past the window")].set_index("condition")["loss"]
        parts.append(f"{model} ({int(g['length'].iloc[0])} tokens, window {int(g['window'].iloc[0])}): "
                     + ", ".join(f"{c} {v:.2f}" for c, v in past.items()))
    return "Loss past the window (nats per token): " + "; ".join(parts) + "."


def _stream_headline(df) -> str:
    parts = []
    for model, g in df.groupby("model", sort=False):
        trained, n = int(g["trained_length"].iloc[0]), int(g["stream_tokens"].iloc[0])
        where = PAST if (g["bucket"] == PAST).any() else ALL
        rows = g[g["bucket"] == where].set_index("condition")
        cache = int(g["cache_size"].dropna().iloc[0]) if g["cache_size"].notna().any() else 0
        shown = ", ".join(f"{c} {r['loss']:.2f}" + (f" ({int(r['n_tokens'])} tokens)" if c == RECOMPUTE else "")
                          for c, r in rows.iterrows())
        span = f"past its {trained} trained positions" if where == PAST else "over the whole stream"
        parts.append(f"{model} ({n} tokens streamed, cache {cache}), {span}: {shown}")
    return "Streaming loss (nats per token): " + "; ".join(parts) + "."


def summary(df):
    stream = df[df["part"] == "stream"] if "part" in df else df.iloc[:0]
    if len(stream):
        rows = stream[stream["bucket"].isin([ALL, PAST, RECOMPUTED])]
        return rows[["model", "condition", "sinks", "cache_size", "bucket", "loss", "n_tokens"]]
    loss = df[(df["part"] == "loss") & (df["bucket"] == "past the window")]
    return loss[["model", "condition", "sinks", "window", "loss", "n_tokens"]]


UNITS = Units("re-computed token (unit: its stream position)", keys=("condition", "sinks", "cache_size", "start_token"),
              measures={"loss": "one re-computed token's next-token loss under the condition (nats)"})


@analysis("attention-window", needs=[Capability.ATTENTION, Capability.CAUSAL_LM], headline=headline, summary=summary,
          units=UNITS,
          small=Run(("repo-small", "rope-small"), dict(n_docs=1, length=96, window=32, n_buckets=3, max_rows=16)),
          main=Run(DECODERS, dict(length=512, n_docs=4, window=128),
                   quick=dict(length=128, n_docs=1, window=32, max_rows=16), section=HEADS),
          # StreamingLLM's experiment: each model streamed past its trained positions (SmolLM2 8192, Gemma 3 32768:
          # about 45 minutes of one CPU core); cache 1024, with the no-start-token control
          real=Run(PRETRAINED, dict(setting="streaming", cache_size=1024, sinks=(0, 1, 4), control=True,
                                    stage="judged"),
                   per_model={"smollm2": dict(stream_tokens=12288, recompute_stride=192),
                              "gemma3-270m": dict(stream_tokens=34816, recompute_stride=256)},
                   quick=dict(stream_tokens=96, cache_size=32, recompute_stride=32), section=KNOWN),
          memory=Run(("rope-small",), dict(length=256, window=64)),
          builds_logits=False)
@may_be_nan(sinks="full attention, dense attention and re-computation keep no first tokens",
            position="a row of a span of positions (past the window, all, past the trained length, re-computed "
                     "tokens)",
            loss="a reach row (where a head looks) has no loss",
            n_tokens="a reach row (where a head looks) has no loss",
            layer="a loss row is of the whole model", head="a loss row is of the whole model",
            depth="a loss row is of the whole model", mean_distance="a loss row is of the whole model",
            mass_beyond_window="a loss row is of the whole model", sink_mass="a loss row is of the whole model",
            mass_beyond_own_window="a loss row, or a layer without an attention window of its own",
            cache_size="dense attention and re-computation keep no rolling cache")
def attention_window(model, *,
                     setting: Annotated[str, Help("window: documents inside the trained length read through a window "
                                                  "of keys at their own positions, against full attention; streaming: "
                                                  "StreamingLLM's experiment, one long stream (past the trained length "
                                                  "if asked) through a rolling KV cache with positions re-indexed in "
                                                  "the cache, against dense attention and sliding-window "
                                                  "re-computation"), Choices(SETTINGS)] = "window",
                     length: Annotated[int, Help("tokens per document (window setting; default: 1024)"), Range(8),
                                       Fits(), Adapts(_for("window", 1024))] = None,
                     n_docs: Annotated[int, Help("documents (window setting; default: 4)"), Range(1), NotWith(),
                                       Adapts(_for("window", 4))] = None,
                     window: Annotated[int, Help("keys each query sees, itself included (window setting; shorter than "
                                                 "--length; default: 256)"), Range(1),
                                       Adapts(_for("window", 256))] = None,
                     sinks: Annotated[tuple[int, ...], Help("counts of first tokens kept besides the window (0: "
                                                            "plain window attention); in the streaming setting they "
                                                            "are part of the cache"),
                                      Range(0)] = (0, 1, 4),
                     n_buckets: Annotated[int, Help("position buckets of the loss curve (default: 8; streaming: 16)"),
                                          Range(1),
                                          Adapts(lambda m, o: 16 if o.get("setting") == "streaming" else 8)] = None,
                     max_rows: Annotated[int, Help("query rows per document for where heads look (window setting; "
                                                   "default: 0, every row 1..N-1; a number: that many evenly spaced)"),
                                         Range(0), Adapts(_for("window", 0))] = None,
                     stream_tokens: Annotated[int, Help("tokens of the stream (streaming setting, where it may exceed "
                                                        "the model's context; default: 4096)"), Range(3),
                                              Adapts(_for("streaming", 4096))] = None,
                     cache_size: Annotated[int, Help("tokens the rolling cache keeps, sinks included (streaming "
                                                     "setting; default, as in the paper: 1024)"), Range(2),
                                           Adapts(_for("streaming", 1024))] = None,
                     dense_tokens: Annotated[int, Help("tokens of the stream read with dense attention, whose keys and "
                                                       "values are all kept (streaming setting; default: the whole "
                                                       "stream; 0: none)"),
                                             Range(0), Adapts(lambda m, o: (o.get("stream_tokens") or 4096)
                                                              if o.get("setting") == "streaming" else None)] = None,
                     recompute_stride: Annotated[int, Help("re-computation predicts every this-many-th token, each "
                                                           "from a forward pass over cache_size + 1 tokens (streaming "
                                                           "setting; default: 64 tokens evenly spread; 0: none)"),
                                                 Range(0), Adapts(_recompute_stride)] = None,
                     control: Annotated[bool, Help("also stream the text without its document-start token through "
                                                   "the window and the window with the most sinks (streaming setting; "
                                                   "a control: Gemma 3's sinks need its BOS, SmolLM2's do not)"),
                                        Adapts(_for("streaming", False))] = None,
                     stage: STAGE = "any", seed: int = 0, documents=None) -> Tables:
    """Next-token loss read through a window of keys, with and without the first tokens kept (StreamingLLM): documents
    inside the trained length against full attention (``setting=window``), or one long stream through a rolling KV cache
    against dense attention and re-computation (``setting=streaming``).

    Window rows ``part=loss`` (condition, position bucket, and the positions past the window) and ``part=reach`` (layer,
    head); streaming rows ``part=stream`` (condition, position bucket, and spans of the stream), with each re-computed
    token's loss as unit-level values (``UNITS``)."""
    options = dict(length=length, n_docs=n_docs, window=window, max_rows=max_rows, stream_tokens=stream_tokens,
                   cache_size=cache_size, dense_tokens=dense_tokens, recompute_stride=recompute_stride, control=control)
    other = STREAMING_ONLY if setting == "window" else WINDOW_ONLY
    given = [k for k in other if options[k] is not None and not (k == "n_docs" and documents is not None)]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ValueError(f"attention-window {flag} {options[given[0]]}: applies to --setting "
                         f"{'streaming' if setting == 'window' else 'window'}, not {setting}")
    sinks = tuple(sorted(set(sinks)))
    if setting == "streaming":
        return _streaming(model, stream_tokens=stream_tokens, cache_size=cache_size, sinks=sinks,
                          dense_tokens=dense_tokens,
                          recompute_stride=recompute_stride, control=control, n_buckets=n_buckets, seed=seed,
                          documents=documents, stage=stage)
    from analyses import units

    return Tables(_window(model, length=length, n_docs=n_docs, window=window, sinks=sinks, n_buckets=n_buckets,
                          max_rows=max_rows, seed=seed, documents=documents, stage=stage),
                  units.frame(UNITS, []))


def _window(model, *, length, n_docs, window, sinks, n_buckets, max_rows, seed, documents, stage="any"):
    import numpy as np
    import pandas as pd

    from corpora.contexts import analysis_windows
    from interp.runtime import parallel

    if window >= length:
        raise ValueError(f"--window {window}: the window must be shorter than the documents (--length {length}), "
                         "or nothing is left out")
    docs = [w.ids for w in analysis_windows(model, "attention-window", documents, length=length, n_docs=n_docs,
                                            seed=seed, stage=stage)
            if len(w.ids) > window]
    if not docs:
        raise ValueError(f"attention-window: no document is longer than the window ({window} tokens)")
    conds = conditions(sinks)
    spans = buckets(length, n_buckets)
    shape = (model.n_layers, model.n_heads)
    state = {k: np.zeros(shape) for k in ("distance", "beyond", "sink", "beyond_own")}
    state |= {f"loss|{c}": np.zeros(len(spans)) for c in range(len(conds))}
    state |= {f"beyond|{c}": np.zeros(1) for c in range(len(conds))}
    state |= {"tokens": np.zeros(len(spans)), "beyond_tokens": np.zeros(1)}

    def add(state, i, stats):
        for k, v in stats.items():
            state[k] += v

    state = parallel.fold_items(lambda ids: document_statistics(model, ids, window, sinks, spans, max_rows), docs,
                                state, add, model=model, desc=f"attention-window {model.model_name}")
    rows = []
    for c, (name, s) in enumerate(conds):
        for (a, b), total, count in zip(spans, state[f"loss|{c}"], state["tokens"]):
            if count:
                rows.append(dict(part="loss", condition=name, sinks=s, bucket=f"{a}-{b - 1}", position=(a + b - 1) / 2,
                                 loss=total / count, n_tokens=int(count)))
        rows.append(dict(part="loss", condition=name, sinks=s, bucket="past the window", position=float("nan"),
                         loss=float(state[f"beyond|{c}"][0] / state["beyond_tokens"][0]),
                         n_tokens=int(state["beyond_tokens"][0])))
    windows = getattr(model, "attention_windows", None) or (None,) * model.n_layers
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            rows.append(dict(part="reach", layer=layer, head=head, depth=layer / max(1, model.n_layers - 1),
                             attention=f"sliding {windows[layer]}" if windows[layer] else "full",
                             mean_distance=state["distance"][layer, head] / len(docs),
                             mass_beyond_window=state["beyond"][layer, head] / len(docs),
                             sink_mass=state["sink"][layer, head] / len(docs),
                             mass_beyond_own_window=(state["beyond_own"][layer, head] / len(docs) if windows[layer]
                                                     else float("nan"))))
    df = integer_columns(pd.DataFrame(rows), "layer", "head", "sinks", "n_tokens")
    df.insert(0, "model", model.model_name)
    df["length"], df["window"], df["n_docs"], df["first_tokens"] = (max(len(d) for d in docs), window, len(docs),
                                                                    max(sinks, default=0))
    return df


def stream_ids(model, n_tokens: int, seed: int, documents=None, stage: str = "any") -> list[int]:
    """The one stream: the built-in lead sections joined into one text (``corpora.contexts.wikipedia_windows``), or the
    user's documents joined by newlines (token ids: concatenated as given), with the start token first, cut to
    ``n_tokens``."""
    if documents is None:
        from corpora.contexts import wikipedia_windows

        ids = wikipedia_windows(model.require_tokenizer("attention-window"), 1, n_tokens, seed=seed,
                                stage=stage)[0].ids
    else:
        from corpora.user import user_inputs

        inputs = user_inputs(documents, "attention-window", ("texts", "tokens"))
        if inputs.kind == "tokens":
            ids = [int(i) for w in inputs.items for i in w.ids]
        else:
            text = "\n".join(d.text for d in inputs.items)
            ids = model.require_tokenizer("attention-window").encode(text, doc_start=True)
    ids = ids[:n_tokens]
    if len(ids) < 3:
        raise ValueError(f"attention-window: the stream holds {len(ids)} tokens; streaming needs at least 3")
    return ids


def without_start(model, ids: list[int]) -> list[int]:
    """The stream without its document-start token (the control), or an error naming why there is none to drop."""
    from corpora.random_tokens import start_token

    first = start_token(model)
    if first is None:
        raise ValueError(f"attention-window --control: {model.model_name}'s tokenizer puts no start token before a "
                         "document, so there is nothing to leave out")
    if ids[0] != first:
        raise ValueError(f"attention-window --control: the stream begins with token {ids[0]}, "
                         f"not {model.model_name}'s start token {first}")
    return ids[1:]


def _streaming(model, *, stream_tokens, cache_size, sinks, dense_tokens, recompute_stride, control, n_buckets, seed,
               documents, stage="any"):
    import numpy as np
    import pandas as pd

    from interp import streaming

    streaming.check_streamable(model, "attention-window --setting streaming")
    bad = [k for k in sinks if k >= cache_size]
    if bad:
        raise ValueError(f"attention-window --sinks {bad[0]}: the sinks are part of the cache, so fewer than "
                         f"--cache-size {cache_size}")
    if dense_tokens > stream_tokens:
        raise ValueError(f"attention-window --dense-tokens {dense_tokens}: longer than the stream (--stream-tokens "
                         f"{stream_tokens})")
    streams = {True: stream_ids(model, stream_tokens, seed, documents, stage)}
    if control:
        streams[False] = without_start(model, streams[True])
    n = len(streams[True])
    recompute_window = cache_size + 1
    targets = np.arange(recompute_stride, n, recompute_stride) if recompute_stride else np.zeros(0, dtype=int)
    conds, first = _stream_conditions(model, streams[True], sinks, cache_size, dense_tokens, control, targets)
    state = _stream_losses(model, streams, conds, first, targets, dense_tokens, recompute_window)
    rows = _stream_rows(model, state, conds, targets, n, n_buckets)
    df = integer_columns(pd.DataFrame(rows), "sinks", "cache_size", "n_tokens")
    df.insert(0, "model", model.model_name)
    df["stream_tokens"], df["trained_length"], df["dense_tokens"] = n, model.max_seq_len, min(n, dense_tokens)
    df["recompute_window"], df["recompute_stride"] = recompute_window, recompute_stride
    return Tables(df, _token_units(model, state, conds, targets))


def _stream_conditions(model, stream, sinks, cache_size, dense_tokens, control, targets) -> tuple[list, int | None]:
    """The conditions as (name, sinks, cache, start token): dense, the rolling caches, [the control's], re-computation
    last (with the start token kept where the stream begins with it); and the model's start token."""
    from corpora.random_tokens import start_token

    windows = conditions(sinks)[1:]
    conds = (([(DENSE, None, None, True)] if dense_tokens >= 2 else [])
             + [(name, s, cache_size, True) for name, s in windows])
    if control:
        conds += [(f"{name}, no start token", s, cache_size, False)
                  for name, s in (windows[0], windows[-1])[:len(set(sinks))]]
    first = start_token(model)
    if len(targets):
        conds += [(RECOMPUTE, None, None, True)]
        if first is not None and stream[0] == first:
            conds += [(RECOMPUTE_START, None, None, True)]
    return conds, first


def _stream_losses(model, streams, conds, first, targets, dense_tokens, recompute_window) -> dict:
    """Per condition, each predicted token's loss (``nll|c``) and whether it was computed (``seen|c``), at the
    stream's positions; re-computation in blocks of its target tokens."""
    import numpy as np

    from interp import streaming
    from interp.runtime import parallel
    n = len(streams[True])
    recomputing = {RECOMPUTE, RECOMPUTE_START}
    blocks = np.array_split(targets, min(len(targets), 8)) if len(targets) else []
    items = ([(c, None) for c in range(len(conds)) if conds[c][0] not in recomputing]
             + [(c, b) for c in range(len(conds)) if conds[c][0] in recomputing for b in blocks])

    def work(item):
        c, block = item
        name, s, cache, start = conds[c]
        ids = streams[start]
        nll, seen = np.zeros(n - 1), np.zeros(n - 1)
        if name in recomputing:
            prefix = [first] if name == RECOMPUTE_START else []
            nll[block - 1] = streaming.recomputed_nll(model, ids, recompute_window, block, prefix=prefix)
            seen[block - 1] = 1
        elif name == DENSE:
            upto = min(n, dense_tokens)
            nll[:upto - 1] = streaming.stream_nll(model, ids[:upto], None, 0, CHUNK)
            seen[:upto - 1] = 1
        else:  # the control's tokens are the stream's from its second on: kept at the stream's positions,
            # token for token
            shift = n - len(ids)
            nll[shift:] = streaming.stream_nll(model, ids, cache, s, CHUNK)
            seen[shift:] = 1
        return {f"nll|{c}": nll, f"seen|{c}": seen}

    state = {f"{k}|{c}": np.zeros(n - 1) for c in range(len(conds)) for k in ("nll", "seen")}

    def add(state, i, share):
        for k, v in share.items():
            state[k] += v

    return parallel.fold_items(work, items, state, add, model=model, tag="streaming",
                               desc=f"attention-window streaming {model.model_name}")


def _stream_rows(model, state, conds, targets, n, n_buckets) -> list[dict]:
    """Rows ``part=stream``: each condition's mean loss per span of the stream."""
    import numpy as np

    position = np.arange(1, n)  # the stream position of each predicted token
    spans = [(f"{a}-{b - 1}", (a + b - 1) / 2, (position >= a) & (position < b)) for a, b in buckets(n, n_buckets)]
    spans.append((ALL, float("nan"), np.ones(n - 1, dtype=bool)))
    if n - 1 >= model.max_seq_len:
        spans.append((PAST, float("nan"), position >= model.max_seq_len))
    if len(targets):
        spans.append((RECOMPUTED, float("nan"), np.isin(position, targets)))
    rows = []
    for c, (name, s, cache, start) in enumerate(conds):
        nll, seen = state[f"nll|{c}"], state[f"seen|{c}"] > 0
        for bucket, mid, where in spans:
            m = where & seen
            if m.any():
                rows.append(dict(part="stream", setting="streaming", condition=name, sinks=s, cache_size=cache,
                                 start_token=start, bucket=bucket, position=mid, loss=float(nll[m].mean()),
                                 n_tokens=int(m.sum())))
    return rows


def _token_units(model, state, conds, targets):
    """Each re-computed target token's loss under each condition that computed it (``UNITS``; ``unit`` the token's
    stream position)."""
    import pandas as pd

    from analyses import units

    parts = []
    for c, (name, s, cache, start) in enumerate(conds):
        nll, seen = state[f"nll|{c}"], state[f"seen|{c}"] > 0
        kept = [int(g) for g in targets if seen[g - 1]]
        if kept:
            parts.append(pd.DataFrame(dict(model=model.model_name, measure="loss", condition=name,
                                           sinks=pd.array([s] * len(kept), dtype="Int64"),
                                           cache_size=pd.array([cache] * len(kept), dtype="Int64"),
                                           start_token=start, unit=kept, value=[float(nll[g - 1]) for g in kept])))
    return units.frame(UNITS, parts)
