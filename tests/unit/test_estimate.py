"""The main job's progress lines (``poslens.run.estimate``): each step's estimate is its recorded cost x the probe's
seconds, and the time left is scaled by how the finished steps compared with their estimates."""

from pathlib import Path

import pytest

from poslens.run.estimate import Pace, clock


def test_estimates_and_time_left_follow_the_pace_of_the_finished_steps():
    pace = Pace([5.0, 15.0, None, 40.0])
    assert pace.line(0) == "estimate 5 s, 60 s left for the 3 of 4 steps with an estimate"
    pace.finished(0, 10.0)  # twice its estimate: the rest are expected to take twice theirs (2 x 55 s)
    assert pace.factor == 2.0
    assert pace.line(1) == "estimate 30 s, 2 min left for the 2 of 3 steps with an estimate"
    pace.finished(1, 5.0)  # 15 s spent on 20 s estimated: three quarters
    assert pace.line(2) == "no estimate (not in the cost table), 30 s left for the 1 of 2 steps with an estimate"
    pace.finished(2, 99.0)  # a step without an estimate does not move the pace
    assert pace.line(3) == "estimate 30 s, 30 s left"
    assert Pace([None, None], "not timed under --quick").line(0) == "no estimate (not timed under --quick)"


@pytest.mark.parametrize("seconds, text", [(4.4, "4 s"), (89, "89 s"), (90, "2 min"), (5399, "90 min"),
                                           (5400, "1.5 h")])
def test_clock(seconds, text):
    assert clock(seconds) == text


def test_every_step_of_the_main_job_has_a_cost_and_so_an_estimate():
    from poslens.reproduce import _estimate, main_plan

    for step in main_plan():
        assert _estimate(Path("/nonexistent"), step, unit=0.5) > 0, step.analysis
        assert _estimate(Path("/nonexistent"), step, quick=True, unit=0.5) is None  # the costs time full runs


def test_the_probe_runs_on_the_threads_the_steps_will_use_and_gives_back_the_processs(monkeypatch):
    import torch

    from poslens.run import estimate

    seen, before = [], torch.get_num_threads()
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), real(n)))
    assert estimate.probe(repeats=1, threads=1) > 0
    assert seen == [1, before] and torch.get_num_threads() == before  # one thread for the passes timed, then restored
