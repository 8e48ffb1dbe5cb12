"""poslens: mechanistic interpretability of positional mechanisms in transformers.

The entry points, imported on first use (``import poslens`` itself imports no torch); these lines run as doctests
(``tests/acceptance/poslens/test_package.py``) on a model bundled with poslens:

    >>> import poslens, tempfile
    >>> model = poslens.load("rope-small")                     # a catalog name (poslens models), a path or a hub id
    >>> table = poslens.analyze("sink-rate", model, n_docs=2)  # one analysis by name: its table
    >>> out = tempfile.mkdtemp()
    >>> done = poslens.analyze("sink-rate", "rope-small", n_docs=2, out=out)  # ... or CSV + figure + provenance there
    >>> iv = poslens.interventions.MaskHeads({(3, 1)})         # named edits of a forward pass
    >>> poslens.view(results=out, length=256)                  # browse results (poslens.viewer)
    View(rope-small 4x4; 256 tokens in 32 blocks of 8; 9 statistics; rows of 32/32 blocks; page ... kB)

The rest lives in the packages below this one: ``interp`` (models, loading, hooks, interventions), ``analyses``
(the analyses and their registry), ``figures``, ``probes``, ``corpora`` and ``poslens`` itself (the command line,
the main job, training). The API reference (``make docs``) documents each.
"""

import importlib
import importlib.metadata
from pathlib import Path

try:
    __version__ = importlib.metadata.version("poslens")  # pyproject.toml's, as installed
except importlib.metadata.PackageNotFoundError:  # a checkout imported without installing it
    __version__ = "unknown (not installed)"

_EXPORTS = {  # name -> (module, attribute; None: the module itself)
    "load": ("interp.loading", "load"),
    "save": ("interp.loading", "save"),
    "load_tokenizer": ("interp.loading", "load_tokenizer"),
    "analyze": ("poslens.api", "analyze"),
    "analyses": ("analyses", None),
    "interventions": ("interp.interventions", None),
    "view": ("poslens.viewer", "view"),
    "Capability": ("interp.capabilities", "Capability"),
    "CheckpointError": ("interp.loading.errors", "CheckpointError"),
    "OptionError": ("analyses.registry", "OptionError"),
}
# every name whose module is here (poslens.viewer arrives with the viewer)
__all__ = [n for n, (m, _) in _EXPORTS.items()
           if not m.startswith("poslens.") or (Path(__file__).parent / m.split(".")[1]).exists()
           or (Path(__file__).parent / (m.split(".")[1] + ".py")).exists()]


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'poslens' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    try:
        value = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise AttributeError(f"poslens.{name} comes from {module}, which this installation lacks") from None
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
