"""Compact Markdown tables of each result, for ``SUMMARY.md`` beside the report (and for pasting into notes)."""

from __future__ import annotations

import pandas as pd

from analyses.kl_ablation import group_counts


def markdown(df: pd.DataFrame, digits: int = 3) -> str:
    def cell(v):
        if isinstance(v, float):
            return "" if v != v else f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{v:.{digits}f}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |\n| " + " | ".join("---" for _ in df.columns) + " |\n"
    return head + "\n".join("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))


def compact(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The few columns and rows of a result that a reader needs first."""
    if name == "byte-increments":
        return df.pivot_table(index="category", columns=["model", "source"], values="mean", sort=False).reset_index()
    if name == "word-boundaries":
        return df[["model", "layer", "reference", "auc", "ci_low", "ci_high", "n_gaps", "positive_rate"]]
    if name == "entity-spacing":
        return df[["model", "set", "layer", "mean_real", "mean_reversed", "frac_real_smaller", "p_value", "n_pairs"]]
    if name == "char-spacing":
        d = df[df["scale"] == "per-row"]
        return d.groupby(["model", "text_id", "layer"], as_index=False).agg(widest_gap=("scaled", "max"), mean_increment=("increment", "mean"))
    if name == "loss-neutrality":
        return df[["model", "language", "loss", "ci_low", "ci_high", "bits_per_byte", "trained_steps", "trained_tokens"]]
    if name == "attention-mass":
        d = df[(df["layer"].astype(str) == "all") & df["part"].isin(["needle", "query", "rest"])]
        d = d.assign(per_token_x100=100 * d["mean_per_token"])
        wide = d.pivot_table(index=["model", "mode"], columns="part", values="per_token_x100", sort=False)[["needle", "query", "rest"]]
        wide.columns = [f"{part} (% per token)" for part in wide.columns]
        acc = d.groupby(["model", "mode"], sort=False)[["accuracy", "n_samples", "context_tokens"]].first()
        return wide.join(acc).reset_index()
    if name == "niah-accuracy":
        return df[["model", "context_tokens", "accuracy", "ci_low", "ci_high", "n_samples"]]
    if name == "position-ranges":
        per_head = df.groupby(["model", "layer", "head", "mode"], as_index=False).agg(d=("d", "mean"), n_tokens=("n_tokens", "median"))
        return per_head.groupby(["model", "mode"], as_index=False, sort=False).agg(
            heads=("d", "size"), d_min=("d", "min"), d_median=("d", "median"), d_max=("d", "max"), n_tokens=("n_tokens", "median"))
    if name == "position-patterns":
        return df.drop_duplicates(["model", "layer", "head"])[["model", "layer", "head", "mode", "n_jumps", "longest_plateau", "median_step"]]
    if name == "ap-spectrum":
        comps = df.drop_duplicates(["model", "component"])
        return comps[comps["component"] <= 4][["model", "component", "explained_variance", "cumulative", "low_freq_power"]]
    if name in ("kl-ablation", "compare-heads"):
        return group_counts(df).reset_index()
    if name == "position-probes":
        d = df.pivot_table(index=["model", "subspace", "target", "control"], columns="layer", values="r2_mean", sort=False)
        return d.reset_index()
    return df.head(20)


def summary(done) -> str:
    parts = ["# poslens results\n"]
    for step, result in done:
        from analyses import get

        analysis = get(step.analysis)
        parts.append(f"## {analysis.name}\n\n{analysis.headline(result.table) if analysis.headline else ''}\n")
        parts.append(markdown(compact(analysis.name, result.table)) + "\n")
    return "\n".join(parts)
