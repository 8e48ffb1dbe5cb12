"""The statistics request (``collecting_statistics``) and the model-level passes (``model_statistics``,
``forward_statistics``): every argument checked before any work, results recorded under each attention's
``hook_pattern`` name as float32 whatever the model's dtype."""

from __future__ import annotations

import contextlib
import contextvars
import numbers
from dataclasses import dataclass, field

import torch
from torch import Tensor

from interp.attention.budget import rows_per_chunk
from interp.attention.context import StopForward, current_query_rows, query_rows, setting, whole_positions
from interp.attention.statistics import DECLARED, STATISTICS, Rows, reduce


def _counts(value, what: str, least: int) -> tuple[int, ...]:
    values = (value,) if isinstance(value, numbers.Number) else tuple(value)
    for x in values:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) and not (
                isinstance(x, numbers.Real) and float(x).is_integer()):
            raise ValueError(f"attention statistics: {what} takes whole numbers, got {x!r}")
        if int(x) < least:
            raise ValueError(f"attention statistics: {what} {'counts' if least else 'distances'} >= {least} expected, "
                             f"got {tuple(values)}")
    return tuple(int(x) for x in values)


@dataclass
class StatisticsRequest:
    """Per-head statistics of every query row (or of ``rows``), exact over all keys, recorded under each attention's
    ``hook_pattern`` name as ``[batch, head, rows(, columns)]`` float32 (``results``).

    ``first``: key counts for ``first_mass``; ``windows``: distances for ``window_mass`` / ``far_mass``;
    ``key_parts`` / ``n_parts``: a part label per key for ``span_mass``; ``rows``: query positions (whole numbers,
    sorted and made unique; pattern hooks then see these rows alone); ``chunk_bytes``: the scores one chunk of rows may
    take (None: ``budget.chunk_budget`` of the device); ``names``: the ``hook_pattern`` names recorded (None: every
    attention; the others attend as without statistics); ``stop_after``: a ``hook_pattern`` name after which the pass
    stops;
    ``progress(name, rows_done, rows_total)``. Which backend serves an attention: ``interp.attention.backends``."""

    wanted: tuple[str, ...]
    first: tuple[int, ...] = (1,)
    windows: tuple[int, ...] = ()
    key_parts: Tensor | None = None
    n_parts: int = 0
    rows: Tensor | None = None
    chunk_bytes: int | None = None
    names: frozenset[str] | None = None
    stop_after: str | None = None
    progress: object = None
    results: dict[str, dict[str, Tensor]] = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.wanted, str):
            self.wanted = (self.wanted,)
        self.wanted = tuple(self.wanted)
        unknown = sorted(str(w) for w in set(self.wanted) - set(STATISTICS))
        if unknown or not self.wanted:
            raise ValueError(f"attention statistics: unknown {unknown or 'none asked for'}; "
                             f"known: {', '.join(STATISTICS)}")
        self.first = _counts(self.first, "first", 1)
        self.windows = _counts(self.windows, "windows", 0)
        if not self.first:
            raise ValueError("attention statistics: first needs at least one key count")
        needing = [w for w in self.wanted if "windows" in DECLARED[w].needs]
        if needing and not self.windows:
            raise ValueError(f"attention statistics: {needing[0]} needs windows= (distances w, one column each)")
        if "span_mass" in self.wanted:
            n = self.n_parts
            if self.key_parts is None or isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
                raise ValueError("attention statistics: span_mass needs key_parts and n_parts >= 1 (a whole number)")
        if self.key_parts is not None:
            parts = torch.as_tensor(self.key_parts)
            if parts.is_floating_point() or parts.dtype == torch.bool or parts.is_complex():
                raise ValueError(f"attention statistics: key_parts takes integer labels, got dtype {parts.dtype}")
            self.key_parts = parts.long().flatten()
        if self.rows is not None:
            self.rows = torch.unique(whole_positions(self.rows, "attention statistics: rows"))
        if self.chunk_bytes is not None and (isinstance(self.chunk_bytes, bool) or not isinstance(
                self.chunk_bytes, numbers.Integral) or self.chunk_bytes < 1):
            raise ValueError(f"attention statistics: chunk_bytes must be a positive whole number, got "
                             f"{self.chunk_bytes!r}")
        if self.names is not None:
            self.names = frozenset(self.names)
        if self.progress is not None and not callable(self.progress):
            raise ValueError(f"attention statistics: progress must be callable, got {self.progress!r}")

    def covers(self, name: str) -> bool:
        return self.names is None or name in self.names

    def check_keys(self, n_k: int) -> None:
        """Span masses need one part label per key of the attention."""
        if "span_mass" in self.wanted and self.key_parts.numel() != n_k:
            raise ValueError(f"attention statistics: key_parts has shape ({self.key_parts.numel()},), "
                             f"expected ({n_k},) for {n_k} keys")

    def rows_of(self, n_q: int) -> Tensor:
        """The query rows asked for among ``n_q`` (every one without ``rows``), checked against ``n_q``."""
        if self.rows is None:
            return torch.arange(n_q)
        if int(self.rows[-1]) >= n_q:
            raise IndexError(f"attention statistics: row {int(self.rows[-1])} asked for, but this forward pass has "
                             f"{n_q} query positions (0..{n_q - 1})")
        return self.rows

    def record(self, name: str, values: dict[str, Tensor]) -> None:
        self.results[name] = {s: values[s].cpu() for s in self.wanted}
        if name == self.stop_after:
            raise StopForward(name)

    def of_pattern(self, p: Tensor, rows: Tensor, n_q: int, n_k: int, k0: int = 0) -> dict[str, Tensor]:
        """The statistics of pattern rows ``p [batch, head, r, keys]`` of query ``rows`` among ``n_q`` queries over
        ``n_k`` keys, ``p`` holding keys ``k0 .. k0 + keys - 1`` only (the others masked for every row)."""
        keys = torch.arange(k0, k0 + p.shape[-1], device=p.device)
        return reduce(self.wanted, Rows(p.float(), rows.to(p.device) + (n_k - n_q), keys, k0), self)


_STATISTICS: contextvars.ContextVar[StatisticsRequest | None] = contextvars.ContextVar(
    "poslens_statistics", default=None)


def collecting_statistics(wanted, **options):
    """Record, under each attention's ``hook_pattern`` name, the statistics ``wanted`` (names of ``STATISTICS``) of
    every query row (or of ``rows=``, which pattern hooks then see alone), each ``[batch, head, rows(, columns)]``;
    yields the ``StatisticsRequest``. Every argument is checked here, before any work."""
    request = StatisticsRequest(wanted, **options)
    if request.rows is None:
        return setting(_STATISTICS, request)
    return _statistics_of_rows(request)


@contextlib.contextmanager
def _statistics_of_rows(request: StatisticsRequest):
    """Sampled rows: hooked attentions materialise those rows only (``query_rows``), as ``collecting_spans`` has it."""
    with query_rows(request.rows), setting(_STATISTICS, request):
        yield request


def current_statistics(name: str | None = None) -> StatisticsRequest | None:
    """The request in force; with ``name``, None where it does not cover that attention (``names``)."""
    request = _STATISTICS.get()
    return request if request is None or name is None or request.covers(name) else None


@torch.no_grad()
def model_statistics(model, tokens: Tensor, wanted, *, layers=None, **options) -> dict[str, Tensor]:
    """``{statistic: [layer, batch, head, rows(, columns)]}`` (float32) for any model with
    ``blocks.{l}.attn.hook_pattern``: every query row's attention statistics (``STATISTICS``), exact over every key, in
    the memory of a forward pass plus one chunk of rows (``chunk_bytes``). The pass stops after the last layer asked
    for; no logits are built. An attention that does not honour ``collecting_statistics`` has its pattern read one chunk
    of rows at a time instead."""
    return _statistics_pass(model, tokens, wanted, layers, True, options)[1]


@torch.no_grad()
def forward_statistics(model, tokens: Tensor, wanted, *, layers=None, run=None,
                       **options) -> tuple[object, dict[str, Tensor]]:
    """``(model(tokens), model_statistics(...))`` from one forward pass: the statistics ride the pass that gives the
    output, for analyses that need both. ``run()``, when given, is that pass instead of ``model(tokens)`` (e.g.
    ``model.final_hidden`` or ``model.token_losses``: losses without every position's logits). Options as
    ``model_statistics``'s."""
    return _statistics_pass(model, tokens, wanted, layers, False, options, run)


def _check_pass(model, tokens, layers, options) -> list[int]:
    if not torch.is_tensor(tokens) or tokens.is_floating_point() or tokens.dtype == torch.bool or tokens.ndim not in (
            1, 2):
        raise ValueError("attention statistics: tokens must be an integer tensor [batch, pos] (or [pos]), got "
                         + (f"{tokens.dtype} of shape {tuple(tokens.shape)}" if torch.is_tensor(tokens)
                            else type(tokens).__name__))
    given = list(range(model.n_layers)) if layers is None else list(layers)
    for layer in given:
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral):
            raise ValueError(f"attention statistics: layers takes whole numbers, got {layer!r}")
    layers = sorted(set(int(layer) for layer in given))
    if not layers or layers[0] < 0 or layers[-1] >= model.n_layers:
        raise ValueError(f"attention statistics: layers {layers} outside 0..{model.n_layers - 1}")
    if options.get("key_parts") is not None:
        options["key_parts"] = torch.as_tensor(options["key_parts"])
        if options["key_parts"].shape != (tokens.shape[-1],):
            raise ValueError(f"key_parts has shape {tuple(options['key_parts'].shape)}, "
                             f"expected ({tokens.shape[-1]},): one label per token")
    if options.get("rows") is not None:
        rows = whole_positions(options["rows"], "attention statistics: rows")
        if int(rows.max()) >= tokens.shape[-1]:
            raise IndexError(f"attention statistics: row {int(rows.max())} asked for, but this forward pass has "
                             f"{tokens.shape[-1]} query positions (0..{tokens.shape[-1] - 1})")
    return layers


def _statistics_pass(model, tokens: Tensor, wanted, layers, stop: bool, options: dict, run=None):
    layers = _check_pass(model, tokens, layers, options)
    names = [f"blocks.{l}.attn.hook_pattern" for l in layers]
    output = None
    with collecting_statistics(wanted, names=frozenset(names), stop_after=names[-1] if stop else None,
                               **options) as request:
        try:
            output = model(tokens) if run is None else run()
        except StopForward:
            pass
    missing = [n for n in names if n not in request.results]
    if missing:
        _read_patterns(model, tokens, request, missing)
    return output, {stat: torch.stack([request.results[n][stat] for n in names]) for stat in request.results[names[0]]}


def _read_patterns(model, tokens: Tensor, request: StatisticsRequest, names: list[str]) -> None:
    n = tokens.shape[-1]
    every = torch.arange(n) if request.rows is None else request.rows
    b, h = (tokens.shape[0] if tokens.ndim == 2 else 1), model.n_heads
    chunk = rows_per_chunk(tokens.device, 3 * 4 * b * h * n, request.chunk_bytes)
    parts: dict[str, list] = {name: [] for name in names}

    def read(pattern, hook):
        parts[hook.name].append(request.of_pattern(pattern, current_query_rows(), n, n))
        if hook.name == names[-1]:
            raise StopForward(hook.name)

    for start in range(0, every.numel(), chunk):
        with query_rows(every[start:start + chunk]), model.hooks(fwd_hooks=[(name, read) for name in names]):
            try:
                model(tokens)
            except StopForward:
                pass
    for name in names:
        request.results[name] = {s: torch.cat([p[s] for p in parts[name]], 2).cpu() for s in parts[name][0]}
