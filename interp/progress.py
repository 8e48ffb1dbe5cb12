"""Progress bars for the long loops of analyses and probes: shown on a terminal, silent in pipes, logs and CI."""


def progress(iterable, desc: str, total: int | None = None):
    from tqdm.auto import tqdm  # imported here: analysis modules stay light to import (the CLI reads them)

    return tqdm(iterable, desc=desc, total=total, leave=False, disable=None, dynamic_ncols=True)
