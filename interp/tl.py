"""The TransformerLens surface of every poslens model: what a script written for TransformerLens' ``HookedTransformer``
reaches for besides hooks.

- ``TLConfig``: ``model.cfg`` with TransformerLens' field names (``n_layers``, ``n_heads``, ``d_head``, ``d_model``,
  ``n_ctx``, ``d_vocab``, ``normalization_type``, ``default_prepend_bos``, ...) beside the family's own config, which
  it reads and writes through (``model.cfg.rope_theta``, ``model.cfg.to_dict()``) and which ``model.original_cfg`` is;
- ``Cache``: TransformerLens' own ``ActivationCache`` (``cache["pattern", 0]``, ``accumulated_resid``,
  ``decompose_resid``, ``stack_head_results``, ``apply_ln_to_stack``) with the dict methods poslens code uses, and a
  missing key named with its closest hooks;
- ``check_hook_names`` / ``check_filter``: a hook name or filter that matches no hook point is an error naming the
  closest ones (TransformerLens caches nothing, silently, or raises a bare ``KeyError``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable, Iterable
from types import SimpleNamespace

import torch
from transformer_lens.ActivationCache import ActivationCache

from interp.attention import hooked

TL_FIELDS = ("n_layers", "n_heads", "n_key_value_heads", "d_model", "d_head", "d_mlp", "d_vocab", "d_vocab_out",
             "n_ctx", "act_fn", "normalization_type", "positional_embedding_type", "attn_only", "final_rms",
             "gated_mlp", "parallel_attn_mlp", "original_architecture", "model_name", "device", "dtype",
             "default_prepend_bos", "tokenizer_prepends_bos", "use_attn_result", "use_split_qkv_input")


class TLConfig:
    """TransformerLens' config fields (``TL_FIELDS``) over the family's own config: any other attribute is the
    original's (read and written through), and so is a TL name the original already has (its value is the family's),
    so family code, checkpoints and ``dataclasses.asdict(model.cfg)`` see what they saw."""

    def __init__(self, original, **fields):
        object.__setattr__(self, "original", original)
        object.__setattr__(self, "tl", {k: fields.get(k) for k in TL_FIELDS})

    def _own(self, name: str) -> bool:
        return name in self.__dict__.get("tl", {}) and not hasattr(self.__dict__.get("original"), name)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("original", "tl"):
            raise AttributeError(name)
        if self._own(name):
            return self.__dict__["tl"][name]
        return getattr(self.__dict__["original"], name)

    def __setattr__(self, name, value):
        if self._own(name):
            self.tl[name] = value
        else:
            setattr(self.original, name, value)

    @property
    def __dataclass_fields__(self):  # dataclasses.asdict / fields / is_dataclass see the original's fields
        return self.original.__dataclass_fields__

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self) -> str:
        tl = ", ".join(f"{k}={v!r}" for k, v in self.tl.items() if v is not None)
        return f"TLConfig({tl}; original={self.original!r})"

    def to_dict(self) -> dict:
        """The original config's dict (what a checkpoint records)."""
        original = self.original
        if hasattr(original, "to_dict"):
            return original.to_dict()
        return dataclasses.asdict(original) if dataclasses.is_dataclass(original) else dict(vars(original))


def closest(name: str, names: Iterable[str], n: int = 5) -> list[str]:
    """The hook names nearest ``name`` (difflib), best first."""
    names = list(names)
    near = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    if not near:  # same leaf in another layer, or names sharing the leaf
        leaf = name.rsplit(".", 1)[-1]
        near = difflib.get_close_matches(leaf, sorted({m.rsplit(".", 1)[-1] for m in names}), n=n, cutoff=0.5)
    return near


class HookNameError(KeyError):
    """A hook name or filter that matches no hook point of the model; the message names the closest hooks it has
    (``interp.extract`` raises it too)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _unknown(model, name: str) -> HookNameError:
    near = closest(name, model.hook_dict)
    hint = f"; closest: {', '.join(near)}" if near else ""
    return HookNameError(f"{model.model_name} ({model.family} family) has no hook {name!r}{hint} "
                         "(model.hook_dict lists every hook; the README's hook table says which family has which)")


def check_hook_names(model, names: Iterable) -> None:
    """Every string of ``names`` is a hook point of ``model`` and every callable selects at least one."""
    for name in names:
        if isinstance(name, str):
            if name not in model.hook_dict:
                raise _unknown(model, name)
        elif callable(name):
            if not any(name(n) for n in model.hook_dict):
                raise HookNameError(f"{model.model_name}: the hook filter {_describe(name)} matches no hook point "
                                    "(model.hook_dict lists every hook)")
        else:
            raise TypeError(f"a hook is named by a string or a filter function, got {type(name).__name__}")


def check_filter(model, names_filter) -> None:
    """``run_with_cache``'s ``names_filter`` (None, a name, a list of names or a function) selects at least one hook,
    and every name it lists exists."""
    if names_filter is None:
        return
    if isinstance(names_filter, str):
        check_hook_names(model, [names_filter])
    elif isinstance(names_filter, (list, tuple, set, frozenset)):
        if not names_filter:
            raise HookNameError(f"{model.model_name}: names_filter is an empty list, so nothing would be cached")
        check_hook_names(model, list(names_filter))
    elif callable(names_filter):
        check_hook_names(model, [names_filter])
    else:
        raise TypeError(f"names_filter must be None, a hook name, a list of hook names or a function of the name; "
                        f"got {type(names_filter).__name__}")


def _describe(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class Cache(ActivationCache):
    """TransformerLens' ``ActivationCache`` over a poslens model, with the dict methods (``get``, ``in``, ``pop``,
    item assignment) code written for the plain dict it replaces uses."""

    def __getitem__(self, key) -> torch.Tensor:
        try:
            return super().__getitem__(key)
        except KeyError:
            import transformer_lens.utilities as utils

            name = key if isinstance(key, str) else None
            if name is None:
                try:
                    layer = key[1] + self.model.cfg.n_layers if len(key) > 1 and key[1] is not None and key[1] < 0 \
                        else (key[1] if len(key) > 1 else None)
                    name = utils.get_act_name(key[0], layer, *key[2:])
                except Exception:
                    name = repr(key)
            elif "." not in name and not name.startswith("hook_"):
                name = utils.get_act_name(name)
            near = closest(name, self.cache_dict)
            model_has = self.model is not None and name in getattr(self.model, "hook_dict", {})
            why = ("the model has this hook, but it was not cached (names_filter)" if model_has
                   else "the model has no such hook")
            raise HookNameError(f"{key!r} ({name}) is not in the cache: {why}"
                                + (f"; cached names closest: {', '.join(near)}" if near else "")) from None

    def __contains__(self, key) -> bool:
        return key in self.cache_dict

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self.cache_dict[key] = value

    def get(self, key, default=None):
        return self.cache_dict.get(key, default)

    def pop(self, key, *default):
        return self.cache_dict.pop(key, *default)

    def apply_ln_to_stack(self, residual_stack, layer=None, *args, **kwargs):
        """TransformerLens' ``apply_ln_to_stack``: each component divided by the norm's cached scale (centred first
        for LayerNorm): the norm without its weight and bias. ``apply_ln_to_stack(resid, layer=-1) @ model.W_U +
        model.b_U`` is the model's logits only on processed weights (``interp.load(..., fold_ln=True)`` or
        ``model.process_weights_()``, as TransformerLens' ``from_pretrained`` gives); poslens loads the checkpoint's
        weights unprocessed, and there the result must be multiplied by ``model.ln_final.w`` (and
        ``model.ln_final.b`` added) before ``W_U``. Warns once per model when its final norm is unfolded."""
        from interp.tl_modules import warn_unfolded

        if layer is None or layer == -1 or layer == self.model.cfg.n_layers:
            warn_unfolded(self.model)
        return super().apply_ln_to_stack(residual_stack, layer, *args, **kwargs)

    def __eq__(self, other) -> bool:
        other = other.cache_dict if isinstance(other, ActivationCache) else other
        return isinstance(other, dict) and other.keys() == self.cache_dict.keys() and all(
            torch.equal(other[k], v) for k, v in self.cache_dict.items())

    __hash__ = None


class AttentionWeights:
    """TransformerLens' per-head weight views on an attention module whose class says where its projections are
    (``tl_projections()``: the q, k, v and o ``nn.Linear``s, nn.Linear layout; None where the architecture has none).
    ``W_Q`` ``[head, d_model, d_head]``, ``W_K`` / ``W_V`` ``[kv_head, d_model, d_head]`` (grouped-query heads, as
    TransformerLens' bridge gives them), ``W_O`` ``[head, d_head, d_model]``, ``b_Q`` ``[head, d_head]``, ``b_K`` /
    ``b_V`` ``[kv_head, d_head]``, ``b_O`` ``[d_model]``: views of the weights in use (edit the modules, not these). A
    projection's weight may also be ``[head, d_head, d_model]`` (``per_head_split``: a fused qkv laid out head by
    head), its bias ``[head, d_head]``."""

    def tl_projections(self):
        raise NotImplementedError

    def _split(self, linear, heads: int) -> torch.Tensor:
        w = linear.weight  # [heads * d_head, d_model] or [heads, d_head, d_model]
        return w.reshape(heads, -1, w.shape[-1]).transpose(1, 2)

    def _heads(self) -> tuple[int, int]:
        q, k, _, _ = self.tl_projections()
        d = rows(q.weight) // self.tl_n_heads
        return self.tl_n_heads, rows(k.weight) // d

    @property
    def W_Q(self) -> torch.Tensor:
        return self._split(self.tl_projections()[0], self.tl_n_heads)

    @property
    def W_K(self) -> torch.Tensor:
        h, kv = self._heads()
        return self._split(self.tl_projections()[1], kv)

    @property
    def W_V(self) -> torch.Tensor:
        h, kv = self._heads()
        return self._split(self.tl_projections()[2], kv)

    @property
    def W_O(self) -> torch.Tensor:
        w = self.tl_projections()[3].weight  # [d_model, heads * d_head]
        return w.T.reshape(self.tl_n_heads, -1, w.shape[0])

    def _bias(self, i: int, heads: int) -> torch.Tensor:
        linear = self.tl_projections()[i]
        if linear.bias is None:
            return torch.zeros(rows(linear.weight), dtype=linear.weight.dtype,
                               device=linear.weight.device).view(heads, -1)
        return linear.bias.reshape(heads, -1)

    @property
    def b_Q(self) -> torch.Tensor:
        return self._bias(0, self.tl_n_heads)

    @property
    def b_K(self) -> torch.Tensor:
        h, kv = self._heads()
        return self._bias(1, kv)

    @property
    def b_V(self) -> torch.Tensor:
        h, kv = self._heads()
        return self._bias(2, kv)

    @property
    def b_O(self) -> torch.Tensor:
        o = self.tl_projections()[3]
        return o.bias if o.bias is not None else torch.zeros(o.weight.shape[0], dtype=o.weight.dtype,
                                                              device=o.weight.device)


def rows(weight: torch.Tensor) -> int:
    """A projection's output size: ``heads * d_head`` for a weight ``[out, in]`` or ``[head, d_head, in]``."""
    return weight.numel() // weight.shape[-1]


def per_head_split(weight: torch.Tensor, bias: torch.Tensor | None, n_heads: int) -> tuple:
    """q, k and v of a fused projection whose output rows are laid out ``[head, q|k|v, d_head]`` (GPT-NeoX, BLOOM,
    the encoder baselines), as Linear-like views sharing its storage: weights ``[head, d_head, in]``, biases
    ``[head, d_head]`` (writing into them writes into the fused projection)."""
    w = weight.view(n_heads, 3, -1, weight.shape[-1]).unbind(1)
    b = bias.view(n_heads, 3, -1).unbind(1) if bias is not None else (None,) * 3
    return tuple(SimpleNamespace(weight=w_, bias=b_) for w_, b_ in zip(w, b))


def result_heads(attn, z: torch.Tensor, out_proj) -> torch.Tensor:
    """The attention output from per-head outputs ``z`` ``[batch, pos, head, d_head]``: ``out_proj(z)`` unless
    ``attn.hook_result`` is hooked; then each head's contribution ``[batch, pos, head, d_model]`` passes that hook
    (TransformerLens' ``use_attn_result``, computed only when asked) and their sum plus the bias is the output, so its
    edits change the output."""
    hook = attn._modules.get("hook_result")
    if not hooked(hook):
        return out_proj(z.reshape(*z.shape[:2], -1))
    w = out_proj.weight.T.reshape(z.shape[2], z.shape[3], -1)  # [head, d_head, d_model]
    result = hook(torch.einsum("bphd,hdm->bphm", z, w.to(z.dtype)))
    out = result.sum(2)
    return out + out_proj.bias if out_proj.bias is not None else out


def normalize(hooks, norm, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)`` through TransformerLens' norm hooks (``hooks``: a ``NormHooks`` module), as TransformerLens fires
    them: ``hook_scale`` the divisor ``[batch, pos, 1]``, ``hook_normalized`` the normalised ``x / scale`` before the
    norm's weight (and bias). Only while one of them is hooked does the norm run step by step (edits change the
    output); otherwise it is ``norm(x)`` itself."""
    scale_hook, normalized_hook = hooks._modules.get("hook_scale"), hooks._modules.get("hook_normalized")
    if not (hooked(scale_hook) or hooked(normalized_hook)):
        return norm(x)
    if scale_hook is None:  # no one scale (DSTG's two streams): the output is hooked whole
        return normalized_hook(norm(x))
    dtype, xf = x.dtype, x.float()
    eps = norm.eps if getattr(norm, "eps", None) is not None else torch.finfo(xf.dtype).eps
    if isinstance(norm, torch.nn.LayerNorm):
        xf = xf - xf.mean(-1, keepdim=True)
    scale = scale_hook((xf.pow(2).mean(-1, keepdim=True) + eps).sqrt())
    normed = normalized_hook(xf / scale)
    weight, bias = getattr(norm, "weight", None), getattr(norm, "bias", None)
    if getattr(norm, "style", "") == "llama":  # interp.layers.RMSNorm: weight * normed cast back first
        return weight * normed.to(dtype)
    out = normed * weight.float() if weight is not None else normed
    out = out + bias.float() if bias is not None else out
    return out.to(dtype)

TL_HOOKS = (  # the TransformerLens hooks a script written for one model reads, in forward order: the README's matrix
    "hook_tokens", "hook_embed", "hook_pos_embed", "blocks.{l}.hook_resid_pre", "blocks.{l}.ln1.hook_scale",
    "blocks.{l}.ln1.hook_normalized", "blocks.{l}.attn.hook_q", "blocks.{l}.attn.hook_k", "blocks.{l}.attn.hook_v",
    "blocks.{l}.attn.hook_rot_q", "blocks.{l}.attn.hook_rot_k", "blocks.{l}.attn.hook_attn_scores",
    "blocks.{l}.attn.hook_pattern", "blocks.{l}.attn.hook_z", "blocks.{l}.attn.hook_result",
    "blocks.{l}.hook_attn_out", "blocks.{l}.hook_resid_mid", "blocks.{l}.ln2.hook_scale",
    "blocks.{l}.ln2.hook_normalized", "blocks.{l}.mlp.hook_pre", "blocks.{l}.mlp.hook_post",
    "blocks.{l}.hook_mlp_out", "blocks.{l}.hook_resid_post", "ln_final.hook_scale", "ln_final.hook_normalized",
)

TL_GENERATE = {"input", "stop_at_eos", "eos_token_id", "do_sample", "top_k", "top_p", "temperature", "freq_penalty",
               "repetition_penalty", "use_past_kv_cache", "prepend_bos", "padding_side", "return_type", "verbose",
               "attention_mask"}


class TLSurface:
    """TransformerLens' ``HookedTransformer`` methods on a ``PosLensModel`` (mixed into it): tokens and strings,
    ``return_type``, ``generate`` on text, ``run_with_cache`` giving a ``Cache``, weight views, hook-name checks."""

    # -- config -----------------------------------------------------------------------------------------------------
    def tl_config(self) -> dict:
        """The family's TransformerLens config fields beyond the shared ones (``d_head``, ``d_mlp``, ``act_fn``,
        ``normalization_type``, ``positional_embedding_type``, ...)."""
        return {}

    def make_tl_config(self) -> None:
        """``model.cfg`` becomes a ``TLConfig`` over the family's config (``model.original_cfg``)."""
        original = self.__dict__.get("cfg")
        if isinstance(original, TLConfig):
            return
        first = next(iter(self.parameters()), None)
        fields = dict(n_layers=self.n_layers, n_heads=self.n_heads, d_model=getattr(self, "d_model", None),
                      d_vocab=getattr(self, "d_vocab", None), d_vocab_out=getattr(self, "d_vocab", None),
                      n_ctx=getattr(self, "max_seq_len", None), model_name=self.model_name, attn_only=False,
                      parallel_attn_mlp=False, final_rms=False, use_attn_result=False, use_split_qkv_input=False,
                      default_prepend_bos=False, tokenizer_prepends_bos=False,
                      device=first.device if first is not None else None,
                      dtype=first.dtype if first is not None else None, original_architecture=type(self).__name__)
        if fields["d_model"] and self.n_heads:
            fields["d_head"] = fields["d_model"] // self.n_heads
        fields["n_key_value_heads"] = self.n_heads
        fields.update(self.tl_config())
        if fields.get("normalization_type") == "RMS":
            fields["final_rms"] = True
        self.__dict__["original_cfg"] = original
        self.__dict__["cfg"] = TLConfig(original, **fields)

    def set_tokenizer(self, tokenizer, default_padding_side: str = "right") -> None:
        """TransformerLens' ``set_tokenizer``: ``tokenizer`` (a transformers fast tokenizer, or a poslens one) becomes
        ``model.tokenizer``, padding on ``default_padding_side``."""
        from interp.tokenizers import HFTokenizer, SpanTokenizer

        if default_padding_side not in ("right", "left"):
            raise ValueError(f"default_padding_side={default_padding_side!r} is not 'right' or 'left'")
        if not isinstance(tokenizer, SpanTokenizer):
            tokenizer = HFTokenizer(tokenizer, getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        tokenizer.padding_side = default_padding_side
        self.tokenizer = tokenizer

    def set_use_attn_result(self, use_attn_result: bool) -> None:
        """TransformerLens' switch for ``blocks.{l}.attn.hook_result``, recorded in ``cfg.use_attn_result``: poslens
        computes and caches ``hook_result`` either way (a documented difference), so switching it changes no output."""
        self.cfg.use_attn_result = bool(use_attn_result)

    def tl_absent(self) -> dict[str, str]:
        """Why each hook of ``TL_HOOKS`` this model lacks is absent (the README's matrix): the shared reasons here, a
        family's own in its override."""
        reasons = {}
        if getattr(self, "rotation", None) is None or not any(
                f"blocks.{l}.attn.hook_rot_q" in self.hook_dict for l in range(self.n_layers)):
            reasons["blocks.{l}.attn.hook_rot_q"] = reasons["blocks.{l}.attn.hook_rot_k"] = "no rotary positions"
        if "hook_pos_embed" not in self.hook_dict:
            reasons["hook_pos_embed"] = "no learned position table added to the embeddings"
        return reasons

    # -- hook names: an unknown name or an empty filter is an error ---------------------------------------------------
    def _enable_hook(self, name, hook, dir="fwd"):
        check_hook_names(self, [name])
        return super()._enable_hook(name, hook, dir)

    def add_hook(self, name, hook, dir="fwd", is_permanent=False, level=None, prepend=False):
        check_hook_names(self, [name])
        return super().add_hook(name, hook, dir=dir, is_permanent=is_permanent, level=level, prepend=prepend)

    def get_caching_hooks(self, names_filter=None, *args, **kwargs):
        check_filter(self, names_filter)
        return super().get_caching_hooks(names_filter, *args, **kwargs)

    def run_with_hooks(self, *model_args, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True, clear_contexts=False,
                       **model_kwargs):
        """As TransformerLens' (hook names checked), through ``__call__``, so ``return_type`` and text work."""
        with self.hooks(list(fwd_hooks), list(bwd_hooks), reset_hooks_end, clear_contexts) as hooked_model:
            return hooked_model(*model_args, **model_kwargs)

    def run_with_cache(self, *model_args, names_filter=None, **kwargs):
        """As TransformerLens': the output and an ``interp.tl.Cache`` (TransformerLens' ``ActivationCache``)."""
        remove = kwargs.get("remove_batch_dim", False)
        out, cache = super().run_with_cache(*model_args, names_filter=names_filter, **kwargs)
        return out, Cache(cache, self, has_batch_dim=not remove)

    # -- text -------------------------------------------------------------------------------------------------------
    def _prepend(self, prepend_bos) -> bool:
        return bool(self.cfg.default_prepend_bos if prepend_bos is None else prepend_bos)

    def to_tokens(self, input, prepend_bos: bool | None = None, padding_side: str | None = None,
                  move_to_device: bool = True, truncate: bool = True) -> torch.Tensor:
        """``[batch, pos]`` token ids of a text (``[1, pos]``; ``""`` is ``[[bos]]``) or a list of texts, those of
        different lengths padded on ``padding_side`` (else ``model.tokenizer.padding_side``: "right") with the pad id,
        as TransformerLens does (``interp.tl_batch``; ``model(texts)`` builds their attention mask). The BOS token is
        prepended when ``prepend_bos`` says so, else as ``model.cfg.default_prepend_bos`` says: False for poslens
        models (TransformerLens' default is True)."""
        from interp.tl_batch import tokens_and_mask

        out = tokens_and_mask(self, input, prepend_bos, padding_side, truncate)[0]
        return out if move_to_device else out.cpu()

    def _decode_one(self, token: int) -> str:
        from interp.tokenizers import HFTokenizer

        if isinstance(self.tokenizer, HFTokenizer) or not hasattr(self.tokenizer, "token_strings"):
            return self.tokenizer.decode([int(token)], clean_up_tokenization_spaces=False)  # the token's text
        return self.tokenizer.token_strings([int(token)])[0]  # a byte, a word piece

    def to_string(self, tokens):
        """The text of ``[pos]`` tokens, or one text per row of ``[batch, pos]`` (special tokens included, as
        TransformerLens decodes them)."""
        tokens = torch.as_tensor(tokens)
        if tokens.dim() == 2:
            return [self.to_string(row) for row in tokens]
        if tokens.dim() > 2:
            raise ValueError(f"to_string takes [pos] or [batch, pos] tokens, got shape {tuple(tokens.shape)}")
        return self.tokenizer.decode(tokens.reshape(-1).tolist(), clean_up_tokenization_spaces=False)

    def to_str_tokens(self, input, prepend_bos: bool | None = None, padding_side: str | None = None):
        """Each token's text: of a text (tokenized as ``to_tokens`` does), a list of texts, or token ids."""
        if isinstance(input, list) and input and isinstance(input[0], str):
            return [self.to_str_tokens(t, prepend_bos, padding_side) for t in input]
        if isinstance(input, str):
            tokens = self.to_tokens(input, prepend_bos=prepend_bos)[0]
        else:
            tokens = torch.as_tensor(input).squeeze()
            tokens = tokens[None] if tokens.dim() == 0 else tokens
            if tokens.dim() != 1:
                raise ValueError(f"to_str_tokens takes one sequence of tokens, got shape {tuple(tokens.shape)}")
        return [self._decode_one(t) for t in tokens.tolist()]

    def to_single_token(self, string: str) -> int:
        """The id of a string that is exactly one token (no BOS)."""
        tokens = self.to_tokens(string, prepend_bos=False)[0]
        if tokens.numel() != 1:
            raise ValueError(f"{string!r} is {tokens.numel()} tokens, not one: {self.to_str_tokens(tokens)}")
        return int(tokens.item())

    # -- forward with TransformerLens' inputs and return_type ---------------------------------------------------------
    def __init_subclass__(cls, **kwargs):
        """A family's ``forward(tokens, ...)`` becomes TransformerLens' (``interp.tl_batch.run_forward``): a text, a
        list of texts (padded, with their attention mask) or tokens (``attention_mask=`` where padded), and
        ``return_type`` "logits" (the family's output, the default), "loss" (mean next-token cross-entropy over the
        real tokens, or per token with ``loss_per_token``), "both" or None (run for the hooks, return nothing);
        ``model(...)`` takes the same."""
        super().__init_subclass__(**kwargs)
        family_forward = cls.__dict__.get("forward")
        if family_forward is None or hasattr(family_forward, "__wrapped__"):
            return

        @functools.wraps(family_forward)
        def forward(self, input, *args, **kwargs):
            from interp.tl_batch import run_forward

            return run_forward(self, family_forward, input, *args, **kwargs)

        cls.forward = forward

    def loss_of(self, logits: torch.Tensor, tokens, per_token: bool = False) -> torch.Tensor:
        """TransformerLens' ``lm_cross_entropy_loss``: next-token loss for a causal LM; for a masked LM, the loss of
        each position's own token (what an MLM predicts where it is masked)."""
        from interp.capabilities import Capability

        tokens = torch.as_tensor(tokens, device=logits.device)
        tokens = tokens[None] if tokens.dim() == 1 else tokens
        if Capability.CAUSAL_LM in self.capabilities:
            logits, targets = logits[:, :-1], tokens[:, 1:]
        else:
            targets = tokens
        losses = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), targets.long(), reduction="none")
        return losses if per_token else losses.mean()

    # -- generate ----------------------------------------------------------------------------------------------------
    def tl_generate(self, input="", max_new_tokens: int = 10, **options):
        """TransformerLens' ``generate`` (``interp.tl_generate.generate``)."""
        from interp.tl_generate import generate

        return generate(self, input, max_new_tokens, **options)

    def _decode_text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # -- weights -----------------------------------------------------------------------------------------------------
    def _stacked(self, name: str) -> torch.Tensor:
        attns = [block.attn for block in self.blocks]
        if not all(isinstance(a, AttentionWeights) for a in attns):
            raise AttributeError(f"{self.model_name} ({self.family} family) has no {name}: its attention "
                                 f"({type(attns[0]).__name__}) has no per-head q, k, v, o weights in TransformerLens' "
                                 "sense (see the README's TransformerLens section)")
        return torch.stack([getattr(a, name) for a in attns])

    W_Q = property(lambda self: self._stacked("W_Q"), doc="``[layer, head, d_model, d_head]``")
    W_K = property(lambda self: self._stacked("W_K"), doc="``[layer, kv_head, d_model, d_head]``")
    W_V = property(lambda self: self._stacked("W_V"), doc="``[layer, kv_head, d_model, d_head]``")
    W_O = property(lambda self: self._stacked("W_O"), doc="``[layer, head, d_head, d_model]``")
    b_Q = property(lambda self: self._stacked("b_Q"), doc="``[layer, head, d_head]``")
    b_K = property(lambda self: self._stacked("b_K"), doc="``[layer, kv_head, d_head]``")
    b_V = property(lambda self: self._stacked("b_V"), doc="``[layer, kv_head, d_head]``")
    b_O = property(lambda self: self._stacked("b_O"), doc="``[layer, d_model]``")

    @property
    def W_U(self) -> torch.Tensor:
        raise AttributeError(f"{self.model_name} ({self.family} family) has no unembedding matrix W_U "
                             + ("(no output head)" if not self.has_output_head else "exposed"))

    @property
    def b_U(self) -> torch.Tensor:
        w = self.W_U
        return torch.zeros(w.shape[-1], dtype=w.dtype, device=w.device)
