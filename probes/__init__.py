"""Linear probes fitted from streamed sufficient statistics.

``ridge.Stats`` accumulates ``X'X``, ``X'Y``, ``Y'Y``, sums and counts chunk by chunk; everything a ridge
probe needs (fits for any alpha, cross-validated alpha choice, held-out R^2) is computed from those
sums, so the number of documents is bounded by time, not memory. ``targets`` defines the positional
targets; ``position`` runs a model over documents and fits per layer, subspace and target.
"""

from probes.ridge import Stats, fit, r2, select_alpha
from probes.targets import TARGETS, position_targets, segment_ids

__all__ = ["Stats", "fit", "r2", "select_alpha", "TARGETS", "position_targets", "segment_ids"]
