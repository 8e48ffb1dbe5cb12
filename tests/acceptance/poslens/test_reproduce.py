import pytest

from interp.loading import save
from poslens.reproduce import Step, reproduce
from tests.helpers import tiny_model


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for variant in ("shared", "per-layer", "rope"):
        save(tiny_model(variant, max_seq_len=512), root / variant,
             training={"steps": 3, "tokens_seen": 99, "final_validation_loss": 5.5})
    inc = (str(root / "shared"), str(root / "per-layer"))
    return (
        Step("loss-neutrality", inc + (str(root / "rope"),), quick=dict(n_docs=2, n_boot=10), section="A"),
        Step("byte-increments", inc, section="A"),
        Step("word-boundaries", inc, quick=dict(max_gaps=300, n_boot=10), section="A"),
        Step("entity-spacing", inc, section="B"),
        Step("char-spacing", inc, section="B"),
    )


def test_report_links_every_result_and_says_what_it_shows(plan, tmp_path):
    lines = []
    index = reproduce(tmp_path / "r", quick=True, plan=plan, log=lines.append)
    html = index.read_text()
    for step in plan:
        assert f"<iframe src='{step.analysis}.html'" in html
        assert (tmp_path / "r" / f"{step.analysis}.csv").exists()
        assert f"{step.analysis}.provenance.json" in html
    assert "jieba itself reaches AUC" in html  # the word-boundary headline is computed from the table
    assert html.count("<p class='headline'>") == len(plan)
    assert len(list((tmp_path / "r").glob("*.js"))) == 1  # one plotly.min.js, shared by every figure of the report
    assert all('src="plotly.min.js"' in (tmp_path / "r" / f"{s.analysis}.html").read_text() for s in plan)
    assert lines[0].startswith("[1/5] loss-neutrality")
    summary = (tmp_path / "r" / "SUMMARY.md").read_text()
    assert summary.count("\n## ") == len(plan) and "| model | layer | reference | auc |" in summary


def test_refuses_foreign_folders_and_existing_reports(plan, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a poslens report folder"):
        reproduce(tmp_path / "mine", quick=True, plan=plan[:1], log=lambda s: None)
    reproduce(tmp_path / "r", quick=True, plan=plan[:1], log=lambda s: None)
    with pytest.raises(FileExistsError, match="--force"):
        reproduce(tmp_path / "r", quick=True, plan=plan[:1], log=lambda s: None)
    reproduce(tmp_path / "r", quick=True, plan=plan[:1], force=True, log=lambda s: None)


def test_every_step_of_the_plans_names_an_analysis_and_its_options():
    """The main job and its --real-models runs, from the analyses' declarations: each option a step sets is one its
    analysis has, and the main job draws every figure in the report's order."""
    import inspect

    from analyses import all_analyses, get
    from analyses.registry import MODULES
    from poslens.reproduce import main_plan, real_plan

    PLAN, REAL_PLAN = main_plan(), real_plan()
    assert [s.analysis for s in REAL_PLAN] == ["sink-rate", "massive-activations", "induction", "rope-frequencies",
                                               "retrieval-heads", "attention-window"]
    assert [s.analysis for s in PLAN] == [a.name for a in all_analyses()]
    modules = [inspect.unwrap(get(s.analysis).body).__module__ for s in PLAN]
    assert list(dict.fromkeys(modules)) == list(MODULES)  # the report's order, one line each
    assert {s.section for s in REAL_PLAN} == {"Known results on pretrained models"}
    for step in PLAN + REAL_PLAN:
        names = {o.name for o in get(step.analysis).options} | {"seed"}
        for options in (step.options, step.quick, *step.per_model.values()):
            assert set(options) <= names, (step.analysis, set(options) - names)


def test_resume_keeps_the_steps_done_at_this_commit_with_the_same_arguments(plan, tmp_path, monkeypatch):
    import dataclasses
    import json

    from poslens import reproduce as rep

    monkeypatch.setattr(rep, "git_commit", lambda: "c0ffee")
    steps = plan[:2]
    reproduce(tmp_path / "r", quick=True, plan=steps, log=lambda s: None)
    record = json.loads((tmp_path / "r" / ".steps" / "loss-neutrality.json").read_text())
    assert record["commit"] == "c0ffee" and record["seconds"] >= 0 and "loss-neutrality.csv" in record["files"]
    stamp = (tmp_path / "r" / "loss-neutrality.csv").stat().st_mtime_ns
    lines = []
    changed = (steps[0], dataclasses.replace(steps[1], models=steps[1].models[:1]))  # the second step: other models
    reproduce(tmp_path / "r", quick=True, plan=changed, resume=True, log=lines.append)
    assert "reused" in lines[0] and (tmp_path / "r" / "loss-neutrality.csv").stat().st_mtime_ns == stamp
    assert "reused" not in lines[1] and "estimate" in lines[1]  # timed in this folder: an estimate in seconds
    assert "<iframe src='loss-neutrality.html'" in (tmp_path / "r" / "index.html").read_text()
    lines.clear()  # the same commit and arguments in another precision: redone
    reproduce(tmp_path / "r", quick=True, plan=changed, resume=True, dtype="bfloat16", log=lines.append)
    assert not any("reused" in x for x in lines)
    monkeypatch.setattr(rep, "git_commit", lambda: "beef")  # another commit: everything is redone
    lines.clear()
    reproduce(tmp_path / "r", quick=True, plan=changed, resume=True, log=lines.append)
    assert not any("reused" in x for x in lines)
