"""One word for one thing: an option's old spelling is never another analysis' live option, and a result column that
was renamed took the name of the option it records."""

from __future__ import annotations

import warnings

import pytest

from analyses import all_analyses, get
from interp.deprecation import PoslensDeprecationWarning
from poslens.deprecated import columns, old_flags, old_keywords


def test_no_old_spelling_is_a_live_option_anywhere():
    live = {o.name for spec in all_analyses() for o in spec.options}
    old = {alias for spec in all_analyses() for alias in old_keywords(spec)}
    assert "n_samples" in old and not live & old


@pytest.mark.parametrize("name,new", [("attention-mass", "n_docs"), ("niah-accuracy", "n_docs"),
                                      ("head-profiles", "niah_prompts"), ("rope-frequencies", "niah_prompts"),
                                      ("retrieval-heads", "niah_prompts")])
def test_n_samples_is_read_as_the_option_it_meant(name, new):
    spec = get(name)
    assert old_keywords(spec)["n_samples"] == new
    option = next(o for o in spec.options if o.name == new)
    assert "--n-samples" in old_flags(name)[new] and option.flag == "--" + new.replace("_", "-")


def test_a_renamed_column_takes_an_option_name_of_its_analysis():
    derived = {"sink_share", "poslens_logit_share"}  # renamed for what they hold, not after an option
    for name, table in columns().items():
        options = get(name).options
        # a row per value of a repeatable option (sink-rate's and niah-accuracy's lengths) names it in the singular
        names = {o.name for o in options} | {o.name[:-1] for o in options if o.multiple and o.name.endswith("s")}
        for old, new in table.items():
            assert new in derived or new in names, f"{name} column {old} -> {new}: no option {new}"


def test_the_old_keyword_warns_and_binds_the_new_option():
    from tests.helpers import tiny_model

    model = tiny_model("per-layer", max_seq_len=64)
    with pytest.warns(PoslensDeprecationWarning, match="head-profiles: 'n_samples=' is now 'niah_prompts='"):
        bound = get("head-profiles").bind(model, {"n_samples": 3})
    assert bound["niah_prompts"] == 3 and "n_samples" not in bound
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoslensDeprecationWarning)
        assert get("head-profiles").bind(model, {"niah_prompts": 5})["niah_prompts"] == 5
