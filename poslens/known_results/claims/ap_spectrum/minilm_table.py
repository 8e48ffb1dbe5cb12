"""poslens' own observation: MiniLM's learned position table, its leading components and their frequency (no published
claim)."""

from __future__ import annotations

import numpy as np

from poslens.known_results.types import Observation, Results, pct


def measure(r: Results, m: str) -> str:
    full = r.model("ap-spectrum", m)
    d = full.drop_duplicates("component").set_index("component").sort_index()
    n = int(full["position"].max()) + 1

    def period(c: int) -> float:
        b = d.loc[c].dominant_bin
        return 2 * n / b if b else float("inf")  # DCT-II bin b: b / 2 cycles over the N positions

    def scores(c: int):
        return full[full.component == c].sort_values("position")["score"].to_numpy()

    third = scores(3)
    lag1 = float(np.corrcoef(third[:-1], third[1:])[0, 1])
    one, two = scores(1), scores(2)
    step = float(np.median(np.abs(np.diff(np.unwrap(np.arctan2(two, one))))))
    radius = np.hypot(one, two)
    return (f"a quadrature pair first: components 1 and 2 explain {pct(d.loc[1].explained_variance)} and "
            f"{pct(d.loc[2].explained_variance)} of the variance, dominant DCT bins {int(d.loc[1].dominant_bin)} and "
            f"{int(d.loc[2].dominant_bin)} of {n} (periods of about {period(1):.1f} and {period(2):.1f} positions), "
            f"{pct(d.loc[1].low_freq_power)} and {pct(d.loc[2].low_freq_power)} of their power in the 4 lowest "
            f"bins; read as cos and sin, their phase advances a median {step:.2f} rad per position (a period of "
            f"{2 * np.pi / step:.1f}) at a radius varying by {radius.std() / radius.mean():.0%} (coefficient of "
            f"variation); then a smooth component: the third explains {pct(d.loc[3].explained_variance)}, "
            f"{pct(d.loc[3].low_freq_power)} of its power in the lowest bins, lag-1 autocorrelation {lag1:.3f}. "
            f"The first 8 components hold {pct(d.loc[8].cumulative)}. A fixed table: no sampling, so no interval")


ROW = Observation(
    finding="MiniLM's learned position table: its leading components and their frequency",
    context="Wang & Chen (EMNLP 2020, What Do Position Embeddings Learn?) probe pre-trained position embeddings "
            "for absolute and relative position; they make no claim about a table's principal components (their "
            "pictures of learned tables are known here only from summaries: unverified). No comparison is drawn: "
            "the share of variance in a few components depends on the table's size (MiniLM's 512 x 384)",
    models=("minilm",), measure=measure)
