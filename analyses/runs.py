"""Where an analysis runs besides the user's own calls, declared in its ``@analysis`` with the rest of it:

    @analysis("my-thing", ...,
              small=Run(("repo-small",), dict(n_docs=1, length=64)),             # the test suite's small run
              main=Run(DECODERS, dict(n_docs=4), quick=dict(n_docs=1), section=HEADS),  # poslens reproduce
              real=Run(PRETRAINED, dict(n_docs=8), section=KNOWN),               # reproduce --real-models (optional)
              memory=Run(("rope-small",), dict(length=128)))                     # bench.memory (with n_docs)

``tests/acceptance/analyses`` and ``figures`` run every ``small``; ``poslens.reproduce.main_plan()`` is every
``main`` in the order of ``analyses.registry.MODULES`` (the report's order), ``real_plan()`` every ``real``;
``bench.memory.plan()`` is every ``memory``, the count of documents set by the benchmark. A ``real`` run of an
analysis that draws built-in units (a ``stage`` option, ``analyses.stage.STAGE``) draws them under
``stage="judged"``: units no pilot read (``corpora.stages``); declaring it otherwise fails at import. Models are
catalog names (``poslens models``). The options are checked against the analysis' own when the module is imported, so a
declaration naming an option the analysis lacks fails at once, naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SETTINGS = ("small", "main", "real", "memory")

# the main job's model groups and report sections
INCREMENT_MODELS = ("increments-shared", "increments-per-layer")
DECODERS = ("repo-small", "rope-small", "nope-small")
ENCODERS = ("dstg-small", "ap-encoder-small", "rp-encoder-small", "rope-encoder-small")
PRETRAINED = ("smollm2", "gemma3-270m")
INC = "Learned position increments (seed 001)"
REPO = "Context re-positioning (seed 000)"
DSTG = "Disentangled positional and semantic streams (seed 002)"
HEADS = "Heads across models"
KNOWN = "Known results on pretrained models"
JUDGED = "judged"  # the stage a ``real`` run draws under (corpora.stages)


@dataclass(frozen=True)
class Run:
    """One run of an analysis: ``models`` with ``options``. In the main job (``main``, ``real``) also ``quick`` (options
    that shrink the run for ``reproduce --quick``), ``per_model`` (a model's own options, over the others) and the
    report's ``section``."""

    models: tuple[str, ...]
    options: dict = field(default_factory=dict)
    quick: dict = field(default_factory=dict)
    per_model: dict = field(default_factory=dict)
    section: str = ""

    def __post_init__(self):
        object.__setattr__(self, "models", (self.models,) if isinstance(self.models, str) else tuple(self.models))


def check(spec, setting: str, run) -> None:
    """``run`` as ``spec``'s ``setting``: its options are the analysis' own, its models named."""
    where = f"@analysis({setting}=...) of '{spec.name}'"
    if setting not in SETTINGS:
        raise TypeError(f"@analysis of '{spec.name}': unknown setting {setting!r} "
                        f"(settings: {', '.join(SETTINGS)})")
    if not isinstance(run, Run):
        raise TypeError(f"{where}: expected a Run, got {type(run).__name__}")
    if not run.models:
        raise ValueError(f"{where}: no models")
    in_main = setting in ("main", "real")
    if in_main and not run.section:
        raise ValueError(f"{where}: the main job needs the report's section= for it")
    if not in_main and (run.quick or run.per_model or run.section):
        raise ValueError(f"{where}: quick=, per_model= and section= are the main job's; {setting} takes models "
                         "and options")
    names = {o.name for o in spec.options if not o.feeds} | ({"seed"} if spec.seeded else set())
    for label, options in (("options", run.options), ("quick", run.quick),
                           *((f"per_model[{m!r}]", o) for m, o in run.per_model.items())):
        unknown = sorted(set(options) - names)
        if unknown:
            raise ValueError(f"{where}: {label} names {', '.join(unknown)}, not an option of '{spec.name}' "
                             f"(options: {', '.join(sorted(names))})")
    if setting == "real" and "stage" in names and run.options.get("stage") != JUDGED:
        raise ValueError(f"{where}: the known-results run draws units no pilot read; declare stage={JUDGED!r} "
                         f"(corpora.stages), not {run.options.get('stage', 'any')!r}")
    stray = sorted(set(run.per_model) - set(run.models))
    if stray:
        raise ValueError(f"{where}: per_model names {', '.join(stray)}, not among its models")
