"""``bench.script --small`` names no options of its own: each analysis' command line is its declared ``real`` run
(``main`` where it has none) shrunk by the run's ``quick`` options, the model's own over both, and ``poslens analyze``
reads that command line back as exactly those options."""

import pytest

from analyses import get
from analyses.runs import KNOWN, PRETRAINED, Run
from bench import script
from poslens.cli import build_parser


def read_back(name: str, argv: list[str], model: str = "smollm2") -> dict:
    args = build_parser(["analyze"]).parse_args(["analyze", name, "--model", model, "--out", "unused", *argv])
    return args.spec.parse_cli(vars(args))


def plain(options: dict) -> dict:
    return {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in options.items()}


@pytest.mark.parametrize("name", script.ANALYSES)
def test_each_analysis_runs_its_real_run_shrunk_by_its_quick_options(name):
    run = get(name).real
    assert read_back(name, script.options(name, "smollm2")) == plain({**run.options, **run.quick,
                                                                      **run.per_model.get("smollm2", {})})


def test_quick_options_win_over_the_run_and_the_models_own_over_both(monkeypatch):
    got = read_back("sink-rate", script.options("sink-rate", "smollm2"))
    real = get("sink-rate").real
    assert real.options["lengths"] != (64,) and real.options["n_docs"] == 100 and "max_rows" not in real.options
    assert (got["lengths"], got["n_docs"], got["max_rows"]) == ((64,), 2, 32)  # real's lengths and n_docs shrunk
    assert got["long_conditions"] == ("text",)  # SmolLM2's own option
    spec = get("induction")
    monkeypatch.setattr(spec, "real", Run(PRETRAINED, dict(half=256, n_docs=8), quick=dict(half=32, n_docs=1),
                                          per_model={"gemma3-270m": dict(half=64)}, section=KNOWN))
    assert read_back("induction", script.options("induction", "smollm2")) == dict(half=32, n_docs=1)
    assert read_back("induction", script.options("induction", "gemma3-270m"), "gemma3-270m") == dict(half=64, n_docs=1)


def test_an_analysis_without_a_real_run_runs_its_main_one_and_one_with_neither_is_named(monkeypatch):
    spec = get("head-profiles")
    main = spec.main
    assert read_back("head-profiles", script.options("head-profiles", "gemma3-270m")) \
        == plain({**main.options, **main.quick})
    assert read_back("head-profiles", script.options("head-profiles", "smollm2")) == plain(
        {**main.options, **main.quick, **main.per_model["smollm2"]}) != plain({**main.options, **main.quick})
    monkeypatch.setattr(spec, "main", None)
    with pytest.raises(ValueError, match="analysis 'head-profiles' declares no real= or main= run"):
        script.options("head-profiles", "smollm2")
