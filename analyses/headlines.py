"""One data-driven sentence per result, for the report: what the numbers in this table say."""

from __future__ import annotations

import pandas as pd


def byte_increments(df: pd.DataFrame) -> str:
    parts = []
    for (model, source), g in df.groupby(["model", "source"], sort=False):
        g = g.set_index("category")["mean"]
        parts.append(f"{model} ({source}): space {g['Space']:.2f}, newline {g['Newline']:.2f}, EOS {g['EOS']:.2f}, "
                     f"a-z {g['English lowercase']:.2f}, A-Z {g['English uppercase']:.2f}")
    return "; ".join(parts) + "."


def word_boundaries(df: pd.DataFrame) -> str:
    parts = []
    models = df[df["layer"] != "jieba"]
    for model, g in models[models["reference"] == "gold"].groupby("model", sort=False):
        best = g.loc[(g["auc"] - 0.5).abs().idxmax()]
        parts.append(f"{model}: strongest layer {best.layer} with AUC {best.auc:.3f} [{best.ci_low:.3f}, {best.ci_high:.3f}] vs gold")
    agree = df[df["layer"] == "jieba"]
    if len(agree):
        parts.append(f"jieba itself reaches AUC {agree.iloc[0].auc:.3f} (F1 {agree.iloc[0].f1:.3f}) against gold on the same gaps")
    return "; ".join(parts) + "."


def entity_spacing(df: pd.DataFrame) -> str:
    parts = []
    for (model, name), g in df.groupby(["model", "set"], sort=False):
        sig = g[g["p_value"] < 0.01]
        closer = ", ".join(f"{r.layer} ({r.frac_real_smaller:.0%}, p={r.p_value:.1e})" for r in sig.itertuples() if r.mean_real < r.mean_reversed)
        wider = ", ".join(f"{r.layer} (p={r.p_value:.1e})" for r in sig.itertuples() if r.mean_real >= r.mean_reversed)
        said = ([f"real order closer in {closer}"] if closer else []) + ([f"real order wider in {wider}"] if wider else [])
        parts.append(f"{model}, {name} names: " + ("; ".join(said) if said else "no layer with p < 0.01"))
    return "; ".join(parts) + "."


def char_spacing(df: pd.DataFrame) -> str:
    g = df[(df["scale"] == "per-row")]
    widest = g.loc[g.groupby(["model", "text_id", "layer"])["scaled"].idxmax()]
    top = widest.sort_values("scaled", ascending=False).head(4)
    return "Widest gaps (per-row scale): " + ", ".join(
        f"{r.model} {r.layer} before {r.char!r} ({r.scaled:.1f}x the row mean)" for r in top.itertuples()) + "."


def loss_neutrality(df: pd.DataFrame) -> str:
    g = df[df["language"] == "all"].sort_values("loss")
    return "Held-out loss (nats/byte, all windows): " + ", ".join(
        f"{r.model} {r.loss:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]" for r in g.itertuples()) + "."


def attention_mass(df: pd.DataFrame) -> str:
    agg = df[(df["layer"].astype(str) == "all") & (df["mode"] == "teacher")].set_index(["model", "part"])
    parts = []
    for model in dict.fromkeys(df["model"]):
        g = agg.loc[model]
        needle, query, rest = (g.loc[p, "mean_per_token"] for p in ("needle", "query", "rest"))
        parts.append(f"{model}: needle {100 * needle:.3f}%, query {100 * query:.3f}%, rest {100 * rest:.3f}% "
                     f"(needle/rest x{needle / rest:.1f}), accuracy {g['accuracy'].iloc[0]:.2f}")
    return "Attention per key token while teacher-forcing the answer: " + "; ".join(parts) + "."


def position_ranges(df: pd.DataFrame) -> str:
    per_head = df.groupby(["model", "mode", "layer", "head"], sort=False).agg(d=("d", "mean"), n=("n_tokens", "median"))
    parts = []
    for model, g in per_head.groupby(level=0, sort=False):
        modes = ", ".join(f"{mode} heads {h['d'].median():.3g} ({h['d'].min():.3g}-{h['d'].max():.3g})"
                          for mode, h in g.groupby(level=1, sort=False))
        parts.append(f"{model} ({int(g['n'].median())} tokens): {modes}")
    return "Position range d per head, median (min-max): " + "; ".join(parts) + "."


def position_patterns(df: pd.DataFrame) -> str:
    per_head = df.drop_duplicates(["model", "layer", "head"])
    parts = []
    for model, g in per_head.groupby("model", sort=False):
        top = g.sort_values("longest_plateau", ascending=False).iloc[0]
        parts.append(f"{model}: {int(g['n_jumps'].sum())} jumps over {len(g)} heads; longest plateau {int(top.longest_plateau)} tokens "
                     f"(layer {top.layer}, head {top['head']})")
    return "; ".join(parts) + "."


def niah_accuracy(df: pd.DataFrame) -> str:
    return "Accuracy by length: " + "; ".join(
        f"{m}: " + ", ".join(f"{int(r.context_tokens)}: {r.accuracy:.2f}" for r in g.itertuples())
        for m, g in df.groupby("model", sort=False)) + "."


def ap_spectrum(df: pd.DataFrame) -> str:
    comps = df.drop_duplicates(["model", "component"])
    parts = []
    for model, g in comps.groupby("model", sort=False):
        g = g.set_index("component")
        two = g.loc[2, "cumulative"] if 2 in g.index else g["cumulative"].iloc[-1]
        parts.append(f"{model}: {100 * two:.1f}% of variance in 2 PCs, low-frequency power PC1 {100 * g.loc[1, 'low_freq_power']:.1f}%"
                     + (f", PC2 {100 * g.loc[2, 'low_freq_power']:.1f}%" if 2 in g.index else ""))
    return "; ".join(parts) + "."


def kl_ablation(df: pd.DataFrame) -> str:
    from analyses.kl_ablation import group_counts

    counts = group_counts(df)
    return "Head groups: " + "; ".join(
        f"{m}: " + ", ".join(f"{int(n)} {g}" for g, n in row.items() if n) for m, row in counts.iterrows()) + "."


def position_probes(df: pd.DataFrame) -> str:
    d = df[df["control"] == "none"]
    parts = []
    for (model, space), g in d.groupby(["model", "subspace"], sort=False):
        token = g[g["target"] == "token"].set_index("layer")["r2_mean"]
        seg = g[g["target"] == "segment"].set_index("layer")["r2_mean"]
        parts.append(f"{model} [{space}]: token R2 {token.iloc[0]:.2f} (first layer) -> {token.iloc[-1]:.2f} (last), "
                     f"segment {seg.max():.2f} at best")
    ctrl = df[df["control"] == "shuffled"]["r2_mean"]
    return "; ".join(parts) + f"; shuffled controls between {ctrl.min():.2f} and {ctrl.max():.2f}."
