"""poslens: the application layer (command line, training, the main job) over ``interp``, ``analyses``,
``figures``, ``probes`` and ``corpora``."""

__version__ = "0.1.0"

from poslens import deprecated as _deprecated  # noqa: E402,F401  (installs the finder that serves the old names)
