"""Progress bars for the long loops of analyses and probes: shown on a terminal, silent in pipes, logs and CI.

``progress(iterable, desc)`` counts a loop; ``layers(model, desc, passes)`` counts a forward pass layer by layer
(a tick as each block's ``hook_resid_post`` fires), for passes long enough that a single one takes minutes.
"""

from __future__ import annotations

import contextlib


def progress(iterable, desc: str, total: int | None = None):
    from tqdm.auto import tqdm  # imported here: analysis modules stay light to import (the CLI reads them)

    return tqdm(iterable, desc=desc, total=total, leave=False, disable=None, dynamic_ncols=True)


@contextlib.contextmanager
def layers(model, desc: str, passes: int = 1, enabled: bool = True):
    """A bar of ``passes x model.n_layers`` ticks, one as each layer finishes, for the ``with`` block's forward passes.
    Yields the bar (None when not ``enabled``); the hooks it adds are plain torch hooks, apart from
    ``model.hooks()``."""
    if not enabled:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(desc=desc, total=passes * model.n_layers, leave=False, disable=None, dynamic_ncols=True, unit="layer")
    points = [model.hook_dict[n] for n in (f"blocks.{layer}.hook_resid_post" for layer in range(model.n_layers))
              if n in model.hook_dict]
    handles = [p.register_forward_hook(lambda *_: bar.update(1)) for p in points]
    try:
        yield bar
    finally:
        for h in handles:
            h.remove()
        bar.close()
