"""Run one analysis on one or more models and write ``NAME.csv``, its figure and ``NAME.provenance.json``
(all at once, under a lock: see ``poslens.run.outputs``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import figures
from analyses import get
from analyses.nan_policy import check_table, nan_columns
from corpora.niah import NeedleTooLong
from interp.runtime import memory, parallel
from interp.runtime.progress import stage
from poslens.run.outputs import active, under_lock
from poslens.run.provenance import jsonable, provenance

OUTPUT_SUFFIXES = (".csv", ".html", ".png", ".pdf", ".svg", ".provenance.json")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # --dtype's choices


def model_dtype(value) -> torch.dtype | None:
    """``run_analysis(dtype=)`` / ``--dtype``: None (the models as they load: float32), a name of ``DTYPES``
    (``"torch."`` allowed before it) or one of their torch dtypes; anything else is a ``ValueError`` naming them."""
    if value is None or (isinstance(value, torch.dtype) and value in DTYPES.values()):
        return value
    if isinstance(value, str) and value.removeprefix("torch.") in DTYPES:
        return DTYPES[value.removeprefix("torch.")]
    raise ValueError(f"dtype {value!r}: expected one of {', '.join(DTYPES)}")


@dataclass
class Result:
    name: str
    table: pd.DataFrame
    files: list[Path]
    figure_height: int | None = None  # the figure's own layout height, for the report


def existing_outputs(out_dir: Path, name: str) -> list[Path]:
    return [out_dir / f"{name}{s}" for s in OUTPUT_SUFFIXES if (out_dir / f"{name}{s}").exists()]


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
    loaded = []
    for m in models:
        if hasattr(m, "hook_dict"):
            loaded.append(m.to(dtype) if dtype is not None else m)
            continue
        with stage(f"loading {m}"):
            loaded.append(load(m, dtype=dtype))
    for model in loaded:
        if tokenizer is not None and getattr(model, "tokenizer", None) is None:
            attach_tokenizer(model, tokenizer)
    return [m.to(device) for m in loaded] if device is not None else loaded


@under_lock
def run_analysis(name: str, models, out_dir, *, options: dict | None = None, seed: int = 0, force: bool = False,
                 formats=None, per_model: dict | None = None, device=None, dtype=None, tokenizer=None,
                 cli: bool = False) -> Result:
    """Run ``name`` on each model, concatenate the tables, write CSV, figure and provenance.

    ``per_model`` maps a model name to options that replace ``options`` for that model only; ``formats`` are
    the figure's (``figures.save``; default HTML plus PDF and PNG where a browser is found). ``dtype``
    (``"float32"``, ``"bfloat16"``, ``"float16"`` or the torch dtype; default: as loaded, float32) is the precision
    every model runs in, recorded in provenance (``dtype``, and each model's own). Every model's
    options are checked and bound (``Analysis.bind``) before the first one runs, and only once (the body then runs on
    them: ``Analysis.run_bound``); provenance records the values used, and
    user documents by their input file's path, size and sha256 (or a hash of texts given in Python).
    ``tokenizer`` (a directory or model holding one) is given to models loaded without one. ``cli`` names
    options by their flags in errors.

    The whole call holds the lock ``out_dir/.NAME.lock`` (a concurrent run into the same folder is refused);
    every file is written aside and renamed into place only once all succeeded, so a failed run changes nothing.
    """
    analysis = get(name)
    dtype = model_dtype(dtype)  # before anything loads
    figures.resolve_formats(formats)
    out_dir = Path(out_dir)
    clash = existing_outputs(out_dir, name)
    if clash and not force and parallel.writes_outputs():
        raise FileExistsError(f"{out_dir} already holds results of '{name}' ({', '.join(p.name for p in clash)}); "
                              "pass --force to overwrite them")
    kwargs = dict(options or {})
    if analysis.seeded:
        kwargs["seed"] = seed
    names = [m if isinstance(m, str) else getattr(m, "model_name", "") for m in models]
    label = (lambda opt: opt.flag) if cli else None
    for given in names:  # keywords it does not take, values that contradict each other: before any model loads
        analysis.check_options({**kwargs, **(per_model or {}).get(given, {})}, label=label)
    target = parallel.device_for(device)
    for given in models:  # before any weights load, where the config can be read alone
        config = memory.config_before_load(given)
        if config is not None:
            config = {**config, "torch_dtype": str(dtype or torch.float32).removeprefix("torch.")}  # as it will load
            memory.check_run(analysis, {**kwargs, **(per_model or {}).get(given, {})}, config=config, device=target,
                             name=str(given))
    loaded = resolve_models(models, target, tokenizer, dtype)
    torch.manual_seed(seed)
    np.random.seed(seed)
    bound = [analysis.bind(model, {**kwargs, **(per_model or {}).get(given, {})}, label=label)
             for given, model in zip(names, loaded)]
    for model, these in zip(loaded, bound):  # loaded: before any of them runs
        memory.check_run(analysis, these, model=model, device=model.device)
    tables, used = [], {}
    for model, these in zip(loaded, bound):
        used[model.model_name] = these
        try:
            with stage(f"{name} on {model.model_name}"):
                tables.append(parallel.call(analysis.run_bound, model, these))
        except NeedleTooLong as err:
            raise _needle_option(err, analysis, these, model, label) from None
    if not parallel.writes_outputs():  # torchrun ranks > 0 and --shard I/N processes write nothing
        return Result(name, pd.concat([t for t in tables if t is not None] or [pd.DataFrame()], ignore_index=True), [])
    table = pd.concat(tables, ignore_index=True)
    check_table(table, name, nan_columns(analysis.function))  # NaN / inf only where the analysis gives it a meaning
    staged = active().staging
    csv = staged / f"{name}.csv"
    table.to_csv(csv, index=False)
    fig = figures.render(name, table)
    files = [csv] + figures.save(fig, staged / name, formats=formats)
    first = bound[0]
    arguments = _arguments(analysis, first)
    differ = {m: _arguments(analysis, o) for m, o in used.items() if o != first}
    if differ:
        arguments["per_model"] = differ
    record = provenance(name, loaded, arguments, seed, [p.name for p in files])
    record["dtype"] = str(dtype).removeprefix("torch.") if dtype is not None else None  # asked for; None: as loaded
    if parallel.describe():
        record["parallel"] = parallel.describe()
    prov = staged / f"{name}.provenance.json"
    prov.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Result(name, table, active().commit(files + [prov], replaces=clash), fig.layout.height)


def _needle_option(err, analysis, bound: dict, model, label) -> Exception:
    """NIAH prompts too short for the needle, as an error naming the option that set their length."""
    from analyses.registry import OptionError

    label = label or (lambda opt: opt.name)
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
