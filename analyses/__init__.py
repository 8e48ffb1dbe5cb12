"""Analyses of positional mechanisms. Each is a function ``f(model, **options) -> DataFrame`` declared in its
own module (``analyses/NAME.py``, see ``analyses.registry``), also runnable as ``poslens analyze NAME``
(CSV + figure + provenance). Analyses rely on model capabilities (``interp.capabilities.Capability``), never on
concrete model classes.

    from analyses.word_boundaries import word_boundaries     # the function
    analyses.run("word-boundaries", model, n_docs=50)         # or by name
    analyses.get("word-boundaries")                           # its declaration: options, needs, figure

A new analysis is its module, its figure (``figures/NAME.py``) and one line in ``MODULES``.
"""

import importlib

from analyses.registry import Analysis, Option, OptionError, all_analyses, get, run

MODULES = (  # in the order the report shows them
    "analyses.byte_increments",
    "analyses.word_boundaries",
    "analyses.entity_spacing",
    "analyses.char_spacing",
    "analyses.loss_neutrality",
    "analyses.attention_mass",
    "analyses.positions",  # position-ranges, position-patterns
    "analyses.niah_accuracy",
    "analyses.ap_spectrum",
    "analyses.kl_ablation",  # kl-ablation, compare-heads
    "analyses.position_probes",
    "analyses.head_profiles",
    "analyses.sink_rate",
    "analyses.induction",
    "analyses.rope_frequencies",
    "analyses.retrieval_heads",
    "analyses.attention_window",
    "analyses.along_context",
)


def load_all() -> None:
    """Import every analysis module (light: their heavy imports happen inside the functions)."""
    for module in MODULES:
        importlib.import_module(module)


__all__ = ["Analysis", "Option", "OptionError", "all_analyses", "get", "run", "MODULES", "load_all"]
