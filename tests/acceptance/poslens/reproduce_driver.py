"""Run ``poslens reproduce`` command lines on a given plan in one process (under torchrun: one process group).

``python reproduce_driver.py SPEC.json``, SPEC: ``{"plan": [{Step fields}, ...], "jobs": [[argv, expected exit
status], ...], "fail": [rank, analysis] or null}``. A job that ends otherwise than expected stops the process
with status 1. On ranks above 0 taking any output lock raises, so a job in which they would write fails.
With ``fail``, that rank raises ``ValueError("planted failure")`` right after that analysis' step (on rank 0:
once its files are written), as a failed write would.
"""

import importlib
import json
import os
import sys

importlib.import_module("figures.save").find_chrome = lambda: None  # HTML only: PNG/PDF export would dominate the time

import poslens.reproduce  # noqa: E402
import poslens.run.outputs  # noqa: E402
from poslens.cli import main  # noqa: E402

spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
rank = int(os.environ.get("RANK", "0"))
steps = tuple(poslens.reproduce.Step(**{k: tuple(v) if k == "models" else v for k, v in step.items()})
              for step in spec["plan"])
poslens.reproduce.main_plan = lambda: steps

if rank > 0:
    def refuse(self):
        raise AssertionError(f"rank {rank} took the lock {self.lock}")

    poslens.run.outputs.Outputs.__enter__ = refuse

if spec.get("fail") and spec["fail"][0] == rank:
    run = poslens.reproduce.run_analysis

    def failing(name, *args, **kwargs):
        result = run(name, *args, **kwargs)
        if name == spec["fail"][1]:
            raise ValueError("planted failure")
        return result

    poslens.reproduce.run_analysis = failing

for argv, expected in spec["jobs"]:
    if main(argv) != expected:
        sys.exit(1)
