"""Deprecated path of ``analyses.nan_policy`` (the NaN / inf policy of result tables); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "analyses.nan_policy")
