"""The rows of the known-results table (``poslens.known_results.render``): one ``Claim`` per published claim, one
``Observation`` per finding of poslens' own, each in its own module, ``claims/GROUP/NAME.py``, beside the rows that
read the same analysis' CSV. A row's module holds its ``RULE`` (a claim's verdict rule), ``measure(results, model)``,
``verdict(results)`` and ``ROW``, the record the table shows; what several rows of a group read is the group's
package (``claims/sinks/__init__.py``: the sink-rate conditions). Quotes, places and numbers are the papers';
addresses and the authors' code read are in ``shared/reference/known-results-papers.md`` of the steering repo.

A new row is its module and one line in ``MODULES``, in the table's order.
"""

from __future__ import annotations

import importlib

from poslens.known_results.types import Claim, Observation

# when the rules of the induction, StreamingLLM, rotary and retrieval rows were written (the sink rows:
# ``claims.sinks.SINKS_WRITTEN``); read by those modules, so it stands before the rows are imported
WRITTEN = "2026-11-27 in commit 4ecf8bc, before the reruns that judge it"

MODULES = (  # one line per row, in the table's order (claims and observations each keep theirs)
    "induction.heads",
    "induction.previous_token",
    "sinks.table1",
    "sinks.position",
    "sinks.lengths",
    "sinks.depth",
    "sinks.repeat",
    "sinks.massive_activations",
    "ap_spectrum.minilm_table",  # an observation
    "streaming.window_sinks",
    "rotary.norms",
    "rotary.ablations",  # an observation
    "rotary.positional_heads",
    "retrieval.sparse",
    "retrieval.causal",
)



def rows(modules: tuple[str, ...] = MODULES) -> tuple[Claim | Observation, ...]:
    """The ``ROW`` of each module of ``modules`` (named under this package), in their order."""
    return tuple(importlib.import_module(f"{__name__}.{module}").ROW for module in modules)


ROWS = rows()
CLAIMS: tuple[Claim, ...] = tuple(row for row in ROWS if isinstance(row, Claim))
OBSERVATIONS: tuple[Observation, ...] = tuple(row for row in ROWS if isinstance(row, Observation))
