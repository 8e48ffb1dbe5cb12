"""``poslens.analyze``: one analysis by name from Python, the twin of ``poslens analyze NAME``."""

from __future__ import annotations

import os


def analyze(name: str, models, out=None, *, seed: int = 0, force: bool = False, formats=None, device=None,
            tokenizer=None, **options):
    """Run the analysis ``name`` (``poslens analyze --help`` lists them; a misspelt name gets the nearest ones) on one
    model or several: loaded models, catalog names (``poslens models``), paths or hub ids.

    Every keyword is checked before any model loads (an unknown one names the nearest option). With ``out`` (a
    folder), the CSV, figure and provenance are written there as the command line writes them and the
    ``poslens.run.execute.Result`` is returned (``.table``, ``.files``); without, the table (a pandas DataFrame) is
    returned and nothing is written.

        import poslens
        table = poslens.analyze("sink-rate", "smollm2", n_docs=4)
        result = poslens.analyze("sink-rate", ["smollm2", "gemma3-270m"], out="results")
    """
    from analyses.registry import get

    analysis = get(name)
    models = [models] if isinstance(models, (str, os.PathLike)) or hasattr(models, "hook_dict") else list(models)
    analysis.check_options(options)
    if out is not None:
        from poslens.run.execute import run_analysis

        return run_analysis(name, models, out, options=options, seed=seed, force=force, formats=formats,
                            device=device, tokenizer=tokenizer)
    import numpy as np
    import pandas as pd
    import torch

    from poslens.run.execute import resolve_models

    loaded = resolve_models(models, device, tokenizer)
    kwargs = dict(options, seed=seed) if analysis.seeded else dict(options)
    torch.manual_seed(seed)
    np.random.seed(seed)
    return pd.concat([analysis.function(model, **kwargs) for model in loaded], ignore_index=True)
