"""Every registered analysis, through its declaration: a small real run on bundled models, then its figure,
headline and summary table checked against the table's own numbers; capabilities enforced in one place."""

import re

import numpy as np
import pandas as pd
import pytest

import analyses
from interp import load
from interp.capabilities import CapabilityError
from poslens.run.summary import markdown


def small_suite() -> dict:
    """``{analysis: (bundled models, options)}``: every registered analysis' ``small`` run (``@analysis(small=)``)."""
    return {a.name: (a.small.models, a.small.options) for a in analyses.all_analyses() if a.small is not None}


SMALL = small_suite()
MODELS: dict = {}


def model(name):
    if name not in MODELS:
        MODELS[name] = load(name)
    return MODELS[name]


def test_every_analysis_declares_its_small_run_and_its_place_in_the_main_job():
    missing = [(a.name, s) for a in analyses.all_analyses() for s in ("small", "main") if getattr(a, s) is None]
    assert missing == [], "declare these with @analysis(..., small=Run(...))"


def numbers(values) -> np.ndarray:
    flat = pd.to_numeric(pd.Series(np.asarray(values, dtype=object).ravel()), errors="coerce").dropna()
    return flat[np.isfinite(flat)].to_numpy(dtype=float)


def formatted(values: np.ndarray, like: str) -> set[str]:
    """``values`` printed as ``like`` is printed (fixed decimals, scientific or integer)."""
    mantissa, _, exponent = like.partition("e")
    digits = len(mantissa.partition(".")[2])
    spec = f".{digits}e" if exponent else f".{digits}f"
    return {format(v, spec) for v in values}


def small_table(name: str):
    """The analysis' small run: its table on each of its models, concatenated."""
    models, options = small_suite()[name]
    return pd.concat([analyses.run(name, model(m), **options) for m in models], ignore_index=True)


@pytest.fixture(scope="module")
def tables():
    return {name: small_table(name) for name in SMALL}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_table_figure_headline_and_summary(tables, name):
    check_table_figure_headline_and_summary(name, tables[name])


def check_table_figure_headline_and_summary(name: str, table):
    """The small run's table, headline, summary table and figure agree with each other."""
    spec = analyses.get(name)
    models = set(small_suite()[name][0])
    assert set(table["model"]) == models

    # headline: names every model, and most numbers it prints are the table's or the summary table's, to the
    # digits it shows (percentages included)
    small = spec.summary(table)
    line = spec.headline(table)
    assert all(m in line for m in models)
    assert "\n" not in line and not re.search(r"<[\w .]+>|object at 0x|dtype:|Name: ", line), line
    values = numbers(table.select_dtypes("number").to_numpy())
    known = np.concatenate([values, numbers(small.select_dtypes("number").to_numpy())])
    known = np.concatenate([known, 100 * known])
    shown = re.findall(r"(?<![\w.\-])\d+(?:\.\d+)?(?:e[-+]\d+)?(?![\w-])", line)
    found = [printed in formatted(known, printed) for printed in shown]
    decimals = [f for f, x in zip(found, shown) if "." in x]
    assert shown and sum(found) >= len(found) / 2 and sum(decimals) >= len(decimals) / 2, (line, shown, found)

    # summary: a compact table of these models whose columns taken from the table hold the table's values
    assert len(small) > 0 and markdown(small).count("\n") == len(small) + 1
    if "model" in small.columns:
        assert set(small["model"]) == models
    for column in set(small.columns) & set(table.select_dtypes("number").columns):
        have = numbers(table[column])
        assert all(np.isclose(have, v).any() for v in numbers(small[column])), column

    # figure: its own height, and traces that carry the table's numbers
    fig = spec.figure(table)
    assert isinstance(fig.layout.height, int) and fig.layout.height > 200
    drawn = np.concatenate([numbers(getattr(t, k)) for t in fig.data for k in ("x", "y", "z", "a", "b", "c", "cells")
                            if getattr(t, k, None) is not None and not isinstance(getattr(t, k), (str, dict))]
                           + [np.zeros(0)])
    real = values[(values != np.round(values)) & np.isfinite(values)]
    assert np.isin(np.round(drawn, 6), np.round(np.concatenate([real, 100 * real]), 6)).any(), name  # as is, or in %


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_model_without_a_needed_capability_is_refused_by_the_registry(name):
    spec = analyses.get(name)
    lacking = next((m for m in ("repo-small", "dstg-small", "increments-shared")
                    if not set(spec.needs) <= model(m).capabilities), None)
    if lacking is None:
        pytest.skip("every bundled model tried has what it needs")
    missing = next(c for c in spec.needs if c not in model(lacking).capabilities)
    with pytest.raises(CapabilityError, match=f"analysis '{name}' needs a model with {missing.value}; '{lacking}'"):
        spec.function(model(lacking))


def test_modules_are_modules_and_old_keywords_are_refused():
    import analyses.word_boundaries as module

    assert module.__name__ == "analyses.word_boundaries" \
        and module.word_boundaries.analysis is analyses.get("word-boundaries")
    with pytest.raises(analyses.OptionError, match="position-ranges: no option 'n_contexts'"):
        analyses.run("position-ranges", model("repo-small"), n_contexts=1, length=64, source="wiki")
    assert analyses.run("position-ranges", model("repo-small"), n_docs=1, length=64, source="wiki")["context"] \
        .nunique() == 1


def test_options_come_from_the_signature_once():
    import inspect

    from analyses.kl_ablation import kl_ablation

    spec = analyses.get("kl-ablation")
    params = inspect.signature(kl_ablation).parameters
    assert [o.name for o in spec.options] == ["n_docs", "length", "rp_support", "documents"]  # documents: --input
    assert all(o.default == params[o.name].default for o in spec.options)
    assert analyses.get("compare-heads").options == spec.options


def test_defaults_adapt_to_the_model_and_the_users_input_and_provenance_records_them(tmp_path):
    """head-profiles on a causal LM with a 512-token context, the NIAH length never set; position-probes on a dozen
    of the user's documents with n_train / n_test never set. A value the user wrote is still refused."""
    import json

    from analyses.registry import OptionError
    from poslens.run.execute import run_analysis
    from tests.repo_helpers import tiny_repo

    short = tiny_repo("repo", max_position_embeddings=512)
    run_analysis("head-profiles", [short], tmp_path, options=dict(n_docs=1, length=48, max_rows=8, niah_prompts=1),
                 seed=0, formats="html")
    prov = json.loads((tmp_path / "head-profiles.provenance.json").read_text())
    assert prov["arguments"]["niah_tokens"] == 512 - 16
    with pytest.raises(OptionError, match="niah_tokens 600: longer than tiny-repo allows"):
        analyses.get("head-profiles").bind(short, {"niah_tokens": 600})
    # never read there
    assert analyses.get("head-profiles").bind(load("dstg-small"), {"niah_tokens": 600})["niah_tokens"] == 600

    docs = [f"Document {i}. It has a first sentence. And a second one, about topic {i}." for i in range(12)]
    run_analysis("position-probes", ["dstg-small"], tmp_path,
                 options=dict(documents=docs, n_seeds=1, cv_folds=2, length=64), seed=0, formats="html")
    prov = json.loads((tmp_path / "position-probes.provenance.json").read_text())
    assert (prov["arguments"]["n_train"], prov["arguments"]["n_test"]) == (9, 3)
    with pytest.raises(ValueError, match="n_train"):
        run_analysis("position-probes", ["dstg-small"], tmp_path / "x",
                     options=dict(documents=docs, n_train=20, length=64), seed=0, formats="html")
