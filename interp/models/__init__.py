"""Deprecated package: the model classes live in ``interp.families.<family>.model``; removed on 2027-05-24."""

import importlib

from interp.deprecated import Alias, moved

_FAMILIES = ("bert", "encoder", "hf", "increments", "llama", "repo")

__getattr__, __dir__ = moved(__name__, "interp.families", {
    name: Alias(f"interp.families.{name}.model", lambda name=name: importlib.import_module(f"interp.models.{name}"),
          submodule=True)
    for name in _FAMILIES})
