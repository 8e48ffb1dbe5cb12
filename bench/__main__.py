"""``python -m bench``: run every benchmark and update BENCHMARKS.md."""

from bench import attention, extraction, probes

if __name__ == "__main__":
    for bench in (extraction, attention, probes):
        print(bench.main())
