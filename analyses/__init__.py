"""Analyses of positional mechanisms. Each is a function ``f(model, **options) -> DataFrame`` declared in its
own module (``analyses/NAME.py``, see ``analyses.registry``), also runnable as ``poslens analyze NAME``
(CSV + figure + provenance). Analyses rely on model capabilities (``interp.capabilities.Capability``), never on
concrete model classes.

    from analyses.word_boundaries import word_boundaries     # the function
    analyses.run("word-boundaries", model, n_docs=50)         # or by name
    analyses.get("word-boundaries")                           # its declaration: options, needs, figure, runs

A new analysis is its module (its ``@analysis`` declares the tests' small run, the main job, the memory benchmark), its
figure (``figures/NAME.py``) and one line in ``analyses.registry.MODULES``.
"""


from analyses.registry import Analysis, Option, OptionError, all_analyses, get, run

__all__ = ["Analysis", "Option", "OptionError", "all_analyses", "get", "run"]
