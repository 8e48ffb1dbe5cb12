"""The viewer's numbers against a materialised pattern (``run_with_cache``'s ``hook_pattern``) and the analyses' CSVs:
a pooled block is the mean of the exact pattern's entries over it, the grid is the rows' mean, the token level is the
pattern rows, and a results folder's column is copied as its CSV wrote it."""

import math

import numpy as np
import pytest
import torch

from interp.attention import current_query_rows
from poslens.viewer import view
from poslens.viewer.data import FAR, WINDOW, block_rows, bounded, head_data, token_level
from tests.repo_helpers import tiny_repo


def _patterns(model, ids) -> torch.Tensor:
    """``[layer, head, q, k]`` float64, materialised (what the viewer never builds)."""
    _, cache = model.run_with_cache(torch.tensor([ids]))
    return torch.stack([cache[f"blocks.{l}.attn.hook_pattern"][0] for l in range(model.n_layers)]).double()


def _pooled(a: torch.Tensor, block: int) -> torch.Tensor:
    n = a.shape[-1]
    nb = math.ceil(n / block)
    out = torch.zeros(*a.shape[:2], nb, nb, dtype=torch.float64)
    for b in range(nb):
        for c in range(nb):
            out[:, :, b, c] = a[:, :, b * block:(b + 1) * block, c * block:(c + 1) * block].mean((-1, -2))
    return out


@pytest.mark.parametrize("n,block", [(70, 8), (64, 16), (33, 33)])
def test_pooled_block_is_the_mean_of_the_exact_entries_over_it(n, block):
    model = tiny_repo("rope")
    ids = torch.randint(1, 250, (n,), generator=torch.Generator().manual_seed(n)).tolist()
    got = head_data(model, ids, block)
    a = _patterns(model, ids)
    assert got.pooled.shape == (3, 4, math.ceil(n / block), math.ceil(n / block))
    assert np.abs(got.pooled - _pooled(a, block).numpy()).max() < 1e-7
    # above the causal diagonal every entry is 0; a row of blocks times its key sizes sums to the rows' mass, 1
    nb = got.n_blocks
    assert (got.pooled[..., np.triu_indices(nb, 1)[0], np.triu_indices(nb, 1)[1]] == 0).all()
    sizes = np.bincount(np.arange(n) // block)
    assert np.abs((got.pooled * sizes).sum(-1) - 1).max() < 1e-5


def test_grid_and_curves_are_the_means_of_the_exact_rows():
    model = tiny_repo("rope")
    n, block = 90, 16
    ids = torch.randint(1, 250, (n,), generator=torch.Generator().manual_seed(1)).tolist()
    got = head_data(model, ids, block)
    a = _patterns(model, ids)
    q = torch.arange(n)[:, None]
    k = torch.arange(n)[None, :]
    d = (q - k).clamp(min=0).double()
    rows = {"first": a[..., :, 0], "previous": torch.cat([torch.zeros_like(a[..., :1, 0]),
                                                           torch.diagonal(a, -1, -2, -1)], -1),
            "window": (a * (d <= WINDOW)).sum(-1), "far": (a * (d > FAR)).sum(-1),
            "entropy": torch.special.entr(a).sum(-1), "distance": (a * d).sum(-1)}
    for stat, r in rows.items():
        np.testing.assert_allclose(got.grid[stat], r[..., 1:].mean(-1).numpy(), atol=2e-6, err_msg=stat)
        np.testing.assert_allclose(got.curves[stat][..., 2], r[..., 32:48].mean(-1).numpy(), atol=2e-6, err_msg=stat)
        np.testing.assert_allclose(got.curves[stat][..., 0], r[..., 1:16].mean(-1).numpy(), atol=2e-6, err_msg=stat)


def test_a_block_of_row_0_alone_has_no_curve_value():
    """Row 0 is left out of the curves, so a first block holding only it has no rows: NaN (a gap), not a mean of 0."""
    model = tiny_repo("rope")
    ids = torch.randint(1, 250, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    got = head_data(model, ids, 1)
    a = _patterns(model, ids)
    for stat, v in got.curves.items():
        assert np.isnan(v[..., 0]).all(), stat
    np.testing.assert_allclose(got.curves["first"][..., 1:], a[..., 1:, 0].numpy(), atol=2e-6)
    page = view(model, text=ids, block=1, page_mb=5).data["models"][0]["curves"]["first"]
    assert page[0][0][0] is None and page[0][0][1] is not None


def test_token_rows_are_the_hook_pattern_rows():
    model = tiny_repo("rope")
    n = 120
    ids = torch.randint(1, 250, (n,), generator=torch.Generator().manual_seed(2)).tolist()
    a = _patterns(model, ids)
    rows = block_rows(n, 32, 2)
    assert rows == [64, 74, 85, 95]
    got = token_level(model, ids, rows, range(3), range(4), top=5, before=3)
    assert set(got) == {(l, h, q) for l in range(3) for h in range(4) for q in rows}
    for (l, h, q), (keys, ws) in got.items():
        assert keys == sorted(keys) and keys[-3:] == [q - 2, q - 1, q]
        np.testing.assert_allclose(ws, a[l, h, q, keys].numpy(), atol=1e-6)
        heaviest = set(torch.topk(a[l, h, q, :q + 1], 5).indices.tolist())
        assert heaviest <= set(keys)


def _plant(model, layer):
    """Layer ``layer``: head 0 reads only the previous token, head 1 only the first (planted ground truth)."""

    def hook(pattern, hook):
        rows = current_query_rows()
        rows = torch.arange(pattern.shape[-2]) if rows is None else rows.cpu()
        p = pattern.clone()
        for j, q in enumerate(rows.tolist()):
            p[0, :2, j] = 0
            p[0, 0, j, max(q - 1, 0)] = 1
            p[0, 1, j, 0] = 1
        return p

    model.add_hook(f"blocks.{layer}.attn.hook_pattern", hook)


def test_planted_heads_read_as_planted_at_every_level():
    model = tiny_repo("rope")
    _plant(model, 1)
    try:
        v = view(model, text="abcdefghij" * 10, block=10, page_mb=5)
    finally:
        model.reset_hooks()
    m = v.data["models"][0]
    assert m["length"] == 101 and m["n_blocks"] == 11
    assert m["grid"]["previous"][1][0] == pytest.approx(1.0) and m["grid"]["first"][1][1] == pytest.approx(1.0)
    pooled = np.frombuffer(__import__("base64").b64decode(m["pooled"]), dtype="<f4").reshape(3, 4, 11, 11)
    # the first-token head: every row puts 1 on key 0, so each row block's mean entry over key block 0 is 1 / 10
    assert pooled[1, 1, 1:, 0] == pytest.approx(np.full(10, 0.1)) and (pooled[1, 1, :, 1:] == 0).all()
    # the previous-token head: mass only on the diagonal blocks and the one before (a block's first row)
    assert pooled[1, 0, 5, 5] == pytest.approx(9 / 100) and pooled[1, 0, 5, 4] == pytest.approx(1 / 100)
    assert m["precomputed"] == list(range(11))
    (q, keys, ws), *_ = m["rows"]["1|1|10"]
    assert q == 100 and ws[keys.index(0)] == 1.0 and sum(ws) == pytest.approx(1.0)
    assert m["tokens"][1:4] == ["a", "b", "c"]


# ---- the results folders: the grid's column is the CSV's ----

RUNS = {"head-profiles": dict(n_docs=1, length=48, max_rows=16, niah_prompts=1, niah_tokens=224),
        "along-context": dict(n_docs=2, length=64),
        "sink-rate": dict(lengths=(32, 48), n_docs=2),
        "attention-window": dict(n_docs=1, length=64, window=16)}


@pytest.fixture(scope="module")
def model():
    from interp.loading import load

    return load("rope-small")


@pytest.fixture(scope="module")
def folders(tmp_path_factory, model):
    from poslens.run.execute import run_analysis

    out = {}
    for name, options in RUNS.items():
        out[name] = tmp_path_factory.mktemp(name)
        run_analysis(name, [model], out[name], options=options)
    return out


def _expected(name, df):
    """``{column: [layer, head]}`` as the CSV gives each head (sink-rate: the text input at its longest length;
    along-context: the bucket means weighted by their rows)."""
    if name == "sink-rate":
        df = df[(df["input"] == "text") & (df["length"] == 48)]
    if name == "attention-window":
        df = df[df["part"] == "reach"]
    out = {}
    for col in {"head-profiles": ("first_token_mass", "previous_token_mass", "local_mass"),
                "sink-rate": ("alpha_1", "first_token_mass", "sink_share"),
                "attention-window": ("sink_mass", "mass_beyond_window", "mean_distance"),
                "along-context": ("first_mass", "previous_mass", "distance_mean", "entropy")}[name]:
        grid = np.zeros((4, 4))
        for (l, h), g in df.groupby(["layer", "head"]):
            grid[int(l), int(h)] = ((g[col] * g["tokens"]).sum() / g["tokens"].sum() if name == "along-context"
                          else g[col].iloc[0])
        out[col] = grid
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_the_grid_holds_the_csv_values(name, folders, model):
    import pandas as pd

    v = view(model, results=folders[name], length=32, page_mb=5)
    df = pd.read_csv(folders[name] / f"{name}.csv")
    grid = v.data["models"][0]["grid"]
    expected = _expected(name, df)
    for col, want in expected.items():
        got = np.array(grid[f"csv:{col}"], dtype=float)
        if name == "along-context":
            np.testing.assert_allclose(got, want, rtol=1e-12)
        else:
            assert (got == want).all(), col  # copied as written
    labels = [s["label"] for s in v.data["stats"]]
    assert f"{name}: {next(iter(expected))} (CSV)" in labels
    if name == "along-context":
        curves = v.data["models"][0]["csv_curves"]
        assert len(curves["x"]) == df["bucket_centre"].nunique() and len(curves["first_mass"]) == 4


def test_two_models_share_one_page(model):
    v = view([model, tiny_repo("rope")], length=40, page_mb=5)
    names = [m["name"] for m in v.data["models"]]
    assert names == ["rope-small", "tiny-rope"] and [m["length"] for m in v.data["models"]] == [40, 40]
    assert [m["n_layers"] for m in v.data["models"]] == [4, 3]


def test_bounded_keeps_the_heaviest_and_the_keys_before_the_query():
    row = torch.tensor([0.5, 0.0, 0.0, 0.2, 0.0, 0.0, 0.1, 0.1, 0.1, 0.0])
    keys, ws = bounded(row, 8, top=2, before=2)
    assert keys == [0, 3, 7, 8] and ws == pytest.approx([0.5, 0.2, 0.1, 0.1])


def test_an_encoders_rows_read_every_key():
    """A bidirectional model's rows see later keys too: they come from the whole text (no causal prefix), and its
    pooled blocks above the diagonal are not 0."""
    from interp.capabilities import Capability
    from tests.encoder_helpers import tiny_encoder

    model = tiny_encoder()
    assert Capability.CAUSAL_LM not in model.capabilities
    ids = torch.randint(5, 60, (24,), generator=torch.Generator().manual_seed(6)).tolist()
    a = _patterns(model, ids)
    got = head_data(model, ids, 8)
    assert np.abs(got.pooled - _pooled(a, 8).numpy()).max() < 1e-6 and got.pooled[..., 0, 2].min() > 0
    from poslens.viewer.data import pattern_rows

    rows = pattern_rows(model, ids, [3, 10], [0, 1])
    assert rows[1].shape == (a.shape[1], 2, 24)
    np.testing.assert_allclose(rows[1].double().numpy(), a[1][:, [3, 10]].numpy(), atol=1e-6)


def test_tokens_read_as_text_not_bpe_pieces():
    from types import SimpleNamespace

    from poslens.viewer import _token_strings

    pieces = {1: "<s>", 2: "Ġthe", 3: "Ċ", 4: "âĢ"}
    texts = {1: "<s>", 2: " the", 3: "\n", 4: "\ufffd"}  # 4: part of a UTF-8 character alone
    tok = SimpleNamespace(token_strings=lambda ids: [pieces[i] for i in ids], decode=lambda ids: texts[ids[0]])
    assert _token_strings(SimpleNamespace(tokenizer=tok), [1, 2, 3, 4, 2]) == ["<s>", " the", "\n", "âĢ", " the"]


# ---- the live server's recording: a click's rows from the recorded queries and keys ----


def _family_examples():
    from interp import families

    return [pytest.param(f.name, i, id=f"{f.name}-{i}") for f in families.families()
            for i in range(len(f.examples()))]


@pytest.mark.parametrize("family,i", _family_examples())
def test_recorded_rows_are_the_hook_pattern_rows_on_every_family_example(family, i):
    """Every family's examples: the recorded path's rows (``Recorded``) equal ``run_with_cache``'s ``hook_pattern``
    rows within 1e-6, every layer and head; where the recording cannot serve the family exactly (an additive bias:
    ALiBi, the DSTG encoder's relative-position bias) it says so and the per-click forward serves the same rows."""
    from interp import families
    from poslens.viewer.data import NotRecordable, Recorded, pattern_rows

    model = families.get(family).examples()[i]
    n = min(40, model.max_seq_len)
    ids = torch.randint(4, min(model.d_vocab, 250), (n,), generator=torch.Generator().manual_seed(i)).tolist()
    a = _patterns(model, ids)
    rows = [0, 7, n // 2, n - 1]
    try:
        rec = Recorded.record(model, ids)
    except NotRecordable as err:
        assert "bias" in str(err), err
        got = pattern_rows(model, ids, rows, range(model.n_layers))
        for l, p in got.items():
            np.testing.assert_allclose(p.double().numpy(), a[l][:, rows, :p.shape[-1]].numpy(), atol=1e-6)
        return
    for l in range(model.n_layers):
        p = rec.rows(l, rows)
        assert p.dtype == torch.float32 and p.shape == (a.shape[1], len(rows), n)
        np.testing.assert_allclose(p.double().numpy(), a[l][:, rows].numpy(), atol=1e-6, err_msg=f"layer {l}")


@pytest.mark.parametrize("kind,options", [("mistral", dict(sliding_window=8)),
                                          ("gemma2", dict(sliding_window=8, attn_logit_softcapping=5.0))])
def test_a_sliding_window_mask_is_recorded_as_its_window(kind, options, tmp_path):
    """transformers hands a sliding-window layer a materialised boolean mask; the recording keeps it as the window it
    is (verified), never the ``[q, k]`` mask, with the soft-cap. Tolerance 1e-5: these spread-weight models' deeper
    layers drift by float32 rounding between the recording's fused forward and ``run_with_cache``'s materialised one
    (the per-click path drifts as much: 2.7e-6 on mistral's layer 1)."""
    from interp.loading import load
    from poslens.viewer.data import Recorded
    from tests.hf_helpers import write_tiny_hf

    write_tiny_hf(kind, tmp_path, **options)
    model = load(tmp_path)
    ids = torch.randint(4, 250, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    rec = Recorded.record(model, ids)
    assert rec.layers[0].windows == ((8, 0),)
    assert all(isinstance(x, (int, tuple)) for layer in rec.layers.values() for x in layer.windows)
    if kind == "gemma2":
        assert rec.layers[0].softcap == 5.0 and rec.layers[1].windows == ()
    a = _patterns(model, ids)
    for l in range(model.n_layers):
        np.testing.assert_allclose(rec.rows(l, range(40)).double().numpy(), a[l].numpy(), atol=1e-5)
        assert (rec.rows(l, [30])[:, 0, :23] == 0).all() if rec.layers[l].windows else True


def test_a_planted_model_is_served_by_the_forward_per_click():
    """A hooked pattern (planted heads) is an edit a recording would not carry: the live server falls back to the
    forward pass per click and serves the planted rows."""
    model = tiny_repo("rope")
    _plant(model, 1)
    try:
        v = view(model, text="abcdefghij" * 10, block=10, page_mb=0, serve=True, port=0)
        try:
            live = v.server.live
            assert live.recorded == [None]
            rows = live.rows(0, 1, 5)
            (q, keys, ws), *_ = rows["1|1|5"]
            assert q == 50 and ws[keys.index(0)] == 1.0
            (q, keys, ws), *_ = rows["1|0|5"]
            assert ws[keys.index(q - 1)] == 1.0
        finally:
            v.stop()
    finally:
        model.reset_hooks()


def test_the_live_server_records_once_and_answers_from_the_recording():
    """An unhooked model: the server's rows come from the recording, equal to the per-click forward's."""
    from poslens.viewer.data import Recorded, block_rows, token_level

    model = tiny_repo("rope")
    ids = torch.randint(1, 250, (96,), generator=torch.Generator().manual_seed(4)).tolist()
    v = view(model, text=ids, block=16, page_mb=0, serve=True, port=0)
    try:
        live = v.server.live
        assert isinstance(live.recorded[0], Recorded)
        got = live.rows(0, 2, 4)
        old = token_level(model, ids, block_rows(96, 16, 4), [2], range(4))
        for h in range(4):
            for (q, keys, ws), r in zip(got[f"2|{h}|4"], block_rows(96, 16, 4)):
                assert q == r and keys == old[(2, h, q)][0]
                np.testing.assert_allclose(ws, old[(2, h, q)][1], atol=1e-6)
    finally:
        v.stop()


def test_a_recording_that_does_not_fit_says_what_it_needs():
    from poslens.viewer.data import Recorded

    model = tiny_repo("rope")
    ids = list(range(1, 65))
    with pytest.raises(MemoryError, match=r"needs .* GiB .* 3 layers at 64 tokens .* is free"):
        Recorded.record(model, ids, free_bytes=1000)


def test_a_rows_keys_are_those_it_sees_after_the_query_too_in_an_encoder():
    # a bidirectional row: most weight on a key after the query
    keys, weights = bounded(torch.tensor([0.05, 0.05, 0.9]), 0, top=1, before=1)
    assert keys == [0, 2] and weights == pytest.approx([0.05, 0.9])
    # a causal row: the future is exactly 0 and never shown, whatever top asks for
    keys, weights = bounded(torch.tensor([0.25, 0.75, 0.0, 0.0]), 1, top=3, before=1)
    assert keys == [0, 1] and weights == pytest.approx([0.25, 0.75])


def test_the_page_budget_decides_which_rows_the_file_holds():
    """``plan_rows``: every row of every block where they fit, then 4, 2, 1 rows of every block, then 4 rows of as many
    blocks as fit; a built page stays within its budget and holds every head's rows of each planned block."""
    from poslens.viewer.page import plan_rows, row_bytes

    per = row_bytes(200) * 12  # one query row of 12 heads
    assert plan_rows(200, 16, 12, 200 * per) == {b: list(range(16 * b, min(200, 16 * b + 16))) for b in range(13)}
    assert plan_rows(200, 16, 12, 200 * per - 1)[6] == [96, 101, 106, 111]
    assert [len(r) for r in plan_rows(200, 16, 12, 13 * 2 * per).values()] == [2] * 13
    assert [len(r) for r in plan_rows(200, 16, 12, 13 * 2 * per - 1).values()] == [1] * 13
    assert plan_rows(200, 16, 12, 13 * per - 1) == {0: [0, 5, 10, 15], 6: [96, 101, 106, 111], 12: [192, 194, 197, 199]}
    assert plan_rows(200, 16, 12, 0) == {}
    model = tiny_repo("rope")
    ids = torch.randint(1, 250, (200,), generator=torch.Generator().manual_seed(7)).tolist()
    base = len(view(model, text=ids, block=16, page_mb=0).html.encode("utf-8"))
    v = view(model, text=ids, block=16, page_mb=(base + 13 * 4 * per) / 1e6)
    m = v.data["models"][0]
    assert m["precomputed"] == list(range(13)) and len(v.html.encode("utf-8")) <= base + 13 * 4 * per
    assert {k: len(r) for k, r in m["rows"].items() if k.endswith("|6")} == {f"{l}|{h}|6": 4 for l in range(3)
                                                                             for h in range(4)}
    assert v.data["budget"]["needs_mb"] >= (base + 13 * 4 * per) / 1e6


def test_a_statistic_constant_at_this_length_is_marked_and_each_says_what_it_means():
    from interp.attention.statistics import STATISTICS
    from poslens.viewer.page import stats_menu

    model = tiny_repo("rope")
    v = view(model, text=list(range(1, 41)), block=8, page_mb=0)
    menu = {s["key"]: s for s in v.data["stats"]}
    assert menu["far"]["constant"].startswith("0 for every head at 40 tokens")
    assert np.allclose(v.data["models"][0]["grid"]["far"], 0)  # what the mark says is so
    assert all(menu[k]["constant"] is None for k in ("first", "previous", "window", "entropy", "distance"))
    assert STATISTICS["previous_mass"] in menu["previous"]["about"]
    assert "|q - k| <= w" in menu["window"]["about"] and "(w = 8)" in menu["window"]["about"]
    views = [type("V", (), {"heads": type("H", (), {"n": n})(), "csv_grid": {}})() for n in (9, 2000)]
    assert [s["constant"] for s in stats_menu(views)] == [None] * 6  # constant for one model only: offered


def test_a_views_repr_is_a_line_not_its_data():
    model = tiny_repo("rope")
    v = view(model, text=list(range(1, 65)), block=16)
    text = repr(v)
    assert text.startswith("View(tiny-rope 3x4; 64 tokens in 4 blocks of 16; 6 statistics; rows of 4/4 blocks; page ")
    assert text.endswith(" kB)") and len(text) < 200 and len(v.html) > 100_000
    assert v._repr_html_().startswith("<iframe srcdoc=")
