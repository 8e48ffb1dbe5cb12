"""The ``stage`` option of every analysis that draws built-in units: which of them a run may read
(``corpora.stages``: pilots and the judged known-results run read disjoint ones)."""

from __future__ import annotations

from typing import Annotated

from analyses.registry import Choices, Help, NotWith
from corpora.stages import STAGES

STAGE = Annotated[str, Help("which built-in units to draw (corpora.stages): any (every article, the default), pilot "
                            "(the units a pilot may read) or judged (units no pilot read: the known-results run)"),
                  Choices(STAGES), NotWith()]
