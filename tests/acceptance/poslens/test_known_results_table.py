"""The README's known-results table: generated from the real-model CSVs kept in docs/known-results, and each verdict
a rule that turns when the numbers do (planted CSVs)."""

import numpy as np
import pandas as pd
import pytest

from poslens import known_results, known_types
from poslens.known_claims import CLAIMS, OBSERVATIONS


def test_readme_table_is_the_one_generated_from_the_kept_csvs():
    from pathlib import Path

    readme = (Path(known_results.__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert known_results.readme_section(readme) == known_results.render(known_types.EVIDENCE), (
        "README's known-results section differs from `python -m poslens.known_results docs/known-results`; "
        "rewrite it with --readme README.md")


def test_every_claim_quotes_a_place_and_the_papers_numbers():
    for c in CLAIMS:
        assert c.quote.strip() and c.where.strip() and c.paper.strip() and c.protocol.strip(), c.finding
        assert any(w in c.where for w in ("§", "Table", "Fig")), \
            f"{c.finding}: where does the paper say it? {c.where!r}"
    assert OBSERVATIONS, "findings without a published claim go to the observations table"


def _induction_csv(folder, score_smol, score_gemma):
    rows = []
    for model, best in (("smollm2", score_smol), ("gemma3-270m", score_gemma)):
        for layer in range(3):
            for head in range(4):
                s = best if (layer, head) == (2, 1) else 0.01
                rows.append(dict(model=model, layer=layer, head=head, depth=layer / 3, induction_score=s,
                                 previous_token_score=0.8 if (layer, head) == (0, 2) else 0.02,
                                 first_copy_loss=12.0, second_copy_loss=2.0, half=64, n_docs=2, start_token=True))
    pd.DataFrame(rows).to_csv(folder / "induction.csv", index=False)


def _claim(name):
    return next(c for c in CLAIMS if c.finding == name)


def test_induction_verdict_turns_when_no_head_scores(tmp_path):
    _induction_csv(tmp_path, 0.9, 0.7)
    r = known_types.Results(tmp_path)
    assert _claim("induction heads").verdict(r).startswith("agrees")
    assert "L2H1 0.90; 1 of 12 heads" in _claim("induction heads").measure(r, "smollm2")
    _induction_csv(tmp_path, 0.9, 0.2)
    assert _claim("induction heads").verdict(known_types.Results(tmp_path)).startswith("does not reproduce")


def _sink_csv(folder, rates: dict, per_layer=None):
    """Gu-estimator rows: ``rates[(model, length, start_token, input)]`` is the share of sink heads, spread over
    4 layers x 4 heads (``per_layer[model]`` overrides the layers' shares at T = 64 text)."""
    rows = []
    for (model, length, start, inp), rate in rates.items():
        for layer in range(4):
            share = per_layer[model][layer] if per_layer and length == 64 and inp == "text" else rate
            for head in range(4):
                rows.append(dict(model=model, estimator="gu", input=inp, start_token=start, length=length,
                                 layer=layer, head=head, depth=layer / 4, sink_share=share, alpha_1=share,
                                 first_token_mass=share, epsilon=0.3))
    pd.DataFrame(rows).to_csv(folder / "sink-rate.csv", index=False)


def _rates(smol_by_length, gemma_with, gemma_without):
    out = {}
    for length, rate in smol_by_length.items():
        for start in (True, False):
            for inp in ("text", "random"):
                out[("smollm2", length, start, inp)] = rate
                out[("gemma3-270m", length, start, inp)] = gemma_with if start else gemma_without
    return out


def test_sink_verdicts_follow_the_numbers(tmp_path):
    _sink_csv(tmp_path, _rates({64: 0.8, 256: 0.6, 1024: 0.5}, 0.75, 0.0))
    r = known_types.Results(tmp_path)
    assert "within Table 1's natural-text range" in _claim("attention sinks in pretrained LMs").verdict(r)
    assert _claim("the sink sits where pretraining fixes a token").verdict(r).startswith("agrees for Gemma 3")
    # gemma's rate is the same at every length here: only SmolLM2's falls
    assert _claim("sinks and evaluation length").verdict(r).startswith("partly")

    _sink_csv(tmp_path, _rates({64: 0.5, 256: 0.6, 1024: 0.7}, 0.5, 0.5))
    r = known_types.Results(tmp_path)
    assert "below Table 1's natural-text range" in _claim("attention sinks in pretrained LMs").verdict(r)
    assert _claim("the sink sits where pretraining fixes a token").verdict(r).startswith("Gemma 3 does not show it")
    assert _claim("sinks and evaluation length").verdict(r).startswith("differs")


def test_depth_verdict_reads_the_layers_above_the_bottom_two(tmp_path):
    layers = {"smollm2": [0.0, 0.0, 0.25, 1.0], "gemma3-270m": [0.0, 0.5, 0.75, 1.0]}
    _sink_csv(tmp_path, _rates({64: 0.5}, 0.5, 0.5), per_layer=layers)
    verdict = _claim("sinks above the bottom layers").verdict(known_types.Results(tmp_path))
    assert "SmolLM2-135M differs: 1 of 2 layers" in verdict and "Gemma 3 270M agrees: 2 of 2 layers" in verdict


def test_a_missing_csv_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="induction's CSV"):
        known_results.render(tmp_path)


def test_readme_section_is_rewritten_in_place_and_nothing_else(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\nbefore\n<!-- known-results -->\nold\n<!-- /known-results -->\nafter\n", encoding="utf-8")
    known_results.write_readme(readme, "| new |\n")
    assert readme.read_text(encoding="utf-8") == ("# x\nbefore\n<!-- known-results -->\n| new |\n"
                                                  "<!-- /known-results -->\nafter\n")
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="no <!-- known-results -->"):
        known_results.write_readme(tmp_path / "bare.md", "| new |\n")


def test_pct_and_head_names():
    assert known_types.pct(0.25) == "25.0%" and known_types.pct(1 / 3) == "33.3%"
    assert known_types.head(pd.Series(dict(layer=np.int64(3), head=np.int64(7)))) == "L3H7"


def _rope_csv(folder, low_norm):
    rows = []
    for model in ("smollm2", "gemma3-270m"):
        for band, freq in enumerate([1.0, 0.5, 0.1, 0.01]):  # band 3 is the lowest frequency
            rows.append(dict(model=model, part="bands", layer=0, head=0, band=band, frequency=freq,
                             q_norm=low_norm if freq == 0.01 else 1.0, k_norm=low_norm if freq == 0.01 else 1.0,
                             poslens_logit_share=0.25))
    pd.DataFrame(rows).to_csv(folder / "rope-frequencies.csv", index=False)


def test_rotary_verdict_compares_the_lowest_quarters_norm_with_the_highest(tmp_path):
    claim = _claim("rotary bands: queries and keys weigh the low frequencies")
    _rope_csv(tmp_path, 3.0)
    assert claim.verdict(known_types.Results(tmp_path)).startswith("SmolLM2-135M agrees (low / high norm 3.00x)")
    _rope_csv(tmp_path, 0.5)
    assert claim.verdict(known_types.Results(tmp_path)).startswith("SmolLM2-135M differs (low / high norm 0.50x)")


def _retrieval_csv(folder, n_retrieval, top_acc, random_acc, heads=100):
    rows = []
    for model in ("smollm2", "gemma3-270m"):
        for h in range(heads):
            rows.append(dict(model=model, score="wu", masking="query", part="heads", layer=h // 10, head=h % 10,
                             retrieval_score=0.5 if h < n_retrieval else 0.0, is_retrieval=h < n_retrieval,
                             n_counted=8, n_scored=8))
        rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="none", k=0,
                         niah_accuracy=1.0))
        for k in (2, 5, 10):
            rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="top", k=k,
                             niah_accuracy=top_acc if k >= n_retrieval else 1.0))
            rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="random", k=k,
                             niah_accuracy=random_acc))
    pd.DataFrame(rows).to_csv(folder / "retrieval-heads.csv", index=False)


def test_retrieval_verdicts_read_the_share_and_the_masking_at_the_number_of_retrieval_heads(tmp_path):
    sparse, causal = _claim("retrieval heads are sparse"), _claim("retrieval heads are causal")
    _retrieval_csv(tmp_path, 4, top_acc=0.0, random_acc=1.0)
    r = known_types.Results(tmp_path)
    assert "SmolLM2-135M 4.0% (4 of 100 heads; the range is 2.1-6.2 heads): agrees" in sparse.verdict(r)
    assert "SmolLM2-135M agrees (k = 5, 4 heads score > 0.1" in causal.verdict(r)  # top 2 would not have sufficed
    _retrieval_csv(tmp_path, 9, top_acc=0.0, random_acc=0.0)
    r = known_types.Results(tmp_path)
    assert "SmolLM2-135M 9.0% (9 of 100 heads; the range is 2.1-6.2 heads): differs" in sparse.verdict(r)
    assert "SmolLM2-135M partly: random heads hurt too (k = 10" in causal.verdict(r)


def _stream_csv(folder, window, sinks, recomputed, past=True):
    rows = []
    span = "past the trained length" if past else "all"
    for model in ("smollm2", "gemma3-270m"):
        base = dict(model=model, setting="streaming", stream_tokens=12288, trained_length=8192, recompute_stride=64)
        for condition, loss in (("dense", 4.0), ("window", window), ("window + 1 sink", sinks),
                                ("window + 4 sinks", sinks)):
            rows.append(dict(base, condition=condition, bucket=span, loss=loss,
                             cache_size=1024 if "window" in condition else None))
            rows.append(dict(base, condition=condition, bucket="re-computed tokens", loss=loss, cache_size=None))
        rows.append(dict(base, condition="re-computation", bucket="re-computed tokens", loss=recomputed,
                         cache_size=None))
    pd.DataFrame(rows).to_csv(folder / "attention-window.csv", index=False)


def test_streaming_verdict_needs_sinks_to_recover_re_computation(tmp_path):
    claim = _claim("window attention needs the first tokens (attention sinks)")
    _stream_csv(tmp_path, window=3.3, sinks=2.7, recomputed=2.7)
    assert claim.verdict(known_types.Results(tmp_path)).startswith("SmolLM2-135M agrees (past the trained length)")
    _stream_csv(tmp_path, window=2.75, sinks=2.7, recomputed=2.7, past=False)
    verdict = claim.verdict(known_types.Results(tmp_path))
    assert verdict.startswith("SmolLM2-135M differs (over the whole stream, inside the trained length)")
