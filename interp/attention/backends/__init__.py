"""The table of attention backends. ``interp.attention.call.dispatch`` runs a call through the first entry whose
``serves(call)`` holds; a backend is an object with ``name``, ``reads_windows`` (whether it applies ``key_window``
conditions itself; the others see them folded into the mask), ``serves(call) -> bool`` and ``__call__(call) ->
output``. A new backend is one entry (``register``). The private torch APIs they call, each with its fallback, live in
``private``.

| entry | serves | module |
|---|---|---|
| ``key_window`` | key windows, no hooks, no statistics: chunks of rows on their window's keys | ``key_window`` |
| ``materialised`` | hooked scores or pattern (``query_rows``' rows): statistics of the edited rows | ``materialised`` |
| ``statistics_cpu_flash`` | statistics with a ``band`` or ``columns`` on the CPU flash kernel | ``cpu_flash`` |
| ``statistics_cuda`` | the same on CUDA's flash / memory-efficient kernels | ``cuda`` |
| ``chunked`` | any statistics: chunks of rows' float32 patterns | ``chunked`` |
| ``sdpa`` | everything else: the fused kernel, or the softmax of given scores | ``sdpa`` |
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
