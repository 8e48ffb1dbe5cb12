"""What entropy and the distance moments would miss as value columns of a float32 kernel call (the question of
``interp.attention.backends.lse``'s docstring): on SmolLM2-135M's own queries and keys at N tokens (layers 0, 3, 10,
20, 29), entropy as ``L - scale q . E[k]`` and the attended distance's mean and variance from the centred key index
``j - a`` and its square per block of rows ``[a, a + block)``, against float64 from the definition.

``python -m bench.value_columns [N=2048] [block=512]`` (needs the smollm2 checkpoint offline)."""

import sys
from unittest import mock

import torch

import interp
from interp.attention import call as calls
from interp.attention import model_statistics
from interp.attention.backends.cpu_flash import cpu_flash
from interp.attention.mask import causal_mask

torch.set_num_threads(1)

LAYERS = {0, 3, 10, 20, 29}


def main(N: int = 2048, BLOCK: int = 512) -> dict:  # noqa: N803
    model = interp.load("smollm2")
    ids = torch.randint(1000, 20000, (1, N), generator=torch.Generator().manual_seed(0))
    taken = {}
    real = calls.dispatch
    def rec(call):
        if call.statistics is not None:
            layer = int(call.name.split(".")[1])
            if layer in LAYERS:
                taken[layer] = (call.q.float().clone(), call.k.float().clone(), call.scale)
        return real(call)
    with mock.patch.object(calls, "dispatch", rec):
        model_statistics(model, ids, ["first_mass"])
    worst = {"entropy": 0.0, "mean/scale": 0.0, "mean abs": 0.0, "var/scale^2": 0.0, "std abs": 0.0}
    for layer, (q, k, scale) in sorted(taken.items()):
        rep = q.shape[1] // k.shape[1]
        kr = k.repeat_interleave(rep, 1)
        s = (q.double() @ kr.double().transpose(-1, -2)) * scale
        s = s.masked_fill(~causal_mask(N, N, "cpu"), float("-inf"))
        p = s.softmax(-1)
        ent = -torch.where(p > 0, p * p.log(), 0.0).sum(-1)
        d = (torch.arange(N)[:, None] - torch.arange(N)[None]).double()
        mean = (p * d.clamp(min=0)).sum(-1)
        var = (p * (d.clamp(min=0) - mean[..., None]) ** 2).sum(-1)
        del s, p
        ek, lse = cpu_flash(q, k, k, None, True, scale)
        ent32 = lse - scale * (q * ek).sum(-1)
        worst["entropy"] = max(worst["entropy"], float((ent32.double() - ent).abs().max()))
        means, vars_ = [], []
        for a in range(0, N, BLOCK):
            e = min(N, a + BLOCK)
            c = (torch.arange(e) - a).float()
            cols = torch.stack([c, c * c], -1)[None, None].expand(1, k.shape[1], e, 2)
            qq = q[..., a:e, :]
            width = q.shape[-1]
            vals = torch.nn.functional.pad(cols, (0, width - 2))
            m = causal_mask(e - a, e, "cpu")[None, None]
            out, _ = cpu_flash(qq, k[..., :e, :], vals, m, False, scale)
            i = (torch.arange(a, e) - a).float()
            ec, ec2 = out[..., 0], out[..., 1]
            means.append(i - ec)
            vars_.append((ec2 - ec * ec).clamp(min=0))
        m32, v32 = torch.cat(means, -1).double(), torch.cat(vars_, -1).double()
        sc = float(mean.abs().max())
        worst["mean/scale"] = max(worst["mean/scale"], float((m32 - mean).abs().max()) / max(1.0, sc))
        worst["mean abs"] = max(worst["mean abs"], float((m32 - mean).abs().max()))
        worst["var/scale^2"] = max(worst["var/scale^2"], float((v32 - var).abs().max()) / max(1.0, sc) ** 2)
        worst["std abs"] = max(worst["std abs"], float((v32.sqrt() - var.sqrt()).abs().max()))
        print(layer, {k_: f"{v:.2e}" for k_, v in worst.items()}, flush=True)
    print("N", N, "block", BLOCK, {k_: f"{v:.2e}" for k_, v in worst.items()})
    return worst


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
