"""The analyses poslens runs by name, each declared once, beside its function.

An analysis is a function ``f(model, *, option=default, ...) -> DataFrame`` in ``analyses/NAME.py``,
decorated with ``@analysis("NAME", needs=..., headline=..., summary=...)``. The declaration is read from
the function itself:

- its options are the keyword parameters annotated ``Annotated[type, Help("..."), constraints...]``: the
  default is the parameter's own, the command-line flag is ``--name-with-dashes`` unless ``Cli(...)``
  spells it otherwise;
- constraints are checked before any work starts: ``Range`` and ``Choices`` on the value alone (before
  models load), ``Fits`` / ``Below`` against each model (right after it loads, before the analysis runs);
  ``NotWith`` marks an option of the built-in input that the user's documents replace;
- a ``documents`` parameter gives the analysis ``--input PATH`` (read by ``corpora.user.read_documents``);
- ``needs`` are capabilities, checked on every call (``CapabilityError`` names the analysis and the model);
- ``headline(table) -> str`` and ``summary(table) -> DataFrame`` are what the report and SUMMARY.md show;
- its figure is ``figures/NAME.py``'s ``figure(table)``, whose layout height the report uses;
- where it runs besides the user's calls (the tests' small run, the main job, the memory benchmark) is declared
  in the same ``@analysis(small=, main=, real=, memory=)`` (``analyses.runs``), with ``builds_logits``.

``MODULES`` below lists the analysis modules, one line each, in the report's order. Nothing here imports torch,
pandas or plotly: the command line reads every declaration without them (analysis modules import those inside
functions).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

from analyses.units import Tables, Units
from corpora.documents import KINDS
from interp.capabilities import Capability, require

if typing.TYPE_CHECKING:
    from analyses.runs import Run

MODULES = (  # one line per analysis module, in the order the report shows them
    "analyses.loss_neutrality",
    "analyses.byte_increments",
    "analyses.word_boundaries",
    "analyses.entity_spacing",
    "analyses.char_spacing",
    "analyses.niah_accuracy",
    "analyses.attention_mass",
    "analyses.positions",  # position-ranges, position-patterns
    "analyses.ap_spectrum",
    "analyses.kl_ablation",  # kl-ablation, compare-heads
    "analyses.position_probes",
    "analyses.head_profiles",
    "analyses.sink_rate",
    "analyses.massive_activations",
    "analyses.induction",
    "analyses.rope_frequencies",
    "analyses.retrieval_heads",
    "analyses.attention_window",
    "analyses.along_context",
)


class OptionError(ValueError):
    """An option value outside what its declaration allows; the message names the option and the value."""


@dataclass(frozen=True)
class Help:
    text: str


@dataclass(frozen=True)
class Range:
    """Numbers from ``min`` to ``max`` (inclusive; None: unbounded)."""
    min: float | None = None
    max: float | None = None

    def check(self, value) -> str | None:
        if self.min is not None and value < self.min:
            return f"must be at least {self.min}"
        if self.max is not None and value > self.max:
            return f"must be at most {self.max}"
        return None


@dataclass(frozen=True)
class Choices:
    values: tuple

    def check(self, value) -> str | None:
        return None if value in self.values else f"must be one of {', '.join(map(str, self.values))}"


@dataclass(frozen=True)
class Fits:
    """At most ``model.<attribute>`` (a context length). Left at its default, the value is lowered to the
    model's and the lowered value is what provenance records; given explicitly, a larger value is an error.
    ``margin`` tokens are kept free (``for_what`` says for what: an answer to generate); ``times`` copies of the
    value must fit (two copies of a sequence); with ``only``, models without that capability (which never read the
    option) are not checked."""
    attribute: str = "max_seq_len"
    margin: int = 0
    only: Capability | None = None
    times: int = 1
    for_what: str = "the answer"


@dataclass(frozen=True)
class Adapts:
    """Left at its default, the value is ``rule(model, options)`` (the user's options and those bound before it),
    so a default fits the model and the input the user gave; a value the user wrote is kept and checked as usual.
    Provenance records the value used."""
    rule: Callable


@dataclass(frozen=True)
class NotWith:
    """The option picks or sizes the built-in input, so it does not apply when ``documents=`` holds one of ``kinds``
    (``corpora.documents.KINDS``: texts, tokens, prompts): a value the user wrote with them is refused, and provenance
    records the option as not applied rather than a default that never ran."""
    kinds: tuple[str, ...] = ("texts", "tokens", "prompts")

    def __post_init__(self):
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"NotWith: {', '.join(map(repr, unknown))} is not a kind of documents= "
                             f"(kinds: {', '.join(KINDS)})")



@dataclass(frozen=True)
class Inline:
    """On ``documents``: a second command-line flag for the user's documents, written inline (char-spacing's
    ``--text ID=TEXT``); ``convert`` turns its values (a list, the flag repeats) into what ``documents=`` takes."""
    flag: str
    convert: Callable
    help: str
    metavar: str | None = None


@dataclass(frozen=True)
class Below:
    """An index into ``range(model.<attribute>)`` (a layer or a head)."""
    attribute: str


@dataclass(frozen=True)
class Cli:
    """How the command line spells and reads an option: ``flag`` replaces ``--name``, ``convert`` turns the text (a
    list of texts for a repeatable option) into the Python value."""
    flag: str | None = None
    convert: Callable | None = None
    multiple: bool | None = None
    metavar: str | None = None


@dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: object
    help: str
    flag: str
    multiple: bool = False
    checks: tuple = ()  # Range / Choices, applied to each value
    model_checks: tuple = ()  # Fits / Below
    convert: Callable | None = None
    metavar: str | None = None
    adapts: Callable | None = None  # Adapts.rule
    not_with: tuple[str, ...] = ()  # NotWith.kinds
    feeds: str | None = None  # a command-line flag whose value is another option's (``Inline``)

    def replaced_by(self, kwargs: dict) -> str | None:
        """What replaces this option (``NotWith``): the kind of ``documents=`` given when it is one of its kinds."""
        documents = kwargs.get("documents")
        if documents is None or not self.not_with:
            return None
        from corpora.documents import input_kind

        kind = input_kind(documents)
        if kind not in self.not_with:
            return None
        return ("documents" if kind == "texts"
                else f"documents ({ {'tokens': 'token ids', 'prompts': 'NIAH prompts'}[kind]})")

    @property
    def choices(self) -> tuple | None:
        return next((c.values for c in self.checks if isinstance(c, Choices)), None)

    def parse(self, raw):
        """The Python value of a command-line value (``raw`` is a list for repeatable options)."""
        shown = ",".join(map(str, raw)) if isinstance(raw, list) else str(raw)
        if self.convert is not None:
            try:
                value = self.convert(raw)
            except (ValueError, OSError) as err:
                said = str(err)  # a reader's error that already names the file is prefixed by the option alone
                raise OptionError(f"{self.flag} {said}" if said.startswith(shown)
                                  else f"{self.flag} {shown}: {said}") from None
        elif self.type is bool:
            value = raw
        else:
            items = [v.strip() for r in raw for v in str(r).split(",") if v.strip()] if self.multiple else [raw]
            try:
                value = [self.type(v) for v in items]
            except ValueError:
                raise OptionError(f"{self.flag} {shown}: expected {_kind(self.type)}") from None
            if not value:
                raise OptionError(f"{self.flag} {shown}: expected at least one value")
            if self.type is float and not all(math.isfinite(v) for v in value):
                raise OptionError(f"{self.flag} {shown}: expected a finite number")
            value = tuple(value) if self.multiple else value[0]
        self.validate(value, self.flag + " " + shown)
        return value

    def validate(self, value, label: str) -> None:
        if value is None or self.convert is not None and not self.checks:
            return
        for item in value if self.multiple and isinstance(value, (tuple, list)) else (value,):
            for check in self.checks:
                why = check.check(item)
                if why:
                    raise OptionError(f"{label}: {why}")


def _kind(t) -> str:
    return {int: "an integer", float: "a number"}.get(t, t.__name__)


def _options(function: Callable) -> tuple[Option, ...]:
    """The options of ``function``: its keyword parameters annotated ``Annotated[type, Help(...), ...]``."""
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.name == "documents":
            continue  # the user's documents: --input below, and an Inline flag where the analysis declares one
        ann = p.annotation
        if isinstance(ann, str):
            try:  # the module's own annotation, evaluated as typing.get_type_hints does
                ann = eval(ann, inspect.unwrap(function).__globals__)
            except NameError:  # a heavy type (torch.Tensor) imported inside the function: not an option
                continue
        if typing.get_origin(ann) is not typing.Annotated:
            continue
        base, *meta = typing.get_args(ann)
        cli = next((m for m in meta if isinstance(m, Cli)), Cli())
        origin = typing.get_origin(base)
        multiple = cli.multiple if cli.multiple is not None else origin in (tuple, list)
        item = typing.get_args(base)[0] if origin in (tuple, list) else base
        out.append(Option(
            name=p.name, type=item, default=p.default, help=next(m.text for m in meta if isinstance(m, Help)),
            flag=cli.flag or "--" + p.name.replace("_", "-"), multiple=multiple,
            checks=tuple(m for m in meta if isinstance(m, (Range, Choices))),
            model_checks=tuple(m for m in meta if isinstance(m, (Fits, Below))), convert=cli.convert,
            metavar=cli.metavar, adapts=next((m.rule for m in meta if isinstance(m, Adapts)), None),
            not_with=next((m.kinds for m in meta if isinstance(m, NotWith)), ())))
    documents = inspect.signature(function).parameters.get("documents")
    if documents is not None:
        out.append(Option("documents", str, None, "your documents: a .txt file (one document), a .jsonl file (one "
                          "{\"text\": ...} per line) or a folder of .txt files (default: the built-in corpus)",
                          "--input", convert=read_documents, metavar="PATH"))
        ann = documents.annotation
        if isinstance(ann, str):
            ann = eval(ann, inspect.unwrap(function).__globals__)
        for inline in (m for m in typing.get_args(ann)[1:] if isinstance(m, Inline)):
            out.append(Option(inline.flag.lstrip("-").replace("-", "_"), str, None, inline.help, inline.flag,
                              multiple=True, convert=inline.convert, metavar=inline.metavar, feeds="documents"))
    return tuple(out)


def read_documents(path):
    from corpora.user import read_documents as read

    return read(path)


@dataclass
class Analysis:
    name: str
    function: Callable  # the checked function: f(model, **options) -> pandas.DataFrame
    about: str  # what the analysis computes, in a sentence or two (for help and the report)
    needs: tuple[Capability, ...] = ()
    options: tuple[Option, ...] = ()
    seeded: bool = False  # takes ``seed=``
    headline: Callable | None = None  # (table) -> one sentence on what this result shows
    summary: Callable | None = None  # (table) -> the compact table SUMMARY.md shows
    small: Run | None = None  # where it runs besides the user's calls (analyses.runs)
    main: Run | None = None
    real: Run | None = None
    memory: Run | None = None
    builds_logits: bool = True  # False: its passes build no [pos, vocab] logits (interp.runtime.memory's estimate)
    body: Callable | None = field(default=None, repr=False)  # the function as written: what ``run_bound`` runs
    precheck: Callable | None = None  # (options, defaults filled, label) -> None: checks across options, before loading
    units: Units | None = None  # the unit-level values its body returns beside its table (``analyses.units``)

    def check_options(self, kwargs: dict, *, label=None) -> None:
        """What can be checked without a model, before any loads: keywords the analysis does not take (with the
        nearest names), then its ``precheck`` on the options with their defaults filled in."""
        label = label or (lambda opt: opt.name)
        names = sorted({o.name for o in self.options if not o.feeds} | ({"seed"} if self.seeded else set()))
        parameters = inspect.signature(self.body).parameters
        # a body taking **kwargs (an analysis declared ``like=`` another) takes its declared options
        known = set(names) if any(p.kind is p.VAR_KEYWORD for p in parameters.values()) else set(parameters)
        unknown = [k for k in kwargs if k not in known]
        if unknown:
            raise OptionError(f"{self.name}: no option {unknown[0]!r}{did_you_mean(unknown[0], names)} "
                              f"(options: {', '.join(names)})")
        if self.precheck is not None:
            self.precheck({**{o.name: o.default for o in self.options if not o.feeds}, **kwargs},
                          lambda name: label(next(o for o in self.options if o.name == name)))

    @property
    def figure(self) -> Callable:
        """``figures/NAME.py``'s ``figure(table) -> plotly Figure``."""
        return importlib.import_module("figures." + self.name.replace("-", "_")).figure

    def check_model(self, model) -> None:
        for capability in self.needs:
            require(model, capability, self.name)

    def bind(self, model, kwargs: dict, *, label=None) -> dict:
        """``kwargs`` checked against the declaration (``check_options``) and ``model`` (``bind_checked``), with every
        option's value filled in (what the function receives and provenance records). ``label(option)`` names an
        option in errors."""
        self.check_options(kwargs, label=label)
        return self.bind_checked(model, kwargs, label=label)

    def bind_checked(self, model, kwargs: dict, *, label=None) -> dict:
        """``kwargs``, already through ``check_options``, checked against ``model`` (capabilities, ``Fits`` /
        ``Below``) with every option's value filled in: a run's plan checks the options once, then binds each model."""
        label = label or (lambda opt: opt.name)
        kwargs = dict(kwargs)
        self.check_model(model)
        for opt in self.options:
            if opt.feeds:
                continue  # a command-line spelling of another option (parse_cli gave its value to that one)
            given = opt.name in kwargs
            replaced = opt.replaced_by(kwargs)
            if given and replaced:
                named = {"documents": "your documents (--input)"}.get(replaced, f"your {replaced}")
                raise OptionError(f"{label(opt)} {_shown(kwargs[opt.name])}: does not apply with {named}, "
                                  "which are read whole; leave it out")
            if replaced:
                continue  # the function's default stands, unused; provenance records the option as not applied
            value = kwargs[opt.name] if given else opt.default
            if given:
                opt.validate(value, f"{label(opt)} {_shown(value)}")
            elif opt.adapts is not None:
                value = opt.adapts(model, kwargs)
            for check in opt.model_checks:
                if value is None or getattr(check, "only", None) not in (None, *model.capabilities):
                    continue
                limit = getattr(model, check.attribute)
                items = value if isinstance(value, (tuple, list)) else (value,)
                if isinstance(check, Below) and any(not 0 <= v < limit for v in items):
                    raise OptionError(f"{label(opt)} {_shown(value)}: {model.model_name} has {check.attribute} "
                                      f"{limit}, so it must be between 0 and {limit - 1}")
                if isinstance(check, Fits) and any(check.times * v > limit - check.margin for v in items):
                    limit = (limit - check.margin) // check.times
                    if given:
                        room = f" less {check.margin} for {check.for_what}" if check.margin else ""
                        many = f" ({check.times} times the value)" if check.times > 1 else ""
                        raise OptionError(f"{label(opt)} {_shown(value)}: longer than {model.model_name} allows{many} "
                                          f"({check.attribute}={getattr(model, check.attribute)}{room})")
                    if not isinstance(value, (tuple, list)):
                        value = limit
                    elif not (value := tuple(v for v in items if v <= limit)):
                        raise OptionError(f"{label(opt)}: none of the default values {_shown(items)} fits "
                                          f"{model.model_name} ({check.attribute}={getattr(model, check.attribute)})")
            kwargs[opt.name] = value
        return kwargs

    def workload(self, options: dict, max_len: int | None = None) -> dict | None:
        """``length``, ``batch``, ``attention_rows`` and ``logits`` of one model's run with ``options`` (given values,
        else the declared defaults), the numbers ``interp.runtime.memory`` estimates a peak from: the length is the
        largest option declared ``Fits(max_seq_len)`` times its copies plus its margin, lowered to ``max_len`` as
        ``Fits`` lowers a default; the batch and the materialised attention rows are the ``batch_size`` and
        ``max_rows`` options where declared; ``logits`` is ``builds_logits``. None where no option declares a length."""
        lengths = []
        for opt in self.options:
            for check in (c for c in opt.model_checks if isinstance(c, Fits) and c.attribute == "max_seq_len"):
                value = options.get(opt.name, opt.default)
                values = [int(v) for v in (value if isinstance(value, (tuple, list)) else (value,))
                          if isinstance(v, (int, float)) and not isinstance(v, bool)]
                if values:
                    n = max(values)
                    n = min(n, max_len) if max_len and opt.name not in options else n
                    lengths.append(check.times * n + check.margin)
        if not lengths:
            return None

        def declared(name, default):
            opt = next((o for o in self.options if o.name == name), None)
            value = options.get(name, opt.default if opt is not None else default)
            return int(value) if isinstance(value, (int, float)) and value else default

        return dict(length=max(lengths), batch=declared("batch_size", 1), attention_rows=declared("max_rows", 0),
                    logits=self.builds_logits)

    def not_applied(self, bound: dict) -> dict[str, str]:
        """``{option: why}`` for the options that the inputs given in ``bound`` replaced (``NotWith``)."""
        return {opt.name: f"replaced by {by}" for opt in self.options if (by := opt.replaced_by(bound))}

    def tables(self, model, **kwargs) -> Tables:
        """Run on one model: ``bind`` (options and capabilities checked), then the function's body; its table and its
        unit-level values (``analyses.units``; None where it keeps none)."""
        return self.run_bound(model, self.bind(model, kwargs))

    def run_bound(self, model, bound: dict) -> Tables:
        """The function's body, without gradients, on options ``bind`` gave (``poslens.run.execute.run_analysis`` binds
        every model's options before the first runs, then calls this: options and documents are bound once)."""
        import torch

        with torch.no_grad():
            out = self.body(model, **bound)
        if self.units is None:
            return out if isinstance(out, Tables) else Tables(out)
        self.units.check(out.units if isinstance(out, Tables) else None, self.name)
        return out

    def parse_cli(self, namespace: dict) -> dict:
        """The keyword arguments the command line gave (only those given), parsed and checked on their own; an
        ``Inline`` flag's value is ``documents``."""
        given = [opt for opt in self.options if opt.name in namespace]
        feeding = [opt for opt in given if opt.feeds]
        if feeding and any(opt.name == feeding[0].feeds for opt in given):
            raise OptionError(f"{feeding[0].flag} and --input both give your documents: use one")
        return {opt.feeds or opt.name: opt.parse(namespace[opt.name]) for opt in given}


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def no_grad(function):
    """``torch.no_grad()`` as a decorator that imports torch only when called (analysis modules import light)."""

    @functools.wraps(function)
    def inner(*args, **kwargs):
        import torch

        with torch.no_grad():
            return function(*args, **kwargs)

    return inner


def check_window(model, max_tokens: int, what: str = "--length") -> None:
    from interp.base import InputError

    if max_tokens > model.max_seq_len:
        raise InputError(f"{what}={max_tokens} is longer than {model.model_name} allows "
                         f"(max_seq_len={model.max_seq_len})")
    if max_tokens < 4:
        raise InputError(f"{what}={max_tokens} is too short to hold a character")


def did_you_mean(given: str, known) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) for the known names nearest ``given``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(given, list(known), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


_REGISTRY: dict[str, Analysis] = {}


def analysis(name: str, *, needs=(), headline=None, summary=None, like: Callable | None = None,
             builds_logits: bool = True, small: Run | None = None, main: Run | None = None, real: Run | None = None,
             memory: Run | None = None, precheck: Callable | None = None, units: Units | None = None) -> Callable:
    """Declare ``function`` as the analysis ``name``, everything about it in one record, built once: what it ``needs``,
    its options (``Annotated`` parameters; ``like`` takes another analysis' options), where it runs (``small``,
    ``main``, ``real``, ``memory``: ``analyses.runs``, checked against its options here), whether its passes build
    logits (``builds_logits``: the memory estimate, ``interp.runtime.memory``) and ``precheck(options, label)``: values
    that contradict each other on the options alone (defaults filled in; ``label(name)`` is how the caller spells an
    option), so the error comes before any model loads. ``units`` declares the unit-level values its body returns
    beside its table (``Tables(table, units)``; ``analyses.units``): calling the function gives the table,
    ``Analysis.tables`` both."""
    from analyses.runs import check

    def declare(function):
        options = _options(like.__wrapped__ if like is not None else function)

        @functools.wraps(function)
        def checked(model, **kwargs):
            import torch

            with torch.no_grad():
                return spec.tables(model, **kwargs).table

        spec = Analysis(name, checked, inspect.cleandoc(function.__doc__ or "").split("\n\n")[0].replace("\n", " "),
                        needs=tuple(needs), options=options, headline=headline, summary=summary,
                        seeded=("seed" in inspect.signature(function).parameters
                                or (like is not None and like.analysis.seeded)),
                        small=small, main=main, real=real, memory=memory, builds_logits=builds_logits, body=function,
                        precheck=precheck, units=units)
        for setting in ("small", "main", "real", "memory"):
            if getattr(spec, setting) is not None:
                check(spec, setting, getattr(spec, setting))
        checked.analysis = spec
        _REGISTRY[name] = spec
        return checked

    return declare


def load_all() -> None:
    """Import every analysis module of ``MODULES`` (light: their heavy imports happen inside the functions)."""
    for module in MODULES:
        importlib.import_module(module)


def get(name: str) -> Analysis:
    load_all()
    if name not in _REGISTRY:
        raise KeyError(f"unknown analysis '{name}'{did_you_mean(name, _REGISTRY)} "
                       f"(known: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]


def all_analyses() -> list[Analysis]:
    """Every registered analysis: those of ``MODULES`` in its order (whatever order they were imported in), then
    those registered from other modules, in the order they were registered."""
    load_all()
    rank = {m: i for i, m in enumerate(MODULES)}
    order = list(_REGISTRY)
    return sorted(_REGISTRY.values(), key=lambda a: (rank.get(inspect.unwrap(a.body).__module__, len(rank)),
                                                     order.index(a.name)))


def run(name: str, model, *, units: bool = False, **options):
    """``analyses.run("word-boundaries", model, n_docs=20)``: one analysis on one model, by name: its table, or with
    ``units=True`` its ``Tables(table, units)`` (``analyses.units``)."""
    import torch

    spec = get(name)
    with torch.no_grad():
        out = spec.tables(model, **options)
    return out if units else out.table
