import numpy as np
import pytest
from scipy.fft import dct

from analyses.ap_spectrum import spectrum


def test_two_low_frequency_sinusoids_give_two_components_and_low_frequency_power():
    p = np.arange(512)
    rng = np.random.default_rng(0)
    basis = np.stack([np.cos(np.pi * (p + 0.5) / 512), np.sin(np.pi * (p + 0.5) / 512 * 1.5)], 1)
    E = basis @ rng.normal(size=(2, 48)) + 1e-4 * rng.normal(size=(512, 48))
    df = spectrum(E).drop_duplicates("component").set_index("component")
    assert df.loc[2, "cumulative"] > 0.9999
    assert df.loc[1, "low_freq_power"] > 0.95 and df.loc[2, "low_freq_power"] > 0.95
    assert df.loc[3, "explained_variance"] < 1e-6


def test_white_noise_is_high_dimensional_and_spread_over_frequencies():
    E = np.random.default_rng(1).normal(size=(512, 48))
    df = spectrum(E).drop_duplicates("component").set_index("component")
    assert df.loc[2, "cumulative"] < 0.15
    assert df.loc[1, "low_freq_power"] < 0.1


def test_against_sklearn_pca_and_scipy_dct():
    from sklearn.decomposition import PCA

    E = np.random.default_rng(2).normal(size=(64, 10)) @ np.diag(np.linspace(3, 0.1, 10))
    df = spectrum(E, n_components=4)
    pca = PCA(n_components=4).fit(E)
    comps = df.drop_duplicates("component")
    np.testing.assert_allclose(comps["explained_variance"], pca.explained_variance_ratio_, rtol=1e-10)
    scores = df[df.component == 1]["score"].to_numpy()
    ref = pca.transform(E)[:, 0]
    assert np.allclose(scores, ref) or np.allclose(scores, -ref)
    power = dct(ref, type=2, norm="ortho") ** 2
    assert comps.iloc[0]["low_freq_power"] == pytest.approx(power[:4].sum() / power.sum())


def test_bad_matrix():
    with pytest.raises(ValueError, match=r"\[positions, dims\]"):
        spectrum(np.zeros(5))


def test_component_signs_do_not_depend_on_the_svd():
    """Rotating the embedding dimensions leaves PCA unchanged up to each component's sign, which the
    orientation rule fixes: scores rise with position (or their largest entry is positive)."""
    rng = np.random.default_rng(4)
    p = np.arange(128)
    E = np.stack([p / 128.0, np.cos(np.pi * (p + 0.5) / 128 * 3), rng.normal(size=128)], 1) @ rng.normal(size=(3, 16))
    rotation, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    a, b, c = spectrum(E, n_components=3), spectrum(E @ rotation, n_components=3), spectrum(-E, n_components=3)
    np.testing.assert_allclose(a["score"], b["score"], atol=1e-9)
    np.testing.assert_allclose(a["score"], c["score"], atol=1e-9)
    pc1 = a[a.component == 1]["score"].to_numpy()
    assert np.corrcoef(pc1, p)[0, 1] > 0
