"""Deprecated path of ``interp.families.llama.model`` (the hand-written LLaMA decoder); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.llama.model")
