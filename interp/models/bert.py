"""Deprecated path of ``interp.families.bert.model`` (the hand-written BERT encoder); removed on 2027-05-24."""

from interp.deprecated import moved

__getattr__, __dir__ = moved(__name__, "interp.families.bert.model")
