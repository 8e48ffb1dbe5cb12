"""``position-probes``: ridge probes for token, segment and intra-segment position (see ``probes.position``)."""

from probes.position import position_probes

__all__ = ["position_probes"]
