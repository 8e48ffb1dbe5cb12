"""What a backend of the table is: a ``name``, whether it applies key windows itself (``reads_windows``; the others see
them folded into the mask), the whole condition it serves as named tests of the call (``conditions``) and
``__call__(call) -> output``."""

from __future__ import annotations

from collections.abc import Callable


class Backend:
    reads_windows = False

    def conditions(self) -> list[tuple[str, Callable]]:
        """``[(what it needs, test(call) -> bool), ...]``: a call it serves meets every one."""
        raise NotImplementedError

    def serves(self, call) -> bool:
        return all(test(call) for _, test in self.conditions())
