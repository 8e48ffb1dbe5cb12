"""Deprecated path of ``interp.families.hf.model`` (the generic Hugging Face family's model); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.hf.model")
