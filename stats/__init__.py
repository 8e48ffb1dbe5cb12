"""Intervals for unit-level values (``stats.intervals``: bootstrap, exact binomial, and the verdict a rule reads off
an interval). The lowest room of the tree: numpy and scipy only, so that the analyses, their figures and the
known-results table compute an interval the same way from the same units (``NAME.units.csv``)."""
