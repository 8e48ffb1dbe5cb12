"""Old spellings keep working until their removal date: every row of README.md's "Deprecated names" table is read here
and checked (it warns, naming the new spelling and the date, and gives the object the new spelling gives), and each
alias whose arguments changed is checked for the behaviour it promises. pyproject ignores DeprecationWarnings, so every
check asks for the warning with pytest.warns."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from interp import deprecated
from interp.deprecation import PoslensDeprecationWarning

ROOT = Path(__file__).resolve().parents[3]
DATE = "2027-05-24"


def _expand(text: str) -> list[str]:
    """``a.{x,y}.b`` -> ``["a.x.b", "a.y.b"]``."""
    match = re.search(r"\{(\w+(?:,\w+)+)\}", text)
    if match is None:
        return [text]
    return [out for part in match.group(1).split(",")
            for out in _expand(text[: match.start()] + part + text[match.end():])]


def readme_rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Deprecated names"):]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        old, new, date = re.match(r"`([^`]*)`", cells[0]).group(1), cells[1].strip("`"), cells[2]
        olds, news = _expand(old), _expand(new)
        rows += [(o, n, date) for o, n in zip(olds, news if len(news) == len(olds) else news * len(olds))]
    return rows


def _is_module(path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # finding interp.models.bert imports interp.models
            return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:
        return False


ROWS = readme_rows()
DOTTED = re.compile(r"^[A-Za-z_][\w.]*$")
NAMES = [(o, n) for o, n, _ in ROWS if DOTTED.match(o) and (_is_module(o) or _is_module(o.rsplit(".", 1)[0]))]
COLUMN = re.compile(r"^([\w-]+) column (\w+)$")  # a result column's old name, read back by poslens' CSV readers
COLUMNS = [(COLUMN.match(o).group(1), COLUMN.match(o).group(2), n) for o, n, _ in ROWS if COLUMN.match(o)]
CALLS = [o for o, n, _ in ROWS if (o, n) not in NAMES and not COLUMN.match(o)]  # calls, keywords and attributes: below


def _resolve(path: str):
    """A dotted path read as a module, then attributes (``interp.families.repo.FAMILY.name``), or raises LookupError."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        if _is_module(".".join(parts[:i])):
            obj = importlib.import_module(".".join(parts[:i]))
            try:
                for p in parts[i:]:
                    obj = getattr(obj, p)
            except AttributeError:
                raise LookupError(path) from None
            return obj
    raise LookupError(path)


def _fresh_import(path: str):
    """Import a module again (so its import-time warning fires), dropping any earlier copy."""
    sys.modules.pop(path, None)
    return importlib.import_module(path)


def test_the_table_lists_every_kind_of_alias_with_the_one_date():
    assert len(ROWS) > 40
    assert {date for _, _, date in ROWS} == {DATE} and deprecated.REMOVAL == DATE


@pytest.mark.parametrize("old,new", [pytest.param(o, n, id=o) for o, n in NAMES])
def test_old_name_warns_and_gives_the_new_object(old, new):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for i in range(1, old.count(".")):  # parents (themselves maybe old paths) imported quietly
            if _is_module(old.rsplit(".", i)[0]):
                importlib.import_module(old.rsplit(".", i)[0])
    expected = re.escape(deprecated.message(old, new))
    if _is_module(old):
        with pytest.warns(DeprecationWarning, match=expected):
            module = _fresh_import(old)
        target = importlib.import_module(new)
        names = [n for n in dir(target) if not n.startswith("_")]
        assert names
        own_rows = {o for o, _ in NAMES}
        for name in names:
            if f"{old}.{name}" in own_rows:  # a name that did not move with its module: checked by its own row
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = getattr(module, name)
            assert not caught, f"{old}.{name} warns but has no README row"
            assert value is getattr(target, name), f"{old}.{name}"
        return
    parent, name = old.rsplit(".", 1)
    with pytest.warns(DeprecationWarning, match=expected):
        value = getattr(importlib.import_module(parent), name)
    try:
        target = _resolve(new) if DOTTED.match(new) else None
    except LookupError:
        pytest.fail(f"the new spelling {new} does not exist")
    if target is not None:
        assert value is target or (isinstance(value, str) and value == target)


def test_the_column_rows_are_the_renames_the_readers_know():
    from analyses.columns import RENAMED

    assert sorted(COLUMNS) == sorted((a, old, new) for a, table in RENAMED.items() for old, new in table.items())


@pytest.mark.parametrize("analysis,old,new", [pytest.param(*c, id=f"{c[0]}.{c[1]}") for c in COLUMNS])
def test_an_old_column_is_read_back_under_its_new_name(analysis, old, new, tmp_path):
    """An older poslens' CSV: ``poslens figure``'s reader and the known-results reader rename the column, warning."""
    import pandas as pd

    from figures.render import read_table
    from poslens.known_types import Results

    csv = tmp_path / f"{analysis}.csv"
    pd.DataFrame({"model": ["a", "b"], old: [3, 5], "other": [0.5, 1.5]}).to_csv(csv, index=False)
    expected = re.escape(deprecated.message(f"{analysis} column {old}", new))
    with pytest.warns(DeprecationWarning, match=expected):
        table = read_table(csv)
    with pytest.warns(DeprecationWarning, match=expected):
        known = Results(tmp_path)[analysis]
    for df in (table, known):
        assert list(df.columns) == ["model", new, "other"] and df[new].tolist() == [3, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoslensDeprecationWarning)
        pd.DataFrame({"model": ["a"], new: [7]}).to_csv(csv, index=False)
        assert read_table(csv)[new].tolist() == [7]  # a current table reads quietly
        pd.DataFrame({"model": ["a"], old: [7]}).to_csv(tmp_path / "other-name.csv", index=False)
        assert old in read_table(tmp_path / "other-name.csv").columns  # another analysis' table keeps its columns


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


def test_an_analysis_module_declaring_losses_in_chunks_still_plans_no_logits():
    import types

    from interp.memory import builds_logits

    old = types.ModuleType("my_analysis")
    old.LOSSES_IN_CHUNKS = True
    with pytest.warns(PoslensDeprecationWarning, match=r"my_analysis.LOSSES_IN_CHUNKS is deprecated: declare "
                                                       r"BUILDS_LOGITS = False instead .*2027-05-24"):
        assert builds_logits(old) is False
    new = types.ModuleType("my_analysis")
    new.BUILDS_LOGITS = False
    assert builds_logits(new) is False and builds_logits(types.ModuleType("plain")) is True


KEYWORD_TESTS = {  # each README row that is a call, and the test of what it does
    "corpora.documents.Document.doc_id": test_document_doc_id,
    "interp.hook_docs.table(cls)": "tests/integration/interp/test_deprecated_models.py",
    "interp.parallel.session(shard_dir=)": test_session_shard_keywords_make_the_store,
    "analyses.registry.NotWith(inputs=)": test_not_with_reads_old_input_names_as_kinds,
    "corpora.documents.Document(doc_id=)": test_document_doc_id,
    "Window(document, index, start, ids, spans)": test_window_in_its_old_field_order,
    "poslens.run.run_analysis(static=)": "tests/integration/interp/test_deprecated_models.py",
    "figures.save(static=)": test_figures_save_static,
    "poslens.outputs.under_lock(name)": test_under_lock_factory_and_its_fixed_name,
    "figures.render.output_stem(csv, name, ...)": test_output_stem_with_its_unused_name,
    "LOSSES_IN_CHUNKS = True (an analysis module's flag)":
        test_an_analysis_module_declaring_losses_in_chunks_still_plans_no_logits,
}


def test_every_call_row_has_its_behaviour_test():
    assert set(CALLS) == set(KEYWORD_TESTS)
