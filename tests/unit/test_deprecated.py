"""Old spellings keep working until their removal date: every entry of the one table, ``poslens.deprecated.TABLE``, is
checked here (it warns, naming the new spelling and the date, and gives the object the new spelling gives), each alias
whose arguments changed is checked for the behaviour it promises, README.md's "Deprecated names" is the table's, and no
module outside the table's machinery has a module-level ``__getattr__`` but a lazy export."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from interp.deprecation import PoslensDeprecationWarning
from poslens import deprecated

ROOT = Path(__file__).resolve().parents[2]
DATE = "2027-05-24"
MOVED = deprecated.moved_modules()
NAMES = [(f"{module}.{name}", new, entry) for module, table in deprecated.names().items()
         for name, (new, entry) in table.items()]
COLUMNS = [(a, old, new) for a, table in deprecated.columns().items() for old, new in table.items()]
CALLS = [e.old for e in deprecated.TABLE if isinstance(e, (deprecated.Wrapped, deprecated.Said))]
FLAGS = [e for e in deprecated.TABLE if isinstance(e, deprecated.Flag)]
LAZY_EXPORTS = {"interp/__init__.py", "poslens/__init__.py", "poslens/reproduce.py", "bench/memory.py",
                "bench/script.py"}


def _fresh_import(path: str):
    """Import a module again (so its import-time warning fires), dropping any earlier copy."""
    sys.modules.pop(path, None)
    return importlib.import_module(path)


def test_the_table_holds_every_kind_of_alias_with_the_one_date():
    assert len(deprecated.rows()) > 40 and deprecated.REMOVAL == DATE
    assert {type(e).__name__ for e in deprecated.TABLE} == {"Moved", "Alias", "Removed", "Wrapped", "Said", "Flag",
                                                             "Column", "Filled"}


def test_the_readme_section_is_the_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert deprecated.readme_section(text) == deprecated.markdown() + "\n", \
        "run: python -m poslens.deprecated --write README.md"
    assert "removed on" in deprecated.markdown() and DATE in text[text.index("## Deprecated names"):]


@pytest.mark.parametrize("entry", FLAGS, ids=lambda e: f"{e.analysis} {e.old}")
def test_an_old_flag_names_an_option_of_an_analysis_and_no_live_flag(entry):
    from analyses import get

    options = get(entry.analysis).options
    assert entry.option in {o.name for o in options} and entry.old not in {o.flag for o in options}


def test_the_core_declares_no_old_flags():
    """Old flags are rows of the table: neither ``Cli`` nor ``Option`` has a field for them, and no analysis module
    spells one."""
    import dataclasses

    from analyses.registry import Cli, Option

    assert not {"aliases"} & {f.name for cls in (Cli, Option) for f in dataclasses.fields(cls)}
    for path in (ROOT / "analyses").glob("*.py"):
        assert "aliases=" not in path.read_text(encoding="utf-8"), path.name
        assert not {e.old for e in FLAGS} & set(re.findall(r'"(--[\w-]+)"', path.read_text(encoding="utf-8"))), \
            path.name


def test_an_old_flag_parses_to_its_option_with_the_warning():
    from analyses import get
    from poslens.cli import build_parser
    from poslens.commands import spelled

    argv = ["analyze", "retrieval-heads", "--model", "m", "--out", "o", "--n-samples", "4"]
    args = build_parser(argv).parse_args(argv)
    with pytest.warns(PoslensDeprecationWarning, match="poslens analyze retrieval-heads --n-samples is deprecated: "
                                                       f"use --niah-prompts \\(the old spelling is removed on {DATE}"):
        assert spelled(args, get("retrieval-heads")) == {"niah_prompts": "--n-samples"}
    assert get("retrieval-heads").parse_cli(vars(args)) == {"niah_prompts": 4}


def test_no_file_is_left_at_an_old_module_path():
    for old in MOVED:
        assert importlib.util.find_spec(old.split(".")[0]) is not None
        path = ROOT / old.replace(".", "/")
        assert not path.with_suffix(".py").exists() and not (path / "__init__.py").exists(), old


def _module_getattrs() -> list[str]:
    out = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv/", "tests/", "notebooks/")) or "/." in rel:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            named = [node.name] if isinstance(node, ast.FunctionDef) else \
                [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)] + \
                [e.id for t in getattr(node, "targets", []) if isinstance(t, ast.Tuple) for e in t.elts
                 if isinstance(e, ast.Name)]
            if "__getattr__" in named:
                out.append(rel)
    return sorted(set(out))


def test_a_module_getattr_is_a_lazy_export_or_the_tables_machinery():
    assert set(_module_getattrs()) <= LAZY_EXPORTS, "an old name belongs in poslens.deprecated.TABLE"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_warns_and_gives_the_new_modules_objects(old):
    new, own = MOVED[old]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if old.count(".") > 1:
            importlib.import_module(old.rsplit(".", 1)[0])
    with pytest.warns(DeprecationWarning, match=re.escape(deprecated.message(old, new))):
        module = _fresh_import(old)
    target = importlib.import_module(new)
    names = [n for n in dir(target) if not n.startswith("_") and n not in own]
    assert names
    for name in names:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(module, name)
        assert not caught, f"{old}.{name} warns but has no entry"
        assert value is getattr(target, name), f"{old}.{name}"


def _names_in_moved():
    return [(f"{old}.{name}", new, entry) for old, (_, table) in MOVED.items() for name, (new, entry) in table.items()]


@pytest.mark.parametrize("old,new,entry", [pytest.param(*n, id=n[0]) for n in NAMES + _names_in_moved()
                                           if isinstance(n[2], deprecated.Alias)])
def test_an_old_name_warns_and_gives_the_new_object(old, new, entry):
    parent, name = old.rsplit(".", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(parent)
    with pytest.warns(DeprecationWarning, match=re.escape(deprecated.message(old, new))):
        value = getattr(module, name)
    if entry.get is None:
        assert value is deprecated._read(new) or value == deprecated._read(new)


def test_the_column_entries_are_the_renames_the_readers_know():
    assert ("sink-rate", "is_sink", "sink_share") in COLUMNS and len(COLUMNS) == 19


@pytest.mark.parametrize("analysis,old,new", [pytest.param(*c, id=f"{c[0]}.{c[1]}") for c in COLUMNS])
def test_an_old_column_is_read_back_under_its_new_name(analysis, old, new, tmp_path):
    """An older poslens' CSV: ``poslens figure``'s reader and the known-results reader rename the column, warning."""
    import pandas as pd

    from figures.render import read_table
    from poslens.known_types import Results

    csv = tmp_path / f"{analysis}.csv"
    pd.DataFrame({"model": ["a", "b"], old: [3, 5], "other": [0.5, 1.5]}).to_csv(csv, index=False)
    expected = deprecated.message(f"{analysis} column {old}", new)
    with pytest.warns(DeprecationWarning) as caught:
        table = read_table(csv)
    with pytest.warns(DeprecationWarning) as again:
        known = Results(tmp_path)[analysis]
    for warned in (caught, again):
        assert any(str(w.message).endswith(expected) for w in warned)
    for df in (table, known):
        assert list(df.columns)[:3] == ["model", new, "other"] and df[new].tolist() == [3, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoslensDeprecationWarning)
        pd.DataFrame({"model": ["a"], new: [7]}).to_csv(csv, index=False)
        assert read_table(csv)[new].tolist() == [7]  # a current table reads quietly
        pd.DataFrame({"model": ["a"], old: [7]}).to_csv(tmp_path / "other-name.csv", index=False)
        assert old in read_table(tmp_path / "other-name.csv").columns  # another analysis' table keeps its columns


def test_a_sink_rate_table_from_before_the_renames_draws(tmp_path):
    """``poslens figure`` on a sink-rate table written before the column renames and before ``--estimator``: its
    columns are mapped (``is_sink``, ``n_contexts``; ``estimator`` filled in as ``poslens``) before the figure runs."""
    import pandas as pd

    from poslens.cli import main

    rows = [dict(model="m", input=i, start_token=s, length=64, layer=l, depth=l / 1, head=h,
                 first_token_mass=0.5, is_sink=h == 0, epsilon=0.3, n_contexts=4)
            for i in ("text", "random") for s in (True, False) for l in (0, 1) for h in (0, 1)]
    csv = tmp_path / "sink-rate.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    with pytest.warns(PoslensDeprecationWarning) as caught:
        main(["figure", str(csv), "--analysis", "sink-rate", "--format", "html", "--out", str(tmp_path / "out")])
    said = " ".join(str(w.message) for w in caught)
    assert "sink-rate column is_sink" in said and "estimator = 'poslens'" in said
    assert list((tmp_path / "out").glob("sink-rate*.html"))


def test_the_kept_known_results_are_read_under_the_new_names_quietly():
    from poslens.known_types import EVIDENCE, Results

    with warnings.catch_warnings():
        warnings.simplefilter("error", PoslensDeprecationWarning)
        results = Results(EVIDENCE)
        rope, retrieval, sink = results["rope-frequencies"], results["retrieval-heads"], results["sink-rate"]
    assert {"n_docs", "length", "niah_prompts"} <= set(rope.columns) \
        and not {"n_contexts", "n_samples"} & set(rope.columns)
    assert {"niah_prompts", "length"} <= set(retrieval.columns) and "n_docs" in sink.columns


def test_a_warning_points_at_the_line_that_used_the_old_name():
    sys.modules.pop("interp.registry", None)
    code = compile("import interp.registry\nfrom interp.base import TOKEN_DIMS\n", "old_script.py", "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, {})
    assert [(w.filename, w.lineno) for w in caught] == [("old_script.py", 1), ("old_script.py", 2)]


def test_a_fresh_process_that_imports_poslens_reads_the_old_paths():
    import subprocess

    code = ("import warnings; warnings.simplefilter('ignore'); import analyses.registry, interp.catalog, poslens; "
            "from interp.registry import entries as old; from analyses import MODULES; "
            "assert old is interp.catalog.entries and MODULES is analyses.registry.MODULES; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("statement,why", [
    ("from interp.parallel import weights_hash", "weights_sha256"),
    ("from interp.hook_docs import ORDER", "interp.families.MODULES"),
    ("from interp.loading.hf_config import ROPE_FIELDS", "rope_settings"),
])
def test_a_removed_name_says_what_to_use(statement, why):
    with pytest.raises(deprecated.RemovedError, match=f"no replacement: .*{re.escape(why)}"):
        exec(statement, {})


def test_other_missing_names_are_still_attribute_errors():
    import interp.parallel

    assert not hasattr(interp.parallel, "no_such_name")
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec("from interp.loading import no_such_name", {})


# ---- aliases whose arguments changed: the behaviour they promise ---------------------------------------------------


def test_probe_doc_builds_the_window_the_probes_read():
    from corpora.documents import Window
    from corpora.user import user_inputs

    with pytest.warns(DeprecationWarning, match="probes.position.ProbeDoc is deprecated: use corpora.documents.Window"):
        from probes.position import ProbeDoc
    doc = ProbeDoc("ab", (5, 6), [(0, 1), (1, 2)])
    assert isinstance(doc, Window)
    assert (doc.text, doc.ids, doc.spans) == ("ab", [5, 6], [(0, 1), (1, 2)])
    assert user_inputs([ProbeDoc("", [1, 2, 3], [])], "kl-ablation", accepts=("tokens",)).items[0].ids == [1, 2, 3]


def test_document_doc_id():
    from corpora.documents import Document

    with pytest.warns(DeprecationWarning, match=re.escape(deprecated.message("corpora.documents.Document(doc_id=)",
                                                                             "Document(id=...)"))):
        doc = Document(doc_id="d7", text="x", source="enwiki")
    assert doc == Document("d7", "x", "enwiki")
    with pytest.warns(DeprecationWarning, match="Document.doc_id is deprecated: use Document.id"):
        assert doc.doc_id == "d7"


def test_window_in_its_old_field_order():
    from corpora.documents import Window

    with pytest.warns(DeprecationWarning, match=re.escape("Window(document, index, start, ids, spans) is deprecated")):
        old = Window("d", 2, 40, [7, 8], [(0, 1), (1, 2)])
    assert old == Window("d", [7, 8], [(0, 1), (1, 2)], index=2, start=40)


def test_texts_is_read_as_documents_with_their_source():
    from corpora.user import as_documents, documents_record

    with pytest.warns(DeprecationWarning, match="corpora.user.Texts is deprecated"):
        from corpora.user import Texts
    texts = Texts({"a": "first", "b": "second"})
    texts.source = {"path": "notes.jsonl", "bytes": 12, "sha256": "0" * 64}
    assert [(d.id, d.text) for d in as_documents(texts)] == [("a", "first"), ("b", "second")]
    assert documents_record(texts) == {"input": texts.source, "n_documents": 2}


@pytest.mark.parametrize("old,kinds", [
    (("documents", "token_ids"), ("texts", "tokens")), (("samples",), ("prompts",)), (("docs", "texts"), ("texts",))])
def test_not_with_reads_old_input_names_as_kinds(old, kinds):
    from analyses.registry import NotWith

    with pytest.warns(DeprecationWarning, match=re.escape("NotWith(inputs=) is deprecated")):
        assert NotWith(inputs=old).kinds == kinds
    with pytest.warns(DeprecationWarning):
        assert NotWith(old).kinds == kinds  # positionally, as the old declarations wrote it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert NotWith(kinds).kinds == kinds
    with pytest.raises(ValueError, match="'bogus' is not a kind of documents="):
        NotWith(("bogus",))


def test_block_hooks_hold_what_every_family_declared():
    from interp.base import HookDoc

    with pytest.warns(DeprecationWarning, match="interp.base.BLOCK_HOOKS is deprecated"):
        from interp.base import BLOCK_HOOKS
    assert BLOCK_HOOKS == (  # the tuple as interp.base declared it before the hooks moved to interp.hooks
        HookDoc("blocks.{l}.hook_resid_pre", "[batch, pos, d_model]", "residual entering layer l"),
        HookDoc("blocks.{l}.attn.hook_attn_scores", "[batch, head, q, k]", "attention logits before the softmax"),
        HookDoc("blocks.{l}.attn.hook_pattern", "[batch, head, q, k]", "attention probabilities"),
        HookDoc("blocks.{l}.hook_attn_out", "[batch, pos, d_model]", "attention output added to the residual"),
        HookDoc("blocks.{l}.hook_resid_mid", "[batch, pos, d_model]", "residual after attention"),
        HookDoc("blocks.{l}.hook_mlp_out", "[batch, pos, d_model]", "MLP output added to the residual"),
        HookDoc("blocks.{l}.hook_resid_post", "[batch, pos, d_model]", "residual leaving layer l"),
    )


def test_loading_families_and_types_are_the_family_records():
    import interp.families as families

    with pytest.warns(DeprecationWarning, match="interp.loading.FAMILIES is deprecated"):
        from interp.loading import FAMILIES
    with pytest.warns(DeprecationWarning, match="interp.loading.HF_TYPES is deprecated"):
        from interp.loading import HF_TYPES
    for name in ("increments", "repo", "encoder", "llama", "bert"):  # the old dict's keys
        assert FAMILIES[name] is families.get(name)
        assert FAMILIES[name].build is families.get(name).build and FAMILIES[name].export is families.get(name).export
    assert {t: f.name for t, f in HF_TYPES.items()} == {"olmo2": "repo", "llama": "llama", "bert": "bert",
                                                        "neobert": "encoder", "dstg": "encoder"}


def test_hf_files_model_type(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{", encoding="utf-8")
    with pytest.warns(DeprecationWarning, match="interp.loading.hf_files.model_type is deprecated"):
        from interp.loading.hf_files import model_type
    assert [model_type(tmp_path), model_type(tmp_path / "broken"),
            model_type(tmp_path / "nothing")] == ["llama", None, None]


def test_old_is_hf_dir_takes_a_path(tmp_path):
    for name, model_type in (("olmo", "olmo2"), ("dev", "dstg"), ("other", "gpt2")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"model_type": model_type}), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from interp.loading import encoder, repo
    with pytest.warns(DeprecationWarning, match=re.escape("interp.loading.repo.is_hf_dir is deprecated")):
        repo_is = repo.is_hf_dir
    with pytest.warns(DeprecationWarning, match=re.escape("interp.loading.encoder.is_hf_dir is deprecated")):
        encoder_is = encoder.is_hf_dir
    assert [repo_is(tmp_path / n) for n in ("olmo", "dev", "other", "none")] == [True, False, False, False]
    assert [encoder_is(tmp_path / n) for n in ("olmo", "dev", "other", "none")] == [False, True, False, False]


def test_under_lock_factory_and_its_fixed_name(tmp_path):
    from poslens.outputs import active, under_lock

    seen = []

    def body(name, out_dir):
        seen.append(sorted(p.name for p in Path(out_dir).glob(".*.lock")))
        file = active().staging / f"{name}.txt"
        file.write_text("x", encoding="utf-8")
        return active().commit([file])

    with pytest.warns(DeprecationWarning, match=re.escape("poslens.outputs.under_lock(name) is deprecated")):
        fixed = under_lock("fixed")(body)
    with pytest.warns(DeprecationWarning):
        plain = under_lock()(body)
    fixed("a", tmp_path)
    plain("b", tmp_path)
    assert seen == [[".fixed.lock"], [".b.lock"]]
    assert sorted(p.name for p in tmp_path.glob("*.txt")) == ["a.txt", "b.txt"]


def test_output_stem_with_its_unused_name(tmp_path):
    from figures.render import output_stem

    csv = tmp_path / "position-ranges.csv"
    with pytest.warns(DeprecationWarning, match=re.escape("output_stem(csv, name, ...) is deprecated")):
        old = output_stem(csv, "position-ranges", tmp_path / "out", "paper", "3.3in", None)
    assert old == output_stem(csv, tmp_path / "out", "paper", "3.3in", None) \
        == tmp_path / "out" / "position-ranges-paper-3.3in"


def test_figures_save_static(tmp_path):
    import plotly.graph_objects as go

    import figures

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    with pytest.warns(DeprecationWarning, match=re.escape("figures.save(static=) is deprecated: use formats=['html']")):
        written = figures.save(fig, tmp_path / "f", static=False)
    assert written == [tmp_path / "f.html"] and sorted(p.name for p in tmp_path.iterdir()) == ["f.html"]
    with pytest.warns(DeprecationWarning):
        old = figures.save(fig, tmp_path / "g", static=True)
    assert [p.suffix for p in old] == [p.suffix for p in figures.save(fig, tmp_path / "h")]  # the default set
    with pytest.raises(TypeError, match="static= and formats= both"):
        figures.save(fig, tmp_path / "k", ["html"], static=False)


class _Planted:
    model_name = "planted"

    def state_dict(self, keep_vars=False):
        import torch

        return {"w": torch.arange(6.0)}


def _run_share(**session):
    from interp import parallel

    with parallel.session(**session):
        return parallel.call(parallel.map_items, lambda x: x * 3, list(range(10)), model=_Planted())


def test_session_shard_keywords_make_the_store(tmp_path):
    from poslens.shards import ShardStore, arguments_record

    with pytest.warns(DeprecationWarning, match=r"interp\.parallel\.session\(\w+=\) is deprecated") as caught:
        old = _run_share(analysis="toy", models=["planted"], options={"n": 1}, seed=3, shard_dir=tmp_path / "old",
                         shard="1/3", flush_every=2)
    assert [re.search(r"session\((\w+)=\)", str(w.message))[1] for w in caught] == \
        ["analysis", "models", "options", "seed", "shard_dir", "shard", "flush_every"]  # one warning per old keyword
    record = arguments_record("toy", ["planted"], {"n": 1}, 3)
    new = _run_share(share=(1, 3), store=ShardStore(tmp_path / "new", record=record, flush_every=2, standalone=True))
    assert old is None and new is None  # a standalone share writes its part and reduces nothing
    written = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in (tmp_path / "old").glob("*.json")}
    assert written and written == {p.name: json.loads(p.read_text(encoding="utf-8"))
                                   for p in (tmp_path / "new").glob("*.json")}
    assert written["share-1-of-3.json"]["args_hash"] == record["args_hash"]
    with pytest.raises(ValueError, match="--shard I/N needs --shard-dir"), pytest.warns(DeprecationWarning):
        _run_share(shard="0/2")
    with pytest.raises(TypeError, match="unexpected keyword argument 'shards'"):
        _run_share(shards="0/2")


@pytest.mark.parametrize("flag,value", [("LOSSES_IN_CHUNKS", True), ("BUILDS_LOGITS", False)])
def test_an_analysis_module_flag_is_read_as_builds_logits(flag, value, monkeypatch):
    import types

    from analyses.registry import _REGISTRY, analysis
    from interp.memory import planned_run

    old = types.ModuleType("my_analysis")
    setattr(old, flag, value)
    monkeypatch.setitem(sys.modules, "my_analysis", old)

    def body(model, *, length: int = 8):
        return None

    body.__module__ = "my_analysis"
    with pytest.warns(PoslensDeprecationWarning, match=rf"my_analysis.{flag} is deprecated: use "
                                                       r"@analysis\(\.\.\., builds_logits=\.\.\.\) .*2027-05-24"):
        declared = analysis("my-old-analysis")(body)
    try:
        assert declared.analysis.builds_logits is False
        plain = types.ModuleType("plain")
        monkeypatch.setitem(sys.modules, "plain", plain)
        body.__module__ = "plain"
        assert analysis("my-old-analysis")(body).analysis.builds_logits is True
        assert planned_run(declared.analysis, {}) is None  # no length option: nothing to plan, quietly
    finally:
        _REGISTRY.pop("my-old-analysis", None)


def test_runs_above_analysis_still_sets_the_runs():
    from analyses.registry import _REGISTRY, analysis
    from analyses.runs import HEADS, Run

    with pytest.warns(PoslensDeprecationWarning, match=r"analyses.runs.runs is deprecated: use @analysis\(\.\.\., "
                                                       r"small=Run"):
        from analyses.runs import runs

    from typing import Annotated

    from analyses.registry import Help

    def body(model, *, n_docs=4):
        return None

    body.__annotations__ = {"n_docs": Annotated[int, Help("documents")]}  # this file's annotations are strings
    try:
        declared = runs(main=Run(("repo-small",), dict(n_docs=2), section=HEADS))(analysis("my-old-runs")(body))
        assert declared.analysis.main == Run(("repo-small",), dict(n_docs=2), section=HEADS)
        with pytest.raises(ValueError, match="quick names length"):
            runs(main=Run(("repo-small",), quick=dict(length=8), section=HEADS))(declared)
        with pytest.raises(TypeError, match=r"@runs goes above @analysis"):
            runs(small=Run(("repo-small",)))(lambda model: None)
    finally:
        _REGISTRY.pop("my-old-runs", None)


def test_a_plug_in_declaring_old_flags_with_cli_aliases_keeps_them_with_a_warning():
    """``Cli(aliases=)`` left the core (its old flags are ``Flag`` rows): a plug-in analysis that still declares one
    gets a warning at its declaration, and its old flag still parses, warning again on use."""
    from typing import Annotated

    from analyses import registry
    from analyses.registry import Cli, Help, analysis
    from poslens.cli import build_parser
    from poslens.commands import spelled

    with pytest.warns(PoslensDeprecationWarning, match=re.escape("analyses.registry.Cli(aliases=) is deprecated")):
        cli = Cli(aliases=("--old-count",))

    def plugin(model, *, count: int = 2):
        raise AssertionError("not run")

    plugin.__annotations__["count"] = Annotated[int, Help("how many"), cli]
    analysis("plugin-old-flag", needs=[])(plugin)
    try:
        assert deprecated.old_flags("plugin-old-flag") == {"count": ("--old-count",)}
        assert deprecated.old_keywords(registry.get("plugin-old-flag")) == {"old_count": "count"}
        argv = ["analyze", "plugin-old-flag", "--model", "m", "--out", "o", "--old-count", "5"]
        args = build_parser(argv).parse_args(argv)
        with pytest.warns(PoslensDeprecationWarning, match="plugin-old-flag --old-count is deprecated: use --count"):
            assert spelled(args, registry.get("plugin-old-flag")) == {"count": "--old-count"}
        assert registry.get("plugin-old-flag").parse_cli(vars(args)) == {"count": 5}
    finally:
        registry._REGISTRY.pop("plugin-old-flag", None)


KEYWORD_TESTS = {  # each entry that is a call, and the test of what it does
    "an analysis' old keywords: its options' old flags (`n_samples=` for `--n-samples`, ...) and `docs=`, "
    "`token_ids=`, `samples=`, `texts=`": "tests/unit/analyses/test_vocabulary.py",
    "threads.choose(load=)": "tests/acceptance/poslens/test_threads.py",
    "corpora.documents.Document.doc_id": test_document_doc_id,
    "interp.hook_docs.table(cls)": "tests/integration/interp/test_deprecated_models.py",
    "`interp.parallel.session(shard_dir=)` (and `shard=`, `flush_every=`, `serve=`, `analysis=`, `models=`, "
    "`options=`, `seed=`)": test_session_shard_keywords_make_the_store,
    "analyses.registry.NotWith(inputs=)": test_not_with_reads_old_input_names_as_kinds,
    "analyses.registry.Cli(aliases=)": test_a_plug_in_declaring_old_flags_with_cli_aliases_keeps_them_with_a_warning,
    "corpora.documents.Document(doc_id=)": test_document_doc_id,
    "Window(document, index, start, ids, spans)": test_window_in_its_old_field_order,
    "poslens.run.run_analysis(static=)": "tests/integration/interp/test_deprecated_models.py",
    "figures.save(static=)": test_figures_save_static,
    "poslens.outputs.under_lock(name)": test_under_lock_factory_and_its_fixed_name,
    "figures.render.output_stem(csv, name, ...)": test_output_stem_with_its_unused_name,
    "LOSSES_IN_CHUNKS = True (an analysis module's flag)": test_an_analysis_module_flag_is_read_as_builds_logits,
    "BUILDS_LOGITS = False (an analysis module's flag)": test_an_analysis_module_flag_is_read_as_builds_logits,
}


def test_every_call_row_has_its_behaviour_test():
    assert set(CALLS) == set(KEYWORD_TESTS)

