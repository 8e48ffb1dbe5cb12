"""The warning every old poslens spelling raises: ``PoslensDeprecationWarning``, a ``DeprecationWarning``.

A subclass of its own lets a caller (and poslens' test suite, through pytest's ``filterwarnings`` in pyproject.toml)
treat poslens' deprecations apart from those of torch, transformers and the other libraries: the suite turns poslens'
into errors, so a test that still uses an old spelling fails unless it asks for the warning (``pytest.warns``), while
the libraries' stay ignored. Code that filters or catches ``DeprecationWarning`` still sees these. Nothing here
imports anything, so the command line can warn without loading torch.
"""


class PoslensDeprecationWarning(DeprecationWarning):
    """An old poslens spelling (a keyword, name, module or option) that still works until its removal date; the
    message names the new spelling."""
