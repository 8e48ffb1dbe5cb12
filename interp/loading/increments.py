"""Deprecated path of ``interp.families.increments.checkpoints`` (reading and writing the learned-increments family's
checkpoints); removed on 2027-05-24."""

from interp.deprecated import Alias, moved

__getattr__, __dir__ = moved(__name__, "interp.families.increments.checkpoints", {
    "FAMILY": Alias("interp.families.increments.FAMILY.name", lambda: "increments"),
})
