"""poslens: the application layer (command line, training, the main job) over ``interp``, ``analyses``,
``figures``, ``probes`` and ``corpora``."""

__version__ = "0.1.0"
