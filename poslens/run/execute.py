"""Carry out a run's plan (``poslens.run.plan``): load the models, bind each one's options (its own checks), check its
memory, run the analysis on each, and write ``NAME.csv``, ``NAME.units.csv`` (where the analysis keeps unit-level
values), its figure and ``NAME.provenance.json`` all at once, under a lock (``poslens.run.outputs``)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import figures
from analyses.nan_policy import check_table, nan_columns
from analyses.units import Tables, concat
from corpora.niah import NeedleTooLong
from interp.runtime import memory, parallel
from interp.runtime.progress import stage
from poslens.run.outputs import active, under_lock
from poslens.run.plan import DTYPES, Plan, model_dtype, plan
from poslens.run.provenance import jsonable, provenance

__all__ = ["DTYPES", "Result", "model_dtype", "resolve_models", "run_analysis", "execute", "sharing_models"]

_SHARED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("poslens_shared_models", default=None)


@dataclass
class Result:
    name: str
    table: pd.DataFrame
    files: list[Path]
    figure_height: int | None = None  # the figure's own layout height, for the report
    units: pd.DataFrame | None = None  # the unit-level values (``NAME.units.csv``), where the analysis keeps them


def resolve_models(models, device=None, tokenizer=None, dtype=None) -> list:
    """Load names and paths (models already built pass through); ``device`` moves every one there and ``dtype``
    (``model_dtype``) casts its floating-point weights, names and paths as they load (a Hugging Face checkpoint is
    read in that dtype, never whole in float32 first), built models in place. ``tokenizer`` (a directory or a model
    holding one, or a tokenizer) is read first and given to every model loaded without one."""
    from interp.loading import attach_tokenizer, load, load_tokenizer

    if not models:
        raise ValueError("no model given (use --model NAME_OR_PATH; `poslens models` lists names)")
    dtype = model_dtype(dtype)
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer)
    loaded, shared = [], _SHARED.get()
    for m in models:
        if hasattr(m, "hook_dict"):
            loaded.append(m.to(dtype) if dtype is not None else m)
            continue
        if shared is not None and (str(m), dtype) in shared:
            loaded.append(shared[str(m), dtype])
            continue
        with stage(f"loading {m}"):
            loaded.append(load(m, dtype=dtype))
        if shared is not None:
            shared[str(m), dtype] = loaded[-1]
    for model in loaded:
        if tokenizer is not None and getattr(model, "tokenizer", None) is None:
            attach_tokenizer(model, tokenizer)
    return [m.to(device) for m in loaded] if device is not None else loaded


@contextlib.contextmanager
def sharing_models():
    """Inside the block a model given by name or path is loaded once (per dtype) and given again to the runs after
    (the main job loads SmolLM2 and MiniLM for three steps each). Yields the ``{(name, dtype): model}`` it keeps, for
    the caller to drop a model no later run needs. No analysis changes a model it is given (hooks it adds are removed
    when it ends), and each run seeds torch after its models load, so a run gives what it gives on a fresh load."""
    token = _SHARED.set({})
    try:
        yield _SHARED.get()
    finally:
        _SHARED.reset(token)


@under_lock
def run_analysis(name: str, models, out_dir, *, options: dict | None = None, seed: int = 0, force: bool = False,
                 formats=None, per_model: dict | None = None, device=None, dtype=None, tokenizer=None,
                 cli: bool = False) -> Result:
    """Run ``name`` on each model, concatenate the tables, write CSV(s), figure and provenance: ``execute(plan(...))``.

    ``per_model`` maps a model name to options that replace ``options`` for that model only; ``formats`` are
    the figure's (``figures.save``; default HTML plus PDF and PNG where a browser is found). ``dtype``
    (``"float32"``, ``"bfloat16"``, ``"float16"`` or the torch dtype; default: as loaded, float32) is the precision
    every model runs in, recorded in provenance (``dtype``, and each model's own). The options are checked once, before
    any model loads (``poslens.run.plan``), and every model's are bound before the first one runs; provenance records
    the values used, and user documents by their input file's path, size and sha256 (or a hash of texts given in
    Python). ``tokenizer`` (a directory or model holding one) is given to models loaded without one. ``cli`` names
    options by their flags in errors.

    The whole call holds the lock ``out_dir/.NAME.lock`` (a concurrent run into the same folder is refused);
    every file is written aside and renamed into place only once all succeeded, so a failed run changes nothing.
    """
    return execute(plan(name, models, out_dir, options=options, per_model=per_model, seed=seed, force=force,
                        formats=formats, device=device, dtype=dtype, tokenizer=tokenizer, cli=cli))


def execute(p: Plan) -> Result:
    """Load, bind, check memory, run, write (inside ``run_analysis``' lock)."""
    loaded = resolve_models(p.models, p.device, p.tokenizer, p.dtype)
    torch.manual_seed(p.seed)
    np.random.seed(p.seed)
    bound = [p.analysis.bind_checked(model, these, label=p.label) for model, these in zip(loaded, p.options)]
    for model, these in zip(loaded, bound):  # loaded: before any of them runs
        run = p.analysis.workload(these, int(model.max_seq_len))
        if run is not None:
            memory.check_run(run, model=model, device=model.device, what=f"{p.name} on {model.model_name}")
    results = []
    for model, these in zip(loaded, bound):
        try:
            with stage(f"{p.name} on {model.model_name}"):
                results.append(parallel.call(p.analysis.run_bound, model, these))
        except NeedleTooLong as err:
            raise _needle_option(err, p.analysis, these, model, p.label) from None
    tables = concat(results)
    if not parallel.writes_outputs():  # torchrun ranks > 0 and --shard I/N processes write nothing
        return Result(p.name, tables.table, [], units=tables.units)
    return _write(p, loaded, bound, tables)


def _write(p: Plan, loaded: list, bound: list[dict], tables: Tables) -> Result:
    name, table = p.name, tables.table
    check_table(table, name, nan_columns(p.analysis.function))  # NaN / inf only where the analysis gives it a meaning
    staged = active().staging
    csv = staged / f"{name}.csv"
    table.to_csv(csv, index=False)
    files = [csv]
    if tables.units is not None and len(tables.units):
        files.append(staged / f"{name}.units.csv")
        tables.units.to_csv(files[-1], index=False)
    fig = figures.render(name, table, units=tables.units)
    files += figures.save(fig, staged / name, formats=p.formats)
    arguments = _arguments(p.analysis, bound[0])
    differ = {m.model_name: _arguments(p.analysis, o) for m, o in zip(loaded, bound) if o != bound[0]}
    if differ:
        arguments["per_model"] = differ
    record = provenance(name, loaded, arguments, p.seed, [f.name for f in files])
    record["dtype"] = str(p.dtype).removeprefix("torch.") if p.dtype is not None else None  # asked for; None: as loaded
    if parallel.describe():
        record["parallel"] = parallel.describe()
    prov = staged / f"{name}.provenance.json"
    prov.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Result(name, table, active().commit(files + [prov], replaces=list(p.replaces)), fig.layout.height,
                  tables.units)


def _needle_option(err, analysis, bound: dict, model, label) -> Exception:
    """NIAH prompts too short for the needle, as an error naming the option that set their length."""
    from analyses.registry import OptionError

    hits = [o for o in analysis.options if isinstance(bound.get(o.name), int) and bound[o.name] == err.context_tokens
            or isinstance(bound.get(o.name), tuple) and err.context_tokens in bound[o.name]]
    hits.sort(key=lambda o: ("niah" not in o.name, "length" not in o.name))
    if not hits:
        return err
    return OptionError(f"{label(hits[0])} {err.context_tokens}: NIAH prompts of {err.context_tokens} tokens cannot "
                       f"hold the needle and the query ({err.fixed} tokens with {model.model_name}'s tokenizer); give "
                       f"{label(hits[0])} {err.fixed} or more")


def _arguments(analysis, bound: dict) -> dict:
    """What ran: every option's value, with options the user's input replaced recorded as None under
    ``not_applied`` (a default that never ran is not recorded as if it had)."""
    skipped = analysis.not_applied(bound)
    out = {k: _argument(k, v) for k, v in bound.items()} | dict.fromkeys(skipped)
    if skipped:
        out["not_applied"] = skipped
    return out


def _argument(key: str, value):
    """The user's documents are recorded by their input file's path, size and sha256, or their kind and a hash of the
    texts, token ids or prompts given in Python."""
    if value is None:
        return None
    if key == "documents":
        from corpora.user import documents_record

        return documents_record(value)
    return jsonable(value)
