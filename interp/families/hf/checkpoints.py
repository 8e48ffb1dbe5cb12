"""Loading the generic family: a Hugging Face directory of any architecture TransformerLens' bridge supports.

Protocol:

1. ``config.json`` is read by transformers' ``AutoConfig``; the bridge names the architecture
   (``determine_architecture_from_hf_config``) and its adapter says where the layers, the token embedding
   and a learned position table live, and whether positions are rotary. A type the bridge does not know
   is not a generic directory (``load`` then refuses it by name).
2. The model class is the checkpoint's own (``config.architectures[0]``; the base model when absent), so a
   head the file does not hold is never made up; every weight of that class must be in the file and every
   weight in the file must be used, else ``CheckpointError`` names the keys.
3. Attention runs through ``interp.families.hf.model.poslens_attention``; a probe forward decides ``ATTENTION``.
   Rotary positions are transformers' own, scaled as the config says (any ``rope_type`` transformers implements:
   yarn, longrope, dynamic, llama3, ...; another is refused by name before any weight is read). Each layer's
   ``RotarySpec`` holds the frequencies, ``rope_type`` and attention scaling read off transformers' rotary module,
   and follows the module: after each call of it (one per forward pass) the spec's ``inv_freq`` holds the frequencies
   that pass rotates by (dynamic scaling recomputes them from the sequence length, longrope switches sets past its
   original length).
4. Tokenizer files beside the weights give ``model.tokenizer``; without them the model loads without one.

``save_generic`` writes the same layout back (``save_pretrained`` of the model and its tokenizer).
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path

import torch

from interp.loading.errors import CheckpointError
from interp.loading.hf_files import header_shapes


def _model_type(path: Path) -> str | None:
    try:
        return json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def _known_type(model_type) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return model_type in CONFIG_MAPPING_NAMES


def rope_types(hf_config) -> dict[str, str]:
    """The ``rope_type`` a config declares, by where it stands: ``{"rope_parameters": type}``, or one entry per layer
    type (``rope_parameters[sliding_attention]``, Gemma 3) where the config holds one set per type."""
    params = getattr(hf_config, "rope_parameters", None)
    if not isinstance(params, dict):
        return {}
    if "rope_type" in params or "rope_theta" in params or not all(isinstance(v, dict) or v is None
                                                                  for v in params.values()):
        return {"rope_parameters": str(params.get("rope_type", "default"))}
    return {f"rope_parameters[{t}]": str(v.get("rope_type", "default")) for t, v in params.items()
            if isinstance(v, dict)}


def check_rope(hf_config, where: str) -> None:
    """Refuse a ``rope_type`` transformers has no rotary embedding for (it would fail building the model)."""
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for field, kind in rope_types(hf_config).items():
        if kind != "default" and kind not in ROPE_INIT_FUNCTIONS:
            raise CheckpointError(f"{where}: {field} has rope_type {kind!r}, which "
                                  f"transformers {transformers.__version__} does not implement (it implements "
                                  f"default, {', '.join(sorted(ROPE_INIT_FUNCTIONS))}); poslens cannot run its "
                                  "rotation")


def _hf_config(path: Path):
    from transformers import AutoConfig

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return AutoConfig.from_pretrained(path)
    except Exception as err:  # transformers raises many types for a config it cannot take
        raise CheckpointError(f"{path / 'config.json'}: transformers cannot read it as a {_model_type(path)!r} config: "
                              f"{str(err).splitlines()[0]}") from None


def bridge_architecture(hf_config) -> str | None:
    """The bridge's architecture name for this config, or None when it has no adapter for it."""
    from transformer_lens.model_bridge.sources.transformers.source import determine_architecture_from_hf_config

    try:
        return determine_architecture_from_hf_config(hf_config)
    except ValueError:
        return None


def is_generic_hf_dir(path) -> bool:
    """A directory with a ``config.json`` whose architecture transformers and the bridge both know (a config of
    a known type that transformers cannot read counts: ``load_generic`` then says what is wrong with it)."""
    path = Path(path)
    if not (path.is_dir() and (path / "config.json").is_file()) or not _known_type(_model_type(path)):
        return False
    try:
        return bridge_architecture(_hf_config(path)) is not None
    except CheckpointError:
        return True


def _adapter(hf_config, architecture: str):
    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
    from transformer_lens.model_bridge.sources.transformers.source import build_bridge_config_from_hf

    bridge_config = build_bridge_config_from_hf(hf_config, architecture, "poslens", torch.float32)
    return ArchitectureAdapterFactory.select_architecture_adapter(bridge_config), bridge_config


def _module(hf_model, name: str | None):
    """The submodule the adapter names; the head-less base model lacks the ``bert.`` style prefix."""
    if not name:
        return None
    prefix = getattr(hf_model, "base_model_prefix", "")
    for candidate in (name, name.removeprefix(prefix + ".") if prefix else name):
        try:
            return hf_model.get_submodule(candidate)
        except AttributeError:
            continue
    return None


def _head(hf_model) -> str | None:
    from transformers.models.auto import modeling_auto as auto

    def names(mapping):
        return {n for v in mapping.values() for n in ((v,) if isinstance(v, str) else v)}

    cls = type(hf_model).__name__
    if cls in names(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        return "causal"
    if cls in names(auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        return "masked"
    return None


def structure(hf_model, hf_config, architecture: str) -> dict:
    """Where the layers, embeddings and position table of a loaded transformers model are."""
    adapter, bridge_config = _adapter(hf_config, architecture)
    mapping = adapter.component_mapping
    name = lambda key: getattr(mapping.get(key), "name", None)  # noqa: E731
    layers = _module(hf_model, name("blocks"))
    if not isinstance(layers, torch.nn.ModuleList):
        raise CheckpointError(f"{type(hf_model).__name__}: the bridge's adapter for {architecture} names no list "
                              f"of layers that this model has ({name('blocks')!r})")
    pos_embed = _module(hf_model, name("pos_embed"))
    blocks = mapping.get("blocks")
    parts = {key: part.name for key, part in (getattr(blocks, "submodules", None) or {}).items()
             if key in ("ln1", "ln1_post", "ln2", "ln2_post", "attn", "mlp")}
    attn = (getattr(blocks, "submodules", None) or {}).get("attn")
    attn_parts = {key: part.name for key, part in (getattr(attn, "submodules", None) or {}).items()
                  if key in ("q", "k", "v", "o", "qkv")}
    mlp = (getattr(blocks, "submodules", None) or {}).get("mlp")
    mlp_parts = {key: part.name for key, part in (getattr(mlp, "submodules", None) or {}).items()
                 if key in ("gate", "in", "out")}
    if isinstance(getattr(mlp, "fused_attr", None), str):  # one fused [gate | up] projection (Phi-3's gate_up_proj)
        mlp_parts = {"gate_in": mlp.fused_attr, **{k: v for k, v in mlp_parts.items() if k == "out"}}
    tl = {key: getattr(bridge_config, key, None)
          for key in ("normalization_type", "positional_embedding_type", "gated_mlp", "act_fn", "d_mlp", "final_rms",
                      "rmsnorm_uses_offset")}
    return dict(
        architecture=architecture, layers=layers, parts=parts, attn_parts=attn_parts, mlp_parts=mlp_parts, tl=tl,
        ln_final=_module(hf_model, name("ln_final")),
        embed=_module(hf_model, name("embed")) or hf_model.get_input_embeddings(),
        pos_embed=pos_embed if isinstance(pos_embed, torch.nn.Embedding) else None,
        rotary=getattr(bridge_config, "positional_embedding_type", None) == "rotary", head=_head(hf_model),
    )


def load_generic(path, *, device=None, dtype=None):
    """A hooked ``HFModel`` from a Hugging Face directory (see the module docstring)."""
    import transformers

    from interp.families.hf.model import ATTENTION_NAME, register_attention

    path = Path(path)
    hf_config = _hf_config(path)
    architecture = bridge_architecture(hf_config)
    if architecture is None:
        raise CheckpointError(f"{path / 'config.json'}: model_type {hf_config.model_type!r} has no TransformerLens "
                              "bridge adapter")
    check_rope(hf_config, str(path / "config.json"))
    declared = (getattr(hf_config, "architectures", None) or [None])[0]
    cls = getattr(transformers, declared, None) if declared else transformers.AutoModel
    if cls is None:
        raise CheckpointError(f"{path / 'config.json'}: architectures names {declared!r}, which transformers does "
                              "not have")
    for weights in sorted(path.glob("*.safetensors")):
        header_shapes(weights)  # a truncated file is one named line here, not transformers' traceback
    register_attention()
    hf_model, info = cls.from_pretrained(path, dtype=dtype or torch.float32, attn_implementation=ATTENTION_NAME,
                                         output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        keys = sorted(map(str, info.get(kind) or []))
        if keys:
            raise CheckpointError(f"{path}: as a {cls.__name__} the checkpoint "
                                  f"has {len(keys)} {kind.replace('_', ' ')} (first: {', '.join(keys[:3])}); poslens "
                                  "never initialises weights at random")
    if device is not None:
        hf_model = hf_model.to(device)
    from interp.loading.hf_files import read_tokenizer

    model = hooked(hf_model, hf_config, architecture, read_tokenizer(path, wordpiece=False))  # transformers' own
    model.model_name = path.name
    return model


def hooked(hf_model, hf_config, architecture: str, tokenizer=None):
    """``hf_model`` run under poslens' hooks, its capabilities read off the model (see the module docstring)."""
    from interp.capabilities import Capability
    from interp.families.hf.model import HFModel

    model = HFModel(hf_model.eval(), structure(hf_model, hf_config, architecture), tokenizer)
    calls = model.probe_attention()
    caps = {Capability.HIDDEN_STATES}
    if all(c == 1 for c in calls):
        caps.add(Capability.ATTENTION)
        if model.rotary:
            caps.add(Capability.POSITIONS)
            model.rotary_specs = rotary_specs(model)
            if any(s is not None for s in model.rotary_specs):
                caps.add(Capability.ROTARY)
    if model.head == "causal":
        caps.add(Capability.CAUSAL_LM)
    elif model.head == "masked":
        caps.add(Capability.MASKED_LM)
    if model.pos_table is not None:
        caps.add(Capability.AP_STREAM)
    model.capabilities = frozenset(caps)
    model.head_separable = model.check_head()
    return model.eval()


def _rotary_sources(model) -> list | None:
    """Each layer's ``(module path, buffer name)``: the transformers rotary module and its frequency buffer, one
    ``inv_freq`` for every layer, one ``<layer type>_inv_freq`` per type of layer (Gemma 3's sliding and full
    attention), or one per layer; None when they cannot be told apart."""
    found = [name for name, _ in model.hf.named_buffers() if name.endswith("inv_freq") and "original" not in name]
    split = [tuple(name.rsplit(".", 1)) if "." in name else ("", name) for name in found]
    if not split:
        return None
    if len(split) == 1:
        return split * model.n_layers
    by_type = {t: next((p for p in split if p[1] == f"{t}_inv_freq"), None) for t in set(model.layer_types)}
    if all(p is not None for p in by_type.values()):
        return [by_type[t] for t in model.layer_types]
    if len(split) == model.n_layers:
        return split
    return None


def _rope_of(module, buffer: str, declared: dict) -> tuple[str | None, float]:
    """``(rope_type, attention_scaling)`` of one frequency buffer, as transformers' rotary module holds them."""
    prefix = buffer[: -len("inv_freq")].rstrip("_")
    kind = getattr(module, "rope_type", None)
    kind = kind.get(prefix) if isinstance(kind, dict) else kind
    scaling = getattr(module, f"{prefix}_attention_scaling" if prefix else "attention_scaling", 1.0)
    if kind is None:
        kind = declared.get(f"rope_parameters[{prefix}]" if prefix else "rope_parameters")
    return (str(kind) if kind is not None else None), float(scaling)


def _follow(pairs, module, _args, _output) -> None:
    """After a call of a rotary module: its current frequencies into the specs that describe them."""
    with torch.no_grad():
        for buffer, held in pairs:
            held.copy_(getattr(module, buffer).detach().to(held.device, torch.float32))


PROBE_POSITIONS = 32  # the layout probe's repeated token: positions 0..31 (fewer: see _probe_length)


def _probe_length(model) -> int:
    """Tokens of the layout probe: ``PROBE_POSITIONS``, no more than the model holds, nor more than the original
    length past which a scaled rope (longrope, dynamic) turns by other frequencies."""
    cfg = model.hf.config
    params = getattr(cfg, "rope_parameters", None)
    sets = [params, *params.values()] if isinstance(params, dict) else []
    found = [PROBE_POSITIONS, model.max_seq_len, getattr(cfg, "original_max_position_embeddings", None),
             *(p.get("original_max_position_embeddings") for p in sets if isinstance(p, dict))]
    return max(2, min(int(n) for n in found if isinstance(n, (int, float)) and n > 0))


def layout_tolerance(dtype: torch.dtype) -> float:
    """The largest relative error ``rotary_specs`` accepts for the right layout of queries computed in ``dtype``:
    1e-3 in float32 and float64, else 4 machine epsilons of the dtype (bfloat16: 0.031, float16: 0.0039).

    A model in half precision rounds its queries, the cos and sin it rotates them by and their products to the
    dtype: each element of the rotated query carries a relative error of about one epsilon, so the right layout
    misses by less than an epsilon (measured on the test models: 0.2 to 0.75 epsilons in every dtype). A wrong pairing
    of dims, or frequencies that are not the ones the model turns by, misses by a fraction of the query's norm whatever
    the dtype (measured: 73% to 146% for the other layout, 30% for frequencies 2% too fast), ten times the bfloat16
    bound or more (tests/integration/interp/test_half_precision.py plants them)."""
    if dtype in (torch.float32, torch.float64):
        return 1e-3
    return 4 * torch.finfo(dtype).eps


def layout_errors(q: torch.Tensor, inv_freq: torch.Tensor) -> dict[str, float]:
    """For each layout of ``interp.rope.LAYOUTS``: how far layer 0's queries of one token repeated (``q [1, pos,
    head, d_head]``, as the model rotated them, in its dtype) are from a rotation by ``inv_freq`` in that layout, the
    largest over positions p of ``|q_p turned back by p - q_0| / |q_0|`` (in float32 from the model's numbers;
    ``inf`` where the layout needs more dims than the head has)."""
    from interp.rope import LAYOUTS, RotarySpec

    q = q.detach().cpu().float()
    n = q.shape[1]
    back = torch.arange(n, dtype=torch.float32).neg()[None]
    errors = {}
    for layout in LAYOUTS:
        spec = RotarySpec(inv_freq.detach().cpu().float().clone(), layout)
        if 2 * spec.n_bands > q.shape[-1]:
            errors[layout] = float("inf")
            continue
        turned = spec.rotate(q, back).double()
        first = q[:, :1].double()
        err = (turned - first).flatten(2).norm(dim=-1) / first.flatten(2).norm(dim=-1).clamp(min=1e-30)
        errors[layout] = float(err.max())
    return errors


@torch.no_grad()
def rotary_specs(model) -> list:
    """``[RotarySpec or None] * n_layers``: the frequencies, ``rope_type`` and attention scaling transformers' rotary
    embedding holds, in the pair layout that the model's own queries show: one token repeated, layer 0's query at
    each position p turned back by p must be its query at position 0 (the attention scaling multiplies both and
    cancels), within ``layout_tolerance`` of the dtype the model computes in (``layout_errors``). All None when the
    frequencies or the layout cannot be established. Each spec's ``inv_freq`` is the model's own tensor, refreshed by
    a hook after every call of the rotary module (``_follow``)."""
    from interp.rope import RotarySpec

    sources = _rotary_sources(model)
    if sources is None:
        return [None] * model.n_layers
    declared = rope_types(model.hf.config)
    held = {src: model.hf.get_submodule(src[0]).get_buffer(src[1]).detach().float().cpu().clone()
            for src in dict.fromkeys(sources)}
    seen = {}

    def keep(q, hook):  # returns None: the forward pass keeps its own queries, in the model's dtype
        seen.setdefault("q", q.detach().clone())

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_rot_q", keep)]):
        model(torch.full((1, _probe_length(model)), model.d_vocab // 2, device=model.device))
    q = seen["q"]
    first = model.hf.get_submodule(sources[0][0]).get_buffer(sources[0][1])  # what the probe turned by
    errors = layout_errors(q, first)
    layout = min(errors, key=errors.get)
    if not errors[layout] <= layout_tolerance(q.dtype):
        return [None] * model.n_layers
    specs = {}
    for src, freqs in held.items():
        kind, scaling = _rope_of(model.hf.get_submodule(src[0]), src[1], declared)
        specs[src] = RotarySpec(freqs, layout, attention_scaling=scaling, rope_type=kind)
    modules: dict[str, list] = {}
    for (path, buffer), freqs in held.items():
        modules.setdefault(path, []).append((buffer, freqs))
    for path, pairs in modules.items():
        model.hf.get_submodule(path).register_forward_hook(functools.partial(_follow, tuple(pairs)))
    return [specs[src] for src in sources]


def save_generic(model, directory, *, overwrite: bool = False) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (+ tokenizer files): a directory ``load_generic`` reads back."""
    from interp.loading.hf_files import TOKENIZER_FILES, writable_tokenizer, write_tokenizer

    directory, tokenizer = Path(directory), getattr(model, "tokenizer", None)
    if tokenizer is not None and not writable_tokenizer(tokenizer):
        raise CheckpointError(f"{directory}: the model's tokenizer ({type(tokenizer).__name__}) is not one poslens "
                              "can save; set model.tokenizer = None to save the weights alone")
    names = ("config.json", "model.safetensors") + (TOKENIZER_FILES if tokenizer is not None else ())
    existing = [str(directory / f) for f in names if (directory / f).exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{directory} already holds a checkpoint ({', '.join(existing)}); pass overwrite=True "
                              "/ --force")
    model.hf.save_pretrained(directory)
    if tokenizer is not None:
        write_tokenizer(tokenizer, directory)
    return directory


# ---- the family's layout --------------------------------------------------------------------------------------


def is_generic(checkpoint) -> bool:
    """A directory of an architecture transformers and the bridge know, or a transformers model in memory of one."""
    if checkpoint.module is not None:
        return bridge_architecture(checkpoint.module.config) is not None
    return is_generic_hf_dir(checkpoint.path)


def read_checkpoint(checkpoint, place: dict):
    """A directory read by transformers (placed on ``device`` / ``dtype`` while read), or a copy of a model in memory
    (its attention switched to poslens'; the caller's model is left as it was and shares nothing with the result)."""
    if checkpoint.module is None:
        model = load_generic(checkpoint.path, device=place.get("device"), dtype=place.get("dtype"))
        place.clear()
        return model
    from interp.families.hf.model import ATTENTION_NAME, register_attention

    module = copy.deepcopy(checkpoint.module)
    register_attention()
    module.config._attn_implementation = ATTENTION_NAME
    model = hooked(module, module.config, bridge_architecture(module.config))
    model.model_name = type(module).__name__
    return model


def save(model, directory, overwrite: bool = False):
    return save_generic(model, directory, overwrite=overwrite)


def examples() -> list:
    """A tiny random rotary decoder built by transformers from a config (every hook a rotary model offers)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    module = transformers.LlamaForCausalLM(config).eval()
    from interp.loading.checkpoint import Checkpoint

    return [read_checkpoint(Checkpoint(module=module), {})]
