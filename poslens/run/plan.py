"""One run of one analysis, planned before any work starts.

    parse (the command line, or Python's keywords) -> plan: every check that needs no model, once -> execute: load,
    bind each model (its own checks), check its memory, run -> write: NAME.csv, NAME.units.csv, figure, provenance

``plan`` checks the analysis' options once per distinct set (``Analysis.check_options``: unknown keywords, values,
values that contradict each other), the dtype, the figure formats, the output folder, and, for a model whose config can
be read without its weights, whether the run fits in memory. What it returns is frozen: ``poslens.run.execute`` only
carries it out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

import figures
from analyses import get
from analyses.registry import Analysis
from interp.runtime import memory, parallel

OUTPUT_SUFFIXES = (".csv", ".units.csv", ".html", ".png", ".pdf", ".svg", ".provenance.json")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # --dtype's choices


def model_dtype(value) -> torch.dtype | None:
    """``dtype=`` / ``--dtype``: None (the models as they load: float32), a name of ``DTYPES`` (``"torch."`` allowed
    before it) or one of their torch dtypes; anything else is a ``ValueError`` naming them."""
    if value is None or (isinstance(value, torch.dtype) and value in DTYPES.values()):
        return value
    if isinstance(value, str) and value.removeprefix("torch.") in DTYPES:
        return DTYPES[value.removeprefix("torch.")]
    raise ValueError(f"dtype {value!r}: expected one of {', '.join(DTYPES)}")


def existing_outputs(out_dir: Path, name: str) -> list[Path]:
    return [out_dir / f"{name}{s}" for s in OUTPUT_SUFFIXES if (out_dir / f"{name}{s}").exists()]


@dataclass(frozen=True)
class Plan:
    """What one run will do, checked: the analysis, each model as given with its own options, and where and how."""

    analysis: Analysis
    models: tuple  # names, paths or loaded models, as given
    options: tuple[dict, ...]  # each model's options (checked; every model's own over the common ones)
    out_dir: Path
    seed: int
    dtype: torch.dtype | None
    device: str | None
    formats: tuple[str, ...]
    replaces: tuple[Path, ...]  # earlier outputs of this analysis in out_dir, replaced at the end (--force)
    tokenizer: object = None
    cli: bool = False  # options are named by their flags in errors

    @property
    def name(self) -> str:
        return self.analysis.name

    def label(self, opt) -> str:
        return opt.flag if self.cli else opt.name

    def model_names(self) -> list[str]:
        return [m if isinstance(m, str) else str(m) if isinstance(m, os.PathLike) else getattr(m, "model_name", "")
                for m in self.models]


def plan(name: str, models, out_dir, *, options: dict | None = None, per_model: dict | None = None, seed: int = 0,
         force: bool = False, formats=None, device=None, dtype=None, tokenizer=None, cli: bool = False) -> Plan:
    """The run of ``name`` on ``models`` into ``out_dir``, every check that needs no model done (see the module)."""
    analysis = get(name)
    dtype = model_dtype(dtype)
    formats = tuple(figures.resolve_formats(formats))
    if not models:
        raise ValueError("no model given (use --model NAME_OR_PATH; `poslens models` lists names)")
    out_dir = Path(out_dir)
    clash = existing_outputs(out_dir, name)
    if clash and not force and parallel.writes_outputs():
        raise FileExistsError(f"{out_dir} already holds results of '{name}' ({', '.join(p.name for p in clash)}); "
                              "pass --force to overwrite them")
    common = dict(options or {}) | ({"seed": seed} if analysis.seeded else {})
    p = Plan(analysis, tuple(models), (), out_dir, seed, dtype, parallel.device_for(device), formats, tuple(clash),
             tokenizer, cli)
    each = tuple({**common, **(per_model or {}).get(given, {})} for given in p.model_names())
    for these in {repr(sorted(o.items(), key=str)): o for o in each}.values():  # each distinct set of options, once
        analysis.check_options(these, label=p.label)
    for given, these in zip(models, each):  # before any weights load, where the config can be read alone
        config = memory.config_before_load(given)
        run = analysis.workload(these, config.get("max_position_embeddings")) if config else None
        if run is not None:
            memory.check_run(run, config={**config, "torch_dtype": str(dtype or torch.float32).removeprefix("torch.")},
                             device=p.device, what=f"{name} on {given}")
    return replace(p, options=each)
