"""The base every poslens model stands on, and the capabilities analyses ask for.

Analyses never test for a concrete class. They call ``require(model, Capability.X, ...)`` and then use
the hook names and methods that capability promises:

=====================  ==========================================================================
capability             promise
=====================  ==========================================================================
``INCREMENTS``         ``increment_sources()``: ``(label, hook name)`` pairs whose hooks carry
                       per-token increments ``[batch, pos]`` (or ``[batch, head, pos]``);
                       ``context_free_increments()``: ``{label: [d_vocab] tensor}`` for the
                       increment functions that read token identity alone.
``POSITIONS``          ``blocks.{l}.attn.hook_positions`` ``[batch, head, pos]`` for every layer:
                       the position each head rotates by (integer for plain RoPE).
                       Edits change the rotation unless ``model.positions_read_only``.
``ROTARY``             ``rotation(layer)``: the layer's ``interp.rope.RotarySpec`` (each band's frequency and
                       dims), or None for a layer that does not rotate; ``blocks.{l}.attn.hook_rot_q``
                       ``[batch, pos, head, d_head]`` and ``hook_rot_k`` ``[batch, pos, kv_head, d_head]``:
                       queries and keys after rotation, whose edits change the logits.
``ATTENTION``          ``blocks.{l}.attn.hook_attn_scores`` and ``hook_pattern`` ``[batch, head, q, k]``
                       (edits change the output) and ``model.query_rows(idx)`` to materialise only some
                       query rows.
``HIDDEN_STATES``      ``blocks.{l}.hook_resid_post`` ``[batch, pos, d_model]`` and
                       ``residual_subspaces()``: named slices of the residual stream.
``CAUSAL_LM``          ``forward(tokens)`` gives next-token logits ``[batch, pos, d_vocab]``;
                       ``generate(tokens, n)`` continues greedily.
``MASKED_LM``          ``forward(tokens)`` gives masked-token logits ``[batch, pos, d_vocab]``.
``AP_STREAM``          ``ap_embedding_matrix()``: the absolute-position table ``[positions, d]``, and
                       ``ap_hook()``: the hook whose ``[batch, pos, d]`` rows of that table enter the model
                       (edits change the output).
``LOGIT_COMPONENTS``   ``logit_components()``: names c of additive logit components, each in
                       ``blocks.{l}.attn.hook_logits_{c}`` ``[batch, head, q, k]``; their sum is
                       ``hook_attn_scores``.
=====================  ==========================================================================
"""

from __future__ import annotations

import contextlib
import fnmatch
from dataclasses import dataclass

import torch
from torch import Tensor
from transformer_lens import HookedRootModule

from interp import attention
from interp.capabilities import Capability, CapabilityError, require  # noqa: F401 (re-exported)


class InputError(ValueError):
    """Tokens a model cannot take (wrong shape, out of vocabulary, longer than the model allows)."""


TOKEN_DIMS = ("pos", "q", "k")  # shape names whose axis runs over tokens (queries and keys of a pattern)


@dataclass(frozen=True)
class HookDoc:
    pattern: str  # hook name, with {l} for the layer index
    shape: str  # "[batch, pos, d_model]"; alternatives by rank joined by " or "
    meaning: str

    def dims(self, ndim: int | None = None) -> list[str]:
        """The documented axis names (of the alternative with ``ndim`` axes when there are several)."""
        options = [[d.strip() for d in alt.strip().strip("[]").split(",")] for alt in self.shape.split(" or ")]
        if ndim is None:
            return options[0]
        match = [o for o in options if len(o) == ndim]
        if not match:
            raise ValueError(f"hook {self.pattern} is documented as {self.shape}, not {ndim}-dimensional")
        return match[0]

    def token_axes(self, ndim: int | None = None) -> tuple[int, ...]:
        """Axes that run over tokens, read off the documented shape: ``(1,)`` for ``[batch, pos, d_model]``,
        ``(2, 3)`` for ``[batch, head, q, k]``."""
        return tuple(i for i, d in enumerate(self.dims(ndim)) if d in TOKEN_DIMS)


# Hooks every family's blocks have, declared once; a family lists only its own hooks (and may re-declare one of
# these to say more about it in its case).
BLOCK_HOOKS = (
    HookDoc("blocks.{l}.hook_resid_pre", "[batch, pos, d_model]", "residual entering layer l"),
    HookDoc("blocks.{l}.attn.hook_attn_scores", "[batch, head, q, k]", "attention logits before the softmax"),
    HookDoc("blocks.{l}.attn.hook_pattern", "[batch, head, q, k]", "attention probabilities"),
    HookDoc("blocks.{l}.hook_attn_out", "[batch, pos, d_model]", "attention output added to the residual"),
    HookDoc("blocks.{l}.hook_resid_mid", "[batch, pos, d_model]", "residual after attention"),
    HookDoc("blocks.{l}.hook_mlp_out", "[batch, pos, d_model]", "MLP output added to the residual"),
    HookDoc("blocks.{l}.hook_resid_post", "[batch, pos, d_model]", "residual leaving layer l"),
)
_BLOCK_ORDER = {"hook_resid_pre": 1, "attn.hook_attn_scores": 4, "attn.hook_pattern": 5, "hook_attn_out": 7, "hook_resid_mid": 8,
                "hook_mlp_in": 9, "hook_mlp_out": 10, "hook_resid_post": 12}


def _rank(pattern: str) -> float:
    """Where a hook sits in the forward pass, for ordering the tables: embeddings, block hooks in order, final."""
    if not pattern.startswith("blocks.{l}."):
        return 13 if "final" in pattern else 0
    leaf = pattern.removeprefix("blocks.{l}.")
    if leaf in _BLOCK_ORDER:
        return _BLOCK_ORDER[leaf]
    if leaf.startswith("attn."):
        return 6 if leaf.startswith("attn.hook_z") else 3.5 if leaf.startswith("attn.hook_logits") else 3
    return 11 if leaf.startswith("hook_resid_") else 2


class PosLensModel(HookedRootModule):
    """A HookedRootModule with a tokenizer, a family name, documented hooks and declared capabilities.

    ``max_seq_len`` is a plain attribute: inputs longer than it are refused. Rotary families compute their
    angles on the fly, so raising it (``model.max_seq_len = 8192``) runs extrapolation experiments.

    Subclasses set ``family``, ``HOOKS`` (their own hooks; ``BLOCK_HOOKS`` are shared), ``self.capabilities``, ``self.tokenizer``, ``self.n_layers``,
    ``self.n_heads`` and ``self.max_seq_len``, build their modules, then call ``self.setup()``.
    """

    family: str = "?"
    HOOKS: tuple[HookDoc, ...] = ()
    ABSENT_HOOKS: tuple[str, ...] = ()  # standard block hooks this family cannot offer (named, so none goes missing unnoticed)
    supports_kv_cache = False  # attention appends to ``attention.KVCache`` inside ``attention.decoding``
    positions_read_only = False  # POSITIONS: whether edits of ``hook_positions`` leave the rotation as it was

    def __init__(self):
        super().__init__()
        self.capabilities: frozenset[Capability] = frozenset()
        self.model_name = type(self).__name__
        self.source: dict = {}  # where the weights came from: path, sha256, format

    def describe(self) -> str:
        return f"{self.family} family"

    @classmethod
    def hook_table(cls) -> list[HookDoc]:
        """The shared ``BLOCK_HOOKS`` and the family's own ``HOOKS`` (which win on the same name), in forward order."""
        own = {h.pattern for h in cls.HOOKS} | set(cls.ABSENT_HOOKS)
        return sorted([h for h in BLOCK_HOOKS if h.pattern not in own] + list(cls.HOOKS), key=lambda h: _rank(h.pattern))

    def hook_doc(self, name: str) -> HookDoc:
        """The documentation entry of one hook name (e.g. ``blocks.3.attn.hook_pattern``)."""
        for h in self.hook_table():
            if fnmatch.fnmatchcase(name, h.pattern.replace("{l}", "*")):
                return h
        raise KeyError(f"{self.model_name} documents no hook {name!r}")

    def token_axes(self, name: str, ndim: int | None = None) -> tuple[int, ...]:
        """Axes of hook ``name`` that run over tokens, from its documented shape."""
        return self.hook_doc(name).token_axes(ndim)

    def undocumented_hooks(self) -> list[str]:
        """Hook points of this instance that no ``hook_table()`` entry describes (should be empty)."""
        patterns = [h.pattern.replace("{l}", "*") for h in self.hook_table()]
        return [n for n in self.hook_dict if not any(fnmatch.fnmatchcase(n, p) for p in patterns)]

    def query_rows(self, rows):
        """Context manager: attention hooks see only these query rows (see ``interp.attention``)."""
        return attention.query_rows(rows)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def check_tokens(self, tokens) -> Tensor:
        """Validate and batch token ids: ``[pos]`` or ``[batch, pos]`` ints inside the vocabulary and context."""
        tokens = torch.as_tensor(tokens)
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        if tokens.dim() != 2:
            raise InputError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}")
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise InputError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if tokens.shape[1] == 0:
            raise InputError("tokens are empty (sequence length 0)")
        if tokens.shape[1] > self.max_seq_len:
            raise InputError(
                f"a window of {tokens.shape[1]} tokens is longer than {self.model_name} allows "
                f"(max_seq_len={self.max_seq_len})"
            )
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= self.d_vocab:
            raise InputError(f"token id {hi if hi >= self.d_vocab else lo} is outside the vocabulary [0, {self.d_vocab})")
        return tokens.long().to(self.device)

    @torch.no_grad()
    def generate(self, tokens, max_new_tokens: int, stop_ids=()) -> list[int]:
        """Greedy continuation of one sequence, ending after a token in ``stop_ids`` (kept) or at
        ``max_new_tokens`` or the context limit. Families with ``supports_kv_cache`` run one token per step;
        the others re-run the whole sequence."""
        seq = self.check_tokens(tokens)
        if seq.shape[0] != 1:
            raise InputError(f"generate takes one sequence, got a batch of {seq.shape[0]}; use generate_batch")
        return self.generate_batch(seq, max_new_tokens, stop_ids)[0]

    def _decoding_batch(self, prompts, max_new_tokens: int, budgets):
        """Checked prompts, per-row budgets, empty outputs and the rows that decode at all (budget > 0)."""
        require(self, Capability.CAUSAL_LM, "generate")
        if isinstance(prompts, (list, tuple)) and len({len(p) for p in prompts}) > 1:
            raise InputError(f"generate_batch takes prompts of one length, got lengths {sorted({len(p) for p in prompts})}")
        seq = self.check_tokens(prompts)
        budgets = [max_new_tokens] * seq.shape[0] if budgets is None else [int(b) for b in budgets]
        if len(budgets) != seq.shape[0]:
            raise InputError(f"{len(budgets)} budgets for {seq.shape[0]} prompts")
        out: list[list[int]] = [[] for _ in range(seq.shape[0])]
        rows = [i for i, b in enumerate(budgets) if b > 0]
        return seq, budgets, out, rows

    @torch.no_grad()
    def generate_batch(self, prompts, max_new_tokens: int, stop_ids=(), budgets=None) -> list[list[int]]:
        """Greedy continuations of equal-length prompts, run as one batch: row i gets what ``generate``
        gives it alone (up to ``budgets[i]`` tokens); finished rows leave the batch."""
        seq, budgets, out, rows = self._decoding_batch(prompts, max_new_tokens, budgets)
        seq, length = seq[rows], seq.shape[1]
        cache = attention.KVCache() if self.supports_kv_cache else None
        with attention.decoding(cache) if cache is not None else contextlib.nullcontext():
            step_input = seq
            while rows and length < self.max_seq_len:
                nxt = self(step_input)[:, -1].argmax(-1)
                keep = []
                for j, (i, t) in enumerate(zip(rows, nxt.tolist())):
                    out[i].append(t)
                    if t not in stop_ids and len(out[i]) < budgets[i]:
                        keep.append(j)
                rows, length = [rows[j] for j in keep], length + 1
                if cache is not None:
                    cache.select(keep)
                    step_input = nxt[keep, None]
                else:
                    seq = torch.cat([seq, nxt[:, None]], dim=1)[keep]
                    step_input = seq
        return out

    def require_tokenizer(self, analysis: str):
        """The tokenizer, or a clear error for models loaded without one."""
        if getattr(self, "tokenizer", None) is None:
            raise CapabilityError(f"analysis '{analysis}' reads text, and {self.model_name} was loaded without a tokenizer "
                                  "(put the tokenizer files beside the checkpoint, attach one: model.tokenizer = interp.load_tokenizer(DIR_OR_MODEL), "
                                  "or pass --tokenizer DIR_OR_MODEL)")
        return self.tokenizer

    def to_tokens(self, text: str, *, doc_start: bool = False) -> Tensor:
        """``[1, pos]`` token ids for one text."""
        if getattr(self, "tokenizer", None) is None:
            from interp.tokenizers import TokenizerError

            raise TokenizerError(f"{self.model_name} was loaded without a tokenizer, so it cannot turn text into tokens: "
                                 "put the tokenizer files beside the checkpoint, attach one "
                                 "(model.tokenizer = interp.load_tokenizer(DIR_OR_MODEL)), or pass --tokenizer on the command line")
        return torch.tensor([self.tokenizer.encode(text, doc_start=doc_start)], device=self.device)
