"""poslens' own observation: rotary bands removed or unrotated in trained weights (Barbero et al. train with p-RoPE
instead)."""

from __future__ import annotations

import pandas as pd

from poslens.known_results.claims.rotary import per_context
from poslens.known_results.models import PRETRAINED
from poslens.known_results.types import Observation, Results
from stats.intervals import MIN_UNITS, interval

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


def _effects(losses: pd.DataFrame, masses: pd.DataFrame, cond: str) -> tuple[str, str]:
    """One condition's loss change (paired: each context's own unablated loss) and the heads' mass, each with its
    interval over contexts, or (with fewer than ``MIN_UNITS`` contexts) its estimate alone."""
    loss, mass = interval((losses[cond] - losses["none"]).to_numpy()), interval(masses[cond].to_numpy())
    if loss.descriptive:
        return f"{loss.estimate:+.3f} nats/token", f"{mass.estimate:.2f}"
    return loss.format("{:+.3f}", unit=" nats/token"), mass.format("{:.2f}")


def _ablation_at(r: Results, m: str, part: str, length: int) -> str:
    """The conditions' effects at one length: with per-context values, the loss change and the previous-token heads'
    mass with their intervals over contexts (``stats.intervals.interval``), the estimates alone (said once) where
    the contexts are too few for one; without per-context values, point values marked descriptive."""
    d = r.model("rope-frequencies", m, part=part).set_index("condition")
    losses, masses = (per_context(r, m, measure, length) for measure in ("loss", "positional_heads"))
    base = d.loc["none"]
    kept = losses is not None and masses is not None
    parts = []
    for cond, label in ABLATIONS:
        if cond not in d.index:
            continue
        e = d.loc[cond]
        if kept:
            loss, mass = _effects(losses, masses, cond)
            parts.append(f"{label}: loss {loss}, previous-token heads' mass {mass}")
        else:
            parts.append(f"{label}: loss {e.loss - base.loss:+.3f} nats, previous-token heads' mass "
                         f"{base.positional_heads:.2f} -> {e.positional_heads:.2f}")
    if not kept:
        head = f"at {length:,} tokens (descriptive: no per-context values kept): "
    elif len(losses) < MIN_UNITS:
        head = (f"at {length:,} tokens (n = {len(losses)} contexts, fewer than {MIN_UNITS}: estimates only, "
                f"descriptive): previous-token heads' mass unablated {masses['none'].mean():.2f}; ")
    else:
        head = (f"at {length:,} tokens: previous-token heads' mass unablated "
                f"{interval(masses['none'].to_numpy()).format('{:.2f}')}; ")
    angle = _largest_angle(r, m, length)
    return (head + "; ".join(parts) +
            f" (there the lowest quarter's fastest band turns through at most {angle:.3f} rad, a property of the "
            f"weights with no sampling"
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
