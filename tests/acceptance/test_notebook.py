"""The tutorial notebook runs top to bottom: a failing cell fails the test."""

import os
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_tutorial_notebook_runs():
    nb = nbformat.read(ROOT / "notebooks" / "tutorial.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed without outputs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.km = client.kernel_manager_class(kernel_name="python3")
    client.execute(env=env)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs) >= 5  # figures render inline
    assert any("text/html" in o.get("data", {}) and "previous_token_mass" in o["data"]["text/html"] for o in outputs)
    # the head viewer, inline: an iframe of the self-contained page (grid, pooled patterns, a block's tokens)
    assert any("text/html" in o.get("data", {}) and "poslens-data" in o["data"]["text/html"]
               and "<iframe srcdoc=" in o["data"]["text/html"] for o in outputs)


def test_tutorial_teaches_the_current_option_names():
    from tests.unit.analyses.test_vocabulary import FLAGS

    nb = nbformat.read(ROOT / "notebooks" / "tutorial.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    old = {keyword for _, _, keyword, _, _ in FLAGS} | {"doc_start", "docs", "token_ids", "samples", "texts"}
    used = sorted({a for a in old if re.search(rf"\b{a}=", text) or f"--{a.replace('_', '-')} " in text})
    assert not used, f"the notebook still uses names of CHANGELOG.md's migration table: {used}"
