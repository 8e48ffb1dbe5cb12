"""How fast the command line answers: ``poslens --help``, ``poslens analyze NAME --help`` and ``poslens models``,
wall and CPU seconds (median of 5 fresh processes). ``python -m bench.cli --against DIR`` times another checkout
(say ``git archive OLD | tar -x -C DIR``) in the same run, interleaved, for a before / after table."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from bench import harness

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--help"], ["analyze", "word-boundaries", "--help"], ["models"])


def once(root: Path, argv: list[str]) -> tuple[float, float]:
    done = harness.run([sys.executable, "-m", "poslens.cli", *argv], cwd=root, env={"PYTHONPATH": str(root)})
    if done.failed:
        raise RuntimeError(f"poslens {' '.join(argv)}: {done.failed}")
    return done.wall_s, done.cpu_s


def measure(roots: dict[str, Path], repeats: int = 5) -> list[dict]:
    rows = []
    for argv in COMMANDS:
        runs = {label: [] for label in roots}
        for _ in range(repeats):
            for label, root in roots.items():
                runs[label].append(once(root, argv))
        for label, r in runs.items():
            rows.append(dict(command="poslens " + " ".join(argv), tree=label,
                             wall=statistics.median(w for w, _ in r), cpu=statistics.median(c for _, c in r)))
    return rows


def main(against: str | None = None) -> str:
    roots = {"this": ROOT} | ({"against": Path(against)} if against else {})
    rows = measure(roots)
    lines = ["| command | tree | wall s (median of 5) | CPU s (median of 5) |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r['command']}` | {r['tree']} | {r['wall']:.2f} | {r['cpu']:.2f} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--against", help="another checkout to time in the same run")
    print(main(p.parse_args().against))
