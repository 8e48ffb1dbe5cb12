"""``python -m bench``: run every benchmark and update BENCHMARKS.md (the GPU rows where CUDA is present)."""

import torch

from bench import attention, extraction, families, generic, gpu, peers, probes, steps

if __name__ == "__main__":
    for bench in (extraction, attention, probes, generic, families, gpu, steps):
        print(bench.main())
    for plan in ("smollm2", "llama-1b") + (("gpu-smollm2", "gpu-llama-1b") if torch.cuda.is_available() else ()):
        print(peers.main(plan, repeats=3 if plan.startswith("gpu") else 2))
