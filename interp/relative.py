"""Deprecated path of ``interp.families.encoder.relative`` (the encoders' relative-position bias); removed on
2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.encoder.relative")
