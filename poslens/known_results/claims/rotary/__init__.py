"""Rotary bands (Barbero et al., ICLR 2025, Round and Round We Go): rows that read ``rope-frequencies``, and its
per-context values."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.types import Results


def contexts(r: Results, measure: str = "q_norm", length: int | None = None) -> str:
    """The contexts the kept run read (its per-context values; else its CSV's ``n_docs``), per model where they
    differ."""
    from poslens.known_results.models import PRETRAINED
    from poslens.known_results.types import per_model

    units, out = r.units("rope-frequencies"), {}
    for m in PRETRAINED:
        u = None if units is None else units[(units["model"] == m) & (units["measure"] == measure)]
        if u is not None and length is not None and "length" in u:
            u = u[u["length"] == length]
        out[m] = (int(u["unit"].nunique()) if u is not None and len(u)
                  else int(r.model("rope-frequencies", m)["n_docs"].iloc[0]))
    return per_model(out)


def window(r: Results, part: str = "bands") -> str:
    """The tokens per context of ``part`` (its CSV's ``length``), per model where they differ."""
    from poslens.known_results.models import PRETRAINED
    from poslens.known_results.types import per_model

    return per_model({m: int(r.model("rope-frequencies", m, part=part)["length"].iloc[0]) for m in PRETRAINED})


def per_context(r: Results, m: str, measure: str, length: int) -> pd.DataFrame | None:
    """``[context, condition]`` values of one rope-frequencies measure at one length; None where the run kept no
    per-context values."""
    units = r.units("rope-frequencies")
    if units is None:
        return None
    u = units[(units["model"] == m) & (units["measure"] == measure) & (units["length"] == length)]
    return None if u.empty else u.pivot_table(index="unit", columns="condition", values="value")
