"""poslens' own observation: rotary bands removed or unrotated in trained weights (Barbero et al. train with p-RoPE
instead)."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.claims.rotary import per_context
from poslens.known_results.models import PRETRAINED
from poslens.known_results.types import Observation, Results
from stats.intervals import bootstrap

ABLATIONS = (("zero-highest", "highest quarter zeroed"), ("zero-lowest", "lowest zeroed"),
             ("unrotate-highest", "highest unrotated (Barbero's 0.75-RoPE reversed, applied post hoc)"),
             ("unrotate-lowest", "lowest unrotated (Barbero's 0.75-RoPE, applied post hoc)"))


def _largest_angle(r: Results, m: str, length: int) -> float:
    """The largest angle, in radians, the lowest quarter's bands turn through between a query and a key it can see
    in ``length`` tokens: frequency x (the farthest such key: ``length - 1``, or the window's size - 1 on a sliding
    layer), over the layers (each ordered by its own frequencies)."""
    d = r.model("rope-frequencies", m, part="bands")
    angles = []
    for _, g in d.groupby("layer"):
        per_band = g.groupby("band")["frequency"].first().sort_index()  # band 0 the fastest
        q = max(1, len(per_band) // 4)
        kind = str(g["attention"].iloc[0]) if "attention" in g else "full"
        reach = min(length, int(kind.split()[1])) if kind.startswith("sliding") else length
        angles.append(float(per_band.iloc[-q:].max()) * (reach - 1))
    return max(angles)


def _rope_part(r: Results, m: str, part: str) -> pd.DataFrame | None:
    """The model's rope-frequencies rows of ``part``; None where the kept run has none (a run before that part)."""
    try:
        return r.model("rope-frequencies", m, part=part)
    except ValueError:
        return None


def _ablation_at(r: Results, m: str, part: str, length: int) -> str:
    """The conditions' effects at one length: with per-context values, the loss change and the previous-token heads'
    mass as 95% bootstrap intervals over contexts (paired: each context's own unablated loss); else point values."""
    d = r.model("rope-frequencies", m, part=part).set_index("condition")
    losses, masses = (per_context(r, m, measure, length) for measure in ("loss", "positional_heads"))
    base = d.loc["none"]
    parts = []
    for cond, label in ABLATIONS:
        if cond not in d.index:
            continue
        e = d.loc[cond]
        if losses is not None and masses is not None:
            loss = bootstrap((losses[cond] - losses["none"]).to_numpy())
            mass = bootstrap(masses[cond].to_numpy())
            parts.append(f"{label}: loss {loss.format('{:+.3f}', unit=' nats/token')}, previous-token heads' mass "
                         f"{base.positional_heads:.2f} -> {mass.format('{:.2f}')}")
        else:
            parts.append(f"{label}: loss {e.loss - base.loss:+.3f} nats, previous-token heads' mass "
                         f"{base.positional_heads:.2f} -> {e.positional_heads:.2f} (no per-context values kept)")
    angle = _largest_angle(r, m, length)
    return (f"at {length:,} tokens: " + "; ".join(parts) +
            f" (there the lowest quarter's fastest band turns through at most {angle:.3f} rad"
            + (": less than a radian, so it carries little position and unrotating it is near a no-op"
               if angle < 1 else "") + ")")


def measure(r: Results, m: str) -> str:
    effects = r.model("rope-frequencies", m, part="effects")
    short, n = int(effects["length"].iloc[0]), int(effects["n_positional_heads"].iloc[0])
    out = [_ablation_at(r, m, "effects", short)]
    long = _rope_part(r, m, "long_effects")
    if long is not None and len(long):
        out.append(_ablation_at(r, m, "long_effects", int(long["length"].iloc[0])))
    else:
        out.append("the trained lengths (8k, 32k), where the lowest bands turn, were not run")
    return f"{n} previous-token head{'s' if n != 1 else ''} (found unablated at {short:,} tokens). " + ". ".join(out)


ROW = Observation(
    finding="rotary bands removed or unrotated in trained weights",
    context="Barbero et al. (ICLR 2025, Table 2) *train* Gemma 2B from scratch with p-RoPE, p the share of "
            "frequencies kept rotated (Wiki / FlanV2 perplexity: RoPE 4.4627 / 6.4429, 0.75-RoPE 4.4414 / 6.4422, "
            "0.25-RoPE 4.5302 / 6.5111, the highest 25% unrotated instead 4.4592 / 6.4683: on par with RoPE). "
            "They ablate no trained model: these edits of trained weights are poslens' own. Unrotating the "
            "highest quarter of a trained model is the condition that matches their reversed variant",
    models=PRETRAINED, measure=measure)
