"""The README's known-results table: generated from the real-model CSVs kept in docs/known-results, and each verdict
a rule that turns when the numbers do (planted CSVs)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from poslens.known_results import render as known_results
from poslens.known_results import types as known_types
from poslens.known_results.claims import CLAIMS, OBSERVATIONS


def test_the_model_header_names_the_weights_file_not_a_machines_path(tmp_path):
    import json
    import shutil

    for p in known_types.EVIDENCE.iterdir():
        shutil.copy2(p, tmp_path / p.name)
    for prov in tmp_path.glob("*.provenance.json"):  # as a run elsewhere writes them: the GGUF's absolute path
        data = json.loads(prov.read_text())
        data["models"] = [m | {"gguf": f"/home/someone/venv/site-packages/x/{Path(m['gguf']).name}"}
                          if m.get("gguf") else m for m in data["models"]]
        prov.write_text(json.dumps(data))
    header = "\n".join(known_results.models_header(tmp_path))
    assert "from `SmolLM2-135M-Instruct.Q4_1.gguf`" in header and "/home/someone" not in header


def test_every_claim_quotes_a_place_and_the_papers_numbers():
    r = known_types.Results(known_types.EVIDENCE)
    for c in CLAIMS:
        assert c.quote.strip() and c.where.strip() and c.paper.strip() and c.protocol_text(r).strip(), c.finding
        assert any(w in c.where for w in ("§", "Table", "Fig")), \
            f"{c.finding}: where does the paper say it? {c.where!r}"
    assert OBSERVATIONS, "findings without a published claim go to the observations table"


def _induction_csv(folder, smol, gemma, wiki=(0.9, 0.8, 0.85, 0.95), units=True):
    """Two models of 3 x 4 heads; head L2H1's per-sequence prefix-matching scores are ``smol`` / ``gemma``, head L0H2's
    previous-token scores on text ``wiki``; every other head 0.01."""
    rows, kept = [], []
    for model, best in (("smollm2", smol), ("gemma3-270m", gemma)):
        for layer in range(3):
            for head in range(4):
                ind = list(best) if (layer, head) == (2, 1) else [0.01] * len(best)
                prev = list(wiki) if (layer, head) == (0, 2) else [0.02] * len(wiki)
                row = dict(model=model, layer=layer, head=head, depth=layer / 3, induction_score=np.mean(ind),
                           previous_token_score=np.mean(prev), first_copy_loss=12.0, second_copy_loss=2.0, half=64,
                           n_docs=len(best), start_token=True)
                if units:
                    row |= dict(wiki_previous_token_score=np.mean(prev), n_wiki=len(prev))
                    kept += [dict(model=model, measure=measure, layer=layer, head=head, unit=i, value=v)
                             for measure, values in (("induction", ind), ("previous", prev), ("wiki_previous", prev))
                             for i, v in enumerate(values)]
                rows.append(row)
        kept += [dict(model=model, measure=measure, unit=i, value=v) for measure, v in
                 (("first_copy_loss", 12.0), ("second_copy_loss", 2.0)) for i in range(len(best))] if units else []
    pd.DataFrame(rows).to_csv(folder / "induction.csv", index=False)
    (folder / "induction.units.csv").unlink(missing_ok=True)
    if kept:
        pd.DataFrame(kept, columns=["model", "measure", "layer", "head", "unit", "value"]).to_csv(
            folder / "induction.units.csv", index=False)


def _claim(name):
    return next(c for c in CLAIMS if c.finding == name)


def test_induction_verdict_reads_the_best_heads_interval_over_sequences(tmp_path):
    claim = _claim("induction heads")
    _induction_csv(tmp_path, [0.9, 0.85, 0.95, 0.9] * 2, [0.7, 0.75, 0.8, 0.72] * 2)
    r = known_types.Results(tmp_path)
    assert claim.verdict(r).startswith("agrees (existence): SmolLM2-135M-Instruct (Q4_1) agrees; Gemma 3 270M base "
                                       "(Q4_K_M) agrees.")
    assert "rule (written" in known_results._verdict(claim, r)
    # a t interval over 8 sequences (scipy's), and the count of heads >= 0.4 with its simultaneous bounds
    lo, hi = stats.t.interval(0.95, 7, loc=0.9, scale=stats.sem([0.9, 0.85, 0.95, 0.9] * 2))
    assert f"L2H1 0.90 [{lo:.2f}, {hi:.2f}] (t), n = 8; 1 of 12 heads >= 0.4 (between 1 and 1" in \
        claim.measure(r, "smollm2")
    _induction_csv(tmp_path, [0.9, 0.85, 0.95, 0.9], [0.7, 0.75, 0.8, 0.72])  # 4 sequences: no interval, no verdict
    assert "0.90 (descriptive: n = 4, fewer than 8)" in claim.measure(known_types.Results(tmp_path), "smollm2")
    assert "SmolLM2-135M-Instruct (Q4_1) not judged (descriptive" in claim.verdict(known_types.Results(tmp_path))
    _induction_csv(tmp_path, [0.9, 0.85, 0.95, 0.9] * 2, [0.2, 0.1, 0.3, 0.25] * 2)  # all below the cut
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "differs (existence): SmolLM2-135M-Instruct (Q4_1) agrees; Gemma 3 270M base (Q4_K_M) differs")
    _induction_csv(tmp_path, [0.9, 0.85, 0.95, 0.9] * 2, [0.1, 0.9, 0.2, 0.8] * 2)  # mean 0.5: straddles 0.4
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "inconclusive (existence): SmolLM2-135M-Instruct (Q4_1) agrees; Gemma 3 270M base (Q4_K_M) inconclusive "
        "at n = 8")
    _induction_csv(tmp_path, [0.9, 0.85], [0.9, 0.8], units=False)  # a CSV of means only judges nothing
    assert "no per-sequence values kept" in claim.verdict(known_types.Results(tmp_path))


def test_previous_token_verdict_reads_the_score_on_text(tmp_path):
    claim = _claim("previous-token heads")
    _induction_csv(tmp_path, [0.9, 0.9], [0.9, 0.9], wiki=[0.8, 0.7, 0.9, 0.75] * 2)
    r = known_types.Results(tmp_path)
    assert claim.verdict(r).startswith("agrees")
    assert claim.measure(r, "smollm2").startswith("on Wikipedia text (Olsson's condition): best L0H2 0.79 [")
    _induction_csv(tmp_path, [0.9, 0.9], [0.9, 0.9], wiki=[0.3, 0.2, 0.4, 0.35] * 2)
    assert claim.verdict(known_types.Results(tmp_path)).startswith("differs")
    _induction_csv(tmp_path, [0.9, 0.9], [0.9, 0.9], wiki=[0.2, 0.9, 0.3, 0.8] * 2)
    assert claim.verdict(known_types.Results(tmp_path)).startswith("inconclusive")


def _sink_csv(folder, rates: dict, n: int = 100, layers: int = 4, heads: int = 4, windows=None, unit_level=True):
    """Gu-estimator rows with unit-level values: ``rates[(model, input, start_token, length)]`` is the share of sink
    heads (a number, or one per layer), spread evenly over ``n`` sequences x heads (so the per-sequence rates barely
    vary: a tight interval unless ``n`` is small); ``sink_2`` is 1 - rate in the start-second condition."""
    rows, kept = [], []
    for (model, inp, start, length), rate in rates.items():
        per_layer = rate if isinstance(rate, (list, tuple)) else [rate] * layers
        for layer, p in enumerate(per_layer):
            for head in range(heads):
                ind = [int(((s * heads + head) * 0.6180339887) % 1.0 < p) for s in range(n)]
                two = [1 - x for x in ind] if inp == "start-second" else [0] * n
                rows.append(dict(model=model, estimator="gu", input=inp, start_token=start, length=length,
                                 layer=layer, head=head, depth=layer / layers, sink_share=np.mean(ind), alpha_1=p,
                                 first_token_mass=p, epsilon=0.3, n_docs=n, sink_2_share=np.mean(two), alpha_2=0.0,
                                 key_window=(windows or {}).get((model, layer), 0), start_text="<s>"))
                kept += [dict(model=model, measure=measure, input=inp, start_token=start, length=length, layer=layer,
                              head=head, unit=s, value=float(v)) for measure, values in (("sink", ind), ("sink_2", two))
                         for s, v in enumerate(values)] if unit_level else []
    pd.DataFrame(rows).to_csv(folder / "sink-rate.csv", index=False)
    (folder / "sink-rate.units.csv").unlink(missing_ok=True)
    if kept:
        pd.DataFrame(kept).to_csv(folder / "sink-rate.units.csv", index=False)


def _table1_rates(smol, gemma, n=100):
    """SmolLM2's Gu-comparable condition is without a start token, Gemma's with it; the other is 0."""
    out = {}
    for inp in ("text", "random"):
        out[("smollm2", inp, False, 64)], out[("smollm2", inp, True, 64)] = smol, 0.0
        out[("gemma3-270m", inp, True, 64)], out[("gemma3-270m", inp, False, 64)] = gemma, 0.0
    return out


def test_table1_verdict_is_conditional_on_sinks_and_compares_with_gpt2_only_within_the_interval(tmp_path):
    claim = _claim("attention sinks in pretrained LMs")
    _sink_csv(tmp_path, _table1_rates(0.77, 0.95))
    v = claim.verdict(known_types.Results(tmp_path))
    assert "SmolLM2-135M-Instruct (Q4_1): agrees" in v and "comparable to GPT2-XL's 77.00%" in v
    assert "Gemma 3 270M base (Q4_K_M): agrees" in v and "above GPT2-XL's 77.00%" in v
    assert "[" in claim.measure(known_types.Results(tmp_path), "smollm2")  # the interval is shown
    _sink_csv(tmp_path, _table1_rates(0.02, 0.0))  # no sinks: "present" is not printed as agreement
    v = claim.verdict(known_types.Results(tmp_path))
    assert "SmolLM2-135M-Instruct (Q4_1): differs" in v and "Gemma 3 270M base (Q4_K_M): differs" in v
    _sink_csv(tmp_path, _table1_rates(0.12, 0.12), n=8, heads=2)  # 8 sequences: the interval straddles 10%
    assert "inconclusive at n = 8" in claim.verdict(known_types.Results(tmp_path))
    _sink_csv(tmp_path, _table1_rates(0.5, 0.5), n=4, heads=2)  # 4 sequences: too few for an interval
    assert "not judged (descriptive: n = 4, fewer than 8)" in claim.verdict(known_types.Results(tmp_path))


def test_position_verdict_reads_sink_2_when_the_start_token_is_second(tmp_path):
    claim = _claim("the sink sits where pretraining fixes a token")
    rates = {("smollm2", "text", False, 64): 0.7, ("smollm2", "text", True, 64): 0.7,
             ("smollm2", "separator-first", True, 64): 0.7,
             ("gemma3-270m", "text", True, 64): 0.8, ("gemma3-270m", "text", False, 64): 0.0,
             ("gemma3-270m", "start-second", True, 64): 0.0}  # Sink_1 0, Sink_2 1
    _sink_csv(tmp_path, rates)
    r = known_types.Results(tmp_path)
    assert claim.verdict(r).count(": agrees") == 2
    assert "Sink_2 100.0% [" in claim.measure(r, "gemma3-270m")
    rates[("gemma3-270m", "start-second", True, 64)] = 0.9  # the sink stays on the first token: Sink_2 0.1
    _sink_csv(tmp_path, rates)
    assert "Gemma 3 270M base (Q4_K_M): differs" in claim.verdict(known_types.Results(tmp_path))


def _smollm2_position(folder, separator_first, ordinary_first, n=100, heads=4):
    """The position row's SmolLM2 half on planted rates: Sink_1 with ``<|endoftext|>`` first (None: the condition not
    run) and with an ordinary token first; Gemma's half agrees."""
    rates = {("smollm2", "text", False, 64): ordinary_first, ("smollm2", "text", True, 64): 0.7,
             ("gemma3-270m", "text", True, 64): 0.8, ("gemma3-270m", "start-second", True, 64): 0.0}
    if separator_first is not None:
        rates[("smollm2", "separator-first", True, 64)] = separator_first
    _sink_csv(folder, rates, n=n, heads=heads)
    r = known_types.Results(folder)
    claim = _claim("the sink sits where pretraining fixes a token")
    return claim.verdict(r), claim.measure(r, "smollm2"), claim.protocol_text(r)


def test_position_judges_smollm2_on_its_separator_first_not_on_an_ordinary_token_first(tmp_path):
    """Issue 45: SmolLM2's half read the ordinary-first number row 3 judges; it reads <|endoftext|> first (the token
    before each of its pretraining documents). Planted so that the ordinary-first number gives the other verdict."""
    smol = "SmolLM2-135M-Instruct (Q4_1): "
    verdict, measure, protocol = _smollm2_position(tmp_path, separator_first=0.6, ordinary_first=0.0)
    assert verdict.startswith(smol + "agrees (") and "Gemma 3 270M base (Q4_K_M): agrees" in verdict
    assert measure.startswith("Sink_1 at T = 64 (text): `<|endoftext|>` first (the token before each pretraining "
                              "document) 60.0% [")
    assert "; an ordinary token first 0.0% [0.0, 0.0] (bootstrap), n = 100; `<s>` first " in measure
    assert "separator-first condition, 100 sequences)" in protocol
    verdict, measure, _ = _smollm2_position(tmp_path, separator_first=0.0, ordinary_first=0.8)
    assert verdict.startswith(smol + "differs (") and "document) 0.0% [0.0, 0.0] (bootstrap), n = 100; an ordinary " \
        "token first 80.0% [" in measure
    verdict, _, _ = _smollm2_position(tmp_path, separator_first=0.12, ordinary_first=0.7, n=8, heads=2)
    assert verdict.startswith(smol + "inconclusive at n = 8 (")  # the interval straddles the floor


def test_position_says_separator_first_was_not_run_where_the_csv_has_no_such_rows(tmp_path):
    verdict, measure, protocol = _smollm2_position(tmp_path, separator_first=None, ordinary_first=0.7)
    assert verdict.startswith("SmolLM2-135M-Instruct (Q4_1): inconclusive: separator-first not run (")
    assert "`<|endoftext|>` first (the token before each pretraining document): separator-first not run; " in measure
    assert "separator-first condition; not run in this run)" in protocol
    kept = known_types.Results(known_types.EVIDENCE)  # the kept run predates the condition
    claim = _claim("the sink sits where pretraining fixes a token")
    assert "SmolLM2-135M-Instruct (Q4_1): inconclusive: separator-first not run" in claim.verdict(kept)
    assert "separator-first not run" in claim.measure(kept, "smollm2")


def test_a_run_with_separator_first_rows_changes_the_position_row_only(tmp_path):
    """The kept run with SmolLM2's separator-first condition added (its ordinary-first rows relabelled, as sink-rate
    writes them: start_token True, the separator in ``separator_text``): every other row renders as before."""
    import shutil

    for p in known_types.EVIDENCE.iterdir():
        shutil.copy2(p, tmp_path / p.name)
    for name in ("sink-rate.csv.gz", "sink-rate.units.csv.gz"):
        d = pd.read_csv(tmp_path / name)
        ordinary = d[(d.model == "smollm2") & (d.input == "text") & ~d.start_token & (d.length == 64)]
        d = pd.concat([d, ordinary.assign(input="separator-first", start_token=True)])
        if name == "sink-rate.csv.gz":
            d["separator_text"] = np.where(d.input == "separator-first", "<|endoftext|>", "none")
        d.to_csv(tmp_path / name, index=False)
    before, after = known_results.render(known_types.EVIDENCE), known_results.render(tmp_path)
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines()) and len(changed) == 1
    assert "the sink sits where pretraining fixes a token" in changed[0][1]
    assert "`<\\|endoftext\\|>` first (the token before each pretraining document) 75.0% [73.7, 76.2] (bootstrap), " \
           "n = 100; an ordinary token first 75.0% [73.7, 76.2]" in changed[0][1]
    assert "SmolLM2-135M-Instruct (Q4_1): agrees (" in changed[0][1]


def test_length_verdict_judges_gemma_on_its_global_layers(tmp_path):
    claim = _claim("sinks and evaluation length")
    windows = {("gemma3-270m", layer): 512 for layer in (0, 1, 2)}  # layer 3 global
    rates = {}
    for t, smol, local in ((64, 0.8, 0.8), (256, 0.6, 0.5), (1024, 0.5, 0.0)):
        rates[("smollm2", "text", False, t)] = smol
        rates[("gemma3-270m", "text", True, t)] = [local, local, local, 0.9]  # global layer flat
    _sink_csv(tmp_path, rates, windows=windows)
    r = known_types.Results(tmp_path)
    v = claim.verdict(r)
    assert "SmolLM2-135M-Instruct (Q4_1): agrees" in v
    # the sliding layers fall to 0 but the global one is flat: no fall shown, and none refuted
    assert "Gemma 3 270M base (Q4_K_M): inconclusive at n = 100 and 100 on its global layers 3" in v
    assert "global layers (3) only" in claim.measure(r, "gemma3-270m") and "64->256" in claim.measure(r, "smollm2")
    rates[("gemma3-270m", "text", True, 64)] = [0.8, 0.8, 0.8, 0.3]  # the global layer rises
    rates[("smollm2", "text", False, 1024)] = 0.75
    _sink_csv(tmp_path, rates, n=9, windows=windows)
    v = claim.verdict(known_types.Results(tmp_path))
    assert "SmolLM2-135M-Instruct (Q4_1): inconclusive at n = 9 and 9" in v
    assert "(t), n = 9 and 9" in v  # a Welch t interval below 32 units a sample, both samples' n named
    assert "Gemma 3 270M base (Q4_K_M): differs on its global layers 3" in v


def test_depth_verdict_is_two_sided(tmp_path):
    claim = _claim("sinks above the bottom layers")
    rates = {("smollm2", "text", False, 64): [0.0, 0.0, 0.9, 0.9],  # Xiao's picture
             ("gemma3-270m", "text", True, 64): [0.9, 0.9, 0.9, 0.9]}  # the bottom two sink too
    _sink_csv(tmp_path, rates)
    v = claim.verdict(known_types.Results(tmp_path))
    assert "SmolLM2-135M-Instruct (Q4_1): agrees" in v
    assert "Gemma 3 270M base (Q4_K_M): differs (bottom two layers: differs; the layers above: agrees)" in v
    rates[("smollm2", "text", False, 64)] = [0.0, 0.0, 0.5, 0.5]
    _sink_csv(tmp_path, rates, n=10)
    assert "SmolLM2-135M-Instruct (Q4_1): inconclusive at n = 10" in claim.verdict(known_types.Results(tmp_path))


def test_repeat_verdict(tmp_path):
    claim = _claim("no sink on one repeated token in rotary models")
    _sink_csv(tmp_path, {(m, "repeat", False, 64): 0.0 for m in ("smollm2", "gemma3-270m")})
    assert claim.verdict(known_types.Results(tmp_path)).count(": agrees") == 2
    _sink_csv(tmp_path, {(m, "repeat", False, 64): 0.6 for m in ("smollm2", "gemma3-270m")})
    assert claim.verdict(known_types.Results(tmp_path)).count(": differs") == 2


def test_old_csvs_without_unit_level_values_render_as_no_interval(tmp_path):
    """The CSVs kept before unit-level values: every sink row prints its estimate with "no interval" and an
    inconclusive verdict, and no row crashes."""
    rates = _table1_rates(0.74, 0.77)
    rates |= {("smollm2", "text", False, 256): 0.55, ("gemma3-270m", "text", True, 256): 0.6}
    _sink_csv(tmp_path, rates, n=16, unit_level=False)
    r = known_types.Results(tmp_path)
    for name in ("attention sinks in pretrained LMs", "sinks and evaluation length", "sinks above the bottom layers"):
        c = _claim(name)
        assert "(no interval)" in c.measure(r, "smollm2"), name
        assert "inconclusive (no interval)" in c.verdict(r), name
    assert "not run" in _claim("no sink on one repeated token in rotary models").verdict(r)


def test_every_sink_row_shows_a_rule_written_before_its_run_and_its_history():
    for name in ("attention sinks in pretrained LMs", "the sink sits where pretraining fixes a token",
                 "sinks and evaluation length", "sinks above the bottom layers",
                 "no sink on one repeated token in rotary models"):
        rule = _claim(name).rule
        assert rule is not None and "before" in rule.written, name
        # SmolLM2's half of the position rule was rewritten for issue 45 before a judged run put its separator first
        day = "2026-11-29" if name == "the sink sits where pretraining fixes a token" else "2026-11-27"
        assert rule.history().startswith(f"rule (written {day}"), name
    assert "earlier rule" in _claim("sinks above the bottom layers").rule.history()


def test_every_claim_carries_its_rule_and_the_table_prints_each_rule_once():
    """Six rows once appended their rule to the verdict and declared none, so the table also said "no rule was
    written before the data" under a rule written before the run."""
    assert all(c.rule is not None for c in CLAIMS)
    table = known_results.render(known_types.EVIDENCE)
    assert "no rule was written" not in table
    for c in CLAIMS:
        assert table.count(known_results._cell(c.rule.text.rstrip("."))) == 1, c.finding  # a cell escapes "|"


def test_a_claim_without_a_rule_says_so():
    from dataclasses import replace

    c = replace(_claim("induction heads"), rule=None, verdict=lambda r: "agrees")
    assert "no rule was written before the data" in known_results._verdict(c, None)


def test_a_missing_csv_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="induction's CSV"):
        known_results.render(tmp_path)


def test_readme_section_is_rewritten_in_place_and_nothing_else(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("# x\nbefore\n<!-- known-results -->\nold\n<!-- /known-results -->\nafter\n", encoding="utf-8")
    monkeypatch.setattr(known_results, "render", lambda folder: "| new |\n")
    assert known_results.main([str(tmp_path), "--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == ("# x\nbefore\n<!-- known-results -->\n| new |\n"
                                                  "<!-- /known-results -->\nafter\n")
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="bare.md has no <!-- known-results -->"):
        known_results.main([str(tmp_path), "--readme", str(tmp_path / "bare.md")])


def test_pct_and_head_names():
    assert known_types.pct(0.25) == "25.0%" and known_types.pct(1 / 3) == "33.3%"
    assert known_types.head(pd.Series(dict(layer=np.int64(3), head=np.int64(7)))) == "L3H7"


def _rope_csv(folder, q_low, k_low=(3.0, 3.1, 2.9, 3.2) * 2, layers=4):
    """Bands rows of 4 bands (band 3 the lowest frequency) and per-context quarter norms: the highest quarter's norm
    is 1 in every context, the lowest's ``q_low`` / ``k_low`` (one value per context) in every layer."""
    rows, kept = [], []
    for model in ("smollm2", "gemma3-270m"):
        for layer in range(layers):
            for band, freq in enumerate([1.0, 0.5, 0.1, 0.01]):
                rows.append(dict(model=model, part="bands", layer=layer, head=0, band=band, frequency=freq,
                                 q_norm=float(np.mean(q_low)) if freq == 0.01 else 1.0,
                                 k_norm=float(np.mean(k_low)) if freq == 0.01 else 1.0, poslens_logit_share=0.25,
                                 length=512, n_docs=len(q_low)))
            for c, (q, k) in enumerate(zip(q_low, k_low)):
                for quarter, qn, kn in (("lowest", q, k), ("highest", 1.0, 1.0)):
                    kept += [dict(model=model, measure="q_norm", layer=layer, quarter=quarter, unit=c, value=qn),
                             dict(model=model, measure="k_norm", layer=layer, quarter=quarter, unit=c, value=kn)]
    pd.DataFrame(rows).to_csv(folder / "rope-frequencies.csv", index=False)
    pd.DataFrame(kept, columns=["model", "measure", "condition", "length", "layer", "quarter", "unit", "value"]) \
        .to_csv(folder / "rope-frequencies.units.csv", index=False)


def test_rotary_verdict_reads_queries_and_keys_per_layer_with_intervals(tmp_path):
    claim = _claim("rotary bands: queries and keys weigh the low frequencies")
    keys = (3.0, 3.1, 2.9, 3.2) * 2
    _rope_csv(tmp_path, (2.0, 2.2, 1.9, 2.1) * 2, keys)
    r = known_types.Results(tmp_path)
    assert claim.verdict(r).startswith("SmolLM2-135M-Instruct (Q4_1): queries agrees (4 of 4 layers above 1, 0 wholly "
                                       "at or below), keys agrees")
    assert "queries: lowest / highest quarter norm 2.05-2.05x over 4 layers" in claim.measure(r, "smollm2")
    assert "(95% t intervals over n = 8 contexts)" in claim.measure(r, "smollm2")
    _rope_csv(tmp_path, (0.5, 0.6, 0.55, 0.4) * 2, keys)  # queries prefer the highest quarter, keys the lowest
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "SmolLM2-135M-Instruct (Q4_1): queries differs (0 of 4 layers above 1, 4 wholly at or below (layers 0, 1, 2, "
        "3)), keys agrees")
    _rope_csv(tmp_path, (0.5, 1.6, 0.7, 1.5) * 2, keys)  # mean 1.08, the interval straddles 1
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "SmolLM2-135M-Instruct (Q4_1): queries inconclusive at n = 8 contexts (0 of 4 layers above 1, 0 wholly at or "
        "below, 4 undecided)")


def test_rotary_label_says_how_many_layers_contradict_when_every_layer_is_decided(tmp_path):
    """One layer of eight wholly below 1, the rest above: fewer than the quarter that differs needs, and no layer
    undecided, so the label says so instead of "inconclusive at n"."""
    _rope_csv(tmp_path, (2.0, 2.2, 1.9, 2.1) * 2, layers=8)
    units = pd.read_csv(tmp_path / "rope-frequencies.units.csv")
    low = (units.measure == "q_norm") & (units.layer == 5) & (units.quarter == "lowest")
    units.loc[low, "value"] = units.loc[low, "value"] / 4  # layer 5's queries: about 0.5
    units.to_csv(tmp_path / "rope-frequencies.units.csv", index=False)
    v = _claim("rotary bands: queries and keys weigh the low frequencies").verdict(known_types.Results(tmp_path))
    assert v.startswith("SmolLM2-135M-Instruct (Q4_1): queries inconclusive with every layer decided (7 of 8 "
                        "layers above 1, 1 wholly at or below (layers 5); differs needs 2: more contexts would not "
                        "change it), keys agrees")


def _retrieval_frames(n_retrieval, top_acc=0.0, random_acc=1.0, heads=100, prompts=20, borderline=0, n_masking=16,
                      length=512, borrowed=0):
    """``n_retrieval`` heads hit 0.5 of the needle on every prompt; ``borderline`` more hit 0.2 on every other prompt
    (score 0.1: above the threshold on about half the resamples); NIAH accuracies over ``n_masking`` prompts; each
    random draw of k heads ``borrowed`` from other layers. The table's rows and the unit values, at ``length``."""
    rows, kept = [], []
    for model in ("smollm2", "gemma3-270m"):
        for h in range(heads):
            score = 0.5 if h < n_retrieval else 0.1 if h < n_retrieval + borderline else 0.0
            rows.append(dict(model=model, score="wu", masking="query", part="heads", layer=h // 10, head=h % 10,
                             rank=h, retrieval_score=score, is_retrieval=score > 0.1, n_counted=prompts,
                             n_scored=prompts))
        for p in range(prompts):
            kept += [dict(model=model, measure=m, unit=p, value=v)
                     for m, v in (("needle_depth", p / (prompts - 1)), ("recall", 1.0), ("counted", 1.0))]
            for h in range(heads):
                hit = 0.5 if h < n_retrieval else 0.2 if h < n_retrieval + borderline and p % 2 == 0 else 0.0
                kept.append(dict(model=model, measure="hits", layer=h // 10, head=h % 10, unit=p, value=hit))
        rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="none", k=0,
                         niah_accuracy=1.0, heads=""))
        for k in (2, 5, 10):
            top = " ".join(f"L{h // 10}H{h % 10}" for h in range(k))
            rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="top", k=k,
                             niah_accuracy=top_acc if k >= n_retrieval else 1.0, heads=top))
            for draw in (0, 1):
                rows.append(dict(model=model, score="wu", masking="query", part="masking", condition="random", k=k,
                                 draw=draw, niah_accuracy=random_acc, heads="L9H9", borrowed=borrowed))
    df, units = pd.DataFrame(rows), pd.DataFrame(kept, columns=["model", "measure", "layer", "head", "unit", "value"])
    df["niah_prompts"], df["length"], df["threshold"], units["length"] = n_masking, length, 0.1, length
    return df, units


def _retrieval_csv(folder, *args, **kwargs):
    """One length's rows, the unit values written as runs before lengths kept them (no length column)."""
    df, units = _retrieval_frames(*args, **kwargs)
    df.to_csv(folder / "retrieval-heads.csv", index=False)
    units.drop(columns="length").to_csv(folder / "retrieval-heads.units.csv", index=False)


def test_retrieval_share_is_judged_by_its_interval_over_prompts(tmp_path):
    sparse = _claim("retrieval heads are sparse")
    _retrieval_csv(tmp_path, 4)
    r = known_types.Results(tmp_path)
    assert "SmolLM2-135M-Instruct (Q4_1) agrees (4.0% [4.0, 4.0] (simultaneous t), n = 20)" in sparse.verdict(r)
    assert ("the bounds 4 heads whose score interval lies above 0.1 and 4 whose interval reaches above it"
            in sparse.measure(r, "smollm2"))
    assert "best L0H0 0.50 [0.50, 0.50] (t), n = 20" in sparse.measure(r, "smollm2")
    _retrieval_csv(tmp_path, 9)
    assert "SmolLM2-135M-Instruct (Q4_1) differs (9.0% [9.0, 9.0] (simultaneous t), n = 20)" in \
        sparse.verdict(known_types.Results(tmp_path))
    _retrieval_csv(tmp_path, 4, borderline=4)  # 4 heads at exactly 0.1 may lie above it: 4 to 8, straddles 6.2%
    r = known_types.Results(tmp_path)
    assert "SmolLM2-135M-Instruct (Q4_1) inconclusive at n = 20 (4.0% [4.0, 8.0]" in sparse.verdict(r)
    assert ("the bounds 4 heads whose score interval lies above 0.1 and 8 whose interval reaches above it"
            in sparse.measure(r, "smollm2"))
    assert "Rule revised on" in known_results._verdict(sparse, r)


def test_masking_verdict_reads_binomial_intervals_at_the_number_of_retrieval_heads(tmp_path):
    causal = _claim("retrieval heads are causal")
    _retrieval_csv(tmp_path, 4, top_acc=0.0, random_acc=1.0)  # 0 / 16 vs 16 / 16
    r = known_types.Results(tmp_path)
    # top 2 would not have sufficed
    assert "SmolLM2-135M-Instruct (Q4_1) agrees (k = 5, 4 heads score > 0.1" in causal.verdict(r)
    assert "2 random, each draw: 1.00 [0.79, 1.00], 1.00 [0.79, 1.00]" in causal.measure(r, "smollm2")
    assert "top 2: 1.00" in causal.measure(r, "smollm2") and "top 5 (the rule's k): 0.00 [0.00, 0.21]" in \
        causal.measure(r, "smollm2")
    _retrieval_csv(tmp_path, 4, top_acc=1.0, random_acc=1.0)
    assert "SmolLM2-135M-Instruct (Q4_1) differs (k = 5" in causal.verdict(known_types.Results(tmp_path))
    _retrieval_csv(tmp_path, 4, top_acc=0.375, random_acc=1.0)  # 6 / 16: the upper bound passes half
    assert "SmolLM2-135M-Instruct (Q4_1) inconclusive at n = 16 (k = 5" in causal.verdict(known_types.Results(tmp_path))
    _retrieval_csv(tmp_path, 4, top_acc=0.0, random_acc=0.75)  # random heads' lower bound under 75%
    assert "SmolLM2-135M-Instruct (Q4_1) inconclusive at n = 16: the top heads hurt" in \
        causal.verdict(known_types.Results(tmp_path))
    verdict = known_results._verdict(causal, known_types.Results(tmp_path))
    assert "the earlier rule (k = the smallest k run (3)" in verdict and "SmolLM2 differs (top 3 masked" in verdict


def test_retrieval_rows_judge_each_length_and_agree_only_where_every_length_does(tmp_path):
    """Two lengths: at 512 tokens 4 retrieval heads of 100 (agrees) and masking them breaks retrieval; at 2,048 9
    heads (differs) and masking them leaves it. Each length is judged on its own rows and unit values; the model
    differs on both rows. Each random draw borrowed 3 heads, which the causal row says."""
    short = _retrieval_frames(4, top_acc=0.0, length=512, borrowed=3)
    long = _retrieval_frames(9, top_acc=1.0, length=2048, borrowed=3)
    pd.concat([short[0], long[0]]).to_csv(tmp_path / "retrieval-heads.csv", index=False)
    pd.concat([short[1], long[1]]).to_csv(tmp_path / "retrieval-heads.units.csv", index=False)
    r = known_types.Results(tmp_path)
    sparse, causal = _claim("retrieval heads are sparse"), _claim("retrieval heads are causal")
    verdict = sparse.verdict(r)
    assert ("SmolLM2-135M-Instruct (Q4_1) differs (512 tokens: agrees, 4.0% [4.0, 4.0] (simultaneous t), n = 20; "
            "2,048 tokens: differs, 9.0% [9.0, 9.0]") in verdict
    measured = sparse.measure(r, "smollm2")
    assert measured.startswith("at 512 tokens: 4 of 100 heads") and "; at 2,048 tokens: 9 of 100 heads" in measured
    assert "haystacks of 512, 2,048 tokens (2 lengths)" in sparse.protocol_text(r)
    verdict = causal.verdict(r)
    assert "SmolLM2-135M-Instruct (Q4_1) differs (512 tokens: agrees, k = 5, 4 heads score > 0.1" in verdict
    assert "; 2,048 tokens: differs, k = 10, 9 heads score > 0.1" in verdict
    assert "(heads borrowed from neighbouring layers: 3, 3)" in causal.measure(r, "smollm2")
    assert "a draw borrowed up to 3 heads from the nearest layers" in causal.protocol_text(r)
    _retrieval_csv(tmp_path, 4)  # one length: judged as before, without a length in the verdict
    assert "SmolLM2-135M-Instruct (Q4_1) agrees (4.0% [4.0, 4.0]" in sparse.verdict(known_types.Results(tmp_path))


def _stream_csv(folder, gains, control=0.0, recovered=None):
    """16 buckets of a stream: window loss 3.0; 4 sinks' loss 3.0 - gain (the first bucket's gain 0: the cache is
    not full); the no-start-token control's sinks gain ``control``."""
    rows, kept = [], []
    for model in ("smollm2", "gemma3-270m"):
        base = dict(model=model, setting="streaming", stream_tokens=16 * 512, trained_length=4096,
                    recompute_stride=64, cache_size=1024)
        buckets = [f"{512 * i + 1}-{512 * (i + 1)}" for i in range(16)]
        for i, b in enumerate(buckets):
            g = 0.0 if i == 0 else gains[(i - 1) % len(gains)]
            for condition, loss in (("dense", 2.9), ("window", 3.0), ("window + 1 sink", 3.0 - g),
                                    ("window + 4 sinks", 3.0 - g), ("window, no start token", 3.0),
                                    ("window + 4 sinks, no start token", 3.0 - control)):
                rows.append(dict(base, condition=condition, bucket=b, loss=loss))
        for condition in ("dense", "window", "window + 4 sinks"):
            rows.append(dict(base, condition=condition, bucket="past the trained length", loss=3.0))
            rows.append(dict(base, condition=condition, bucket="re-computed tokens", loss=3.0))
        rows.append(dict(base, condition="re-computation", bucket="re-computed tokens", loss=2.9))
        # 30 tokens (a ratio's BCa interval); per token: window 3.5, re-computation 2.5 (+- noise)
        for i in range(30 if recovered is not None else 0):
            noise = 0.05 * ((i % 5) - 2)
            for condition, loss in (("window", 3.5 + noise), ("window + 4 sinks", 3.5 - recovered + noise),
                                    ("re-computation, start token first", 2.5 + noise)):
                kept.append(dict(model=model, measure="loss", condition=condition, start_token=True,
                                 unit=64 * (i + 1), value=loss))
    pd.DataFrame(rows).assign(part="stream").to_csv(folder / "attention-window.csv", index=False)
    (folder / "attention-window.units.csv").unlink(missing_ok=True)
    if kept:
        pd.DataFrame(kept, columns=["model", "measure", "condition", "sinks", "cache_size", "start_token", "unit",
                                    "value"]).to_csv(folder / "attention-window.units.csv", index=False)


def test_streaming_verdict_reads_the_gain_in_every_bucket_and_shows_the_control(tmp_path):
    claim = _claim("window attention needs the first tokens (attention sinks)")
    _stream_csv(tmp_path, [0.1, 0.12, 0.08])
    r = known_types.Results(tmp_path)
    verdict = claim.verdict(r)
    # the gain part holds; the recovery part cannot be judged without per-token losses, so the row stays inconclusive
    assert verdict.startswith("SmolLM2-135M-Instruct (Q4_1) inconclusive: the gain part agrees (15 of 15 buckets > 0)")
    assert "control, the same 4 sinks without the start token (ordinary tokens first): 0.0000 [0.0000, 0.0000]" in \
        claim.measure(r, "smollm2")
    _stream_csv(tmp_path, [-0.1, -0.05, -0.2])
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "SmolLM2-135M-Instruct (Q4_1) differs: the gain part differs")
    _stream_csv(tmp_path, [0.1, -0.1, 0.02, -0.03])
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "SmolLM2-135M-Instruct (Q4_1) inconclusive: the gain part inconclusive at n = 15")


def test_streaming_verdict_judges_the_share_recovered_when_tokens_are_kept(tmp_path):
    claim = _claim("window attention needs the first tokens (attention sinks)")
    _stream_csv(tmp_path, [0.1, 0.12, 0.08], recovered=0.9)  # 90% of the 1-nat excess removed
    verdict = claim.verdict(known_types.Results(tmp_path))
    assert verdict.startswith("SmolLM2-135M-Instruct (Q4_1) agrees: the gain part agrees (15 of 15 buckets > 0); the "
                              "recovery part agrees (share of the window's excess over re-computation with the start "
                              "token, 2.500 nats/token, removed by 4 sinks: 90.0% [")
    assert "(BCa), n = 30 tokens" in verdict  # the oracle's value is shown, and the share's method
    _stream_csv(tmp_path, [0.1, 0.12, 0.08], recovered=0.2)
    assert claim.verdict(known_types.Results(tmp_path)).startswith(
        "SmolLM2-135M-Instruct (Q4_1) differs: the gain part agrees (15 of 15 buckets > 0); the recovery part differs")


def _massive_csv(folder, log_ratio, first_share, n=100, layers=6):
    rows = []
    for model in ("smollm2", "gemma3-270m"):
        for start in (True, False):
            for s in range(n):
                for layer in range(layers):
                    big = 2 <= layer < 4  # the middle third
                    ratio = 10 ** (log_ratio + 0.1 * ((s * 0.618) % 1 - 0.5)) if big else 10.0
                    rows.append(dict(model=model, start_token=start, layer=layer, sequence=s, rank=1,
                                     magnitude=ratio, median=1.0, ratio=ratio, dim=7, position=0 if s < first_share * n
                                     else 5, first_token=s < first_share * n, length=64, n_layers=layers, n_docs=n))
    pd.DataFrame(rows).to_csv(folder / "massive-activations.csv", index=False)


def test_massive_activation_verdict_reads_size_and_place(tmp_path):
    claim = _claim("massive activations at the first token")
    _massive_csv(tmp_path, 3.5, 0.95)
    r = known_types.Results(tmp_path)
    assert claim.verdict(r).count(": agrees (size: agrees; at the first token: agrees)") == 2
    said = claim.measure(r, "smollm2")
    assert "layers 2-3 10^3.5" in said and "dimension 7 in 100.0% [96.4, 100.0] (exact binomial), n = 100" in said
    _massive_csv(tmp_path, 2.0, 0.95)
    assert claim.verdict(known_types.Results(tmp_path)).count("(size: differs") == 2
    _massive_csv(tmp_path, 3.5, 0.5, n=20)  # half the sequences: the binomial interval straddles 50%
    assert "at the first token: inconclusive at n = 20" in claim.verdict(known_types.Results(tmp_path))


def test_length_verdict_reads_every_gemma_layer_within_its_window(tmp_path):
    claim = _claim("sinks and evaluation length")
    windows = {("gemma3-270m", layer): 512 for layer in (0, 1, 2)}
    rates = {}
    for t, local in ((64, 0.8), (256, 0.5)):  # T <= 512: every layer still sees token 0
        rates[("smollm2", "text", False, t)] = local
        rates[("gemma3-270m", "text", True, t)] = [local, local, local, 0.9]
    _sink_csv(tmp_path, rates, windows=windows)
    v = claim.verdict(known_types.Results(tmp_path))
    assert "Gemma 3 270M base (Q4_K_M): agrees (T = 64 -> 256" in v and "global layers 3 (" not in v


def test_an_intervals_unit_stands_by_its_estimate_not_after_its_n():
    import re

    text = known_results.render(known_types.EVIDENCE)
    assert "loss +" in text and " nats/token [" in text
    assert not re.search(r"n = \d+ nats", text)


def test_a_difference_of_two_samples_names_both_and_below_32_units_is_scipys_welch_interval():
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.7, 0.1, 20), rng.normal(0.5, 0.2, 12)
    iv = known_types.difference(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (iv.lo, iv.hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert iv.format("{:.2f}").endswith("(t), n = 20 and 12")
    big = known_types.difference(rng.normal(size=100), rng.normal(size=50))
    assert big.short == "bootstrap" and big.format().endswith("n = 100 and 50")
    assert known_types.difference(a[:5], b).format("{:.2f}").endswith("(descriptive: n = 5 and 12, fewer than 8)")


def test_every_protocol_reads_its_run_facts_from_the_run_and_states_no_number_of_its_own():
    """A protocol states the run's facts (units, lengths, conditions, what was kept) through ``Protocol.facts``,
    read from the kept CSVs and provenance; every number written into its text is one it cites (the paper's). A
    run fact typed into the text fails here."""
    import re

    r = known_types.Results(known_types.EVIDENCE)
    for c in CLAIMS:
        assert isinstance(c.protocol, known_types.Protocol), f"{c.finding}: protocol text not generated from the run"
        literal = re.sub(r"\{\{|\}\}|\{\w+\}", "", c.protocol.text).replace("Gemma 3", "Gemma")  # a name
        stated = re.findall(r"\d+(?:[.,]\d+)*", literal)
        extra = sorted(set(stated) - set(c.protocol.cited))
        assert not extra, f"{c.finding}: the protocol states {extra} itself: read it from the run or cite it"
        assert c.protocol_text(r).strip(), c.finding


def test_the_protocol_text_follows_what_the_kept_run_did(tmp_path):
    """A copy of the kept run with other facts: fewer sequences, another repeat length, no oracle re-computation and
    no per-token losses, other shares masked. The protocols say what this run did."""
    import json
    import shutil

    for p in known_types.EVIDENCE.iterdir():
        shutil.copy2(p, tmp_path / p.name)
    sinks = pd.read_csv(tmp_path / "sink-rate.csv.gz")
    sinks.loc[sinks.length == 64, "n_docs"] = 37
    sinks.to_csv(tmp_path / "sink-rate.csv.gz", index=False)
    induction = pd.read_csv(tmp_path / "induction.csv.gz")
    induction["half"], induction["n_docs"] = 100, 9
    induction.to_csv(tmp_path / "induction.csv.gz", index=False)
    stream = pd.read_csv(tmp_path / "attention-window.csv.gz")
    stream[stream.condition != "re-computation, start token first"].to_csv(tmp_path / "attention-window.csv.gz",
                                                                             index=False)
    (tmp_path / "attention-window.units.csv.gz").unlink()
    prov = json.loads((tmp_path / "retrieval-heads.provenance.json").read_text())
    prov["arguments"]["shares"] = [0.03, 0.2]
    (tmp_path / "retrieval-heads.provenance.json").write_text(json.dumps(prov))
    r = known_types.Results(tmp_path)
    kept = known_types.Results(known_types.EVIDENCE)
    table1 = _claim("attention sinks in pretrained LMs")
    assert "at T = 64 on 37 sequences per condition" in table1.protocol_text(r)
    assert "at T = 64 on 100 sequences per condition" in table1.protocol_text(kept)
    assert "T = 64 (37 sequences) and T = 256 (50 sequences)" in _claim("sinks and evaluation length").protocol_text(r)
    said = _claim("induction heads").protocol_text(r)
    assert "100 random ordinary tokens repeated once after the start token, 9 sequences" in said
    assert "windows of 200 tokens" in _claim("previous-token heads").protocol_text(r)
    streaming = _claim("window attention needs the first tokens (attention sinks)")
    assert "without the start token only; no per-token losses kept" in streaming.protocol_text(r)
    assert ("with the model's start token first (the rule's oracle) and without it; per-token losses kept on the "
            "re-computed tokens (63 for SmolLM2-135M-Instruct (Q4_1) and 135 for Gemma 3 270M base (Q4_K_M))"
            in streaming.protocol_text(kept))
    assert "k = 3%, 20% of the heads" in _claim("retrieval heads are causal").protocol_text(r)


def _provenance(folder: Path, analysis: str, **arguments) -> None:
    import json

    (folder / f"{analysis}.provenance.json").write_text(json.dumps(dict(analysis=analysis, arguments=arguments)))


def test_the_units_line_says_whether_the_kept_run_drew_units_no_pilot_read(tmp_path):
    _provenance(tmp_path, "sink-rate", n_docs=100, stage="judged")
    _provenance(tmp_path, "induction", half=256, n_docs=16, stage="judged")
    _provenance(tmp_path, "ap-spectrum")  # draws no units
    assert "under stage `judged`" in known_results.units_line(tmp_path)
    _provenance(tmp_path, "retrieval-heads", n_docs=32, niah_prompts=16)  # written before stages existed
    line = known_results.units_line(tmp_path)
    assert line.startswith("**Units**: not held out. retrieval-heads (any) drew")
    assert "sink-rate" not in line and "ap-spectrum" not in line
    assert "not held out" in known_results.units_line(known_types.EVIDENCE)  # the kept run predates the stages


def test_the_retrieval_figure_draws_a_row_of_panels_per_length(tmp_path):
    """What the PNG showed: one row (scores by rank, accuracy by k) per length run, each titled with its length, the
    legend once, the threshold on each row's score panel."""
    from figures.retrieval_heads import figure

    short, long = _retrieval_frames(4, length=512), _retrieval_frames(9, length=2048)
    fig = figure(pd.concat([short[0], long[0]], ignore_index=True))
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["every head's retrieval score, by rank (512 tokens)",
                      "NIAH accuracy, k heads masked (512 tokens)",
                      "every head's retrieval score, by rank (2,048 tokens)",
                      "NIAH accuracy, k heads masked (2,048 tokens)"]
    assert fig.layout.yaxis3.domain[1] < fig.layout.yaxis.domain[0]  # the longer length's row below the shorter's
    assert sum(t.showlegend is not False for t in fig.data) == 6 and len(fig.layout.shapes) == 2
    ranked = [t for t in fig.data if t.xaxis == "x3" and t.mode == "lines+markers"]
    assert [round(float(max(t.y)), 2) for t in ranked] == [0.5, 0.5]  # the 2,048-token scores in the second row
