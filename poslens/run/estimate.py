"""How long each step of the main job will take on this machine, said before it runs.

A step's cost is recorded in ``COSTS`` in probe units: its seconds divided by the seconds of ``probe()`` (a forward
pass of ``PROBE_MODEL`` on a fixed batch, the fastest of a few) measured in the same process just before, so the ratio
holds on a faster or a slower machine (``python -m bench.steps --write`` measures both and rewrites ``COSTS``; on a
machine other jobs share it counts this process' CPU seconds, plus the wall seconds of the figures' export, which
runs in a browser process). ``poslens reproduce`` times the probe once as it starts (about a second) and gives each
step ``probe seconds x cost``, or the step's own seconds where this report folder has timed it with the same
arguments. As steps finish, the time left is scaled by how their times compared with their estimates (``Pace``): a
machine busier than at the probe shows in the time left after the first step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

PROBE_MODEL, PROBE_TOKENS, PROBE_REPEATS = "rope-small", (2, 512), 7

# probe units per step of the main job (full size, not --quick), from bench.steps at 2026-11-29 on 2 cores shared with
# 4-5 other users' jobs (1 torch thread): each step's CPU seconds over the probe's, plus its figures' export (wall)
# over the probe's wall seconds, the probe timed just before the step in the same process
COSTS: dict[str, float] = {
    "loss-neutrality": 385.5, "byte-increments": 45.3, "word-boundaries": 286.9, "entity-spacing": 72.2,
    "char-spacing": 81.2, "niah-accuracy": 506.9, "attention-mass": 527.5, "position-ranges": 117.5,
    "position-patterns": 48.3, "ap-spectrum": 35.6, "kl-ablation": 232.7, "compare-heads": 260.9,
    "position-probes": 852.6, "head-profiles": 280.1, "sink-rate": 77.8, "massive-activations": 36.1,
    "induction": 36.1, "rope-frequencies": 393.1, "retrieval-heads": 936.5, "attention-window": 65.2,
    "along-context": 241.0,
}


def probe(repeats: int = PROBE_REPEATS, timer=time.perf_counter, threads: int | None = None) -> float:
    """Seconds of one forward pass of ``PROBE_MODEL`` on ``PROBE_TOKENS`` random tokens (seed 0), the fastest of
    ``repeats`` after a warm-up pass: the machine's speed as the main job's steps see it (same threads, same
    kernels; ``threads``: the torch threads the steps will run on, where not this process' own, e.g. 1 for
    ``reproduce --workers``). ``timer``: wall seconds, or this process' CPU seconds (``time.process_time``: what
    ``bench.steps`` measures on a machine other jobs share)."""
    import torch

    from interp.loading import load

    model = load(PROBE_MODEL)
    tokens = torch.randint(0, model.cfg.d_vocab, PROBE_TOKENS, generator=torch.Generator().manual_seed(0))
    best, before = float("inf"), torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        with torch.inference_mode():
            model(tokens)
            for _ in range(repeats):
                start = timer()
                model(tokens)
                best = min(best, timer() - start)
    finally:
        torch.set_num_threads(before)
    return best


def clock(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min" if seconds >= 90 \
        else f"{seconds:.0f} s"


@dataclass
class Pace:
    """The estimates of a run's steps (seconds, None where a step has none) and how the finished ones compared:
    ``factor`` (their seconds over their estimates, 1 before any finished) scales the time left."""

    estimates: list[float | None]
    missing: str = "not in the cost table"  # why a step has no estimate
    spent: float = 0.0
    estimated: float = 0.0

    @property
    def factor(self) -> float:
        return self.spent / self.estimated if self.estimated > 0 else 1.0

    def finished(self, i: int, seconds: float) -> None:
        """Step ``i`` (0-based) took ``seconds``."""
        if self.estimates[i] is not None:
            self.spent += seconds
            self.estimated += self.estimates[i]

    def line(self, i: int) -> str:
        """Step ``i``'s estimate and the time left for it and every later step, at the pace so far."""
        mine, rest = self.estimates[i], self.estimates[i:]
        known = [x for x in rest if x is not None]
        if mine is None:
            head = f"no estimate ({self.missing})"
        else:
            head = f"estimate {clock(mine * self.factor)}"
        if not known:
            return head
        left = f"{clock(sum(known) * self.factor)} left"
        if len(known) < len(rest):
            left += f" for the {len(known)} of {len(rest)} steps with an estimate"
        return f"{head}, {left}"


def split(estimates: list[float | None], workers: int) -> list[list[int]]:
    """Steps (their indices) dealt to ``workers`` queues, longest first to the queue that ends soonest (Graham's
    longest-processing-time rule: within 4/3 of the best split); a step without an estimate counts as the mean of
    those with one. Each queue keeps the job's order; empty queues are dropped."""
    known = [e for e in estimates if e is not None]
    fill = sum(known) / len(known) if known else 1.0
    sizes = [fill if e is None else e for e in estimates]
    queues: list[list[int]] = [[] for _ in range(max(1, workers))]
    loads = [0.0] * len(queues)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = loads.index(min(loads))
        queues[k].append(i)
        loads[k] += sizes[i]
    return [sorted(q) for q in queues if q]
