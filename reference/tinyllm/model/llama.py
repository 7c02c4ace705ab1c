"""A llama in numpy float32, in the style of nanoGPT's model.py: config, blocks, model, loader.

Hugging Face llama conventions throughout: config.json keys, tensor names
(`model.layers.N.self_attn.q_proj.weight`, ...), weights stored [out, in], and the rotate_half RoPE
of `LlamaForCausalLM`, so a real HF llama checkpoint (F32, F16 or BF16 safetensors) loads through the
same code. The course ships a tiny one in fixtures/models/tiny-llama (see oracle/make_tiny_llama.py).

Shapes: N tokens in a forward, D hidden, H query heads, KVH key/value heads, G = H // KVH queries
per key/value head, hd head dim, F mlp width, V vocabulary, T key positions visible to attention.
"""

from dataclasses import dataclass
import json
import math
from pathlib import Path

import numpy as np


class ModelError(RuntimeError):
    """A checkpoint cannot be used; the message names the file or tensor, the cause and the remedy."""


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int  # V: token ids are 0..V-1
    hidden_size: int  # D: width of the residual stream
    intermediate_size: int  # F: width of the swiglu mlp
    num_hidden_layers: int  # L: transformer blocks
    num_attention_heads: int  # H: query heads
    num_key_value_heads: int  # KVH: key/value heads, H % KVH == 0 (grouped-query attention)
    rope_theta: float = 10000.0  # RoPE base
    rms_norm_eps: float = 1e-5  # added to the mean square in rmsnorm
    max_position_embeddings: int = 2048  # positions 0..max-1 are valid
    tie_word_embeddings: bool | None = None  # None: config.json does not say
    head_dim: int = 0  # hd; 0 means hidden_size // num_attention_heads

    def __post_init__(self) -> None:
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ModelError(
                f"config: num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}; remedy: fix config.json")
        if self.head_dim % 2:
            raise ModelError(f"config: head_dim {self.head_dim} is odd, RoPE needs pairs; remedy: fix config.json")

    REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads")

    @classmethod
    def from_dict(cls, d: dict, where: str = "config.json") -> "LlamaConfig":
        for key in cls.REQUIRED:
            if key not in d:
                raise ModelError(f"{where}: key {key!r} is missing; remedy: add it (HF llama config format)")
        if d.get("rope_scaling"):
            raise ModelError(f"{where}: rope_scaling {d['rope_scaling']!r} is not supported; remedy: "
                             "use a checkpoint with plain RoPE")
        if d.get("hidden_act", "silu") != "silu":
            raise ModelError(f"{where}: hidden_act {d['hidden_act']!r} is not silu; remedy: use a llama checkpoint")
        if d.get("attention_bias") or d.get("mlp_bias"):
            raise ModelError(f"{where}: attention_bias/mlp_bias are set; remedy: use a llama checkpoint without biases")
        kv_heads = d.get("num_key_value_heads") or d["num_attention_heads"]
        return cls(vocab_size=int(d["vocab_size"]), hidden_size=int(d["hidden_size"]),
                   intermediate_size=int(d["intermediate_size"]), num_hidden_layers=int(d["num_hidden_layers"]),
                   num_attention_heads=int(d["num_attention_heads"]), num_key_value_heads=int(kv_heads),
                   rope_theta=float(d.get("rope_theta", 10000.0)), rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                   max_position_embeddings=int(d.get("max_position_embeddings", 2048)),
                   tie_word_embeddings=d.get("tie_word_embeddings"), head_dim=int(d.get("head_dim") or 0))


# ---------------------------------------------------------------------------------------- blocks

def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis; x [N, D]."""
    ms = np.mean(x * x, axis=-1, keepdims=True)  # [N, 1]
    return (x / np.sqrt(ms + eps)) * weight  # [N, D]


def rope_tables(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin for HF's rotate_half RoPE: angle[n, i] = pos[n] * theta^(-2(i mod hd/2)/hd)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # [hd/2]
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # [N, hd/2]
    angles = np.concatenate([angles, angles], axis=-1)  # [N, hd]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate x [N, heads, hd] by its positions: x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # [N, heads, hd]
    return x * cos[:, None, :] + rotated * sin[:, None, :]  # [N, heads, hd]


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Grouped-query attention of N queries over T keys.

    q [N, H, hd]; k, v [M, T, KVH, hd] with M == N (one key set per query) or M == 1 (shared);
    mask [N, T] True where query n may see key t. Returns [N, H * hd].
    """
    n, heads, hd = q.shape
    kv_heads = k.shape[2]
    qg = q.reshape(n, kv_heads, heads // kv_heads, hd)  # [N, KVH, G, hd]
    scores = qg @ k.transpose(0, 2, 3, 1)  # [N, KVH, G, T]
    scores = scores * np.float32(1.0 / math.sqrt(hd))
    scores = np.where(mask[:, None, None, :], scores, np.float32(-np.inf))  # [N, KVH, G, T]
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)  # [N, KVH, G, T]
    out = probs @ v.transpose(0, 2, 1, 3)  # [N, KVH, G, hd]
    return out.reshape(n, heads * hd)  # [N, H * hd]


def swiglu(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """down(silu(gate(x)) * up(x)); x [N, D], weights pre-transposed to [in, out]."""
    g = x @ w_gate  # [N, F]
    u = x @ w_up  # [N, F]
    silu = g * (np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * g)))  # [N, F] g * sigmoid(g), no overflow
    return (silu * u) @ w_down  # [N, D]


# ----------------------------------------------------------------------------------------- model

@dataclass
class Layer:
    """One block's weights, projections transposed to [in, out] so that y = x @ w."""
    attn_norm: np.ndarray  # [D]
    wq: np.ndarray  # [D, H * hd]
    wk: np.ndarray  # [D, KVH * hd]
    wv: np.ndarray  # [D, KVH * hd]
    wo: np.ndarray  # [H * hd, D]
    mlp_norm: np.ndarray  # [D]
    w_gate: np.ndarray  # [D, F]
    w_up: np.ndarray  # [D, F]
    w_down: np.ndarray  # [F, D]


class Llama:
    """The model. `forward` runs N tokens at given positions; where their keys and values live is the
    caller's business: `kv(layer, k, v)` receives this pass's k, v [N, KVH, hd] and returns the keys,
    values [M, T, KVH, hd] and mask [N, T] each token attends over (see `forward_full`, runner.py)."""

    def __init__(self, cfg: LlamaConfig, embed: np.ndarray, layers: list[Layer], norm: np.ndarray,
                 lm_head: np.ndarray) -> None:
        self.cfg = cfg
        self.embed = embed  # [V, D]
        self.layers = layers
        self.norm = norm  # [D]
        self.lm_head_t = np.ascontiguousarray(lm_head.T)  # [D, V]

    def forward(self, ids, positions, kv) -> np.ndarray:
        c = self.cfg
        ids = np.asarray(ids, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        n = ids.shape[0]
        cos, sin = rope_tables(positions, c.head_dim, c.rope_theta)  # [N, hd] each
        x = self.embed[ids]  # [N, D]
        for i, l in enumerate(self.layers):
            h = rmsnorm(x, l.attn_norm, c.rms_norm_eps)  # [N, D]
            q = rope((h @ l.wq).reshape(n, c.num_attention_heads, c.head_dim), cos, sin)  # [N, H, hd]
            k = rope((h @ l.wk).reshape(n, c.num_key_value_heads, c.head_dim), cos, sin)  # [N, KVH, hd]
            v = (h @ l.wv).reshape(n, c.num_key_value_heads, c.head_dim)  # [N, KVH, hd]
            keys, values, mask = kv(i, k, v)  # [M, T, KVH, hd] x2, [N, T]
            x = x + attend(q, keys, values, mask) @ l.wo  # [N, D]
            x = x + swiglu(rmsnorm(x, l.mlp_norm, c.rms_norm_eps), l.w_gate, l.w_up, l.w_down)  # [N, D]
        x = rmsnorm(x, self.norm, c.rms_norm_eps)  # [N, D]
        return x @ self.lm_head_t  # [N, V]

    def forward_full(self, ids) -> np.ndarray:
        """The plain causal pass over a whole sequence from position 0, no cache: logits [T, V]."""
        ids = list(ids)
        t = len(ids)
        if t == 0 or t > self.cfg.max_position_embeddings:
            raise ModelError(f"forward_full: {t} tokens; a sequence needs 1..{self.cfg.max_position_embeddings}")
        bad = [x for x in ids if not 0 <= x < self.cfg.vocab_size]
        if bad:
            raise ModelError(f"forward_full: token {bad[0]} is outside the vocabulary [0, {self.cfg.vocab_size})")
        causal = np.tril(np.ones((t, t), dtype=bool))  # [T, T]
        return self.forward(ids, np.arange(t), lambda i, k, v: (k[None], v[None], causal))


# ---------------------------------------------------------------------------------------- loader

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of one .safetensors file as float32 (F32, F16 and BF16 are accepted)."""
    raw = path.read_bytes()
    try:
        (header_len,) = np.frombuffer(raw[:8], dtype="<u8")
        header = json.loads(raw[8:8 + int(header_len)])
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: not a safetensors file ({e}); remedy: re-export or re-download it") from None
    base = 8 + int(header_len)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in _DTYPES:
            raise ModelError(f"{path}: tensor {name} has dtype {meta['dtype']}; remedy: convert to F32, F16 or BF16")
        start, end = meta["data_offsets"]
        a = np.frombuffer(raw[base + start:base + end], dtype=np.dtype(_DTYPES[meta["dtype"]]).newbyteorder("<"))
        if meta["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)  # bf16 is the top half of a float32
        out[name] = a.astype(np.float32).reshape(meta["shape"])
    return out


def _sha256(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verify_checksums(root: Path, files: list[Path]) -> None:
    sums = root / "SHA256SUMS"
    if not sums.exists():
        raise ModelError(f"{root}: no SHA256SUMS beside the checkpoint, so it cannot be verified; remedy: write one "
                         "(`sha256sum config.json *.safetensors > SHA256SUMS`) or load with verify=False")
    listed = {}
    for line in sums.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            listed[name.lstrip("*")] = digest.lower()
    for f in files:
        if f.name not in listed:
            raise ModelError(f"{f}: not listed in {sums}; remedy: add its sha256 line")
        got = _sha256(f)
        if got != listed[f.name]:
            raise ModelError(f"{f}: sha256 {got} does not match {listed[f.name]} in {sums}: the file is corrupt or "
                             "was changed; remedy: restore it (re-run oracle/make_tiny_llama.py for the course model)")


def expected_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """HF name -> shape [out, in] of every tensor a llama of this config has (lm_head included)."""
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, d), "model.norm.weight": (d,),
              "lm_head.weight": (cfg.vocab_size, d)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (cfg.num_attention_heads * hd, d),
            p + "self_attn.k_proj.weight": (cfg.num_key_value_heads * hd, d),
            p + "self_attn.v_proj.weight": (cfg.num_key_value_heads * hd, d),
            p + "self_attn.o_proj.weight": (d, cfg.num_attention_heads * hd),
            p + "mlp.gate_proj.weight": (f, d), p + "mlp.up_proj.weight": (f, d), p + "mlp.down_proj.weight": (d, f)})
    return shapes


def load_llama(path, verify: bool = True) -> Llama:
    """Load an HF-layout llama directory: config.json, model.safetensors (or an index of shards),
    and SHA256SUMS covering them (checked unless verify=False). Refuses, with a ModelError naming
    the culprit, a missing or unexpected tensor, a wrong shape, or a checksum mismatch."""
    root = Path(path)
    cfg_path = root / "config.json"
    if not cfg_path.exists():
        raise ModelError(f"{root}: no config.json; remedy: point at a checkpoint directory (HF layout)")
    index = root / "model.safetensors.index.json"
    if index.exists():
        files = [root / n for n in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    else:
        files = [root / "model.safetensors"]
    for f in files:
        if not f.exists():
            raise ModelError(f"{f}: missing; remedy: restore the checkpoint's weight files")
    if verify:
        _verify_checksums(root, [cfg_path] + files)
    raw_cfg = json.loads(cfg_path.read_text())
    cfg = LlamaConfig.from_dict(raw_cfg, str(cfg_path))
    tensors: dict[str, np.ndarray] = {}
    for f in files:
        tensors.update(read_safetensors(f))
    shapes = expected_shapes(cfg)
    tied = cfg.tie_word_embeddings is True or ("lm_head.weight" not in tensors and cfg.tie_word_embeddings is None)
    if tied:  # the output projection is the embedding; HF ignores a stored lm_head then
        del shapes["lm_head.weight"]
        tensors.pop("lm_head.weight", None)
    for name, shape in shapes.items():
        if name not in tensors:
            raise ModelError(f"{root}: tensor {name} is missing (expected shape {list(shape)}); remedy: use a "
                             "complete checkpoint that matches config.json")
        if tuple(tensors[name].shape) != shape:
            raise ModelError(f"{root}: tensor {name} has shape {list(tensors[name].shape)}, config.json implies "
                             f"{list(shape)}; remedy: fix config.json or use the matching checkpoint")
    extra = [n for n in tensors if n not in shapes and not n.endswith("rotary_emb.inv_freq")]
    if extra:
        raise ModelError(f"{root}: unexpected tensor {extra[0]} (and {len(extra) - 1} more); this is not a plain "
                         "llama; remedy: use a llama checkpoint")
    t = lambda name: np.ascontiguousarray(tensors[name].T)  # [out, in] -> [in, out]
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        layers.append(Layer(
            attn_norm=tensors[p + "input_layernorm.weight"], wq=t(p + "self_attn.q_proj.weight"),
            wk=t(p + "self_attn.k_proj.weight"), wv=t(p + "self_attn.v_proj.weight"),
            wo=t(p + "self_attn.o_proj.weight"), mlp_norm=tensors[p + "post_attention_layernorm.weight"],
            w_gate=t(p + "mlp.gate_proj.weight"), w_up=t(p + "mlp.up_proj.weight"), w_down=t(p + "mlp.down_proj.weight")))
    embed = tensors["model.embed_tokens.weight"]
    return Llama(cfg, embed, layers, tensors["model.norm.weight"], embed if tied else tensors["lm_head.weight"])
