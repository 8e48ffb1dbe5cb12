"""Deprecated path of ``interp.catalog`` (the packaged models' data); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.catalog")
