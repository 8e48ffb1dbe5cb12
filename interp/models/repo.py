"""Deprecated path of ``interp.families.repo.model`` (the RePo decoder); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.repo.model")
