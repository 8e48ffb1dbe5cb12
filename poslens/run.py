"""Run one analysis on one or more models and write ``NAME.csv``, its figure and ``NAME.provenance.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import figures
from analyses import get
from interp import parallel
from poslens.provenance import provenance

OUTPUT_SUFFIXES = (".csv", ".html", ".png", ".pdf", ".provenance.json")


@dataclass
class Result:
    name: str
    table: pd.DataFrame
    files: list[Path]


def existing_outputs(out_dir: Path, name: str) -> list[Path]:
    return [out_dir / f"{name}{s}" for s in OUTPUT_SUFFIXES if (out_dir / f"{name}{s}").exists()]


def resolve_models(models, device=None) -> list:
    """Load names and paths (models already built pass through); ``device`` moves every one there."""
    from interp.loading import load

    loaded = [m if hasattr(m, "hook_dict") else load(m) for m in models]
    if not loaded:
        raise ValueError("no model given (use --model NAME_OR_PATH; `poslens models` lists names)")
    return [m.to(device) for m in loaded] if device is not None else loaded


def run_analysis(name: str, models, out_dir, *, options: dict | None = None, seed: int = 0, force: bool = False,
                 static: bool | None = None, per_model: dict | None = None, device=None) -> Result:
    """Run ``name`` on each model, concatenate the tables, write CSV, figure and provenance.

    ``per_model`` maps a model name to options that replace ``options`` for that model only.
    """
    analysis = get(name)
    out_dir = Path(out_dir)
    clash = existing_outputs(out_dir, name)
    if clash and not force and parallel.writes_outputs():
        raise FileExistsError(f"{out_dir} already holds results of '{name}' ({', '.join(p.name for p in clash)}); "
                              "pass --force to overwrite them")
    kwargs = dict(options or {})
    if analysis.seeded:
        kwargs["seed"] = seed
    names = [m if isinstance(m, str) else getattr(m, "model_name", "") for m in models]
    loaded = resolve_models(models, parallel.device_for(device))
    torch.manual_seed(seed)
    np.random.seed(seed)
    tables, used = [], {}
    for name_given, model in zip(names, loaded):
        these = {**kwargs, **(per_model or {}).get(name_given, {})}
        used[model.model_name] = these
        tables.append(parallel.call(analysis.function, model, **these))
    if not parallel.writes_outputs():  # torchrun ranks > 0 and --shard I/N processes write nothing
        return Result(name, pd.concat([t for t in tables if t is not None] or [pd.DataFrame()], ignore_index=True), [])
    table = pd.concat(tables, ignore_index=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in clash:
        stale.unlink()
    csv = out_dir / f"{name}.csv"
    table.to_csv(csv, index=False)
    module = __import__(f"figures.{analysis.figure}", fromlist=["figure"])
    files = [csv] + figures.save(module.figure(table), out_dir / name, static=static)
    arguments = {k: _jsonable(v) for k, v in kwargs.items()}
    if per_model:
        arguments["per_model"] = {m: _jsonable(o) for m, o in used.items() if o != kwargs}
    record = provenance(name, loaded, arguments, seed, [p.name for p in files])
    if parallel.describe():
        record["parallel"] = parallel.describe()
    prov = out_dir / f"{name}.provenance.json"
    prov.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Result(name, table, files + [prov])


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
