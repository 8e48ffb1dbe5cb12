"""Deprecated path of ``analyses.increment_hooks`` (reading learned increments); ``no_grad`` and ``check_window`` are
``analyses.registry``'s. Removed on 2027-05-24."""

from interp.deprecated import Alias, moved

__getattr__, __dir__ = moved(__name__, "analyses.increment_hooks", {
    "no_grad": Alias("analyses.registry.no_grad"),
    "check_window": Alias("analyses.registry.check_window"),
})
