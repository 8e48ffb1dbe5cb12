"""Bands of a learned absolute-position table removed (Wang & Chen, EMNLP 2020, read BERT-style tables as a few smooth
and periodic components; ``ap-spectrum`` measures them): which of them does the model use?

The table ``ap_embedding_matrix() [positions, d]`` is taken to the DCT-II basis along positions (orthonormal, as
``ap-spectrum`` does), the chosen bins are set to zero and the rest taken back; the rows that enter the model (at the
family's ``ap_hook()``) become the filtered table's rows. Bins are chosen as ``bins`` (0 is the mean over positions),
or every bin from ``above`` up (a low-pass: only the slow components stay), or every bin below ``below`` (a high-pass).
The rows entering are found in the table by their values, so shifted positions (an encoder's ``position_offset``) are
filtered at the rows they really use.
"""

from __future__ import annotations

import dataclasses

from interp.capabilities import Capability, require
from interp.interventions import Intervention, as_tuple, register


@register
@dataclasses.dataclass(frozen=True)
class RemoveAPBands(Intervention):
    """DCT bins of the learned absolute-position table removed from the rows that enter the model: ``bins``, or every
    bin from ``above`` up (only the slow components stay), or every bin below ``below``."""

    bins: tuple | None = None
    above: int | None = None
    below: int | None = None
    name = "remove-ap-bands"
    needs = (Capability.AP_STREAM,)
    example = dict(above=4)

    def __post_init__(self):
        object.__setattr__(self, "bins", as_tuple(self.bins))
        given = [n for n in ("bins", "above", "below") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("RemoveAPBands: give exactly one of bins=, above= or below= "
                             f"(got {', '.join(given) or 'none'})")

    def removed(self, n_positions: int) -> list[int]:
        if self.bins is not None:
            bad = [b for b in self.bins if not 0 <= b < n_positions]
            if bad:
                raise ValueError(f"RemoveAPBands bins: {bad[0]} is not a DCT bin of a {n_positions}-position table")
            return list(self.bins)
        edge = self.above if self.above is not None else self.below
        if not 0 <= edge <= n_positions:
            raise ValueError(f"RemoveAPBands: {edge} is not a bin of a {n_positions}-position table")
        return list(range(edge, n_positions)) if self.above is not None else list(range(edge))

    def fwd_hooks(self, model):
        import torch
        from scipy.fft import dct, idct

        require(model, Capability.AP_STREAM, "RemoveAPBands", kind="intervention")
        table = model.ap_embedding_matrix().detach().float().cpu()
        coef = dct(table.double().numpy(), type=2, norm="ortho", axis=0)
        coef[self.removed(table.shape[0])] = 0.0
        delta = table - torch.from_numpy(idct(coef, type=2, norm="ortho", axis=0)).float()  # what the edit takes away

        def filtered(rows, hook):
            out = rows.clone()
            t = table.to(rows.device)
            for b in range(rows.shape[0]):
                gap = (t - rows[b, 0].float()).abs().amax(-1)
                start = int(gap.argmin())
                if float(gap[start]) > 1e-4 * float(t.abs().max()) or start + rows.shape[1] > t.shape[0]:
                    raise ValueError(f"RemoveAPBands: the position rows entering {model.model_name} at {hook.name} are "
                                     "not rows of its table (edited by an earlier hook?)")
                out[b] = rows[b] - delta[start:start + rows.shape[1]].to(rows.device, rows.dtype)
            return out

        return [(model.ap_hook(), filtered)]


