"""Deprecated path of ``interp.package_files`` (files inside installed packages); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.package_files")
