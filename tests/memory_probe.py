"""Peak RSS a forward pass adds, measured in a process of its own: ``python -m tests.memory_probe MODE LENGTH CHUNK``
prints the bytes the process's high-water mark rose by (reset after the model is built and warmed up) and
``interp.runtime.memory``'s estimate of the same run, as JSON. MODE ``whole``: the forward's logits and a loss over
them; ``chunks``: ``token_losses`` in chunks of CHUNK positions."""

import gc
import json
import sys

import torch
import torch.nn.functional as F

from interp.runtime import memory
from tests.repo_helpers import tiny_repo


def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))



def main(mode: str, n: int, chunk: int) -> None:
    m = tiny_repo("rope", vocab_size=32000, max_position_embeddings=8192, hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2)
    tokens = torch.randint(0, 32000, (1, n))
    with torch.no_grad():
        m(tokens[:, :16])
    gc.collect()
    memory.release()
    with open("/proc/self/clear_refs", "w") as f:  # resets the high-water mark (VmHWM) to the current RSS
        f.write("5")
    before = status("VmRSS")
    with torch.no_grad():
        if mode == "whole":
            logits = m(tokens)
            F.cross_entropy(logits[0, :-1].float(), tokens[0, 1:], reduction="none")
        else:
            m.token_losses(tokens, chunk=chunk)
    est = memory.estimate(memory.RunShape.from_model(m, length=n, logits=mode == "whole", loss_chunk=chunk))
    print(json.dumps({"measured": status("VmHWM") - before, "estimate": est.total(loaded=True), "before": before}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
