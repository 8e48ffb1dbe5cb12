"""Head taxonomies of several models side by side."""

from figures.kl_ablation import ternaries


def figure(df):
    return ternaries(df, "Head taxonomy compared across models (KL ablation)")
