"""Shared look: colours per reference / order, and a layer axis that keeps 'shared' first."""

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]
TEMPLATE = "plotly_white"


def layer_order(labels) -> list[str]:
    def key(label):
        return (-1, 0) if label == "shared" else (0, int(label[1:])) if label[1:].isdigit() else (1, label)

    return sorted(set(labels), key=key)
