"""Whether two report folders hold the same results: every CSV of the first (``*.csv``, units files included) against
the file of the same name in the second, the same columns in the same order and the same rows, float columns within a
rounding tolerance (``--rtol``, ``--atol``), every other column exactly. For checking that a change made a step faster
and nothing else.

``python -m bench.compare_csvs BEFORE AFTER [--only a,b] [--rtol 1e-5] [--atol 1e-8]``: one line per differing file,
exit status 1 when any differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def differences(before, after, *, rtol: float = 1e-5, atol: float = 1e-8) -> list[str]:
    """What differs between two tables (empty when they agree)."""
    import numpy as np

    if list(before.columns) != list(after.columns):
        return [f"columns {list(before.columns)} != {list(after.columns)}"]
    if len(before) != len(after):
        return [f"{len(before)} rows != {len(after)} rows"]
    out = []
    for col in before.columns:
        a, b = before[col], after[col]
        if a.dtype.kind == "f" and b.dtype.kind in "fi" or a.dtype.kind == "i" and b.dtype.kind == "f":
            x, y = a.to_numpy(float), b.to_numpy(float)
            bad = ~(np.isclose(x, y, rtol=rtol, atol=atol) | (np.isnan(x) & np.isnan(y)))
        else:
            bad = ~((a == b) | (a.isna() & b.isna())).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            first = f"row {i}, {_plain(a.iloc[i])!r} != {_plain(b.iloc[i])!r}"
            out.append(f"column {col}: {int(bad.sum())} rows differ (first: {first})")
    return out


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def compare(before: Path, after: Path, only: list[str] | None = None, **tolerance) -> dict[str, list[str]]:
    """Each CSV of ``before`` (or of the steps ``only``) that differs in ``after``, with what differs."""
    import pandas as pd

    found = {}
    for path in sorted(before.glob("*.csv")):
        if only and path.name.split(".")[0] not in only:
            continue
        other = after / path.name
        if not other.is_file():
            found[path.name] = [f"missing from {after}"]
            continue
        diff = differences(pd.read_csv(path), pd.read_csv(other), **tolerance)
        if diff:
            found[path.name] = diff
    return found


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--only", default=None, help="comma-separated steps (default: every CSV of BEFORE)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-8)
    a = p.parse_args()
    for folder in (a.before, a.after):
        if not folder.is_dir():
            sys.exit(f"{folder}: not a folder")
    found = compare(a.before, a.after, a.only.split(",") if a.only else None, rtol=a.rtol, atol=a.atol)
    for name, diff in found.items():
        print(f"{name}: " + "; ".join(diff))
    print(f"{len(found)} CSV(s) differ" if found else "the CSVs agree")
    sys.exit(1 if found else 0)
