"""Run several ``poslens`` command lines in one process (under torchrun: one process group for all of them).

``python parallel_driver.py JOBS.json``: a JSON list of argument lists. Ranks above 0 get ``--out DIR-rankR``
instead of ``--out DIR``, so a test can see that they wrote nothing.
"""

import importlib
import json
import os
import sys

# HTML only: PNG/PDF export would dominate the test's time
importlib.import_module("figures.save").find_chrome = lambda: None

from poslens.cli import main  # noqa: E402

rank = int(os.environ.get("RANK", "0"))
failed = 0
for argv in json.loads(open(sys.argv[1], encoding="utf-8").read()):
    if rank > 0 and "--out" in argv:
        i = argv.index("--out") + 1
        argv = argv[:i] + [f"{argv[i]}-rank{rank}"] + argv[i + 1 :]
    failed += main(argv) != 0
sys.exit(1 if failed else 0)
