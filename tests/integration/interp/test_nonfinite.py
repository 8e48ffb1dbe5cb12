"""Non-finite numbers: refused by name at load time, never turned into a real-looking result by an analysis."""

import pytest
import torch

from analyses.ap_spectrum import ap_spectrum
from analyses.kl_ablation import kl_ablation
from corpora.contexts import wikipedia_windows
from corpora.documents import Window
from interp.loading import CheckpointError, load, save
from probes.position import fit_position_probes
from tests.encoder_helpers import tiny_encoder, token_ids
from tests.helpers import tiny_model


def test_nan_and_inf_weights_are_refused_by_name_unless_allowed(tmp_path):
    model = tiny_model("per-layer")
    with torch.no_grad():
        name = next(n for n, _ in model.named_parameters() if n.startswith("blocks.1."))
        dict(model.named_parameters())[name].view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    save(model, tmp_path / "m")
    with pytest.raises(CheckpointError, match=rf"non-finite weights in 1 tensor\(s\): {name} "
                                              r"\(1 NaN, 1 inf of \d+\).*allow_nonfinite=True"):
        load(tmp_path / "m")
    with pytest.warns(UserWarning, match=name):
        loaded = load(tmp_path / "m", allow_nonfinite=True)
    assert loaded.source["nonfinite"] == [name]


def test_a_corrupt_position_table_gives_an_error_naming_it_not_svd_failure():
    model = tiny_encoder("disentangled")
    with torch.no_grad():
        model.positional_embedding.weight[4, 1] = float("nan")
    with pytest.raises(ValueError, match=r"absolute-position table of .* holds 1 NaN/inf values \(positions 3\)"):
        ap_spectrum(model)


def test_kl_ablation_refuses_nan_logits_instead_of_calling_them_kl_zero():
    model = tiny_encoder("disentangled")
    docs = [Window("", token_ids(model, 1, 12, seed=s)[0].tolist()) for s in range(2)]

    def poison(t, hook):
        t = t.clone()
        t[:, 1, 3, 5] = float("nan")
        return t

    model.add_hook("blocks.0.attn.hook_logits_sem", poison)
    try:
        with pytest.raises(ValueError, match=r"blocks\.0\.attn\.hook_logits_sem .* holds NaN \(heads \[1\]\)"):
            kl_ablation(model, documents=docs)
    finally:
        model.reset_hooks()
    assert kl_ablation(model, documents=docs)[["kl_ap", "kl_sem"]].notna().all().all()


def test_position_probes_name_the_hook_with_nan_activations():
    model = tiny_model("per-layer", max_seq_len=128)
    docs = wikipedia_windows(model.tokenizer, 8, 128)

    def poison(t, hook):
        t = t.clone()
        t[0, 2, 0] = float("inf")
        return t

    model.add_hook("blocks.1.hook_resid_post", poison)
    try:
        with pytest.raises(ValueError, match=r"position-probes: blocks\.1\.hook_resid_post of .* "
                                             r"holds NaN/inf on document 0"):
            fit_position_probes(model, docs, n_seeds=1, n_train=6, n_test=2, layers=[0, 1], cv_folds=2)
    finally:
        model.reset_hooks()
