"""TransformerLens' modules and helpers on a poslens model, beside ``interp.tl``'s surface: ``model.embed``
(``W_E``), ``model.unembed`` (``W_U``, ``b_U``; called on a residual it gives the logits), ``model.pos_embed``
(``W_pos``, where positions are a learned table), the MLP's neuron weights (``W_in``, ``W_gate``, ``W_out``, ``b_in``,
``b_out``, per block and stacked over layers), ``accumulated_bias``, ``get_token_position``, ``to_single_str_token``,
``tokens_to_residual_directions`` and weight processing (``process_weights_``, ``interp.weight_processing``).

The modules are views of the family's own weights (built on each access, registered nowhere): the checkpoint keys and
the module tree stay the family's.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch
from torch import Tensor, nn


def as_linear(module):
    """``module`` as an ``nn.Linear``-like object (``weight [out, in]``, ``bias``): itself, a transposed view of a
    transformers ``Conv1D`` (GPT-2), or None."""
    if isinstance(module, nn.Linear) or isinstance(module, SimpleNamespace):
        return module
    if type(module).__name__ == "Conv1D":
        return SimpleNamespace(weight=module.weight.T, bias=module.bias)
    return None


def _zeros(n: int, like: Tensor) -> Tensor:
    return torch.zeros(n, dtype=like.dtype, device=like.device)


class MLPWeights:
    """TransformerLens' neuron weights on a block's ``mlp``: ``W_in`` ``[d_model, d_mlp]`` (the up projection of a gated
    MLP), ``W_gate`` ``[d_model, d_mlp]`` (gated MLPs), ``W_out`` ``[d_mlp, d_model]``, ``b_in``, ``b_out``, read from
    ``tl_mlp_parts()``: ``in``, ``out`` and ``gate`` projections (``gate_in``: one fused ``[gate | in]`` projection)."""

    def tl_mlp_parts(self) -> dict:
        parts = {k: as_linear(m) for k, m in (self.__dict__.get("tl_parts") or {}).items()}
        if "gate_in" in parts:
            fused = parts.pop("gate_in")
            gate, up = fused.weight.chunk(2, dim=0)  # views: writing into them writes into the fused projection
            b_gate, b_up = fused.bias.chunk(2, dim=0) if fused.bias is not None else (None, None)
            parts["gate"] = SimpleNamespace(weight=gate, bias=b_gate)
            parts["in"] = SimpleNamespace(weight=up, bias=b_up)
        return {k: v for k, v in parts.items() if v is not None}

    def _part(self, key: str):
        part = self.tl_mlp_parts().get(key)
        if part is None:
            raise AttributeError(f"{type(self).__name__}: this MLP has no {key!r} projection poslens can read as a "
                                 f"linear map (no {'W_gate' if key == 'gate' else 'neuron weights'})")
        return part

    @property
    def W_in(self) -> Tensor:
        return self._part("in").weight.T

    @property
    def W_gate(self) -> Tensor:
        return self._part("gate").weight.T

    @property
    def W_out(self) -> Tensor:
        return self._part("out").weight.T

    @property
    def b_in(self) -> Tensor:
        part = self._part("in")
        return part.bias if part.bias is not None else _zeros(part.weight.shape[0], part.weight)

    @property
    def b_out(self) -> Tensor:
        part = self._part("out")
        return part.bias if part.bias is not None else _zeros(part.weight.shape[0], part.weight)


class Embed(nn.Module):
    """TransformerLens' ``model.embed``: ``W_E`` ``[d_vocab, d_model]``; ``embed(tokens)`` what the model's
    token-embedding module gives them (``hook_embed``'s input: W_E's rows, times the scale a module such as Gemma's
    applies), the token embeddings ``generate`` takes as input."""

    def __init__(self, model):
        super().__init__()
        self.__dict__["model"] = model

    @property
    def W_E(self) -> Tensor:
        return self.model.W_E

    def forward(self, tokens: Tensor) -> Tensor:
        from interp.tl_batch import token_embeddings

        return token_embeddings(self.model, torch.as_tensor(tokens, device=self.W_E.device))


class PosEmbed(nn.Module):
    """TransformerLens' ``model.pos_embed``: ``W_pos`` ``[n_ctx, d_model]``; ``pos_embed(tokens, past_kv_pos_offset=0,
    attention_mask=None)`` the rows of positions ``offset..offset+pos-1``, ``[batch, pos, d_model]``; with
    ``attention_mask`` (``[batch, past + pos]``) each row's real tokens counted from 0 and zeros at its padding, as
    TransformerLens' ``PosEmbed``."""

    def __init__(self, model):
        super().__init__()
        self.__dict__["model"] = model

    @property
    def W_pos(self) -> Tensor:
        return self.model.W_pos

    def forward(self, tokens: Tensor, past_kv_pos_offset: int = 0, attention_mask: Tensor | None = None) -> Tensor:
        tokens = torch.as_tensor(tokens)
        tokens = tokens[None] if tokens.dim() == 1 else tokens
        b, n = tokens.shape
        if attention_mask is None:
            return self.W_pos[past_kv_pos_offset: past_kv_pos_offset + n][None].expand(b, -1, -1)
        from interp.padding import check_mask, counted

        real = check_mask(attention_mask, tokens, cached=past_kv_pos_offset).to(self.W_pos.device)
        positions = counted(real)[:, past_kv_pos_offset:]
        rows = self.W_pos[positions]
        return torch.where(real[:, past_kv_pos_offset:, None], rows, torch.zeros((), dtype=rows.dtype,
                                                                                  device=rows.device))


class Unembed(nn.Module):
    """TransformerLens' ``model.unembed``: ``W_U`` ``[d_model, d_vocab]``, ``b_U``; ``unembed(residual)`` the logits of
    final-normed rows, exactly as ``forward`` applies its output head (``model.head_logits``)."""

    def __init__(self, model):
        super().__init__()
        self.__dict__["model"] = model

    @property
    def W_U(self) -> Tensor:
        return self.model.W_U

    @property
    def b_U(self) -> Tensor:
        return self.model.b_U

    def forward(self, residual: Tensor) -> Tensor:
        return self.model.head_logits(residual)


def _read(get):
    """``get()``, or None where the model lacks it (an AttributeError naming why)."""
    try:
        return get()
    except (AttributeError, NotImplementedError):
        return None


def _attn_params(attn, prefix: str, n_heads: int) -> dict:
    """An attention's per-head weights under TransformerLens' names, grouped keys and values repeated per head."""
    out = {}
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
        value = _read(lambda name=name: getattr(attn, name)) if attn is not None else None
        if value is not None and name in ("W_K", "W_V", "b_K", "b_V") and 0 < value.shape[0] < n_heads:
            value = value.repeat_interleave(n_heads // value.shape[0], dim=0)
        out[f"{prefix}.{name}"] = value
    return out


def _norm_params(norm, prefix: str) -> dict:
    """A norm's scale (``1 + weight`` where the family stores an offset) and bias as ``{prefix}.w`` / ``.b``."""
    if norm is None:
        return {}
    weight, bias = getattr(norm.module, "weight", None), getattr(norm.module, "bias", None)
    out = {f"{prefix}.b": bias}
    if weight is not None:
        out[f"{prefix}.w"] = 1 + weight if norm.offset else weight
    return out


def warn_unfolded(model) -> None:
    """Once per model: a warning that its final norm's weight is not folded into ``W_U`` (a logit lens written for
    TransformerLens would silently be off)."""
    final = getattr(model, "ln_final", None)
    if final is None or model.__dict__.get("_warned_unfolded") or not hasattr(final, "w"):
        return
    if bool((final.w == 1).all()) and bool((final.b == 0).all()):
        return
    model.__dict__["_warned_unfolded"] = True
    warnings.warn(f"{model.model_name}: apply_ln_to_stack at the final layer divides by the norm's scale only; this "
                  "model's final norm weight is not folded into W_U (poslens loads weights unprocessed), so "
                  "`... @ model.W_U` is not its logits: multiply by model.ln_final.w (add model.ln_final.b) first, or "
                  "load with fold_ln=True / call model.process_weights_()", stacklevel=3)


def fire_tokens(model, args, kwargs):
    """A forward pre-hook: the token ids pass ``hook_tokens`` (``[batch, pos]``) while it is hooked, so an edit changes
    what the model reads. A pass from a given residual or embeddings reads no ids: the hook stays silent; a text fires
    it once tokenized (``run_forward``)."""
    from interp import layer_range
    from interp.tl_batch import is_text

    r = layer_range.current(model)
    if not args or not model.hook_tokens.has_hooks() or is_text(args[0]) or (
            r is not None and (r.residual is not None or r.embeds is not None)):
        return None
    tokens = model.check_tokens(args[0])
    return (model.hook_tokens(tokens), *args[1:]), kwargs


fire_tokens.poslens_own = True  # part of every model (interp.base), not a hook a user attached: provenance skips it


def _stop_layer(model, layer, option: str = "stop_at_layer") -> int:
    n = model.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer <= n:
        raise ValueError(f"{option}={layer!r} is not a layer index in -{n}..{n}")
    return layer % n if layer < 0 else layer


class TLModules:
    """Mixed into ``PosLensModel``: the modules, neuron weights and helpers above, and ``start_at_layer`` /
    ``stop_at_layer`` in ``model(...)``."""

    tl_blocks_read_tokens = False  # whether blocks read more than the residual (increments' or CLS positions)
    tl_layer_range = False  # whether the family's forward reads interp.layer_range (tl_embedded, tl_blocks, tl_final)

    def __getattr__(self, name):
        """``nn.Module``'s lookup, keeping the reason a property gave for a missing attribute (``_absent``): Python
        would otherwise replace it with a bare "object has no attribute"."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            why = self.__dict__.pop("_absent_why", None)
            if why is None:
                raise
            raise AttributeError(why) from None

    def _absent(self, why: str) -> AttributeError:
        self.__dict__["_absent_why"] = why
        return AttributeError(why)

    def __call__(self, input, *args, start_at_layer: int | None = None, stop_at_layer: int | None = None,
                 tokens=None, shortformer_pos_embed=None, **kwargs):
        """TransformerLens' ``start_at_layer`` / ``stop_at_layer``: only blocks ``start..stop-1`` run.
        ``stop_at_layer=k`` returns the residual entering block k (``[batch, pos, d_model]``; ``n_layers``: leaving the
        last block, before the final norm), whatever ``return_type`` says. ``start_at_layer=s`` takes ``input`` as the
        residual entering block s: the embeddings and blocks before s do not run and their hooks do not fire;
        ``tokens=`` (the ids it stands for: the loss's targets, and what a family's blocks read besides the residual)
        and ``attention_mask=`` (padding) serve the blocks that run. ``shortformer_pos_embed`` is TransformerLens'
        argument for shortformer positions, which no poslens family has: only None is taken."""
        if shortformer_pos_embed is not None:
            raise ValueError(f"shortformer_pos_embed: {self.model_name} ({self.family} family) has no shortformer "
                             "positions (input_to_embed returns None for it)")
        if start_at_layer is None and stop_at_layer is None:
            if tokens is not None:
                raise TypeError("tokens= goes with start_at_layer (the tokens the residual stands for)")
            return super().__call__(input, *args, **kwargs)
        from interp import layer_range

        if not self.tl_layer_range:
            from interp.capabilities import CapabilityError

            raise CapabilityError(f"{self.model_name} ({self.family} family) cannot start or stop at a layer: its "
                                  "forward does not read interp.layer_range (tl_embedded, tl_blocks, tl_final; then "
                                  "tl_layer_range = True), so it would run every block regardless")
        stop = _stop_layer(self, stop_at_layer, "stop_at_layer") if stop_at_layer is not None else None
        start, residual = 0, None
        if start_at_layer is not None:
            start = _stop_layer(self, start_at_layer, "start_at_layer")
            if stop is not None and stop < start:
                raise ValueError(f"stop_at_layer={stop_at_layer} comes before start_at_layer={start_at_layer}")
            residual = self._start_residual(input)
            input = self._start_tokens(residual, tokens, kwargs.get("return_type", "logits"))
        elif tokens is not None:
            raise TypeError("tokens= goes with start_at_layer (the tokens the residual stands for)")
        with layer_range.running(self, start, stop, residual):
            try:
                return super().__call__(input, *args, **kwargs)
            except layer_range.Stopped as stopped:
                return stopped.residual

    def _start_residual(self, input) -> Tensor:
        residual = torch.as_tensor(input)
        if residual.dim() != 3 or residual.shape[-1] != self.d_model or not residual.is_floating_point():
            raise ValueError(f"with start_at_layer the input is a residual [batch, pos, {self.d_model}] of floats, got "
                             f"shape {tuple(residual.shape)} ({residual.dtype})")
        first = next(self.parameters())
        return residual.to(first.device, first.dtype)

    def tl_filler_id(self) -> int:
        """A token id that stands for positions whose ids a pass does not read (a run from a residual or from
        embeddings): not the pad id, which some families refuse."""
        pad = getattr(self.cfg, "pad_token_id", None)
        return 1 if pad == 0 else 0

    def _start_tokens(self, residual: Tensor, tokens, return_type) -> Tensor:
        """The tokens a run from ``start_at_layer`` hands the family's forward (positions and padding come from their
        shape and ``attention_mask``; only families whose blocks read the ids need them)."""
        if tokens is not None:
            tokens = torch.as_tensor(tokens, device=self.device)  # checked by the forward (padding known there)
            tokens = tokens[None] if tokens.dim() == 1 else tokens
            if tuple(tokens.shape) != tuple(residual.shape[:2]):
                raise ValueError(f"tokens of shape {tuple(tokens.shape)} for a residual of shape "
                                 f"{tuple(residual.shape)}")
            return tokens
        if self.tl_blocks_read_tokens:
            raise ValueError(f"{self.model_name} ({self.family} family): its blocks read the tokens besides the "
                             "residual, so start_at_layer needs tokens=[batch, pos] ids")
        if return_type not in ("logits", None):
            raise ValueError(f"return_type={return_type!r} with start_at_layer needs tokens= (the loss's targets)")
        return torch.full(residual.shape[:2], self.tl_filler_id(), dtype=torch.long, device=self.device)

    # -- what a family's forward reads of a layer range (interp.layer_range) ------------------------------------------
    def tl_token_rows(self, tokens: Tensor, table) -> Tensor:
        """``table(tokens)``, or the token embeddings a generation from embeddings was given."""
        from interp import layer_range

        r = layer_range.current(self)
        return table(tokens) if r is None or r.embeds is None else r.embeds

    def tl_started(self) -> bool:
        """Whether this pass starts from a given residual (``start_at_layer``)."""
        from interp import layer_range

        r = layer_range.current(self)
        return r is not None and r.residual is not None

    def tl_embedded(self, embed) -> Tensor:
        """``embed()`` (the residual entering block 0), or the residual ``start_at_layer`` was given."""
        from interp import layer_range

        r = layer_range.current(self)
        return embed() if r is None or r.residual is None else r.residual

    def tl_blocks(self) -> list:
        """The blocks this pass runs, in order."""
        from interp import layer_range

        r = layer_range.current(self)
        return list(self.blocks) if r is None else list(self.blocks)[r.start:r.stop]

    def tl_final(self, residual: Tensor) -> Tensor:
        """The residual after the blocks; a pass with ``stop_at_layer`` ends here (``interp.layer_range.Stopped``)."""
        from interp import layer_range

        r = layer_range.current(self)
        if r is not None and r.stop is not None:
            raise layer_range.Stopped(residual)
        return residual

    def input_to_embed(self, input, prepend_bos=None, padding_side=None, attention_mask=None, past_kv_cache=None):
        """TransformerLens' ``input_to_embed``: ``(residual entering block 0, tokens, shortformer_pos_embed (None: no
        poslens family has shortformer positions), attention_mask)``; feed the residual to ``model(residual,
        start_at_layer=0, tokens=tokens, attention_mask=attention_mask)``. A text or list of texts is tokenized as
        ``to_tokens`` does; the mask is built where TransformerLens builds it: from the texts' padding, and for tokens
        with the tokenizer's ``padding_side`` "left" read off their leading pad tokens (``interp.tl_batch``), else
        None."""
        from interp.tl_batch import input_tokens_and_mask

        if past_kv_cache is not None:
            raise ValueError("input_to_embed: past_kv_cache is TransformerLens' cache object; poslens' KV cache is "
                             "interp.attention.decoding")
        tokens, mask = input_tokens_and_mask(self, input, prepend_bos, padding_side, attention_mask)
        residual = self(tokens, stop_at_layer=0, attention_mask=mask)
        return residual, tokens, None, mask

    def _own_module(self, name: str):
        """A module the family registered under a TransformerLens name itself (a plug-in's ``self.embed``)."""
        return self.__dict__["_modules"].get(name)

    @property
    def embed(self) -> Embed:
        own = self._own_module("embed")
        return own if own is not None else Embed(self)

    @property
    def unembed(self) -> Unembed:
        own = self._own_module("unembed")
        return own if own is not None else Unembed(self)

    @property
    def pos_embed(self) -> PosEmbed:
        if self._own_module("pos_embed") is not None:
            return self._own_module("pos_embed")
        if "hook_pos_embed" not in self.hook_dict or not hasattr(self, "ap_embedding_matrix"):
            raise self._absent(self._no_table("pos_embed"))
        return PosEmbed(self)

    def _no_table(self, name: str) -> str:
        return f"{self.model_name} ({self.family} family) has no {name}: no learned position table added to the " \
               "embeddings"

    @property
    def b_U(self) -> Tensor:
        """The output head's bias (``lm_head.bias``, which folding a LayerNorm's bias gives a head without one), else
        zeros."""
        bias = getattr(self.__dict__["_modules"].get("lm_head"), "bias", None)
        return bias if isinstance(bias, torch.Tensor) else super().b_U

    @property
    def W_pos(self) -> Tensor:
        """The learned absolute-position table ``[n_ctx, d_model]`` added to the embeddings (``hook_pos_embed``)."""
        if "hook_pos_embed" not in self.hook_dict or not hasattr(self, "ap_embedding_matrix"):
            raise self._absent(self._no_table("W_pos"))
        return self.ap_embedding_matrix()

    # -- neuron weights, stacked over layers --------------------------------------------------------------------------
    def _mlp_stack(self, name: str) -> Tensor:
        mlps = [block._modules.get("mlp") for block in self.blocks]
        if not all(isinstance(m, MLPWeights) for m in mlps):
            raise self._absent(f"{self.model_name} ({self.family} family) has no {name}: its blocks' MLPs are not "
                                 "readable as TransformerLens' neuron weights")
        return torch.stack([getattr(m, name) for m in mlps])

    W_in = property(lambda self: self._mlp_stack("W_in"), doc="``[layer, d_model, d_mlp]``")
    W_gate = property(lambda self: self._mlp_stack("W_gate"), doc="``[layer, d_model, d_mlp]`` (gated MLPs)")
    W_out = property(lambda self: self._mlp_stack("W_out"), doc="``[layer, d_mlp, d_model]``")
    b_in = property(lambda self: self._mlp_stack("b_in"), doc="``[layer, d_mlp]``")
    b_out = property(lambda self: self._mlp_stack("b_out"), doc="``[layer, d_model]``")

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True) -> Tensor:
        """The sum of the biases written into the residual before ``layer`` (attention ``b_O`` and, unless
        ``include_mlp_biases`` is False, MLP ``b_out``), plus layer ``layer``'s ``b_O`` with ``mlp_input``."""
        if not 0 <= layer <= self.n_layers or (mlp_input and layer == self.n_layers):
            raise ValueError(f"layer={layer} (mlp_input={mlp_input}) is outside 0..{self.n_layers - int(mlp_input)}")
        out = torch.zeros(self.d_model, device=self.device)
        for i in range(layer + int(mlp_input)):
            block = self.blocks[i]
            out = out + block.attn.b_O.float().to(out.device)
            mlp = block._modules.get("mlp")
            if include_mlp_biases and i < layer and isinstance(mlp, MLPWeights) and "out" in mlp.tl_mlp_parts():
                out = out + mlp.b_out.float().to(out.device)
        return out

    # -- tokens --------------------------------------------------------------------------------------------------------
    def get_token_position(self, single_token, input, mode: str = "first", prepend_bos=None, padding_side=None) -> int:
        """The position of ``single_token`` (a string of one token, or an id) in ``input`` (a text, tokenized as
        ``to_tokens`` does, or ``[pos]`` / ``[1, pos]`` tokens): its first occurrence, or its last with
        ``mode="last"``."""
        if mode not in ("first", "last"):
            raise ValueError(f"mode={mode!r} is not 'first' or 'last'")
        tokens = (self.to_tokens(input, prepend_bos=prepend_bos, padding_side=padding_side) if isinstance(input, str)
                  else torch.as_tensor(input))
        if tokens.dim() == 2:
            if tokens.shape[0] != 1:
                raise ValueError(f"get_token_position takes [pos] or [1, pos] tokens, got shape {tuple(tokens.shape)}")
            tokens = tokens[0]
        token = self.to_single_token(single_token) if isinstance(single_token, str) else int(single_token)
        where = (tokens == token).nonzero().flatten().tolist()
        if not where:
            raise ValueError(f"token {token} ({self.to_single_str_token(token)!r}) does not occur in the input")
        return where[0] if mode == "first" else where[-1]

    def to_single_str_token(self, int_token: int) -> str:
        """The text of one token id."""
        if isinstance(int_token, bool) or not isinstance(int_token, int):
            raise TypeError(f"to_single_str_token takes one int token id, got {type(int_token).__name__}")
        return self.to_str_tokens(torch.tensor([int_token]))[0]

    def tokens_to_residual_directions(self, tokens) -> Tensor:
        """The columns of ``W_U`` for ``tokens`` (a string of one token, an id, or a tensor of ids): ``[d_model]`` for
        one token (a one-element tensor too, as TransformerLens), else the tokens' shape plus ``d_model``. On an
        unprocessed model these are not the directions the logits read from the residual: the final norm's weight sits
        between them (``process_weights_`` folds it in)."""
        if isinstance(tokens, str):
            tokens = self.to_single_token(tokens)
        tokens = torch.as_tensor(tokens, device=self.W_U.device)
        tokens = tokens.reshape(()) if tokens.numel() == 1 else tokens  # TransformerLens: one token, [d_model]
        return self.W_U[:, tokens].movedim(0, -1)

    # -- TransformerLens' parameter dictionary -------------------------------------------------------------------------
    def tl_parameters(self) -> dict[str, Tensor]:
        """TransformerLens' parameter dictionary, which its tools read (``SVDInterpreter``): ``embed.W_E``,
        ``blocks.{l}.attn.W_Q`` ... ``b_O`` (all ``n_heads``: grouped keys and values repeated per query head, as
        TransformerLens' ``W_K`` / ``W_V``), ``blocks.{l}.mlp.W_in`` / ``W_gate`` / ``W_out`` / ``b_in`` / ``b_out``,
        ``blocks.{l}.ln1.w`` / ``ln2.w`` (the scale the norm multiplies by) and ``.b``, ``ln_final.w`` / ``.b``,
        ``unembed.W_U`` / ``b_U``: views of the weights in use; what a family lacks is left out."""
        params = {"embed.W_E": _read(lambda: self.embed.W_E), "unembed.W_U": _read(lambda: self.W_U),
                  "unembed.b_U": _read(lambda: self.b_U)}
        plan = _read(self.tl_weight_plan)
        norms = {} if plan is None else {"ln_final": plan.ln_final}
        for l, block in enumerate(self.blocks):
            if plan is not None and len(plan.layers) == len(self.blocks):
                norms.update({f"blocks.{l}.ln1": plan.layers[l].ln1, f"blocks.{l}.ln2": plan.layers[l].ln2})
            params.update(_attn_params(block._modules.get("attn"), f"blocks.{l}.attn", self.n_heads))
            mlp = block._modules.get("mlp")
            params.update({f"blocks.{l}.mlp.{w}": _read(lambda w=w: getattr(mlp, w))
                           for w in ("W_in", "W_gate", "W_out", "b_in", "b_out")})
        for prefix, norm in norms.items():
            params.update(_norm_params(norm, prefix))
        return {k: v for k, v in params.items() if v is not None}

    # -- weight processing ---------------------------------------------------------------------------------------------
    def tl_weight_plan(self):
        """Where this model's weights sit for ``process_weights_`` (``interp.weight_processing.WeightPlan``); a family
        that has not written one refuses every option."""
        from interp.weight_processing import WeightPlan

        why = f"the {self.family} family does not say where its norms and projections sit"
        return WeightPlan([], None, [], refuse={o: why for o in ("fold_ln", "center_writing_weights",
                                                                 "center_unembed", "fold_value_biases")})

    def process_weights_(self, fold_ln: bool = True, center_writing_weights: bool = True, center_unembed: bool = True,
                         fold_value_biases: bool = True, refactor_factored_attn_matrices: bool = False):
        """TransformerLens' weight processing in place, with its defaults (``interp.weight_processing``): the
        log-probabilities stay as they were; afterwards ``apply_ln_to_stack(resid, layer=-1) @ W_U + b_U`` is the
        model's logits. Returns the model."""
        from interp.weight_processing import process_weights

        process_weights(self, fold_ln=fold_ln, center_writing_weights=center_writing_weights,
                        center_unembed=center_unembed, fold_value_biases=fold_value_biases,
                        refactor_factored_attn_matrices=refactor_factored_attn_matrices)
        return self
