"""``python -m bench``: run every benchmark and update BENCHMARKS.md."""

from bench import attention, extraction, families, generic, gpu, peers, probes

if __name__ == "__main__":
    for bench in (extraction, attention, probes, generic, families, gpu):
        print(bench.main())
    for plan in ("smollm2", "llama-1b"):
        print(peers.main(plan))
