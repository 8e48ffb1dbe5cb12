"""Every chunk size of ``interp.attention`` in one place: a chunk takes at most ``chunk_budget`` bytes (on CUDA a share
of the device's free memory, capped; on the CPU a fixed budget), and ``rows_per_chunk`` turns that into the query rows
of one chunk from what a row takes: the statistics' chunks of pattern rows, the band and distance-column blocks, the
plain log-sum-exp fallback, soft-capped logits, the fused calls under a mask and the key-window attention."""

from __future__ import annotations

import torch

CHUNK_BYTES = 64 << 20  # CPU: scores of one chunk of query rows (x3 for the temporaries of the statistics)
CUDA_CHUNK_SHARE = 4  # CUDA: a chunk takes at most a quarter of the device's free memory ...
CUDA_CHUNK_MAX = 1 << 30  # ... and at most 1 GiB (issue 38's memory target: the forward's peak + 1 GiB)
MASK_ROWS = 1024  # at most this many query rows in one fused call where a mask hides stretches of keys from them
CHUNK_ROWS = 1024  # at most this many query rows of soft-capped logits in one chunk
WINDOW_SHARE = 4  # a key-window chunk's scores take a quarter of the budget (16 MiB on the CPU)


def chunk_budget(device, given: int | None = None) -> int:
    """Bytes of scores (and their temporaries) one chunk of rows may take: ``given`` when set; on CUDA a share of the
    free memory, at most ``CUDA_CHUNK_MAX`` (a 64 MiB chunk is 5-20 rows of a long context there: tens of thousands of
    tiny kernels); on the CPU ``CHUNK_BYTES``."""
    if given is not None:
        return given
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(max(CHUNK_BYTES, min(free // CUDA_CHUNK_SHARE, CUDA_CHUNK_MAX)))
    return CHUNK_BYTES


def rows_per_chunk(device, bytes_per_row: int, given: int | None = None, most: int | None = None) -> int:
    """The query rows one chunk holds at ``bytes_per_row`` within ``chunk_budget(device, given)``: at least one, at
    most ``most``."""
    rows = max(1, chunk_budget(device, given) // max(1, bytes_per_row))
    return rows if most is None else min(rows, most)
