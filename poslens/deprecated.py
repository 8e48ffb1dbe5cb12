"""Every old poslens spelling, in one table (``TABLE``), and the machinery that serves it until ``REMOVAL``.

Scripts written against an earlier poslens keep running until ``REMOVAL``: each old spelling warns
(``interp.deprecation.PoslensDeprecationWarning``, naming the new spelling and the date) and gives the same object, or,
where the new spelling takes other arguments, the same behaviour. The kinds of entry:

- ``Moved(old, new, names)``: a module path that moved. No file is left at the old path: ``Finder`` (on
  ``sys.meta_path``) serves it as a module that warns once at its import and reads every name from ``new`` (``names``:
  the ones that did not move with it);
- ``Alias(old, new, get)``: a name gone from a module that is still there; ``Removed(old, instead)``: a name gone with
  nothing in its place (``RemovedError`` says what to use). ``Finder`` gives the module, as it is imported, a
  ``__getattr__`` that serves them (its own, a lazy export, still answers every other name);
- ``Wrapped(old, new, module, name, wrap)``: a keyword or call spelling: ``Finder`` replaces ``module.name`` with
  ``wrap(module.name)`` as the module is imported, so the old spelling is mapped before the function runs;
- ``Said(old, new, where)``: a spelling still mapped where it is read (``where``): listed here so that README.md
  lists it;
- ``Flag(analysis, old, option)``: an option's old command-line flag, which ``poslens analyze ANALYSIS`` still parses
  as ``option`` (``poslens.commands``; the core's options declare no old flags), and whose keyword (``--n-samples``:
  ``n_samples=``) the analysis still reads in Python;
- ``Column(analysis, old, new)`` / ``Filled(analysis, column, value, when)``: a result column's old name, or a column
  an older poslens did not write, mapped wherever poslens reads a CSV back (``figures.read_table``, so ``poslens
  figure``; ``poslens.known_results``) before any figure code runs.

The core (``interp``, ``corpora``, ``probes``, ``analyses``, ``figures``) holds none of this: importing ``poslens``
installs the finder (``install()``), and ``install()`` also serves the modules imported before it.
README.md's "Deprecated names" is generated from ``TABLE`` (``python -m poslens.deprecated --write README.md``;
tests/unit/test_deprecated.py checks each entry and that the README is current). Nothing here imports torch.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import re
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from interp.deprecation import REMOVAL, PoslensDeprecationWarning, message, warn

__all__ = ["REMOVAL", "TABLE", "RemovedError", "install", "message", "warn", "markdown", "current_columns",
           "old_flags"]

FAMILIES = ("bert", "encoder", "hf", "increments", "llama", "repo")


class RemovedError(ImportError):
    """A name that poslens removed with nothing in its place (an ``ImportError``, so ``from m import NAME`` shows
    why)."""


def expand(text: str) -> list[str]:
    """``a.{x,y}.b`` -> ``["a.x.b", "a.y.b"]``."""
    match = re.search(r"\{(\w+(?:,\w+)+)\}", text)
    if match is None:
        return [text]
    return [out for part in match.group(1).split(",")
            for out in expand(text[: match.start()] + part + text[match.end():])]


def _pairs(old: str, new: str) -> list[tuple[str, str]]:
    olds, news = expand(old), expand(new)
    return list(zip(olds, news if len(news) == len(olds) else news * len(olds)))


def _read(path: str):
    """A dotted path read as the longest module it names, then attributes (``interp.families.bert.FAMILY.name``)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise LookupError(path)


@dataclass(frozen=True)
class Moved:
    """A module path that moved: ``old`` (braces expand, with ``new``'s) serves every name of ``new``, and first the
    ``Alias`` / ``Removed`` entries under ``old`` (the names that did not move with it)."""
    old: str
    new: str

    def rows(self):
        return [(self.old, self.new)]


@dataclass(frozen=True)
class Alias:
    """``old`` (``module.name``; braces expand) gives ``get()`` (default: ``new`` read as ``module.attribute``)."""
    old: str
    new: str
    get: Callable | None = None

    def value(self, new: str):
        return self.get() if self.get is not None else _read(new)

    def rows(self):
        return [(self.old, self.new)]


@dataclass(frozen=True)
class Removed:
    old: str
    instead: str

    def rows(self):
        return []


@dataclass(frozen=True)
class Wrapped:
    """A call spelling (``old``, README's words) mapped by ``wrap(function) -> function`` put in place of
    ``module.name`` as ``module`` is imported."""
    old: str
    new: str
    module: str
    name: str
    wrap: Callable

    def rows(self):
        return [(self.old, self.new)]


@dataclass(frozen=True)
class Said:
    """A spelling mapped where it is read (``where``, a function or class of the tree); listed for the README."""
    old: str
    new: str
    where: str

    def rows(self):
        return [(self.old, self.new)]


@dataclass(frozen=True)
class Flag:
    """``poslens analyze {analysis} {old}`` is now the option ``option`` (spelled by its own flag), and ``old``'s
    keyword (``keyword``) is ``option=``."""
    analysis: str
    old: str
    option: str

    @property
    def keyword(self) -> str:
        return self.old.lstrip("-").replace("-", "_")

    def rows(self):
        from analyses.registry import get

        flag = next(o.flag for o in get(self.analysis).options if o.name == self.option)
        return [(f"`{flag_spelling(self.analysis, self.old)}`, `{self.keyword}=`", f"`{flag}`, `{self.option}=`")]


@dataclass(frozen=True)
class Column:
    """An ``analysis`` table's column ``old`` (braces expand with ``new``'s), now ``new``."""
    analysis: str
    old: str
    new: str

    def rows(self):
        return [(f"{self.analysis} column {self.old}", self.new)]


@dataclass(frozen=True)
class Filled:
    """A column an older poslens did not write: a table of ``analysis`` without ``column`` that has every column of
    ``when`` (its old names) gets ``column = value``, what those tables were computed under."""
    analysis: str
    column: str
    value: object
    when: tuple[str, ...] = field(default=())

    @property
    def old(self) -> str:
        return f"{self.analysis} table without {self.column} (it has {', '.join(self.when)})"

    @property
    def new(self) -> str:
        return f"{self.column} = {self.value!r}"

    def rows(self):
        return [(self.old, self.new)]


# ---- what the aliases whose arguments changed give (each as it behaved) ---------------------------------------------


def _load_hf_dir(family: str):
    def load_hf_dir(path):
        from interp.loading.checkpoint import Checkpoint

        return importlib.import_module(f"interp.families.{family}.checkpoints").read_hf(Checkpoint(path), {})
    return load_hf_dir


def _from_hf_state(raw_config: dict, state: dict, where: str):
    from interp.families.bert import checkpoints

    return checkpoints._build(checkpoints.config_from_hf(raw_config, where), state, where)


def _is_dir(family: str, test: str):
    def is_hf_dir(path) -> bool:
        from interp.loading.checkpoint import Checkpoint

        module = importlib.import_module(f"interp.families.{family}.checkpoints")
        return getattr(module, test)(path if isinstance(path, Checkpoint) else Checkpoint(path))
    return is_hf_dir


def _save_state_pt(model, path):
    """A development-style ``state_dict.pt``: the exported state dict, no config (``interp.load`` reads it back)."""
    from pathlib import Path

    import torch

    from interp.families.encoder import checkpoints

    path = Path(path)
    torch.save(checkpoints.export(model)[1], path)
    return path


def _model_type(path) -> str | None:
    from interp.loading.checkpoint import Checkpoint

    return Checkpoint(path).model_type


def _families_by_name() -> dict:
    from interp import families

    return {f.name: f for f in families.families()}


def _families_by_model_type() -> dict:
    from interp import families

    return {t: f for f in families.families() for t in f.hf_model_types}


def _block_hooks() -> tuple:
    """What ``interp.base.BLOCK_HOOKS`` held: the hooks every family's blocks and attentions declare."""
    from interp.base import HookDoc
    from interp.hooks import AttentionHooks, BlockHooks, declared, forward_rank

    rows = [HookDoc(f"blocks.{{l}}.{prefix}{name}", hook.shape, hook.meaning)
            for prefix, cls in (("", BlockHooks), ("attn.", AttentionHooks)) for name, hook in declared(cls).items()]
    return tuple(sorted(rows, key=lambda h: forward_rank(h.pattern)))


def _needs(model, capability, who: str) -> None:
    """The old ``interp.interventions.needs``: ``require`` for an intervention."""
    from interp.capabilities import require

    require(model, capability, who, kind="intervention")


def _variant_classes() -> dict:
    from interp.families.encoder.model import VARIANTS, EncoderModel

    return dict.fromkeys(VARIANTS, EncoderModel)


@functools.cache
def _probe_doc():
    import dataclasses

    from corpora.documents import Window

    @dataclasses.dataclass(frozen=True, init=False)
    class ProbeDoc(Window):
        def __init__(self, text: str, ids, spans):
            super().__init__("", list(ids), list(spans), text=text)

    ProbeDoc.__module__, ProbeDoc.__qualname__ = "probes.position", "ProbeDoc"
    return ProbeDoc


def _user_probe_documents(tokenizer, documents, max_tokens: int) -> list:
    """``user_probe_documents`` as it was: the user's texts, each whole, one longer than ``max_tokens`` refused."""
    from corpora.contexts import _whole
    from corpora.user import as_documents

    return _whole(tokenizer, as_documents(documents), max_tokens, "position-probes")


def _user_windows(model, analysis: str, documents, length: int, accepts=("texts", "tokens")) -> list:
    from corpora.contexts import analysis_windows
    from corpora.user import user_inputs

    user_inputs(documents, analysis, accepts)
    return analysis_windows(model, analysis, documents, length=length)


def _text_contexts(model, analysis: str, n_docs: int, length: int, seed: int, documents=None) -> list[list[int]]:
    from corpora.contexts import analysis_windows

    return [w.ids for w in analysis_windows(model, analysis, documents, length=length, n_docs=n_docs, seed=seed)]


class _Texts(dict):
    """``{id: text}`` with the ``source`` record of the file it was read from (what ``corpora.user.Texts`` was)."""

    source: dict | None = None


def _model_classes() -> list:
    from interp import hook_docs

    return list(hook_docs.tables())


_SHARD_KEYWORDS = ("analysis", "models", "options", "seed", "shard_dir", "shard", "flush_every", "serve")


def _session(session):
    """``interp.parallel.session`` that also takes the shard keywords it took before the store moved to
    ``poslens.shards`` (``shard_dir=``, ``shard=``, ...): they make the ``ShardStore`` now given as ``store=``."""

    @functools.wraps(session)
    def wrapper(*, device=None, share=None, store=None, **old):
        if old:
            unknown = sorted(set(old) - set(_SHARD_KEYWORDS))
            if unknown:
                raise TypeError(f"session() got an unexpected keyword argument {unknown[0]!r}")
            if store is not None:
                raise TypeError(f"session(): store= and the old shard keywords ({', '.join(sorted(old))}) both give "
                                "a store")
            for name in old:
                warn(f"interp.parallel.session({name}=)", "store=poslens.shards.ShardStore(...) and share=(i, n)", 2)
            from poslens.shards import ShardStore, arguments_record, parse_share

            shard, shard_dir = old.get("shard"), old.get("shard_dir")
            if shard is not None and shard_dir is None:
                raise ValueError("--shard I/N needs --shard-dir DIR to write its share to")
            if shard is not None:
                share = parse_share(shard)
            if shard_dir is not None:
                analysis = old.get("analysis")
                record = arguments_record(analysis, old.get("models", ()), old.get("options") or {},
                                          old.get("seed", 0)) if analysis else None
                store = ShardStore(shard_dir, record=record, flush_every=old.get("flush_every", 8),
                                   standalone=shard is not None, serve=old.get("serve"))
        return session(device=device, share=share, store=store)
    return wrapper


def _output_stem(output_stem):
    """``figures.render.output_stem`` that also takes its old call, ``output_stem(csv, name, out, template, width,
    height)`` (``name`` was never read: the stem is the CSV's)."""

    @functools.wraps(output_stem)
    def wrapper(csv, out, template, width, height, *old, name=None):
        if old or name is not None:
            warn("figures.render.output_stem(csv, name, ...)", "output_stem(csv, out, template, width, height)")
            if old:
                out, template, width, height = template, width, height, old[0]
        return output_stem(csv, out, template, width, height)
    return wrapper


def _read_table(read_table):
    """``figures.render.read_table`` whose table has its old columns under their current names (``current_columns``)
    before any figure code sees it."""
    from pathlib import Path

    @functools.wraps(read_table)
    def wrapper(csv, analysis=None):
        df = read_table(csv, analysis)
        return current_columns(analysis or Path(csv).name.split(".")[0], df, str(csv))
    return wrapper


def _document(cls):
    """``Document`` that also takes ``doc_id=`` (the field's old name) and answers ``.doc_id``."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, doc_id=None, **kwargs):
        if doc_id is not None:
            warn("corpora.documents.Document(doc_id=)", "Document(id=...)")
            kwargs["id"] = doc_id
        init(self, *args, **kwargs)

    def doc_id(self) -> str:
        """Deprecated spelling of ``id``."""
        warn("corpora.documents.Document.doc_id", "Document.id")
        return self.id

    cls.__init__, cls.doc_id = __init__, property(doc_id)
    return cls


def _window(cls):
    """``Window`` that also takes its old field order, ``Window(document, index, start, ids, spans)``."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, document, *args, **kwargs):
        if len(args) >= 3 and isinstance(args[0], int) and not isinstance(args[2], int):
            warn("Window(document, index, start, ids, spans)", "Window(document, ids, spans, index=..., start=...)")
            index, start, ids, *rest = args
            kwargs.update(index=index, start=start)
            if rest:
                kwargs["spans"] = rest[0]
            args = (ids, *rest[1:])
        init(self, document, *args, **kwargs)

    cls.__init__ = __init__
    return cls


_OLD_INPUTS = {"documents": "texts", "docs": "texts", "texts": "texts", "token_ids": "tokens", "samples": "prompts"}


def _cli(cls):
    """``Cli`` that still takes ``aliases=`` (a plug-in's old flags, declared on the option before they became
    ``Flag`` rows): warns, and keeps them for ``old_flags`` to serve."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, aliases=(), **kwargs):
        init(self, *args, **kwargs)
        if aliases:
            warn("analyses.registry.Cli(aliases=)", "a Flag(analysis, old, option) row of poslens.deprecated.TABLE")
            object.__setattr__(self, "old_aliases", tuple(aliases))

    cls.__init__ = __init__
    return cls


def _declared_aliases(analysis: str) -> dict[str, tuple[str, ...]]:
    """``{option: (old flags, ...)}`` a plug-in analysis still declares with ``Cli(aliases=)``."""
    import inspect
    import typing

    from analyses import get

    try:
        function = inspect.unwrap(get(analysis).body)
    except (KeyError, ValueError, AttributeError):
        return {}
    out = {}
    for p in inspect.signature(function).parameters.values():
        ann = p.annotation
        if isinstance(ann, str):
            try:
                ann = eval(ann, function.__globals__)
            except NameError:
                continue
        if typing.get_origin(ann) is typing.Annotated:
            found = [a for m in typing.get_args(ann)[1:] for a in getattr(m, "old_aliases", ())]
            if found:
                out[p.name] = tuple(found)
    return out


def _not_with(cls):
    """``NotWith`` that also takes ``inputs=`` and the old input names (the parameters before every input became
    ``documents=``): each is read as the kind that parameter held."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, kinds=None, inputs=None):
        given = inputs if inputs is not None else kinds
        if given is None:
            return init(self)
        from corpora.documents import KINDS

        if inputs is not None or any(k in _OLD_INPUTS and k not in KINDS for k in given):
            warn("analyses.registry.NotWith(inputs=)", f"NotWith(kinds) with kinds among {', '.join(KINDS)}")
            given = tuple(dict.fromkeys(_OLD_INPUTS.get(k, k) for k in given))
        init(self, tuple(given))

    cls.__init__ = __init__
    return cls


def formats_for_static(static, formats, function: str, stacklevel: int = 3):
    """What the old ``static=`` keyword asked for, as ``formats=``: ``static=False`` was HTML alone; ``True`` (like
    the default ``None``) was HTML plus PDF and PNG where a browser was found, which is ``formats=None`` now."""
    if static is None:
        return formats
    if formats is not None:
        raise TypeError(f"{function}: static= and formats= both say which files to write; give formats= only")
    warn(f"{function}(static=)", _STATIC, stacklevel=stacklevel)
    return ("html",) if static is False else None


def _save(save):
    """``figures.save`` that also takes ``static=``."""

    @functools.wraps(save)
    def wrapper(fig, stem, formats=None, *, static=None, **kwargs):
        return save(fig, stem, formats_for_static(static, formats, "figures.save"), **kwargs)
    return wrapper


def _hook_table(table):
    """``interp.hook_docs.table`` that also takes its old call, ``table(cls)``."""

    @functools.wraps(table)
    def wrapper(cls, rows=None, family=None, variant=None):
        if rows is None:
            warn("interp.hook_docs.table(cls)", "interp.hook_docs.table(cls, tables()[cls], cls.family)")
            from interp.hook_docs import tables

            rows, family = tables()[cls], cls.family
        return table(cls, rows, family, variant)
    return wrapper


def _runs(**declared):
    """``@runs(small=, main=, real=, memory=)`` above ``@analysis``, as it was: the runs set on the record."""
    from analyses.runs import check

    def declare(function):
        spec = getattr(function, "analysis", None)
        if spec is None:
            raise TypeError(f"@runs goes above @analysis(...) (on {getattr(function, '__name__', function)!r})")
        for setting, run in declared.items():
            check(spec, setting, run)
        for setting, run in declared.items():
            setattr(spec, setting, run)
        return function
    return declare


def _analysis(analysis):
    """``analyses.registry.analysis`` that also reads an analysis module's old flags, ``BUILDS_LOGITS = False`` and
    ``LOSSES_IN_CHUNKS = True``, declared above the function, as ``builds_logits=False``."""

    @functools.wraps(analysis)
    def wrapper(name, **declared):
        declare = analysis(name, **declared)
        if "builds_logits" in declared:
            return declare

        def read_flags(function):
            module = sys.modules.get(function.__module__)
            if hasattr(module, "BUILDS_LOGITS"):
                warn(f"{function.__module__}.BUILDS_LOGITS", "@analysis(..., builds_logits=...)")
                return analysis(name, **declared, builds_logits=bool(module.BUILDS_LOGITS))(function)
            if hasattr(module, "LOSSES_IN_CHUNKS"):
                warn(f"{function.__module__}.LOSSES_IN_CHUNKS", "@analysis(..., builds_logits=...)")
                return analysis(name, **declared, builds_logits=not module.LOSSES_IN_CHUNKS)(function)
            return declare(function)
        return read_flags
    return wrapper


INPUT_KEYWORDS = ("docs", "token_ids", "samples", "texts")  # what documents= was called before it was one keyword


def old_flags(analysis: str) -> dict[str, tuple[str, ...]]:
    """``{option: (old flags, ...)}`` of ``analysis`` (its ``Flag`` entries): what ``poslens analyze`` still parses."""
    out: dict[str, tuple] = {}
    for entry in TABLE:
        if isinstance(entry, Flag) and entry.analysis == analysis:
            out[entry.option] = out.get(entry.option, ()) + (entry.old,)
    for option, flags in _declared_aliases(analysis).items():
        out[option] = tuple(dict.fromkeys(out.get(option, ()) + flags))
    return out


def old_keywords(spec) -> dict[str, str]:
    """An analysis' old Python keywords, ``{old: option}``: its options' old flags (``--n-samples`` ->
    ``n_samples=``)."""
    return {flag.lstrip("-").replace("-", "_"): option for option, flags in old_flags(spec.name).items()
            for flag in flags}


def _current_keywords(spec, kwargs: dict, stacklevel: int) -> dict:
    """``kwargs`` with an analysis' old keywords (``old_keywords``) and the old names of ``documents=``
    (``INPUT_KEYWORDS``) under their current names, each with its warning."""
    kwargs = dict(kwargs)
    for old, new in old_keywords(spec).items():
        if old in kwargs:
            warnings.warn(f"{spec.name}: '{old}=' is now '{new}=' (the old spelling is removed on {REMOVAL})",
                          PoslensDeprecationWarning, stacklevel=stacklevel)
            kwargs[new] = kwargs.pop(old)
    if any(opt.name == "documents" for opt in spec.options):
        for old in INPUT_KEYWORDS:
            if old in kwargs:
                warnings.warn(f"{spec.name}: '{old}=' is now 'documents=' (the old spelling is removed on "
                              f"{REMOVAL})", PoslensDeprecationWarning, stacklevel=stacklevel)
                value = kwargs.pop(old)
                if value is not None and kwargs.get("documents") is not None:
                    from analyses.registry import OptionError

                    raise OptionError(f"{spec.name}: {old}= and documents= both give the input: use documents=")
                kwargs["documents"] = value if value is not None else kwargs.get("documents")
    return kwargs


def _analysis_record(cls):
    """``Analysis.bind`` and ``Analysis.check_options`` that also read an analysis' old keywords
    (``_current_keywords``)."""
    bind, check_options = cls.bind, cls.check_options

    @functools.wraps(bind)
    def bind_current(self, model, kwargs: dict, *, label=None) -> dict:
        return bind(self, model, _current_keywords(self, kwargs, 5), label=label)

    @functools.wraps(check_options)
    def check_current(self, kwargs: dict, *, label=None) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PoslensDeprecationWarning)  # bind warns once, with the same words
            kwargs = _current_keywords(self, kwargs, 5)
        return check_options(self, kwargs, label=label)

    cls.bind, cls.check_options = bind_current, check_current
    return cls


_SHARDS = "{FORMAT,ShardError,parse_share,arguments_record,manifest_path,read_shards}"
_PLAN = "{INC,REPO,DSTG,HEADS,KNOWN,INCREMENT_MODELS,DECODERS,ENCODERS,PRETRAINED}"
_FAMILIES = "{" + ",".join(FAMILIES) + "}"
_STATIC = "formats=['html'] for static=False, formats=None (the default) for True"

TABLE: tuple = (
    # module paths that moved
    Moved("interp.models", "interp.families"),
    Moved(f"interp.models.{_FAMILIES}", f"interp.families.{_FAMILIES}.model"),
    Moved(f"interp.loading.{_FAMILIES}", f"interp.families.{_FAMILIES}.checkpoints"),
    Alias(f"interp.loading.{_FAMILIES}.FAMILY", f"interp.families.{_FAMILIES}.FAMILY.name"),
    Alias("interp.loading.bert.load_hf_dir", "interp.load(path, family='bert')", lambda: _load_hf_dir("bert")),
    Alias("interp.loading.bert.from_hf_state", "interp.load(transformers_model, family='bert')",
          lambda: _from_hf_state),
    Alias("interp.loading.llama.load_hf_dir", "interp.load(path, family='llama')", lambda: _load_hf_dir("llama")),
    Alias("interp.loading.repo.is_hf_dir", "interp.families.repo.checkpoints.is_hf_dir(Checkpoint(path))",
          lambda: _is_dir("repo", "is_hf_dir")),
    Alias("interp.loading.repo.hf_tokenizer", "interp.loading.hf_files.read_tokenizer"),
    Alias("interp.loading.encoder.is_hf_dir", "interp.families.encoder.checkpoints.is_dev_dir(Checkpoint(path))",
          lambda: _is_dir("encoder", "is_dev_dir")),
    Alias("interp.loading.encoder.save_state_pt", "interp.save(model, directory) (a poslens directory)",
          lambda: _save_state_pt),
    Alias("interp.loading.hf.TOKENIZER_FILES",
          "interp.loading.hf_files.VOCABULARY_FILES (which leaves out tokenizer_config.json)",
          lambda: ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                   "spiece.model")),
    Moved("interp.registry", "interp.catalog"),
    Moved("interp.packaged", "interp.catalog"),
    Moved("interp.packages", "interp.package_files"),
    Moved("interp.relative", "interp.families.encoder.relative"),
    Moved("analyses.tables", "analyses.nan_policy"),
    Moved("analyses.common", "analyses.increment_hooks"),
    Moved("analyses.columns", "poslens.deprecated"),
    Alias("analyses.columns.current", "poslens.deprecated.current_columns"),
    Alias("analyses.common.{no_grad,check_window}", "analyses.registry.{no_grad,check_window}"),
    # names gone from modules that are still there
    Alias("interp.loading.FAMILIES", "interp.families.get(name) (a Family record: build, export)", _families_by_name),
    Alias("interp.loading.HF_TYPES", "interp.families.families() and each Family's hf_model_types",
          _families_by_model_type),
    Alias("interp.loading.sha256_of", "interp.fingerprint.files_sha256"),
    Alias("interp.loading.hf_files.model_type", "interp.loading.checkpoint.Checkpoint(path).model_type",
          lambda: _model_type),
    Removed("interp.loading.hf_config.ROPE_FIELDS", "nothing read it; rope_settings(raw, where) reads rope_theta, "
                                                    "rope_scaling and rope_parameters from a config"),
    Alias("interp.families.encoder.model.{DSTGEncoder,APEncoder,RPEncoder,RoPEEncoder}",
          "interp.families.encoder.model.EncoderModel"),
    Alias("interp.families.encoder.model.VARIANT_CLASSES",
          "interp.families.encoder.model.EncoderModel (one class for every variant; cfg.variant picks it)",
          _variant_classes),
    Alias("interp.base.TOKEN_DIMS", "interp.hooks.TOKEN_DIMS"),
    Alias("interp.base.BLOCK_HOOKS", "interp.hooks.BlockHooks and interp.hooks.AttentionHooks (Hook declarations)",
          _block_hooks),
    Alias("interp.hook_docs.families",
          "list(interp.hook_docs.tables()) (model classes; interp.families.families() gives the families)",
          lambda: _model_classes),
    Alias("interp.attention.request.{CHUNK_BYTES,CUDA_CHUNK_SHARE,CUDA_CHUNK_MAX,chunk_budget}",
          "interp.attention.budget.{CHUNK_BYTES,CUDA_CHUNK_SHARE,CUDA_CHUNK_MAX,chunk_budget}"),
    Alias("interp.attention.backends.lse.{plain_lse,with_fallback}",
          "interp.attention.backends.private.{plain_lse,with_fallback}"),
    Removed("interp.attention.WINDOW_CHUNK_BYTES", "a key window's chunk takes a quarter of the device's budget: "
            "interp.attention.budget.chunk_budget(device) // interp.attention.budget.WINDOW_SHARE"),
    Removed("interp.hook_docs.ORDER", "tables follow the order of interp.families.MODULES, then plug-ins as "
                                      "registered"),
    Wrapped("interp.hook_docs.table(cls)", "interp.hook_docs.table(cls, tables()[cls], cls.family)",
            "interp.hook_docs", "table", _hook_table),
    Alias(f"interp.parallel.{_SHARDS}", f"poslens.shards.{_SHARDS}"),
    Alias("interp.parallel.ShardWritten", "interp.parallel.StopShare"),
    Removed("interp.parallel.weights_hash", "shard manifests identify a model by "
                                            "interp.fingerprint.weights_sha256(model), a hash of its weights (not the "
                                            "checkpoint file's sha256)"),
    Wrapped("`interp.parallel.session(shard_dir=)` (and `shard=`, `flush_every=`, `serve=`, `analysis=`, `models=`, "
            "`options=`, `seed=`)", "store=poslens.shards.ShardStore(...) and share=(i, n)",
            "interp.parallel", "session", _session),
    Alias("analyses.{MODULES,load_all}", "analyses.registry.{MODULES,load_all}"),
    Alias(f"poslens.reproduce.{_PLAN}", f"analyses.runs.{_PLAN}"),
    Wrapped("analyses.registry.Cli(aliases=)", "a Flag(analysis, old, option) row of poslens.deprecated.TABLE",
            "analyses.registry", "Cli", _cli),
    Wrapped("analyses.registry.NotWith(inputs=)", "NotWith(kinds) with kinds among texts, tokens, prompts",
            "analyses.registry", "NotWith", _not_with),
    Alias("probes.position.ProbeDoc", "corpora.documents.Window(document, ids, spans, text=text)", _probe_doc),
    Alias("probes.position.probe_documents", "corpora.contexts.wikipedia_windows"),
    Alias("probes.position.user_probe_documents", "corpora.contexts.analysis_windows(model, 'position-probes', "
                                                  "documents, length=max_tokens, whole=True)",
          lambda: _user_probe_documents),
    Alias("corpora.contexts.user_windows", "corpora.contexts.analysis_windows(model, analysis, documents, "
                                          "length=length)", lambda: _user_windows),
    Alias("corpora.contexts.text_contexts", "[w.ids for w in corpora.contexts.analysis_windows(model, analysis, "
                                            "documents, length=length, n_docs=n_docs, seed=seed)]",
          lambda: _text_contexts),
    Wrapped("corpora.documents.Document(doc_id=)", "Document(id=...)", "corpora.documents", "Document", _document),
    Said("corpora.documents.Document.doc_id", "Document.id", "poslens.deprecated._document"),
    Wrapped("Window(document, index, start, ids, spans)", "Window(document, ids, spans, index=..., start=...)",
            "corpora.documents", "Window", _window),
    Alias("corpora.documents.user_inputs", "corpora.user.user_inputs"),
    Alias("corpora.user.Texts", "a {id: text} dict or corpora.documents.Documents, given as documents=",
          lambda: _Texts),
    Said("poslens.run.run_analysis(static=)", _STATIC, "poslens.run.run_analysis"),
    Wrapped("figures.save(static=)", _STATIC, "figures.save", "save", _save),
    Said("poslens.outputs.under_lock(name)", "@under_lock (the lock is named by the function's name argument)",
         "poslens.outputs.under_lock"),
    Wrapped("figures.render.output_stem(csv, name, ...)", "output_stem(csv, out, template, width, height)",
            "figures.render", "output_stem", _output_stem),
    Alias("interp.interventions.needs", "interp.capabilities.require(model, capability, name, kind='intervention')",
          lambda: _needs),
    Wrapped("LOSSES_IN_CHUNKS = True (an analysis module's flag)", "@analysis(..., builds_logits=False)",
            "analyses.registry", "analysis", _analysis),
    Said("BUILDS_LOGITS = False (an analysis module's flag)", "@analysis(..., builds_logits=False)",
         "poslens.deprecated._analysis"),
    Wrapped("an analysis' old keywords: its options' old flags (`n_samples=` for `--n-samples`, ...) and `docs=`, "
            "`token_ids=`, `samples=`, `texts=`", "the option's name; `documents=`", "analyses.registry", "Analysis",
            _analysis_record),
    # options' old command-line flags (poslens analyze ANALYSIS OLD), and their keywords in Python
    Flag("loss-neutrality", "--n-windows", "n_docs"),
    Flag("loss-neutrality", "--context", "length"),
    Flag("word-boundaries", "--max-docs", "n_docs"),
    Flag("word-boundaries", "--max-bytes", "length"),
    Flag("niah-accuracy", "--n-samples", "n_docs"),
    Flag("attention-mass", "--n-samples", "n_docs"),
    Flag("attention-mass", "--context-tokens", "length"),
    Flag("position-ranges", "--n-contexts", "n_docs"),
    Flag("position-ranges", "--context-tokens", "length"),
    Flag("position-patterns", "--context-tokens", "length"),
    Flag("kl-ablation", "--max-tokens", "length"),
    Flag("compare-heads", "--max-tokens", "length"),
    Flag("position-probes", "--max-tokens", "length"),
    Flag("head-profiles", "--n-contexts", "n_docs"),
    Flag("head-profiles", "--context-tokens", "length"),
    Flag("head-profiles", "--n-samples", "niah_prompts"),
    Flag("rope-frequencies", "--n-samples", "niah_prompts"),
    Flag("retrieval-heads", "--n-samples", "niah_prompts"),
    Alias("analyses.runs.runs", "@analysis(..., small=Run(...), main=..., real=..., memory=...)", lambda: _runs),
    Said("threads.choose(load=)", "busy=, the cores other processes keep busy", "poslens.threads.choose"),
    # result columns, read back under their new names wherever poslens reads a CSV (figures.read_table: poslens figure)
    Column("attention-mass", "{n_samples,context_tokens}", "{n_docs,length}"),
    Column("niah-accuracy", "{n_samples,context_tokens}", "{n_docs,length}"),
    Column("loss-neutrality", "{n_windows,context}", "{n_docs,length}"),
    Column("head-profiles", "{n_contexts,context_tokens,n_samples}", "{n_docs,length,niah_prompts}"),
    Column("rope-frequencies", "{n_contexts,context_tokens,n_samples,logit_share}",
           "{n_docs,length,niah_prompts,poslens_logit_share}"),
    Column("retrieval-heads", "{n_samples,prompt_tokens}", "{niah_prompts,length}"),
    Column("sink-rate", "{n_contexts,is_sink}", "{n_docs,sink_share}"),
    Filled("sink-rate", "estimator", "poslens", ("is_sink",)),
    Column("position-probes", "{n_train_docs,n_test_docs}", "{n_train,n_test}"),
)


# ---- reading the table ---------------------------------------------------------------------------------------------


def _old_names() -> list[tuple[str, str, str, Alias | Removed]]:
    """``(module, name, new spelling, entry)`` of every ``Alias`` and ``Removed``, braces expanded."""
    out = []
    for entry in TABLE:
        if isinstance(entry, (Alias, Removed)):
            for old, new in _pairs(entry.old, entry.new if isinstance(entry, Alias) else entry.instead):
                module, _, name = old.rpartition(".")
                out.append((module, name, new, entry))
    return out


def moved_modules() -> dict[str, tuple[str, dict]]:
    """``{old module path: (new module path, {name: (new spelling, Alias | Removed)})}``."""
    out = {old: (new, {}) for entry in TABLE if isinstance(entry, Moved) for old, new in _pairs(entry.old, entry.new)}
    for module, name, new, entry in _old_names():
        if module in out:
            out[module][1][name] = (new, entry)
    return out


def names() -> dict[str, dict[str, tuple[str, Alias | Removed]]]:
    """``{module: {old name: (new spelling, entry)}}`` for the names gone from modules that are still there."""
    moved = moved_modules()
    out: dict[str, dict] = {}
    for module, name, new, entry in _old_names():
        if module not in moved:
            out.setdefault(module, {})[name] = (new, entry)
    return out


_READERS = (Wrapped("", "", "figures.render", "read_table", _read_table),)  # where Column and Filled are applied


def wrapped() -> dict[str, list[Wrapped]]:
    out: dict[str, list] = {}
    for entry in TABLE + _READERS:
        if isinstance(entry, Wrapped):
            out.setdefault(entry.module, []).append(entry)
    return out


def columns() -> dict[str, dict[str, str]]:
    """``{analysis: {old column: new column}}``."""
    out: dict[str, dict] = {}
    for entry in TABLE:
        if isinstance(entry, Column):
            out.setdefault(entry.analysis, {}).update(_pairs(entry.old, entry.new))
    return out


def flag_spelling(analysis: str, flag: str) -> str:
    """How README.md and the warning write an old flag: ``poslens analyze retrieval-heads --n-samples``."""
    return f"poslens analyze {analysis} {flag}"


def column_spelling(analysis: str, column: str) -> str:
    """How README.md and the warning write an old column: ``sink-rate column is_sink``."""
    return f"{analysis} column {column}"


def current_columns(analysis: str, df, source: str = "", *, quiet: bool = False):
    """``df`` (an ``analysis`` table read from ``source``) with its old column names replaced by the current ones and
    the columns an older poslens did not write filled in (``Filled``), each with a ``PoslensDeprecationWarning`` unless
    ``quiet``; a table that already has the new column keeps both."""
    renames = {old: new for old, new in columns().get(analysis, {}).items()
               if old in df.columns and new not in df.columns}
    where = f"{source}: " if source else ""
    if not quiet:
        for old, new in renames.items():
            warnings.warn(where + message(column_spelling(analysis, old), new), PoslensDeprecationWarning,
                          stacklevel=3)
    fills = [e for e in TABLE if isinstance(e, Filled) and e.analysis == analysis and e.column not in df.columns
             and all(c in df.columns for c in e.when)]
    df = df.rename(columns=renames) if renames else df
    for entry in fills:
        if not quiet:
            warnings.warn(where + message(entry.old, entry.new), PoslensDeprecationWarning, stacklevel=3)
        df = df.assign(**{entry.column: entry.value})
    return df


def rows() -> list[tuple[str, str]]:
    """README.md's rows: ``(old spelling, new spelling)``, braces kept."""
    out = []
    for entry in TABLE:
        for row in entry.rows():
            if row not in out:
                out.append(row)
    return out


def _cell(text: str) -> str:
    """A spelling in code type, unless it marks its own code spans."""
    return text if "`" in text else f"`{text}`"


def markdown() -> str:
    lines = ["| old spelling | new spelling | removed on |", "| --- | --- | --- |"]
    lines += [f"| {_cell(old)} | {_cell(new)} | {REMOVAL} |" for old, new in rows()]
    return "\n".join(lines)


START, END = "<!-- deprecated -->\n", "<!-- /deprecated -->"  # interp.readme.markers("deprecated")


def readme_section(text: str) -> str:
    from interp import readme

    return readme.section(text, START, END)


def sync_readme(path) -> bool:
    from interp import readme

    return readme.sync(path, markdown(), START, END)


# ---- serving it ----------------------------------------------------------------------------------------------------


def _lookup(module: str, name: str, new: str, entry, stacklevel: int):
    if isinstance(entry, Removed):
        raise RemovedError(f"{module}.{name} was removed and has no replacement: {entry.instead}")
    warn(f"{module}.{name}", new, stacklevel + 1)
    return entry.value(new)


def _serve_names(module: types.ModuleType, table: dict) -> None:
    """Give ``module`` a ``__getattr__`` serving ``table``'s names; its own (a lazy export) answers the others."""
    own = module.__dict__.get("__getattr__")
    if getattr(own, "_poslens_deprecated", False):
        return
    name_of = module.__name__

    def __getattr__(name: str):
        if name in table:
            return _lookup(name_of, name, *table[name], 2)
        if own is not None:
            return own(name)
        raise AttributeError(f"module {name_of!r} has no attribute {name!r}")

    __getattr__._poslens_deprecated = True
    module.__getattr__ = __getattr__


def _wrap(module: types.ModuleType) -> list[tuple]:
    """Put each ``Wrapped`` entry of ``module`` in place; ``[(original, wrapped)]``."""
    done = []
    for entry in wrapped().get(module.__name__, ()):
        function = getattr(module, entry.name)
        if not getattr(function, "_poslens_deprecated", False):
            new = entry.wrap(function)
            new._poslens_deprecated = True
            setattr(module, entry.name, new)
            done.append((function, new))
    return done


def _serve(module: types.ModuleType) -> list[tuple]:
    table = names().get(module.__name__)
    if table:
        _serve_names(module, table)
    return _wrap(module)


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str, table: dict):
        self.new, self.table = new, table

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        old, new, table = module.__name__, self.new, self.table
        warn(old, new, stacklevel=2)  # importlib's frames are skipped: the warning points at the importing line
        module.__path__ = []  # a package, so that its old submodules (interp.models.bert) are found too

        def __getattr__(name: str):
            if name in table:
                return _lookup(old, name, *table[name], 2)
            if name == "__all__":
                target = importlib.import_module(new)
                return [n for n in getattr(target, "__all__", dir(target)) if not n.startswith("_")] + \
                    [n for n, (_, e) in table.items() if isinstance(e, Alias)]
            if name.startswith("__"):
                raise AttributeError(name)
            target = importlib.import_module(new)
            try:
                return getattr(target, name)
            except AttributeError:
                raise AttributeError(f"module {old!r} (now {new!r}) has no attribute {name!r}") from None

        def __dir__():
            return sorted(set(dir(importlib.import_module(new))) | set(table))

        module.__getattr__, module.__dir__ = __getattr__, __dir__
        module.__doc__ = f"Deprecated path of ``{new}``; removed on {REMOVAL}."


class _ServingLoader(importlib.abc.Loader):
    """The module's own loader, then ``_serve``."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _serve(module)


class Finder(importlib.abc.MetaPathFinder):
    """Serves the moved module paths, and gives the modules with old names or wrapped calls their aliases as they are
    imported."""

    _poslens_deprecated = True

    def __init__(self):
        self.moved = moved_modules()
        self.served = set(names()) | set(wrapped())

    def find_spec(self, fullname, path, target=None):
        if fullname in self.moved:
            new, table = self.moved[fullname]
            return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new, table), is_package=True)
        if fullname not in self.served:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _ServingLoader):
                    spec.loader = _ServingLoader(spec.loader)
                return spec
        return None


def install() -> Finder:
    """Put the finder on ``sys.meta_path`` (once) and serve the modules already imported."""
    for finder in sys.meta_path:
        if getattr(finder, "_poslens_deprecated", False):  # this module's, run as __main__ too
            return finder
    finder = Finder()
    sys.meta_path.insert(0, finder)
    done = [pair for name in finder.served if name in sys.modules for pair in _serve(sys.modules[name])]
    if done:  # a module imported before this one took the function itself (from figures.render import read_table)
        replace = {id(old): new for old, new in done}
        packages = ("interp", "corpora", "probes", "analyses", "figures", "poslens", "bench")
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").split(".")[0] in packages:
                for key, value in list(vars(module).items()):
                    if id(value) in replace and not isinstance(value, type):
                        setattr(module, key, replace[id(value)])
    return finder


install()

if __name__ == "__main__":
    from interp import readme

    readme.command(sys.argv[1:], markdown, sync_readme)
