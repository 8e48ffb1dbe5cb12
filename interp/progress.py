"""Progress bars for the long loops of analyses and probes: shown on a terminal, silent in pipes, logs and CI."""

from tqdm.auto import tqdm


def progress(iterable, desc: str, total: int | None = None):
    return tqdm(iterable, desc=desc, total=total, leave=False, disable=None, dynamic_ncols=True)
