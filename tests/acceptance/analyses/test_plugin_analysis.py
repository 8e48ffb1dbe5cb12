"""Adding an analysis is its module, its figure and one line: a toy analysis written in a temporary module
(its runs in its ``@analysis``), its figure in a temporary ``figures/`` folder and its module named in
``analyses.registry.MODULES`` runs in the small suite, in the main job's plan, in the memory benchmark's plan and in
the script benchmark's ``--small`` command line, and the command line and the report pick it up, with no other file
edited."""

import importlib
import inspect
import sys
import textwrap

import pandas as pd
import pytest

import analyses
import figures
from analyses import registry
from analyses.runs import HEADS, Run

NAME = "first-token-share"

MODULE = textwrap.dedent('''
    """A toy analysis: the attention each head pays to the first token, averaged over queries and documents."""
    from typing import Annotated

    from analyses.registry import Fits, Help, Range, analysis
    from analyses.runs import HEADS, Run
    from interp.capabilities import Capability


    def headline(table):
        top = table.loc[table["first_token_share"].idxmax()]
        return (f"{', '.join(sorted(set(table['model'])))}: at most {top['first_token_share']:.3f} of a head's attention "
                f"goes to the first token (layer {top['layer']}, head {top['head']})")


    def summary(table):
        return table.groupby("model", as_index=False)["first_token_share"].max()


    @analysis("first-token-share", needs=[Capability.ATTENTION], headline=headline, summary=summary,
              small=Run(("repo-small",), dict(n_docs=1, length=32)),
              main=Run(("repo-small",), dict(n_docs=2, length=64), quick=dict(n_docs=1), section=HEADS),
              memory=Run(("repo-small",), dict(length=32)))
    def first_token_share(model, *, n_docs: Annotated[int, Help("documents of random tokens"), Range(1)] = 4,
                          length: Annotated[int, Help("tokens per document"), Range(2), Fits()] = 64, seed: int = 0):
        """The share of each head's attention that goes to the first token, averaged over queries and documents."""
        import pandas as pd
        import torch

        tokens = torch.randint(0, model.d_vocab, (n_docs, length), generator=torch.Generator().manual_seed(seed))
        _, cache = model.run_with_cache(tokens)
        rows = []
        for layer in range(model.n_layers):
            share = cache[f"blocks.{layer}.attn.hook_pattern"][..., 0].mean(dim=(0, 2))
            rows += [dict(model=model.model_name, layer=layer, head=h, first_token_share=float(s)) for h, s in enumerate(share)]
        return pd.DataFrame(rows)
''')  # noqa: E501 (the module's own source: wrapping it would change the string)

FIGURE = textwrap.dedent('''
    import plotly.graph_objects as go


    def figure(table):
        fig = go.Figure()
        for model, rows in table.groupby("model", sort=False):
            grid = rows.pivot(index="layer", columns="head", values="first_token_share")
            fig.add_trace(go.Heatmap(z=grid.to_numpy(), x=list(grid.columns), y=list(grid.index), name=model))
        fig.update_layout(title="Attention to the first token", height=420, xaxis_title="head", yaxis_title="layer")
        return fig
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The module and its figure on the path, and the one registration line: the module named in ``MODULES``."""
    (tmp_path / "toy_first_token.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "first_token_share.py").write_text(FIGURE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(figures, "__path__", [*figures.__path__, str(tmp_path / "figures")])
    monkeypatch.setattr(registry, "MODULES", registry.MODULES + ("toy_first_token",))
    yield
    registry._REGISTRY.pop(NAME, None)
    for module in ("toy_first_token", "figures.first_token_share"):
        sys.modules.pop(module, None)


def test_an_analysis_from_a_temporary_module_joins_every_plan(plugin, tmp_path):
    assert NAME not in registry._REGISTRY  # nothing imported it yet: the MODULES line does
    assert [a.name for a in analyses.all_analyses()][-1] == NAME

    from bench.memory import plan
    from poslens.cli import main
    from poslens.reproduce import Step, main_plan, real_plan, reproduce
    from tests.acceptance.analyses.test_registry import (
        check_table_figure_headline_and_summary,
        small_suite,
        small_table,
    )
    from tests.acceptance.figures import test_render

    # the small suite: the declared run, and the checks every analysis passes
    assert small_suite()[NAME] == (("repo-small",), dict(n_docs=1, length=32))
    assert test_render._plan()[NAME] == (["repo-small"], dict(n_docs=1, length=32))
    table = small_table(NAME)
    assert len(table) == 4 * 4 and table["first_token_share"].between(0, 1).all()  # repo-small: 4 layers x 4 heads
    check_table_figure_headline_and_summary(NAME, table)

    # the main job: its step last (the report's order is MODULES'), the built-in steps unchanged before it
    steps = main_plan()
    assert steps[-1] == Step(NAME, ("repo-small",), dict(n_docs=2, length=64), dict(n_docs=1), HEADS)
    assert [s.analysis for s in steps[:-1]] == [a.name for a in analyses.all_analyses()][:-1]
    assert NAME not in [s.analysis for s in real_plan()]  # it declares no real= run
    index = reproduce(tmp_path / "report", quick=True, plan=steps[-1:], log=lambda line: None).read_text()
    assert f"<iframe src='{NAME}.html'" in index and "goes to the first token (layer" in index
    prov = (tmp_path / "report" / f"{NAME}.provenance.json").read_text()
    assert '"n_docs": 1' in prov and '"length": 64' in prov  # the quick option over the main job's

    # the memory benchmark: the command line it runs, here in this process
    models, argv = plan()[NAME]
    assert (models, argv) == (["repo-small"], ["--length", "32"])
    out = tmp_path / "memory"
    assert main(["analyze", NAME, "--out", str(out), "--format", "html", "--force",
                 *[a for m in models for a in ("--model", m)], *argv, "--n-docs", "3"]) == 0
    written = pd.read_csv(out / f"{NAME}.csv")
    assert set(written["model"]) == {"repo-small"} and len(written) == 16
    assert (out / f"{NAME}.html").exists()

    # the script benchmark's --small: no real run declared, so the main job's shrunk by its quick options
    from bench.script import options

    assert options(NAME, "repo-small") == ["--n-docs", "1", "--length", "64"]

    from analyses import docs

    assert docs.markdown().splitlines()[-1].startswith(f"| `{NAME}` | attention patterns | ")  # the README's table


def test_a_declaration_naming_what_the_analysis_lacks_fails_when_its_module_is_imported():
    from analyses.registry import _REGISTRY, analysis

    spec = analyses.get("induction")
    body = spec.body

    def declare(**runs):
        return analysis("induction", **runs)(body)

    try:
        with pytest.raises(ValueError, match=r"@analysis\(main=\.\.\.\) of 'induction': quick names length, not an "
                                             r"option of 'induction' \(options: half, n_docs, seed, stage\)"):
            declare(main=Run(("repo-small",), dict(half=8), quick=dict(length=8), section=HEADS))
        with pytest.raises(ValueError, match="the main job needs the report's section="):
            declare(main=Run(("repo-small",)))
        with pytest.raises(ValueError, match="small takes models and options"):
            declare(small=Run(("repo-small",), quick=dict(half=8)))
        with pytest.raises(ValueError, match="per_model names smollm2, not among its models"):
            declare(main=Run(("repo-small",), per_model={"smollm2": dict(half=8)}, section=HEADS))
    finally:
        _REGISTRY["induction"] = spec
    assert analyses.get("induction") is spec and spec.main.options == dict(half=128, n_docs=4)  # nothing changed


def test_modules_order_the_analyses_whatever_order_they_were_imported_in(monkeypatch):
    first = [a.name for a in analyses.all_analyses()]
    module = {a.name: importlib.import_module(inspect.unwrap(a.body).__module__) for a in analyses.all_analyses()}
    backwards = sorted(registry._REGISTRY.items(), key=lambda item: -registry.MODULES.index(module[item[0]].__name__))
    assert [name for name, _ in backwards][:3] == ["along-context", "attention-window", "retrieval-heads"]
    monkeypatch.setattr(registry, "_REGISTRY", dict(backwards))  # as if the modules had been imported last to first
    assert [a.name for a in analyses.all_analyses()] == first
    assert first[:2] == ["loss-neutrality", "byte-increments"] \
        and first[7:9] == ["position-ranges", "position-patterns"]
