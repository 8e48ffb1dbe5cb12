"""Deprecated path of ``interp.families.increments.model`` (the learned-increments transformer); removed on
2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.increments.model")
