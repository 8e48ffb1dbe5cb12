"""The table of attention backends. ``interp.attention.dispatch`` runs a call through the first entry that serves it;
a backend (``base.Backend``) declares the whole condition it serves (``conditions``), so the order only breaks ties
(a call two backends serve goes to the earlier, faster one). A new backend is one entry (``register``). The private
torch APIs they call, each with its fallback, live in ``private``.

| entry | serves | module |
|---|---|---|
| ``key_window`` | key windows, no hooks, no statistics: chunks of rows on their window's keys | ``key_window`` |
| ``materialised`` | a hooked point (``call.rows`` only): statistics of the edited rows | ``materialised`` |
| ``statistics_cpu_flash`` | statistics, no hooks, each read off the CPU flash log-sum-exp and a band | ``cpu_flash`` |
| ``statistics_cuda`` | the same on CUDA's flash / memory-efficient kernels | ``cuda`` |
| ``chunked`` | statistics, no hooks: chunks of rows' float32 patterns | ``chunked`` |
| ``sdpa`` | no hooks, no statistics: the fused kernel, or the softmax of given scores | ``sdpa`` |
"""

from __future__ import annotations

from interp.attention.backends import chunked, cpu_flash, cuda, key_window, materialised, sdpa

BACKENDS = {b.name: b for b in (key_window.BACKEND, materialised.BACKEND, cpu_flash.BACKEND, cuda.BACKEND,
                                chunked.BACKEND, sdpa.BACKEND)}


def register(backend, *, before: str = "chunked") -> None:
    """Add ``backend`` to the table, tried just before the entry ``before``."""
    items = [(n, b) for n, b in BACKENDS.items() if n != backend.name]
    at = next(i for i, (n, _) in enumerate(items) if n == before)
    items.insert(at, (backend.name, backend))
    BACKENDS.clear()
    BACKENDS.update(items)
