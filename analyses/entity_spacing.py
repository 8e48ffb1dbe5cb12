"""Are multi-word entities spaced closer than the same words reversed? (seed 001)

For each two-word entity "A B" the increment at the internal space is read in five carriers, real order
("I visited New York") and reversed ("I visited York New"), from ``[EOS] + UTF-8 bytes``, and averaged
over the carriers. Per layer, a two-sided Wilcoxon signed-rank test (SciPy defaults) on reversed - real
across entities; p is 1 when every difference is zero (byte-identity layers cannot tell the orders apart).

The increment is causal: it is decided before the second word is read, so a smaller real-order space
means the first word made the model expect a continuation. Invented names ("Vantrel Oskbury") are the
control: with no such expectation there should be no real-vs-reversed difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np

from analyses.increment_hooks import byte_model, increment_labels, increments
from analyses.nan_policy import may_be_nan
from analyses.registry import Cli, Help, analysis
from analyses.runs import INC, INCREMENT_MODELS, Run
from interp.capabilities import Capability

if TYPE_CHECKING:
    import pandas as pd

CARRIERS = ("{a} {b}", "the {a} {b}", "I visited {a} {b}", "near {a} {b}", "they went to {a} {b}")

REAL_ENTITIES = (
    # places
    ("New", "York"), ("Los", "Angeles"), ("San", "Francisco"), ("Hong", "Kong"), ("New", "Zealand"),
    ("South", "Africa"), ("Sri", "Lanka"), ("Costa", "Rica"), ("Puerto", "Rico"), ("Saudi", "Arabia"),
    ("North", "Carolina"), ("South", "Dakota"), ("West", "Virginia"), ("Rhode", "Island"), ("Buenos", "Aires"),
    ("Tel", "Aviv"), ("Las", "Vegas"), ("Grand", "Canyon"), ("Death", "Valley"), ("Rocky", "Mountains"),
    ("Amazon", "River"), ("Long", "Island"), ("Pearl", "Harbor"), ("Easter", "Island"), ("Persian", "Gulf"),
    ("Baltic", "Sea"), ("Arctic", "Ocean"), ("Sahara", "Desert"), ("Central", "Park"), ("Times", "Square"),
    ("Buckingham", "Palace"), ("Mount", "Fuji"), ("Middle", "East"), ("Milky", "Way"),
    # people
    ("Albert", "Einstein"), ("Isaac", "Newton"), ("Charles", "Darwin"), ("Abraham", "Lincoln"),
    ("Barack", "Obama"), ("Pablo", "Picasso"), ("Queen", "Elizabeth"), ("Elvis", "Presley"),
    ("Michael", "Jordan"), ("Bob", "Dylan"), ("John", "Lennon"), ("Jane", "Austen"), ("Charles", "Dickens"),
    ("Oscar", "Wilde"), ("Sigmund", "Freud"), ("Karl", "Marx"), ("Joseph", "Stalin"), ("Mahatma", "Gandhi"),
    ("Julius", "Caesar"), ("Galileo", "Galilei"), ("Nikola", "Tesla"), ("Thomas", "Jefferson"),
    ("Benjamin", "Franklin"), ("Walt", "Disney"),
    # institutions, events, things
    ("European", "Union"), ("Soviet", "Union"), ("United", "Nations"), ("Red", "Cross"), ("Royal", "Navy"),
    ("Civil", "War"), ("Cold", "War"), ("Roman", "Empire"), ("Ottoman", "Empire"), ("Industrial", "Revolution"),
    ("French", "Revolution"), ("Olympic", "Games"), ("World", "Cup"), ("Nobel", "Prize"), ("Wall", "Street"),
    ("Silicon", "Valley"), ("Prime", "Minister"), ("Supreme", "Court"), ("Great", "Depression"),
    ("Stone", "Age"), ("Bronze", "Age"), ("Big", "Bang"), ("Star", "Trek"), ("Harry", "Potter"),
)

INVENTED_NAMES = (
    ("Vantrel", "Oskbury"), ("Quillon", "Derramere"), ("Brelvin", "Tasko"), ("Morvane", "Ulstead"),
    ("Tregan", "Vollis"), ("Kestra", "Pemblow"), ("Dravik", "Solenne"), ("Yorvel", "Castagne"),
    ("Pruvet", "Nashold"), ("Zelmira", "Oakhurst"), ("Fennick", "Rausloe"), ("Gavrel", "Minthorpe"),
    ("Ostrid", "Vellamy"), ("Halvane", "Qusterby"), ("Irrenth", "Bolwick"), ("Jaskor", "Tembrelle"),
    ("Lorquin", "Avesdale"), ("Mirrow", "Staffenby"), ("Nuvela", "Krastow"), ("Plendor", "Ivesham"),
    ("Rostam", "Quenvale"), ("Sevrine", "Ullacott"), ("Torvald", "Emmerwick"), ("Ulmira", "Drossley"),
    ("Vasquel", "Thornby"), ("Wendrel", "Ospreyton"), ("Xanthe", "Bellomir"), ("Yaskel", "Fernwold"),
    ("Zorvik", "Amblethorn"), ("Aldric", "Pevensloe"), ("Bexley", "Quartano"), ("Corvin", "Dallowmere"),
    ("Delphor", "Ristvane"), ("Elvarn", "Mossgrave"), ("Farrow", "Ketterbrook"), ("Grimsel", "Outerhay"),
    ("Hestor", "Valcrane"), ("Istvel", "Normarch"), ("Jorvane", "Pellicott"), ("Kalmor", "Threnody"),
)


def space_offset(carrier: str, a: str, b: str) -> int:
    """Token index of the space between ``a`` and ``b`` in ``[EOS] + bytes(carrier)``."""
    prefix = carrier.split("{a}")[0].format(a=a, b=b)
    offset = 1 + len(prefix.encode("utf-8")) + len(a.encode("utf-8"))
    assert carrier.format(a=a, b=b).encode("utf-8")[offset - 1] == ord(" ")
    return offset


def internal_space_increments(model, pairs, carriers=CARRIERS, *, batch_size: int = 32) -> np.ndarray:
    """``[n_pairs, n_layers]`` increment at the internal space, averaged over the carriers."""
    return space_increments(model, [pairs], carriers, batch_size=batch_size)[0]


def space_increments(model, pair_sets, carriers=CARRIERS, *, batch_size: int = 32) -> list[np.ndarray]:
    """``internal_space_increments`` of several sets of pairs, in one (data-parallel) pass."""
    from interp.runtime import parallel

    eos = model.tokenizer.eos_id
    jobs = []  # (set, sequences, space offsets), ``batch_size`` sequences of one set each
    for k, pairs in enumerate(pair_sets):
        seqs, where = [], []
        for a, b in pairs:
            for carrier in carriers:
                seqs.append([eos, *carrier.format(a=a, b=b).encode("utf-8")])
                where.append(space_offset(carrier, a, b))
        jobs += [(k, seqs[i : i + batch_size], where[i : i + batch_size]) for i in range(0, len(seqs), batch_size)]

    def one(job):
        _, seqs, where = job
        return np.stack([inc[:, where[index]] for index, inc in increments(model, seqs, batch_size=len(seqs))])

    done = parallel.map_items(one, jobs, model=model, desc=f"entity-spacing {model.model_name}")
    out = []
    for k, pairs in enumerate(pair_sets):
        parts = [v for (j, _, _), v in zip(jobs, done) if j == k]
        values = np.concatenate(parts).astype(np.float64) if parts else np.empty((0, len(model.increment_sources())))
        out.append(values.reshape(len(pairs), len(carriers), -1).mean(1))
    return out


def wilcoxon_p(diff: np.ndarray) -> tuple[float, float]:
    """(statistic, two-sided p) of SciPy's default Wilcoxon; (0, 1) when every difference is zero."""
    if np.allclose(diff, 0):
        return 0.0, 1.0
    from scipy.stats import wilcoxon

    res = wilcoxon(diff)
    return float(res.statistic), float(res.pvalue)


def read_entities(path) -> tuple[tuple[str, str], ...]:
    """Two-word entities from a UTF-8 file, one per line (blank lines skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
                         "save the entities file as UTF-8") from None
    pairs = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) != 2:
            raise ValueError(f"line {n}: expected two words, got {line!r}")
        pairs.append(tuple(words))
    if not pairs:
        raise ValueError("the file holds no entities (one 'First Second' pair per line)")
    return tuple(pairs)


def headline(df) -> str:
    parts = []
    for (model, name), g in df.groupby(["model", "set"], sort=False):
        sig = g[g["p_value"] < 0.01]
        closer = ", ".join(f"{r.layer} ({r.frac_real_smaller:.0%}, p={r.p_value:.1e})" for r in sig.itertuples()
                           if r.mean_real < r.mean_reversed)
        wider = ", ".join(f"{r.layer} (p={r.p_value:.1e})" for r in sig.itertuples() if r.mean_real >= r.mean_reversed)
        said = ([f"real order closer in {closer}"] if closer else []) + (["real order wider "
                                                                          f"in {wider}"] if wider else [])
        parts.append(f"{model}, {name} names: " + ("; ".join(said) if said else "no layer with p < 0.01"))
    return "; ".join(parts) + "."


def summary(df):
    return df[["model", "set", "layer", "mean_real", "mean_reversed", "frac_real_smaller", "p_value", "n_pairs"]]


@analysis("entity-spacing", needs=[Capability.INCREMENTS], headline=headline, summary=summary,
          small=Run(("increments-per-layer",), dict(real=(("New", "York"), ("Hong", "Kong"), ("Los", "Angeles")))),
          main=Run(INCREMENT_MODELS, section=INC))
@may_be_nan(layer_index="no layer: the shared increment")
def entity_spacing(model, *, carriers=CARRIERS,
                   real: Annotated[tuple, Help("file of two-word entities, one per line (default: the built-in 82)"),
                                   Cli("--entities", convert=read_entities, metavar="FILE")] = REAL_ENTITIES,
                   invented=INVENTED_NAMES, batch_size: int = 32) -> pd.DataFrame:
    """Increment at the space inside two-word names, real order vs reversed, with per-layer Wilcoxon p-values:
    a smaller real-order space means the first word made the model expect the second; invented names are the control.

    Per layer: mean increment at the internal space in real vs reversed order, and the Wilcoxon test."""
    import pandas as pd


    byte_model(model, "entity-spacing")
    layers = increment_labels(model)
    rows = []
    sets = [(name, pairs) for name, pairs in (("real", real), ("invented", invented)) if len(pairs)]
    values = space_increments(model, [p for _, pairs in sets for p in (pairs, [(b, a) for a, b in pairs])], carriers,
                              batch_size=batch_size)
    for k, (name, pairs) in enumerate(sets):
        forward, backward = values[2 * k], values[2 * k + 1]
        for li, layer in enumerate(layers):
            c, r = forward[:, li], backward[:, li]
            stat, p = wilcoxon_p(r - c)
            rows.append(dict(model=model.model_name, set=name, layer=layer,
                             layer_index=li if layer != "shared" else np.nan,
                             mean_real=float(c.mean()), mean_reversed=float(r.mean()),
                             frac_real_smaller=float((c < r).mean()), p_value=p, statistic=stat,
                             n_pairs=len(pairs), n_carriers=len(carriers)))
    return pd.DataFrame(rows)
