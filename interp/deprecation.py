"""The warning every old poslens spelling raises: ``PoslensDeprecationWarning``, a ``DeprecationWarning``, and the one
removal date (``REMOVAL``) its messages name.

A subclass of its own lets a caller (and poslens' test suite, through pytest's ``filterwarnings`` in pyproject.toml)
treat poslens' deprecations apart from those of torch, transformers and the other libraries: the suite turns poslens'
into errors, so a test that still uses an old spelling fails unless it asks for the warning (``pytest.warns``), while
the libraries' stay ignored. Code that filters or catches ``DeprecationWarning`` still sees these. The old spellings
themselves are listed in one table, ``poslens.deprecated.TABLE``. Nothing here imports anything but ``warnings``, so
the command line can warn without loading torch.
"""

import warnings

REMOVAL = "2027-05-24"


class PoslensDeprecationWarning(DeprecationWarning):
    """An old poslens spelling (a keyword, name, module or option) that still works until its removal date; the
    message names the new spelling."""


def message(old: str, new: str) -> str:
    return f"{old} is deprecated: use {new} (the old spelling is removed on {REMOVAL})"


def warn(old: str, new: str, stacklevel: int = 2) -> None:
    warnings.warn(message(old, new), PoslensDeprecationWarning, stacklevel=stacklevel + 1)


def keyword(function: str, old: str, new: str, stacklevel: int = 2) -> None:
    """Warn that ``function(old=...)`` is now spelled ``new``."""
    warn(f"{function}({old}=)", new, stacklevel + 1)
