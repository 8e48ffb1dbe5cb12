"""Every per-row attention statistic, declared once: its name, its meaning, its float64 reference (the definition the
tests and ``bench.exactness`` check against), its reduction of pattern rows (the chunked and hooked backends) and, where
it has one, how the log-sum-exp backends serve it without a pattern row: the keys that hold its mass (``band``: the
first keys and those within a reach of the query) or value columns of a kernel call (``columns``: the statistic is the
expectation of a per-key column under the pattern row). A new statistic is one ``Statistic`` in ``STATISTICS``.

Every reduction is over float32 (or float64) probabilities, whatever the model's dtype; the band masses are summed in
float64."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

FIRST_GATHERED = 256  # first_mass of at most this many keys is read from the band block; more: indicator columns


@dataclass
class Rows:
    """Pattern rows ``p [batch, head, r, keys]`` of query positions ``q_abs [r]`` (absolute, the cache offset added)
    over key positions ``keys [keys]``, or ``[r, keys]`` per row (every other key holds no mass for these statistics;
    -1: no key); ``k0``: the keys are ``k0, k0 + 1, ...`` (a contiguous block: gathers instead of masks)."""

    p: Tensor
    q_abs: Tensor
    keys: Tensor
    k0: int | None = None
    memo: dict = field(default_factory=dict)  # what several statistics share (distances, their mean, the top key)

    def shared(self, key: str, make: Callable[[], Tensor]):
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    @property
    def per_row(self) -> Tensor:
        return self.keys if self.keys.ndim == 2 else self.keys[None, :]

    @property
    def distance(self) -> Tensor:
        return self.shared("distance", lambda: (self.q_abs[:, None] - self.per_row).abs())

    @property
    def top(self):
        return self.shared("top", lambda: self.p.max(-1))

    def at(self, key: Tensor) -> Tensor:
        """Mass on one key per row (``key [r]``, absolute; outside the keys or negative: 0)."""
        if self.k0 is None:
            return (self.p * (self.per_row == key[:, None])).sum(-1)
        n = self.p.shape[-1]
        inside = (key >= self.k0) & (key < self.k0 + n)
        idx = (key - self.k0).clamp(0, n - 1).view(1, 1, -1, 1).expand(*self.p.shape[:-1], 1)
        return self.p.gather(-1, idx)[..., 0].masked_fill(~inside.view(1, 1, -1), 0.0)

    def near(self, w: int) -> Tensor:
        """Mass on keys within distance ``w``: the band gathered when it is narrow (no pass over every key)."""
        n = self.p.shape[-1]
        if self.k0 is None or 4 * (2 * w + 1) >= n:
            return (self.p * (self.distance <= w)).sum(-1)
        key = self.q_abs[:, None] + torch.arange(-w, w + 1, device=self.p.device)[None, :]
        inside = (key >= self.k0) & (key < self.k0 + n)
        idx = (key - self.k0).clamp(0, n - 1).view(1, 1, *key.shape).expand(*self.p.shape[:-1], key.shape[-1])
        return (self.p.gather(-1, idx) * inside).sum(-1)

    def before(self, f: int) -> Tensor:
        """Mass on the keys before position ``f``."""
        if self.k0 is not None:
            return self.p[..., :max(0, f - self.k0)].sum(-1)
        return (self.p * (self.keys < f)).sum(-1)


def part_indicators(key_parts: Tensor, n_parts: int, dtype=torch.float32) -> Tensor:
    """``[k_pos, n_parts]`` one-hot rows; a key labelled outside 0..n_parts-1 belongs to no part."""
    valid = (key_parts >= 0) & (key_parts < n_parts)
    return F.one_hot(torch.where(valid, key_parts, n_parts), n_parts + 1)[:, :n_parts].to(dtype)


@dataclass(frozen=True)
class Statistic:
    """One per-row statistic. ``reduce(rows, options)`` from pattern rows; ``reference(p, q_abs, options)`` the float64
    definition from full pattern rows ``p [..., q, k]`` of query positions ``q_abs``; ``band(options)`` ``(first keys,
    reach)`` holding its whole mass where exact from ``exp(s - L)`` on those keys (reach -1: none), else None;
    ``columns(options, n_k)`` ``[n_k, c]`` per-key values whose expectation it is, else None. ``options``: the
    statistics request (``first``, ``windows``, ``key_parts``, ``n_parts``)."""

    name: str
    meaning: str
    reduce: Callable
    reference: Callable
    band: Callable | None = None
    columns: Callable | None = None
    needs: tuple[str, ...] = ()  # request options it cannot do without (checked before any work)

    def lse_served(self, options) -> bool:
        return ((self.band is not None and self.band(options) is not None)
                or (self.columns is not None and self.columns(options, 1) is not None))


def _distance64(p: Tensor, q_abs: Tensor) -> Tensor:
    return (q_abs[:, None] - torch.arange(p.shape[-1])[None]).abs().double()


def _entropy(rows: Rows) -> Tensor:
    return torch.special.entr(rows.p).sum(-1)


def _distance_mean(rows: Rows) -> Tensor:
    return rows.shared("distance_mean", lambda: (rows.p * rows.distance.to(rows.p.dtype)).sum(-1))


def _distance_std(rows: Rows) -> Tensor:
    d = rows.distance.to(rows.p.dtype)
    mean = _distance_mean(rows)
    return (rows.p * (d - mean[..., None]).square_()).sum(-1).clamp_(min=0).sqrt_()


def _top_key(rows: Rows) -> Tensor:
    return rows.top.indices + rows.k0 if rows.k0 is not None else rows.keys[rows.top.indices]


def _first_columns(o, n_k: int):
    if max(o.first) <= FIRST_GATHERED:
        return None
    key = torch.arange(n_k)
    return torch.stack([key < f for f in o.first], -1).float()


def _first_band(o):
    return (max(o.first), -1) if max(o.first) <= FIRST_GATHERED else None


def _previous_reference(p: Tensor, q_abs: Tensor, o) -> Tensor:
    q = torch.arange(p.shape[-2])
    return torch.where(q_abs > 0, p[..., q, (q_abs - 1).clamp(min=0, max=p.shape[-1] - 1)], 0.0)


def _span_reference(p: Tensor, q_abs: Tensor, o) -> Tensor:
    parts = o.key_parts
    return torch.stack([p[..., parts == j].sum(-1) for j in range(o.n_parts)], -1)


def _std_reference(p: Tensor, q_abs: Tensor, o) -> Tensor:
    d = _distance64(p, q_abs)
    mean = (p * d).sum(-1)
    return ((p * d * d).sum(-1) - mean ** 2).clamp(min=0).sqrt()


_DECLARED = [
    Statistic("first_mass", "mass on the first k keys, one column per k of ``first``",
              reduce=lambda r, o: torch.stack([r.before(f) for f in o.first], -1),
              reference=lambda p, q_abs, o: torch.stack([p[..., :f].sum(-1) for f in o.first], -1),
              band=_first_band, columns=_first_columns),
    Statistic("self_mass", "mass on the query's own key",
              reduce=lambda r, o: r.at(r.q_abs),
              reference=lambda p, q_abs, o: p[..., torch.arange(p.shape[-2]), q_abs.clamp(max=p.shape[-1] - 1)],
              band=lambda o: (0, 0)),
    Statistic("previous_mass", "mass on key q - 1 (0 at position 0)",
              reduce=lambda r, o: r.at(torch.where(r.q_abs > 0, r.q_abs - 1, -1)),
              reference=_previous_reference, band=lambda o: (0, 1)),
    Statistic("window_mass", "mass on keys with |q - k| <= w, the query's own key included, one column per w of "
              "``windows``",
              reduce=lambda r, o: torch.stack([r.near(w) for w in o.windows], -1),
              reference=lambda p, q_abs, o: torch.stack([(p * (_distance64(p, q_abs) <= w)).sum(-1)
                                                         for w in o.windows], -1),
              band=lambda o: (0, max(o.windows)), needs=("windows",)),
    Statistic("far_mass", "mass on keys with |q - k| > w, one column per w of ``windows`` (0 exactly where the pattern "
              "is; ``1 - window_mass`` would miss by the float32 rounding of the sum)",
              reduce=lambda r, o: torch.stack([(r.p * (r.distance > w)).sum(-1) for w in o.windows], -1),
              reference=lambda p, q_abs, o: torch.stack([(p * (_distance64(p, q_abs) > w)).sum(-1)
                                                         for w in o.windows], -1),
              needs=("windows",)),
    Statistic("span_mass", "mass on each labelled part of the keys, one column per part",
              reduce=lambda r, o: r.p @ part_indicators(o.key_parts.to(r.p.device)[r.keys], o.n_parts, r.p.dtype),
              reference=_span_reference,
              columns=lambda o, n_k: part_indicators(o.key_parts[:n_k], o.n_parts), needs=("key_parts", "n_parts")),
    Statistic("distance_mean", "attended distance |q - k| (positions), its mean under the pattern row",
              reduce=lambda r, o: _distance_mean(r),
              reference=lambda p, q_abs, o: (p * _distance64(p, q_abs)).sum(-1)),
    Statistic("distance_std", "its standard deviation under the pattern row",
              reduce=lambda r, o: _distance_std(r), reference=_std_reference),
    Statistic("entropy", "entropy of the pattern row (nats)",
              reduce=lambda r, o: _entropy(r),
              reference=lambda p, q_abs, o: -torch.where(p > 0, p * p.log(), 0.0).sum(-1)),
    Statistic("top_key", "the most attended key (its position)",
              reduce=lambda r, o: _top_key(r), reference=lambda p, q_abs, o: p.argmax(-1)),
    Statistic("top_mass", "the weight of that key",
              reduce=lambda r, o: r.top.values, reference=lambda p, q_abs, o: p.max(-1).values),
]
DECLARED: dict[str, Statistic] = {s.name: s for s in _DECLARED}
STATISTICS: dict[str, str] = {s.name: s.meaning for s in _DECLARED}  # name -> meaning (the public table)


def reference(name: str, pattern: Tensor, options, offset: int = 0) -> Tensor:
    """The float64 definition of statistic ``name`` from full pattern rows ``[..., q, k]`` (queries the last of the
    keys by ``offset``)."""
    p = pattern.double()
    q_abs = torch.arange(p.shape[-2]) + offset
    return DECLARED[name].reference(p, q_abs, options)


def reduce(wanted, rows: Rows, options) -> dict[str, Tensor]:
    """The statistics ``wanted`` of pattern rows (float32 at least)."""
    if rows.p.dtype not in (torch.float32, torch.float64):
        rows = Rows(rows.p.float(), rows.q_abs, rows.keys, rows.k0)
    return {name: DECLARED[name].reduce(rows, options) for name in wanted}
