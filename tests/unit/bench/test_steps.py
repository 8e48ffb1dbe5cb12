"""bench.steps: what a step's floor replays is every forward pass of every model it loaded, with their inputs."""

import json

import torch

from bench.steps import read_rows, recording, replay, table, write_costs
from interp.loading import save
from tests.helpers import tiny_model


def test_every_forward_pass_of_a_loaded_model_is_recorded_and_replayed(tmp_path):
    import interp.loading

    save(tiny_model("shared", max_seq_len=64), tmp_path / "m")
    with recording() as (calls, loads):
        model = interp.loading.load(str(tmp_path / "m"))
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]))
            model(torch.tensor([[4, 5, 6, 7], [1, 1, 1, 1]]))
    assert len(loads) == 1 and [tuple(c[1][0].shape) for c in calls] == [(1, 3), (2, 4)]
    assert calls[0][0] is model and torch.equal(calls[1][1][0], torch.tensor([[4, 5, 6, 7], [1, 1, 1, 1]]))
    assert interp.loading.load.__name__ == "load" and interp.loading.load.__module__ == "interp.loading"  # restored
    cpu, wall = replay(calls)
    assert cpu is not None and wall is not None and len(calls) == 2  # the replay records nothing more


def test_costs_and_table_come_from_the_rows(tmp_path, monkeypatch):
    import bench.steps as steps

    rows = [dict(step="a", seconds=10.0, cpu_s=8.0, export_s=1.0, probe_s=0.5, probe_cpu_s=0.4, cost=22.0,
                 forwards=3, floor_cpu_s=4.0, floor_s=5.0),
            dict(step="b", seconds=2.0, cpu_s=1.0, export_s=1.0, probe_s=0.25, probe_cpu_s=0.2, cost=9.0, forwards=0,
                 floor_cpu_s=None, floor_s=None)]
    text = table(rows)
    assert "| a | 10.0 | 8.0 | 1.0 | 22 | 3 | 4.0 | 2.0x |" in text
    assert "| b | 2.0 | 1.0 | 1.0 | 9 | 0 | - | no forward pass |" in text
    assert "| c | 2.0 | 1.0 | 1.0 | 9 | 2 | 0.0 | floor under 0.1 s |" in table([dict(rows[1], step="c", forwards=2,
                                                                                   floor_cpu_s=0.01)])
    assert "add up to 31 probe units" in text and "where the probe takes 9677 ms or less" in text  # 300 s / 31
    target = tmp_path / "estimate.py"
    target.write_text('X = 1\nCOSTS: dict[str, float] = {"old": 1.0}\nY = 2\n')
    monkeypatch.setattr(steps, "COSTS_FILE", target)
    write_costs(rows)
    assert target.read_text() == 'X = 1\nCOSTS: dict[str, float] = {\n    "a": 22.0, "b": 9.0,\n}\nY = 2\n'
    write_costs(rows[::-1])  # and again, over the table it wrote
    assert target.read_text() == 'X = 1\nCOSTS: dict[str, float] = {\n    "b": 9.0, "a": 22.0,\n}\nY = 2\n'
    log = tmp_path / "log"
    log.write_text("[poslens] noise\n" + "\n".join(json.dumps(r) for r in rows) + "\n")
    assert read_rows(log) == rows


def test_real_steps_are_scaled_down_in_their_units_only():
    from bench.steps import _plan, scaled
    from poslens.reproduce import real_plan

    rope = next(s for s in real_plan() if s.analysis == "rope-frequencies")
    small = scaled(rope, 12)
    assert (small.options["n_docs"], small.options["long_docs"], small.options["niah_prompts"]) == (1, 1, 1)
    assert small.options["length"] == rope.options["length"] and small.per_model == rope.per_model
    retrieval = scaled(next(s for s in real_plan() if s.analysis == "retrieval-heads"), 4)
    assert (retrieval.options["n_docs"], retrieval.options["niah_prompts"], retrieval.options["n_random"]) == (8, 12, 2)
    assert set(_plan(4)) == {s.analysis for s in real_plan()} and "sink-rate" in _plan(0)


def test_the_real_steps_section_names_the_steps_it_did_not_measure(tmp_path, monkeypatch):
    import bench.report as report
    import bench.steps as steps

    monkeypatch.setattr(report, "FILE", tmp_path / "BENCHMARKS.md")
    monkeypatch.setattr(steps, "COSTS_FILE", tmp_path / "untouched.py")
    row = dict(step="induction", seconds=60.0, cpu_s=39.0, export_s=1.5, probe_s=0.07, probe_cpu_s=0.06, cost=700.0,
               forwards=8, floor_cpu_s=22.8, floor_s=30.0)
    steps.write([row], scale=10)
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "| induction | 60.0 | 39.0 | 1.5 | 700 | 8 | 22.8 | 1.7x |" in text and ": induction 1/10." in text
    assert "Not measured in this run: ap-spectrum, sink-rate, massive-activations, rope-frequencies" in text
    assert "add up to" not in text and not (tmp_path / "untouched.py").exists()
