"""The results folders the viewer reads: one ``poslens analyze`` run of ``head-profiles``, ``along-context``,
``sink-rate`` or ``attention-window`` (its ``NAME.csv`` and ``NAME.provenance.json``), checked before any model loads.

Each gives the grid per-head numbers copied from its CSV (``CSV_STATS``), so the grid's value of a head is the CSV's:

- ``head-profiles``: ``first_token_mass``, ``previous_token_mass``, ``local_mass`` as written;
- ``sink-rate``: ``alpha_1``, ``first_token_mass``, ``sink_share`` of the ``text`` input at its longest length (the
  first start token);
- ``attention-window``: the ``reach`` rows' ``sink_mass``, ``mass_beyond_window``, ``mean_distance``;
- ``along-context``: its statistics averaged over its position buckets weighted by the rows each holds (``tokens``):
  the mean over every row the run read, as the bucket means are over rows; its per-bucket curves are also shown beside
  the head's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

VIEWED = ("head-profiles", "along-context", "sink-rate", "attention-window")
CSV_STATS = {
    "head-profiles": ("first_token_mass", "previous_token_mass", "local_mass"),
    "sink-rate": ("alpha_1", "first_token_mass", "sink_share"),
    "attention-window": ("sink_mass", "mass_beyond_window", "mean_distance"),
    "along-context": ("first_mass", "previous_mass", "distance_mean", "entropy"),
}


class ResultsError(ValueError):
    """A folder the viewer cannot read: said before anything loads."""


@dataclass
class Results:
    folder: Path
    analysis: str
    provenance: dict
    table: object  # pandas DataFrame
    models: list[str] = field(default_factory=list)

    def grid(self, model: str) -> dict:
        """``{column: [[value per head] per layer]}`` for ``model`` (a name in the CSV's ``model`` column)."""
        import numpy as np

        df = self.table[self.table["model"] == model]
        if self.analysis == "sink-rate":
            text = df[df["input"] == "text"] if (df["input"] == "text").any() else df
            text = text[text["length"] == text["length"].max()]
            df = text[text["start_token"] == text["start_token"].iloc[0]] if len(text) else text
        elif self.analysis == "attention-window":
            df = df[df["part"] == "reach"]
        if df.empty:
            return {}
        n_layers, n_heads = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
        out = {}
        for col in CSV_STATS[self.analysis]:
            if col not in df:
                continue
            grid = np.full((n_layers, n_heads), np.nan)
            if self.analysis == "along-context":
                g = df.dropna(subset=[col])
                w = g[col] * g["tokens"]
                agg = w.groupby([g["layer"], g["head"]]).sum() / g["tokens"].groupby([g["layer"], g["head"]]).sum()
                for (l, h), v in agg.items():
                    grid[int(l), int(h)] = v
            else:
                for l, h, v in zip(df["layer"], df["head"], df[col]):
                    grid[int(l), int(h)] = v
            out[col] = grid
        return out

    def curves(self, model: str) -> dict | None:
        """along-context only: ``{"x": bucket centres, stat: [layer][head][bucket]}``."""
        if self.analysis != "along-context":
            return None
        import numpy as np

        df = self.table[self.table["model"] == model]
        if df.empty:
            return None
        x = sorted(df["bucket_centre"].unique())
        index = {c: i for i, c in enumerate(x)}
        n_layers, n_heads = int(df["layer"].max()) + 1, int(df["head"].max()) + 1
        out = {"x": [float(c) for c in x]}
        for col in CSV_STATS["along-context"]:
            a = np.full((n_layers, n_heads, len(x)), np.nan)
            for l, h, c, v in zip(df["layer"], df["head"], df["bucket_centre"], df[col]):
                a[int(l), int(h), index[c]] = v
            out[col] = a
        return out


def read_results(folder) -> Results:
    """The one viewable analysis run in ``folder``; a clear error for anything else."""
    import pandas as pd

    folder = Path(folder)
    if not folder.is_dir():
        raise ResultsError(f"--results {folder}: no such folder")
    found = sorted(folder.glob("*.provenance.json"))
    if not found:
        raise ResultsError(f"--results {folder}: no poslens results here (no NAME.provenance.json); give the --out "
                           f"folder of a `poslens analyze` run of {', '.join(VIEWED)}")
    names = {}
    for p in found:
        try:
            names[p] = json.loads(p.read_text(encoding="utf-8")).get("analysis")
        except (OSError, json.JSONDecodeError) as err:
            raise ResultsError(f"--results {folder}: {p.name} is not readable JSON ({err})") from None
    ours = [p for p, a in names.items() if a in VIEWED]
    if not ours:
        raise ResultsError(f"--results {folder}: holds results of {', '.join(sorted(set(map(str, names.values()))))}; "
                           f"the viewer reads {', '.join(VIEWED)}")
    if len(ours) > 1:
        raise ResultsError(f"--results {folder}: holds results of {len(ours)} viewable runs "
                           f"({', '.join(names[p] for p in ours)}); give one run's folder")
    prov_path = ours[0]
    analysis = names[prov_path]
    csv = folder / f"{analysis}.csv"
    if not csv.is_file():
        raise ResultsError(f"--results {folder}: {prov_path.name} names {analysis}, but {csv.name} is missing")
    provenance = json.loads(prov_path.read_text(encoding="utf-8"))
    table = pd.read_csv(csv)
    missing = [c for c in ("model", "layer", "head") if c not in table]
    if missing:
        raise ResultsError(f"--results {folder}: {csv.name} has no column {', '.join(missing)}")
    models = [m.get("name") for m in provenance.get("models", []) if m.get("name")]
    return Results(folder, analysis, provenance, table, models or list(dict.fromkeys(table["model"])))
