from pathlib import Path

import pandas as pd
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


@pytest.fixture(scope="module")
def report(plan, tmp_path_factory):
    """The whole plan's one-process report and its progress lines, run once: read by the report test and compared
    with the two-worker run."""
    lines = []
    index = reproduce(tmp_path_factory.mktemp("one") / "r", quick=True, plan=plan, log=lines.append)
    return index.parent, lines


def test_report_links_every_result_and_says_what_it_shows(plan, report):
    folder, lines = report
    html = (folder / "index.html").read_text()
    for step in plan:
        assert f"<iframe src='{step.analysis}.html'" in html
        assert (folder / f"{step.analysis}.csv").exists()
        assert f"{step.analysis}.provenance.json" in html
    assert "jieba itself reaches AUC" in html  # the word-boundary headline is computed from the table
    assert html.count("<p class='headline'>") == len(plan)
    assert len(list(folder.glob("*.js"))) == 1  # one plotly.min.js, shared by every figure of the report
    assert all('src="plotly.min.js"' in (folder / f"{s.analysis}.html").read_text() for s in plan)
    assert lines[0].startswith("[1/5] loss-neutrality")
    summary = (folder / "SUMMARY.md").read_text()
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
    assert [s.analysis for s in REAL_PLAN] == ["ap-spectrum", "sink-rate", "massive-activations", "induction",
                                               "rope-frequencies", "retrieval-heads", "attention-window"]
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
    assert "reused" not in lines[1] and "no estimate (not timed under --quick" in lines[1]  # timed on other models
    assert "<iframe src='loss-neutrality.html'" in (tmp_path / "r" / "index.html").read_text()
    lines.clear()  # the same commit and arguments in another precision: redone
    reproduce(tmp_path / "r", quick=True, plan=changed, resume=True, dtype="bfloat16", log=lines.append)
    assert not any("reused" in x for x in lines)
    monkeypatch.setattr(rep, "git_commit", lambda: "beef")  # another commit: everything is redone
    lines.clear()
    reproduce(tmp_path / "r", quick=True, plan=changed, resume=True, log=lines.append)
    assert not any("reused" in x for x in lines)


def test_a_step_run_twice_on_other_models_keeps_both_results_and_resumes_both(plan, tmp_path, monkeypatch):
    """The main job and --real-models run the same analyses on other models: the real runs go to ``known/``, so
    neither overwrites the other's CSV or step record, the index links each, and --resume reuses both."""
    import dataclasses

    import pandas as pd

    from poslens import reproduce as rep

    monkeypatch.setattr(rep, "git_commit", lambda: "c0ffee")
    main = plan[1]
    known = dataclasses.replace(main, models=main.models[:1], folder=rep.KNOWN_FOLDER, section="Known")
    reproduce(tmp_path / "r", quick=True, plan=(main, known), log=lambda s: None)
    both = pd.read_csv(tmp_path / "r" / "byte-increments.csv")["model"].nunique()
    one = pd.read_csv(tmp_path / "r" / rep.KNOWN_FOLDER / "byte-increments.csv")["model"].nunique()
    assert (both, one) == (2, 1)
    index = (tmp_path / "r" / "index.html").read_text()
    assert "<iframe src='byte-increments.html'" in index and "<iframe src='known/byte-increments.html'" in index
    assert (tmp_path / "r" / rep.KNOWN_FOLDER / "plotly.min.js").is_file()  # the figures there load their plotly.js
    lines = []
    reproduce(tmp_path / "r", quick=True, plan=(main, known), resume=True, log=lines.append)
    assert all("reused" in x for x in lines[:2])


def test_quick_options_win_over_a_models_own(plan, tmp_path, monkeypatch):
    """A step's per-model options (attention-window streams 34,816 tokens through Gemma 3) give way to its quick
    ones under --quick, or a quick run would take the full run's time for that model."""
    import dataclasses

    from poslens import reproduce as rep

    seen = {}

    def fake(name, models, out, *, options, per_model, **_):
        seen.update(options=options, per_model=per_model)
        raise KeyboardInterrupt

    monkeypatch.setattr(rep, "run_analysis", fake)
    step = dataclasses.replace(plan[0], options=dict(n_docs=8), quick=dict(n_docs=2),
                               per_model={plan[0].models[0]: dict(n_docs=64, n_boot=5)})
    with pytest.raises(KeyboardInterrupt):
        reproduce(tmp_path / "q", quick=True, plan=(step,), log=lambda s: None)
    assert seen["options"]["n_docs"] == 2 and seen["per_model"] == {plan[0].models[0]: dict(n_docs=2, n_boot=5)}


def test_the_real_plan_writes_to_its_own_folder():
    from poslens.reproduce import KNOWN_FOLDER, main_plan, real_plan

    assert {s.folder for s in real_plan()} == {KNOWN_FOLDER} and {s.folder for s in main_plan()} == {""}
    assert "ap-spectrum" in {s.analysis for s in real_plan()}  # MiniLM's table row reads the known folder too
    from poslens.reproduce import _estimate

    real = next(s for s in real_plan() if s.analysis == "sink-rate")
    main = next(s for s in main_plan() if s.analysis == "sink-rate")
    assert _estimate(Path("/nonexistent"), real) > 60 and _estimate(Path("/nonexistent"), main) is None  # no probe
    assert _estimate(Path("/nonexistent"), main, unit=0.01) > 0  # the cost table x the probe's seconds
    assert _estimate(Path("/nonexistent"), real, quick=True) is None  # the estimates time full runs
    assert all(_estimate(Path("/nonexistent"), s) for s in real_plan())  # every real step has one


def test_progress_lines_give_cost_x_probe_and_the_time_left_at_the_pace_so_far(plan, tmp_path, monkeypatch):
    """Planted costs (10 and 30 probe units) and probe (0.5 s): the first step is estimated at 5 s with 20 s left; it
    takes 10 s (a planted clock), twice its estimate, so the second is estimated at 2 x 15 s, the time left with it."""
    import dataclasses
    import types

    import pandas as pd

    from poslens import reproduce as rep
    from poslens.run.execute import Result

    now = [1000.0]
    monkeypatch.setattr(rep, "time", types.SimpleNamespace(time=lambda: now[0]))
    monkeypatch.setattr(rep, "COSTS", {"byte-increments": 10.0, "char-spacing": 30.0})
    monkeypatch.setattr(rep, "probe", lambda threads=None: 0.5)
    steps = tuple(dataclasses.replace(s, quick={}) for s in (plan[1], plan[4]))

    stop = {"char-spacing"}

    def fake(name, models, out, **_):
        if name in stop:
            raise KeyboardInterrupt  # its line is written: nothing more to see
        now[0] += 10.0
        return Result(name, pd.DataFrame(), [], None)

    monkeypatch.setattr(rep, "run_analysis", fake)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        reproduce(tmp_path / "r", plan=steps, log=lines.append)
    assert lines[0].startswith("this machine's speed: 500 ms per probe unit")
    assert lines[1].endswith("(0 s elapsed; estimate 5 s, 20 s left)")
    assert lines[2].endswith("(10 s elapsed; estimate 30 s, 30 s left)")
    lines.clear()  # the folder has timed byte-increments with these arguments: its own 10 s, and no probe needed
    monkeypatch.setattr(rep, "probe", lambda: pytest.fail("probed with every step timed"))
    stop.add("byte-increments")
    with pytest.raises(KeyboardInterrupt):
        reproduce(tmp_path / "r", plan=steps[:1], force=True, log=lines.append)
    assert lines == [f"[1/1] byte-increments on {', '.join(steps[0].models)} (0 s elapsed; estimate 10 s, 10 s left)"]


def test_keep_copies_one_runs_evidence_and_the_provenance_line_names_that_run(plan, tmp_path, monkeypatch):
    import gzip
    import json

    import pandas as pd

    from poslens import reproduce as rep
    from poslens.known_results.render import RUN, keep, provenance_lines

    monkeypatch.setattr(rep, "git_commit", lambda: "c0ffee1234")
    steps = tuple(dataclasses_replace(s, folder=rep.KNOWN_FOLDER) for s in plan[1:3])
    reproduce(tmp_path / "r", quick=True, plan=steps, log=lambda s: None)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "stale.csv.gz").write_bytes(b"")  # what was kept before is replaced whole
    with pytest.raises(FileNotFoundError, match="the known-results table needs"):  # a run missing a step's CSV
        keep(tmp_path / "r", tmp_path / "kept", "a test machine")
    assert {p.name for p in (tmp_path / "kept").iterdir()} == {"stale.csv.gz"}  # refused: nothing replaced
    for inside in (tmp_path / "r", tmp_path / "r" / rep.KNOWN_FOLDER, tmp_path):
        with pytest.raises(ValueError, match="inside the run"):
            keep(tmp_path / "r", inside, "x", check=lambda folder: None)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError, match="notes.txt, which is no kept evidence"):
        keep(tmp_path / "r", tmp_path / "mine", "x", check=lambda folder: None)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"
    files = {p.name for p in keep(tmp_path / "r", tmp_path / "kept", "a test machine", check=lambda folder: None)}
    assert files >= {"byte-increments.csv.gz", "word-boundaries.csv.gz", RUN} and "stale.csv.gz" not in files
    with gzip.open(tmp_path / "kept" / "byte-increments.csv.gz") as f:
        kept = pd.read_csv(f)
    pd.testing.assert_frame_equal(kept, pd.read_csv(tmp_path / "r" / rep.KNOWN_FOLDER / "byte-increments.csv"))
    run = json.loads((tmp_path / "kept" / RUN).read_text())
    assert run["commit"] == "c0ffee1234" and [s["analysis"] for s in run["steps"]] == ["byte-increments",
                                                                                        "word-boundaries"]
    for p in (tmp_path / "kept").glob("*.provenance.json"):  # as the CLI records it, at the steps' commit
        prov = json.loads(p.read_text())
        p.write_text(json.dumps(prov | {"command": ["/x/bin/poslens", "reproduce", "--real-models"],
                                        "git_commit": "c0ffee1234"}))
    line = provenance_lines(tmp_path / "kept")[0]
    assert "one `poslens reproduce --real-models` run at commit `c0ffee1`" in line and "a test machine" in line
    monkeypatch.setattr(rep, "git_commit", lambda: "beef")  # a step redone at another commit: not one run
    reproduce(tmp_path / "r", quick=True, plan=steps[:1], resume=True, log=lambda s: None)
    with pytest.raises(ValueError, match="2 commits"):
        keep(tmp_path / "r", tmp_path / "kept2", "x", check=lambda folder: None)


def dataclasses_replace(step, **changes):
    import dataclasses

    return dataclasses.replace(step, **changes)


def test_steps_runs_only_the_steps_named_and_refuses_an_unknown_one_before_any_work(plan, tmp_path, capsys,
                                                                                     monkeypatch):
    from poslens import reproduce as rep
    from poslens.cli import main

    monkeypatch.setattr(rep, "main_plan", lambda: plan)
    monkeypatch.setenv("POSLENS_FORMATS", "html")
    assert main(["reproduce", "--quick", "--steps", "char-spacing,byte-increments", "--out", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in (tmp_path / "r").glob("*.csv")) == ["byte-increments.csv", "char-spacing.csv"]
    assert main(["reproduce", "--quick", "--steps", "byte-increments,char-spaces", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "--steps byte-increments,char-spaces: char-spaces is not a step of the job (steps: loss-neutrality, " in err
    assert not (tmp_path / "s").exists()


def test_a_model_several_steps_read_is_loaded_once_and_gives_the_same_tables(plan, tmp_path, monkeypatch):
    import interp.loading

    monkeypatch.setenv("POSLENS_FORMATS", "html")
    reproduce(tmp_path / "apart", quick=True, plan=plan[1:2], log=lambda s: None)
    reproduce(tmp_path / "apart2", quick=True, plan=plan[4:5], log=lambda s: None)
    loads, original = [], interp.loading.load

    def counted(source, **kwargs):
        loads.append(str(source))
        return original(source, **kwargs)

    monkeypatch.setattr(interp.loading, "load", counted)
    reproduce(tmp_path / "r", quick=True, plan=(plan[1], plan[4]), log=lambda s: None)
    assert sorted(loads) == sorted(plan[1].models)  # char-spacing reads byte-increments' two models: no new load
    for name, folder in (("byte-increments", "apart"), ("char-spacing", "apart2")):
        assert (tmp_path / "r" / f"{name}.csv").read_text() == (tmp_path / folder / f"{name}.csv").read_text()


def test_shared_models_are_let_go_after_the_last_step_that_reads_them():
    from poslens.reproduce import _drop_unneeded

    models = {("a", None): 1, ("b", None): 2, ("b", "bf16"): 3, ("c", None): 4}
    _drop_unneeded(models, (Step("x", ("b",)), Step("y", ("c", "d"))))
    assert models == {("b", None): 2, ("b", "bf16"): 3, ("c", None): 4}
    _drop_unneeded(models, ())
    assert models == {}


def test_two_workers_write_the_one_process_report(plan, report, tmp_path, capfd):
    """The steps dealt to two spawned processes of one thread each give the one-process tables (to float rounding),
    every step is recorded once, and the index links every step as before."""
    from bench.compare_csvs import differences
    from poslens.run.estimate import split
    from tests.acceptance.poslens.test_parallel import assert_same_table

    # sizes 5, 1, 4, 3 (None: the mean), 2; longest first to the lighter queue: 5 | 4, 3 -> 7, 2 -> 7 | 7, 1 -> 8 | 7
    assert split([5.0, 1.0, 4.0, None, 2.0], 2) == [[0, 1, 4], [2, 3]]
    one, two = report[0], tmp_path / "two"
    lines = []
    reproduce(two, quick=True, plan=plan, log=lines.append, workers=2)
    printed = capfd.readouterr().out
    assert "5 steps in 2 worker processes of one torch thread each" in lines[0]
    assert sum(f"] {s.analysis} on " in printed for s in plan) == len(plan)  # each step run by one worker
    assert printed.count("[worker 1: 1/") == 1 and printed.count("[worker 2: 1/") == 1
    assert printed.count("(no estimate (not timed under --quick") == len(plan)  # the parent's reason, not another
    assert all("done by a worker in " in line for line in lines if line.startswith("["))
    for step in plan:
        assert_same_table(one / f"{step.analysis}.csv", two / f"{step.analysis}.csv")
        assert (two / ".steps" / f"{step.analysis}.json").is_file()
    assert not differences(pd.read_csv(one / "word-boundaries.csv"), pd.read_csv(two / "word-boundaries.csv"))
    index = (two / "index.html").read_text()
    assert all(f"<iframe src='{s.analysis}.html'" in index for s in plan)
    assert not [p.name for p in two.iterdir() if p.name.endswith(".lock") or ".partial-" in p.name]


def test_workers_refuse_a_count_below_one(tmp_path, capsys):
    from poslens.cli import main

    assert main(["reproduce", "--quick", "--workers", "0", "--out", str(tmp_path / "r")]) == 2
    assert "--workers 0: expected an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
