"""``poslens.analyze``: one analysis by name from Python, the twin of ``poslens analyze NAME``."""

from __future__ import annotations

import os


def analyze(name: str, models, out=None, *, seed: int = 0, force: bool = False, formats=None, device=None,
            tokenizer=None, units: bool = False, **options):
    """Run the analysis ``name`` (``poslens analyze --help`` lists them; a misspelt name gets the nearest ones) on one
    model or several: loaded models, catalog names (``poslens models``), paths or hub ids.

    Every keyword is checked once, before any model loads (an unknown one names the nearest option). With ``out`` (a
    folder), the CSV(s), figure and provenance are written there as the command line writes them and the
    ``poslens.run.execute.Result`` is returned (``.table``, ``.units``, ``.files``); without, the table (a pandas
    DataFrame) is returned and nothing is written, or with ``units=True`` the ``analyses.units.Tables(table, units)``:
    the unit-level values its intervals are computed over, where the analysis keeps them.

        import poslens
        table = poslens.analyze("sink-rate", "smollm2", n_docs=4)
        result = poslens.analyze("sink-rate", ["smollm2", "gemma3-270m"], out="results")
    """
    models = [models] if isinstance(models, (str, os.PathLike)) or hasattr(models, "hook_dict") else list(models)
    if out is not None:
        from poslens.run.execute import run_analysis

        return run_analysis(name, models, out, options=options, seed=seed, force=force, formats=formats,
                            device=device, tokenizer=tokenizer)
    import numpy as np
    import torch

    from analyses.registry import get
    from analyses.units import concat
    from poslens.run.execute import resolve_models

    analysis = get(name)
    kwargs = dict(options, seed=seed) if analysis.seeded else dict(options)
    analysis.check_options(kwargs)
    loaded = resolve_models(models, device, tokenizer)
    torch.manual_seed(seed)
    np.random.seed(seed)
    tables = concat([analysis.run_bound(model, analysis.bind_checked(model, kwargs)) for model in loaded])
    return tables if units else tables.table
