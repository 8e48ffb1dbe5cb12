"""Tiny encoder-family models and an independent reference forward of the development DSTG / NeoBERT code.

The reference reads a development-layout state dict (``model.``-prefixed or not, fused ``qkv_*`` or old
``qk_*`` + ``v_*`` keys) and follows the development code's way of handling special tokens: the CLS/SEP
thetas are written over the AP logits (row CLS, row SEP, column CLS, column SEP, in that order) and the
bucketed bias is zeroed on those rows / columns. T5 buckets come from ``transformers``' T5 implementation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from interp.families.encoder.model import EncoderConfig, EncoderModel
from tests.helpers import randomized

SMALL = dict(vocab_size=64, hidden_size=24, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
             max_length=48)
VARIANTS = {
    "disentangled": dict(variant="disentangled", pos_size=8, d_qk=8),
    "ap": dict(variant="ap"),
    "rp": dict(variant="rp"),
    "rope": dict(variant="rope"),
}


def tiny_encoder(variant: str = "disentangled", seed: int = 0, **overrides) -> EncoderModel:
    """A small encoder with weights random enough that every head, stream and theta differs."""
    torch.manual_seed(seed)
    return randomized(EncoderModel(EncoderConfig(**{**SMALL, **VARIANTS[variant], **overrides})), f"tiny-{variant}",
                      0.3, unit=("thetas", "relative_attention_bias"))


def token_ids(model, batch: int = 2, n: int = 11, seed: int = 1) -> torch.Tensor:
    """Ids without the pad id 0."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, model.cfg.vocab_size, (batch, n), generator=g)


# Every attribute the fork's NeoBERTConfig (LequeuISIR/transformers 8a10641) sets, which transformers 4.39's
# save_pretrained writes to config.json (none equals a PretrainedConfig default), and the bookkeeping it adds.
FORK_FIELDS = ("hidden_size", "pos_size", "num_hidden_layers", "num_attention_heads", "dim_head",
               "pos_intermediate_size", "intermediate_size", "pos_dropout_prob", "dropout_prob",
               "attention_probs_dropout_prob",
               "use_only_sem_for_decoding", "mixed_feed_forward", "embedding_init_range", "decoder_init_range",
               "rms_norm", "rope", "posneobert", "norm_eps",
               "hidden_act", "vocab_size", "pad_token_id", "max_length", "flash_attention", "base_scale", "ngpt",
               "positional_embed_init", "attention_activation", "untie_cls", "mix_attentions", "random_offset",
               "shared_pos_keys", "relative_pos_bias", "AP_embeddings", "kwargs")
BOOKKEEPING = ("model_type", "architectures", "transformers_version", "torch_dtype")
FORK_TRAINING = {"dropout_prob": 0.1, "pos_dropout_prob": 0, "attention_probs_dropout_prob": 0.1,
                 "embedding_init_range": 0.02, "decoder_init_range": 0.02, "positional_embed_init": "random",
                 "random_offset": True}
FORK_INERT = {"base_scale": 1.0 / 960.0 ** 0.5, "flash_attention": False, "ngpt": False, "shared_pos_keys": False,
              "kwargs": {}}
FORK_MODELS = {  # the tiny models authors_config describes: the fork builds the RP bias and thetas inside each block
    # int(2 * (4*8 + 4*24) / 3) = 85 -> 88
    "disentangled": dict(intermediate_size=88, norm_eps=1e-5, rp_per_layer=True),
    "ap": dict(intermediate_size=64, norm_eps=1e-5),  # int(2 * 4*24 / 3) = 64
    "rp": dict(intermediate_size=64, norm_eps=1e-5, rp_per_layer=True, untie_cls=False, rp_skip_special=True),
    "rope": dict(intermediate_size=64, norm_eps=1e-5, rope_style="interleaved"),
}


def authors_model(variant: str = "disentangled", seed: int = 0) -> EncoderModel:
    """The tiny model of ``variant`` that ``authors_config(variant)`` describes, as the fork builds it."""
    return tiny_encoder(variant, seed, **FORK_MODELS[variant])


def authors_config(variant: str = "disentangled", **overrides) -> dict:
    """config.json as the fork's NeoBERTConfig writes it for ``authors_model(variant)``: every field, derived and
    training-only ones included, with a DSTG run's values (PosNeoBERT's conf/model/posneobert.yaml: norm_eps 1e-5,
    pos_dropout_prob 0, flash_attention off; random_offset on, base_scale at its default 1/sqrt(960))."""
    dis = variant == "disentangled"
    pos = 8 if dis else 384  # the baselines keep the default pos_size, which they never read
    cfg = {"hidden_size": 24, "pos_size": pos, "num_hidden_layers": 2, "num_attention_heads": 4,
           "dim_head": (24 + pos) // 4 if dis else 24 // 4, "pos_intermediate_size": 4 * pos,
           "intermediate_size": 4 * 24,
           "use_only_sem_for_decoding": dis, "mixed_feed_forward": True, "rms_norm": True, "rope": variant == "rope",
           "posneobert": dis, "norm_eps": 1e-05, "hidden_act": "swiglu", "vocab_size": 64, "pad_token_id": 0,
           "max_length": 48,
           "attention_activation": "softmax", "untie_cls": dis, "mix_attentions": "sum",
           "relative_pos_bias": variant in ("disentangled", "rp"), "AP_embeddings": variant != "rp",
           **FORK_TRAINING, **FORK_INERT,
           "model_type": "neobert", "architectures": ["NeoBERTLMHead"], "transformers_version": "4.39.0",
           "torch_dtype": "float32"}
    assert set(cfg) == set(FORK_FIELDS) | set(BOOKKEEPING)
    cfg.update(overrides)
    return cfg


def fork_reference_config(fork: dict) -> dict:
    """What ``reference_logits`` needs, read off a fork config the way the fork's modeling code reads it."""
    dis, h = fork["posneobert"], fork["num_attention_heads"]
    variant = "disentangled" if dis else "rope" if fork["rope"] else "rp" if fork["relative_pos_bias"] else "ap"
    return {"num_attention_heads": h, "hidden_size": fork["hidden_size"], "pos_size": fork["pos_size"] if dis else 0,
            "norm_eps": fork["norm_eps"], "variant": variant, "d_qk": fork["dim_head"],
            "num_hidden_layers": fork["num_hidden_layers"],
            "num_buckets": 32, "max_distance": 128, "untie_cls": dis and fork["untie_cls"], "rp_at_special": False,
            # RelativePositionBucketedBias zeroes rows / columns 0 and n-1
            "rp_skip_special": fork["relative_pos_bias"],
            "rp_per_layer": True, "residual": "normalized" if dis else "prenorm", "rope_theta": 10000.0,
            "rope_style": "interleaved",
            "mlm_input": "semantic" if fork["use_only_sem_for_decoding"] else "full"}


def t5_reference_buckets(n: int, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """``[query, key]`` buckets from transformers' T5 (relative_position = memory - context)."""
    from transformers.models.t5.modeling_t5 import T5Attention

    context = torch.arange(n)[:, None]
    memory = torch.arange(n)[None, :]
    return T5Attention._relative_position_bucket(memory - context, bidirectional=True, num_buckets=num_buckets,
                                                 max_distance=max_distance)


def old_layout(state: dict, n_heads: int, d_qk: int, *, theta_shape: str = "[H]", embedding_rab: bool = False) -> dict:
    """Rewrite a fused development state dict into the older keys: per-head ``qk_*`` + ``v_*``, per-row thetas."""
    out = {}
    for key, value in state.items():
        if key.endswith(("qkv_pos.weight", "qkv_sem.weight")):
            stream = "pos" if key.endswith("qkv_pos.weight") else "sem"
            base = key[: -len(f"qkv_{stream}.weight")]
            q, k = value[: n_heads * d_qk], value[n_heads * d_qk: 2 * n_heads * d_qk]
            rows = []
            for h in range(n_heads):  # the development code viewed qk as [head, 2 * d_qk] and chunked q | k
                rows.append(q[h * d_qk: (h + 1) * d_qk])
                rows.append(k[h * d_qk: (h + 1) * d_qk])
            out[f"{base}qk_{stream}.weight"] = torch.cat(rows)
            out[f"{base}v_{stream}.weight"] = value[2 * n_heads * d_qk:]
        elif key.endswith("cls_sep_override.thetas"):
            base = key[: -len("thetas")]
            for row, name in enumerate(("theta_cls_out", "theta_sep_out", "theta_cls_in", "theta_sep_in")):
                out[base + name] = value[row].clone() if theta_shape == "[H]" else value[row][None].clone()
        elif key.endswith("relative_attention_bias") and embedding_rab:
            out[key + ".weight"] = value
        else:
            out[key] = value
    return out


def _rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate(x, positions, theta, style):
    """``x [b, n, h, d]`` rotated by ``positions [b, n]``: complex pairs (interleaved) or rotate_half."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    angles = positions[:, :, None, None] * inv  # [b, n, 1, d/2]
    if style == "interleaved":
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rotated * sin


def _special_rows_cols(a: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    """Overwrite ``a [b, h, n, n]`` like the development CLSSEPAttentionReplacer (columns last)."""
    a = a.clone()
    n = a.shape[-1]
    a[:, :, 0, :] = thetas[0][None, :, None]
    a[:, :, n - 1, :] = thetas[1][None, :, None]
    a[:, :, :, 0] = thetas[2][None, :, None]
    a[:, :, :, n - 1] = thetas[3][None, :, None]
    return a


def reference_logits(state: dict, cfg: dict, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """MLM logits (or the final-normed stream without a head) from a development-layout state dict."""
    s = {k.removeprefix("model."): v.float() for k, v in state.items()}
    b, n = ids.shape
    h, hidden, p = cfg["num_attention_heads"], cfg["hidden_size"], cfg["pos_size"]
    eps, variant = cfg["norm_eps"], cfg["variant"]
    dis = variant == "disentangled"
    d_qk = cfg["d_qk"]
    pos_rows = torch.arange(1, n + 1) + offset
    x = s["encoder.weight"][ids]
    if dis:
        x = torch.cat([s["positional_embedding.weight"][pos_rows].expand(b, n, p), x], -1)
    elif variant == "ap":
        x = x + s["positional_embedding.weight"][pos_rows]
    buckets = t5_reference_buckets(n, cfg["num_buckets"], cfg["max_distance"])
    special = torch.zeros(n, n, dtype=torch.bool)
    special[[0, n - 1], :] = True
    special[:, [0, n - 1]] = True

    def rp_parts(prefix):
        """(bucketed bias [1, h, n, n] or 0, thetas or None) of one layer."""
        table = s.get(prefix + "relative_pos_bias.relative_attention_bias",
                      s.get(prefix + "relative_pos_bias.relative_attention_bias.weight"))
        bias = 0.0
        if table is not None:
            bias = table[buckets].permute(2, 0, 1)[None]
            if (cfg["untie_cls"] and not cfg["rp_at_special"]) or cfg.get("rp_skip_special"):
                bias = bias.masked_fill(special, 0.0)
        thetas = s.get(prefix + "cls_sep_override.thetas")
        if thetas is None and prefix + "cls_sep_override.theta_cls_out" in s:  # older per-row parameters
            thetas = torch.stack([s[prefix + f"cls_sep_override.theta_{name}"].flatten()
                                  for name in ("cls_out", "sep_out", "cls_in", "sep_in")])
        return bias, thetas

    for i in range(cfg["num_hidden_layers"]):
        pre = f"transformer_encoder.{i}."
        bias, thetas = rp_parts(pre if cfg["rp_per_layer"] else "")
        if dis:
            xa = torch.cat([_rms(x[..., :p], s[pre + "pos_attention_norm.weight"], eps),
                            _rms(x[..., p:], s[pre + "sem_attention_norm.weight"], eps)], -1)
            heads = {}
            for stream, part, width in (("pos", xa[..., :p], p), ("sem", xa[..., p:], hidden)):
                if pre + f"qkv_{stream}.weight" in s:
                    out = part @ s[pre + f"qkv_{stream}.weight"].T
                    q, k, v = out[..., : h * d_qk], out[..., h * d_qk: 2 * h * d_qk], out[..., 2 * h * d_qk:]
                    q, k = q.reshape(b, n, h, d_qk), k.reshape(b, n, h, d_qk)
                else:  # older layout: qk viewed per head as [q_h | k_h], separate values
                    q, k = (part @ s[pre + f"qk_{stream}.weight"].T).view(b, n, h, 2 * d_qk).chunk(2, dim=-1)
                    v = part @ s[pre + f"v_{stream}.weight"].T
                heads[stream] = (q, k, v.reshape(b, n, h, width // h))
            a_pos = torch.einsum("bqhd,bkhd->bhqk", heads["pos"][0], heads["pos"][1]) / math.sqrt(d_qk)
            a_sem = torch.einsum("bqhd,bkhd->bhqk", heads["sem"][0], heads["sem"][1]) / math.sqrt(d_qk)
            if thetas is not None:
                a_pos = _special_rows_cols(a_pos, thetas)
            probs = torch.softmax(a_pos + a_sem + bias, dim=-1)
            z_pos = torch.einsum("bhqk,bkhd->bqhd", probs, heads["pos"][2]).reshape(b, n, p)
            z_sem = torch.einsum("bhqk,bkhd->bqhd", probs, heads["sem"][2]).reshape(b, n, hidden)
            attn = torch.cat([z_pos @ s[pre + "wo_pos.weight"].T, z_sem @ s[pre + "wo_sem.weight"].T], -1)
            x = (xa if cfg["residual"] == "normalized" else x) + attn
            xf = torch.cat([_rms(x[..., :p], s[pre + "pos_ffn_norm.weight"], eps),
                            _rms(x[..., p:], s[pre + "sem_ffn_norm.weight"], eps)], -1)
        else:
            xa = _rms(x, s[pre + "attention_norm.weight"], eps)
            dh = hidden // h
            # NeoBERT: per head q | k | v
            q, k, v = (xa @ s[pre + "qkv.weight"].T).view(b, n, h, 3 * dh).chunk(3, dim=-1)
            if variant == "rope":
                positions = (torch.arange(n) + offset).float().expand(b, n)
                q = _rotate(q, positions, cfg["rope_theta"], cfg["rope_style"])
                k = _rotate(k, positions, cfg["rope_theta"], cfg["rope_style"])
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
            if thetas is not None:
                scores = scores + _special_rows_cols(torch.zeros_like(scores), thetas)
            probs = torch.softmax(scores + bias, dim=-1)
            attn = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, hidden) @ s[pre + "wo.weight"].T
            x = (xa if cfg["residual"] == "normalized" else x) + attn
            xf = _rms(x, s[pre + "ffn_norm.weight"], eps)
        gate, up = (xf @ s[pre + "ffn.w12.weight"].T).chunk(2, dim=-1)
        x = (xf if cfg["residual"] == "normalized" else x) + (F.silu(gate) * up) @ s[pre + "ffn.w3.weight"].T
    if dis:
        final_ap, final_sem = (_rms(x[..., :p], s["pos_layer_norm.weight"], eps),
                               _rms(x[..., p:], s["sem_layer_norm.weight"], eps))
        head_in = torch.cat([final_ap, final_sem], -1) if cfg["mlm_input"] == "full" else final_sem
        final = torch.cat([final_ap, final_sem], -1)
    else:
        final = head_in = _rms(x, s["layer_norm.weight"], eps)
    if "decoder.bias" not in s:
        return final
    weight = s["decoder.weight"] if "decoder.weight" in s else s["encoder.weight"]
    return head_in @ weight.T + s["decoder.bias"]
