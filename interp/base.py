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

import torch
from torch import Tensor
from transformer_lens import HookedRootModule

from interp import attention
from interp.capabilities import Capability, CapabilityError, require  # noqa: F401 (re-exported)
from interp.hooks import Hook, HookDoc, doc_of, hook_table, make_hook_points
from interp.tl import TL_GENERATE, TLSurface
from interp.tl_modules import TLModules, fire_tokens


class InputError(ValueError):
    """Tokens a model cannot take (wrong shape, out of vocabulary, longer than the model allows)."""


class PosLensModel(TLModules, TLSurface, HookedRootModule):
    """A HookedRootModule with a tokenizer, a family name, declared hooks and declared capabilities.

    ``max_seq_len`` is a plain attribute: inputs longer than it are refused. Rotary families compute their
    angles on the fly, so raising it (``model.max_seq_len = 8192``) runs extrapolation experiments.

    Subclasses set ``family``, ``self.capabilities``, ``self.tokenizer``, ``self.n_layers``, ``self.n_heads`` and
    ``self.max_seq_len``, declare their hooks (``interp.hooks.Hook``, on the module classes that fire them), build
    their modules, then call ``self.setup()``, which gives every declared hook its ``HookPoint`` and makes ``model.cfg``
    TransformerLens-style (``interp.tl``: the family's config stays ``model.original_cfg``, read through ``cfg``).
    """

    family: str = "?"
    hook_tokens = Hook("[batch, pos]", "token ids entering the model (an edit changes what it reads)")
    supports_kv_cache = False  # attention appends to ``attention.KVCache`` inside ``attention.decoding``
    positions_read_only = False  # POSITIONS: whether edits of ``hook_positions`` leave the rotation as it was

    def __init__(self):
        super().__init__()
        self.capabilities: frozenset[Capability] = frozenset()
        self.model_name = type(self).__name__
        self.source: dict = {}  # where the weights came from: path, sha256, format

    def setup(self):
        make_hook_points(self)
        super().setup()
        self.make_tl_config()
        self.register_forward_pre_hook(fire_tokens, with_kwargs=True)

    def describe(self) -> str:
        return f"{self.family} family"

    def hook_table(self) -> list[HookDoc]:
        """Every hook of this model with its shape and meaning, ``{l}`` for the layer, in forward order
        (``interp.hooks``)."""
        if "_hook_table" not in self.__dict__:  # the hook points are fixed once setup has run
            self.__dict__["_hook_table"] = hook_table(self)
        return self.__dict__["_hook_table"]

    def hook_doc(self, name: str) -> HookDoc:
        """The documentation entry of one hook name (e.g. ``blocks.3.attn.hook_pattern``)."""
        doc = doc_of(self.hook_table(), name)
        if doc is None:
            raise KeyError(f"{self.model_name} documents no hook {name!r}")
        return doc

    def token_axes(self, name: str, ndim: int | None = None) -> tuple[int, ...]:
        """Axes of hook ``name`` that run over tokens, from its documented shape."""
        return self.hook_doc(name).token_axes(ndim)

    def undocumented_hooks(self) -> list[str]:
        """Hook points of this instance that no declaration describes (should be empty)."""
        table = self.hook_table()
        return [n for n in self.hook_dict if doc_of(table, n) is None]

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
            raise InputError(f"token id {hi if hi >= self.d_vocab else lo} is outside the vocabulary "
                             f"[0, {self.d_vocab})")
        return tokens.long().to(self.device)

    @torch.no_grad()
    def generate(self, tokens=None, max_new_tokens: int = 10, stop_ids=(), **tl_options):
        """Greedy continuation of one sequence of token ids: the new ids (a list), ending after a token in ``stop_ids``
        (kept) or at ``max_new_tokens`` or the context limit. Families with ``supports_kv_cache`` run one token per
        step; the others re-run the whole sequence.

        A text, ``input=`` or any of TransformerLens' options (``do_sample``, ``return_type``, ``stop_at_eos``, ...)
        runs TransformerLens' ``generate`` instead (``interp.tl_generate``): a text gives a text, a list of texts a
        list, tokens give ``[batch, pos + new]`` tokens, token embeddings (a float ``[batch, pos, d_model]``) give
        embeddings, and it samples unless ``do_sample=False``."""
        unknown = set(tl_options) - set(TL_GENERATE)
        if unknown:
            raise TypeError(f"generate got unknown options {sorted(unknown)} (TransformerLens' are "
                            f"{sorted(TL_GENERATE)})")
        if "input" in tl_options and tokens is not None:
            raise TypeError("generate got both a first argument and input=; pass one")
        text = isinstance(tokens, str) or (isinstance(tokens, list) and tokens and isinstance(tokens[0], str))
        embeds = isinstance(tokens, Tensor) and tokens.is_floating_point()
        if text or embeds or tl_options:
            if stop_ids:
                raise TypeError("stop_ids is poslens' option; with TransformerLens' options pass eos_token_id")
            given = tl_options.pop("input", tokens)
            return self.tl_generate("" if given is None else given, max_new_tokens, **tl_options)
        if tokens is None:
            raise TypeError("generate needs tokens (or TransformerLens' input=)")
        seq = self.check_tokens(tokens)
        if seq.shape[0] != 1:
            raise InputError(f"generate takes one sequence, got a batch of {seq.shape[0]}; use generate_batch")
        return self.generate_batch(seq, max_new_tokens, stop_ids)[0]

    def _decoding_batch(self, prompts, max_new_tokens: int, budgets):
        """Checked prompts, per-row budgets, empty outputs and the rows that decode at all (budget > 0)."""
        require(self, Capability.CAUSAL_LM, "generate", kind="method")
        if isinstance(prompts, (list, tuple)) and len({len(p) for p in prompts}) > 1:
            raise InputError("generate_batch takes prompts of one length, got "
                             f"lengths {sorted({len(p) for p in prompts})}")
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

    # -- the output head apart from the layers below it: losses without the logits of every position -----------------
    head_hooks: tuple[str, ...] = ("hook_final",)  # the hooks whose outputs the output head reads, in firing order

    @property
    def has_output_head(self) -> bool:
        """Whether ``forward`` ends in an output head (next-token or masked-token logits)."""
        return bool({Capability.CAUSAL_LM, Capability.MASKED_LM} & self.capabilities)

    def head_logits(self, hidden: Tensor) -> Tensor:
        """Logits ``[..., d_vocab]`` of rows of ``final_hidden``: the output head alone, exactly as ``forward`` applies
        it."""
        raise CapabilityError(f"{self.model_name} has no output head to unembed with")

    @property
    def head_separable(self) -> bool:
        """Whether the head can run apart from the layers below it (``head_logits`` written, ``head_hooks`` present;
        the hf family sets it from its loader's check): a plug-in family that declares neither still gets its losses,
        from its full logits."""
        written = type(self).head_logits is not PosLensModel.head_logits
        return written and all(h in self.mod_dict for h in self.head_hooks)

    def head_reads(self, captured: dict[str, Tensor]) -> Tensor:
        """What the output head reads, from the outputs of ``head_hooks``."""
        return captured[self.head_hooks[-1]]

    def final_hidden(self, tokens, **kwargs) -> Tensor:
        """``forward`` stopped before its output head: the rows ``head_logits`` turns into logits, ``[batch, pos, d]``
        (a model without a head: what ``forward`` returns). Hooks below the head fire as in ``forward``; no logits are
        built."""
        if not self.has_output_head:
            return self(tokens, **kwargs)
        if not self.head_separable:
            raise CapabilityError(f"{self.model_name}: its family does not run the output head apart (no "
                                  f"head_logits, or no {', '.join(self.head_hooks)} hook): final_hidden needs both")
        got: dict[str, Tensor] = {}

        def keep(x, hook):
            got[hook.name] = x
            if len(got) == len(self.head_hooks):
                raise attention.StopForward(hook.name)

        with self.hooks(fwd_hooks=[(name, keep) for name in self.head_hooks]):
            try:
                self(tokens, **kwargs)
            except attention.StopForward:
                pass
        if len(got) < len(self.head_hooks):
            raise RuntimeError(f"{self.model_name}: the forward pass never "
                               f"reached {sorted(set(self.head_hooks) - set(got))}")
        return self.head_reads(got)

    def logit_chunks(self, hidden: Tensor, chunk: int | None = None):
        """``(start, float32 logits of rows start..start+n-1)`` of ``hidden`` ``[rows, d]``, ``chunk`` rows at a time
        (None: as many as ``interp.runtime.memory.loss_chunk`` lets free memory hold); one chunk's logits exist at a
        time."""
        from interp.runtime import memory

        rows = hidden.shape[0]
        chunk = chunk or memory.loss_chunk(self.d_vocab, self.device)
        for start in range(0, rows, chunk):
            yield start, self.head_logits(hidden[start:start + chunk]).float()

    def losses_from_hidden(self, hidden: Tensor, targets: Tensor, chunk: int | None = None) -> Tensor:
        """Cross-entropy (nats, float32) of ``targets`` ``[batch, pos]`` under the logits of ``hidden``
        ``[batch, pos, d]``, row chunk by row chunk (``logit_chunks``)."""
        targets = torch.as_tensor(targets, device=hidden.device).long()
        if tuple(targets.shape) != tuple(hidden.shape[:-1]):
            raise InputError(f"targets of shape {tuple(targets.shape)} for hidden states {tuple(hidden.shape)}: one "
                             f"target per position, [{', '.join(map(str, hidden.shape[:-1]))}]")
        from interp.runtime import memory
        from interp.runtime.progress import progress

        flat, gold = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
        out = torch.empty(gold.shape, dtype=torch.float32, device=hidden.device)
        chunk = chunk or memory.loss_chunk(self.d_vocab, self.device)
        starts = range(0, flat.shape[0], chunk)
        if flat.shape[0] >= LONG_RUN:
            starts = progress(starts, f"{self.model_name} loss chunks")
        for start in starts:  # nothing holds a chunk's logits once its losses are taken
            logits = self.head_logits(flat[start:start + chunk]).float()
            out[start:start + logits.shape[0]] = torch.nn.functional.cross_entropy(
                logits, gold[start:start + logits.shape[0]], reduction="none")
            del logits
        return out.reshape(targets.shape)

    def token_losses(self, tokens, targets=None, *, chunk: int | None = None) -> Tensor:
        """Per-token cross-entropy (nats, float32) without the logits of every position: the forward pass up to the
        output head (``final_hidden``), then the head over ``chunk`` positions at a time. ``targets=None``: the next
        tokens, ``[batch, pos - 1]`` for positions 0..pos-2; else one target id per position, ``[batch, pos]``."""
        tokens = self.check_tokens(tokens)
        if targets is not None:
            targets = torch.as_tensor(targets, device=tokens.device)
            if targets.dim() == 1:
                targets = targets[None]
        from interp.runtime import progress

        if not self.head_separable:
            logits = self(tokens).float()
            if targets is None:
                logits, targets = logits[:, :-1], tokens[:, 1:]
            return torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets.long(), reduction="none")
        with progress.layers(self, f"{self.model_name} layers", enabled=tokens.shape[1] >= LONG_RUN):
            hidden = self.final_hidden(tokens)
        if targets is None:
            hidden, targets = hidden[:, :-1], tokens[:, 1:]
        return self.losses_from_hidden(hidden, targets, chunk)

    def require_tokenizer(self, analysis: str):
        """The tokenizer, or a clear error for models loaded without one."""
        if getattr(self, "tokenizer", None) is None:
            raise CapabilityError(f"analysis '{analysis}' reads text, and {self.model_name} was loaded without a "
                                  "tokenizer (put the tokenizer files beside the checkpoint, attach one: "
                                  "model.tokenizer = interp.load_tokenizer(DIR_OR_MODEL), or pass --tokenizer "
                                  "DIR_OR_MODEL)")
        return self.tokenizer


LONG_RUN = 2048  # positions from which a pass shows its progress per layer and per loss chunk


