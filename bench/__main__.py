"""``python -m bench``: run every benchmark and update BENCHMARKS.md."""

from bench import extraction

if __name__ == "__main__":
    print(extraction.main())
