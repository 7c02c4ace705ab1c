//! L7.9's tiny llama in f32, in the style of nanoGPT's model.py: config, blocks, model, loader,
//! and the paged runner that keeps K/V in the blocks of a KvPool. A port of the Python reference's
//! `tinyllm/model/llama.py` and `tinyllm/model/runner.py` (given: the course's, not the student's).
//!
//! Hugging Face llama conventions throughout: config.json keys, tensor names
//! (`model.layers.N.self_attn.q_proj.weight`, ...), weights stored [out, in], and the rotate_half
//! RoPE of `LlamaForCausalLM`, so a real HF llama checkpoint (F32, F16 or BF16 safetensors) loads
//! through the same code. Plain f32 loops: no SIMD, no unsafe, no crate but tl-json.
//!
//! Shapes: N tokens in a forward, D hidden, H query heads, KVH key/value heads, G = H / KVH queries
//! per key/value head, hd head dim, F mlp width, V vocabulary, T key positions a query attends over,
//! B tokens per KV block, L layers. Every tensor is a flat row-major `Vec<f32>`; a projection
//! weight [out, in] maps x [N, in] to y [N, out] with y[n][o] = sum_i w[o][i] * x[n][i].

use std::path::Path;
use std::rc::Rc;

use tl_json::Json;

use crate::kv::{KvError, KvPool};

/// A checkpoint cannot be used, or the runner was misused; the message names the file, tensor or
/// argument, the cause and the remedy.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError(pub String);

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModelError {}

fn err<T>(msg: String) -> Result<T, ModelError> {
    Err(ModelError(msg))
}

// ---------------------------------------------------------------------------------------- config

#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    pub vocab_size: usize,              // V: token ids are 0..V-1
    pub hidden_size: usize,             // D: width of the residual stream
    pub intermediate_size: usize,       // F: width of the swiglu mlp
    pub num_hidden_layers: usize,       // L: transformer blocks
    pub num_attention_heads: usize,     // H: query heads
    pub num_key_value_heads: usize,     // KVH: key/value heads, H % KVH == 0 (grouped-query attention)
    pub rope_theta: f64,                // RoPE base
    pub rms_norm_eps: f64,              // added to the mean square in rmsnorm
    pub max_position_embeddings: usize, // positions 0..max-1 are valid
    pub tie_word_embeddings: Option<bool>, // None: config.json does not say
    pub head_dim: usize,                // hd; config.json's 0 or absent means hidden_size / num_attention_heads
}

const REQUIRED: [&str; 6] = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                             "num_attention_heads", "num_key_value_heads"];

/// A key of a JSON object; the last one wins when a key repeats (as Python's json.loads does).
fn field<'a>(obj: &'a Json, key: &str) -> Option<&'a Json> {
    match obj {
        Json::Obj(pairs) => pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}

/// Python's truthiness of a JSON value (`if d.get(key):`).
fn truthy(v: Option<&Json>) -> bool {
    match v {
        None | Some(Json::Null) | Some(Json::Bool(false)) => false,
        Some(Json::Int(i)) => *i != 0,
        Some(Json::Float(f)) => *f != 0.0,
        Some(Json::Str(s)) => !s.is_empty(),
        Some(Json::Arr(a)) => !a.is_empty(),
        Some(Json::Obj(o)) => !o.is_empty(),
        Some(Json::Bool(true)) => true,
    }
}

/// A count: a JSON integer (or an integral float, as Python's int() takes) that fits a usize.
fn count(v: &Json, key: &str, at: &str) -> Result<usize, ModelError> {
    let n = match v {
        Json::Int(i) => usize::try_from(*i).ok(),
        Json::Float(f) if f.fract() == 0.0 && *f >= 0.0 && *f < 1e15 => Some(*f as usize),
        _ => None,
    };
    match n {
        Some(n) => Ok(n),
        None => err(format!("{at}: {key} is {}, not a non-negative integer; remedy: fix config.json", v.dump())),
    }
}

fn number(v: &Json, key: &str, at: &str) -> Result<f64, ModelError> {
    match v {
        Json::Int(i) => Ok(*i as f64),
        Json::Float(f) => Ok(*f),
        _ => err(format!("{at}: {key} is {}, not a number; remedy: fix config.json", v.dump())),
    }
}

impl LlamaConfig {
    /// An HF llama config.json (already parsed); `at` names it in messages. The refusals are the
    /// Python LlamaConfig's, plus a zero size (Python would divide by it) and a non-numeric value.
    pub fn from_json(d: &Json, at: &str) -> Result<LlamaConfig, ModelError> {
        if !matches!(d, Json::Obj(_)) {
            return err(format!("{at}: not a JSON object; remedy: point at an HF llama config.json"));
        }
        for key in REQUIRED {
            if field(d, key).is_none() {
                return err(format!("{at}: key '{key}' is missing; remedy: add it (HF llama config format)"));
            }
        }
        if truthy(field(d, "rope_scaling")) {
            return err(format!("{at}: rope_scaling {} is not supported; remedy: use a checkpoint with plain RoPE",
                               field(d, "rope_scaling").map_or(String::new(), Json::dump)));
        }
        if let Some(act) = field(d, "hidden_act") {
            if !matches!(act, Json::Str(s) if s == "silu") {
                return err(format!("{at}: hidden_act {} is not silu; remedy: use a llama checkpoint", act.dump()));
            }
        }
        if truthy(field(d, "attention_bias")) || truthy(field(d, "mlp_bias")) {
            return err(format!("{at}: attention_bias/mlp_bias are set; remedy: use a llama checkpoint without biases"));
        }
        let get = |key: &str| count(field(d, key).unwrap_or(&Json::Null), key, at);
        let heads = get("num_attention_heads")?;
        // `d.get("num_key_value_heads") or d["num_attention_heads"]`: 0 or null mean "as many as H"
        let kv_heads = if truthy(field(d, "num_key_value_heads")) { get("num_key_value_heads")? } else { heads };
        let opt_count = |key: &str, default: usize| match field(d, key) {
            None => Ok(default),
            Some(v) => count(v, key, at),
        };
        let opt_number = |key: &str, default: f64| match field(d, key) {
            None => Ok(default),
            Some(v) => number(v, key, at),
        };
        let cfg = LlamaConfig {
            vocab_size: get("vocab_size")?,
            hidden_size: get("hidden_size")?,
            intermediate_size: get("intermediate_size")?,
            num_hidden_layers: get("num_hidden_layers")?,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            rope_theta: opt_number("rope_theta", 10000.0)?,
            rms_norm_eps: opt_number("rms_norm_eps", 1e-6)?,
            max_position_embeddings: opt_count("max_position_embeddings", 2048)?,
            tie_word_embeddings: match field(d, "tie_word_embeddings") {
                None | Some(Json::Null) => None,
                Some(v) => Some(matches!(v, Json::Bool(true))), // Python: `is True`
            },
            head_dim: if truthy(field(d, "head_dim")) { get("head_dim")? } else { 0 },
        };
        cfg.finish(at)
    }

    /// The dataclass's __post_init__: derive head_dim, check the heads and RoPE's pairs.
    fn finish(mut self, at: &str) -> Result<LlamaConfig, ModelError> {
        for (key, n) in [("vocab_size", self.vocab_size), ("hidden_size", self.hidden_size),
                         ("intermediate_size", self.intermediate_size), ("num_hidden_layers", self.num_hidden_layers),
                         ("num_attention_heads", self.num_attention_heads),
                         ("max_position_embeddings", self.max_position_embeddings)] {
            if n == 0 {
                return err(format!("{at}: {key} is 0; remedy: fix config.json"));
            }
        }
        if self.head_dim == 0 {
            self.head_dim = self.hidden_size / self.num_attention_heads;
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return err(format!("{at}: num_attention_heads {} is not a multiple of num_key_value_heads {}; \
                                remedy: fix config.json", self.num_attention_heads, self.num_key_value_heads));
        }
        if self.head_dim % 2 != 0 || self.head_dim == 0 {
            return err(format!("{at}: head_dim {} is odd or 0, RoPE needs pairs; remedy: fix config.json", self.head_dim));
        }
        Ok(self)
    }
}

// ---------------------------------------------------------------------------------------- blocks

/// sum_i a[i] * b[i], left to right in f32.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

/// y = x @ w.T: x [N, in], w [out, in] -> [N, out].
fn linear(x: &[f32], w: &[f32], d_in: usize) -> Vec<f32> {
    let d_out = w.len() / d_in;
    let mut y = Vec::with_capacity(x.len() / d_in * d_out); // [N, out]
    for xr in x.chunks_exact(d_in) {
        for wr in w.chunks_exact(d_in) {
            y.push(dot(xr, wr));
        }
    }
    y
}

/// x / sqrt(mean(x^2) + eps) * weight over each row of x [N, D].
fn rmsnorm(x: &[f32], weight: &[f32], eps: f64) -> Vec<f32> {
    let d = weight.len();
    let mut y = Vec::with_capacity(x.len()); // [N, D]
    for row in x.chunks_exact(d) {
        let ms = dot(row, row) / d as f32; // [1]
        let denom = (ms + eps as f32).sqrt();
        y.extend(row.iter().zip(weight).map(|(a, w)| a / denom * w));
    }
    y
}

/// cos and sin for HF's rotate_half RoPE, [N, hd] each: angle[n, i] = pos[n] * theta^(-2(i mod hd/2)/hd),
/// computed in f64 and rounded to f32 (as the Python reference does).
fn rope_tables(positions: &[usize], head_dim: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let inv_freq: Vec<f64> = (0..half).map(|i| 1.0 / theta.powf((2 * i) as f64 / head_dim as f64)).collect(); // [hd/2]
    let (mut cos, mut sin) = (Vec::with_capacity(positions.len() * head_dim), Vec::with_capacity(positions.len() * head_dim));
    for &p in positions {
        for i in 0..head_dim {
            let angle = p as f64 * inv_freq[i % half];
            cos.push(angle.cos() as f32); // [N, hd]
            sin.push(angle.sin() as f32); // [N, hd]
        }
    }
    (cos, sin)
}

/// Rotate x [N, heads * hd] in place by its positions: x * cos + rotate_half(x) * sin per head,
/// rotate_half(x) = [-x2, x1] for the halves x1, x2 of a head.
fn rope(x: &mut [f32], cos: &[f32], sin: &[f32], head_dim: usize) {
    let half = head_dim / 2;
    let per_token = x.len() / (cos.len() / head_dim);
    for (n, tok) in x.chunks_exact_mut(per_token).enumerate() {
        let (c, s) = (&cos[n * head_dim..(n + 1) * head_dim], &sin[n * head_dim..(n + 1) * head_dim]);
        for head in tok.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (x1, x2) = (head[i], head[i + half]);
                head[i] = x1 * c[i] - x2 * s[i];
                head[i + half] = x2 * c[i + half] + x1 * s[i + half];
            }
        }
    }
}

/// Grouped-query attention of one query q [H * hd] over T key and value rows [T][KVH * hd]:
/// query head h reads key/value head h / G. Returns [H * hd].
fn attend(q: &[f32], keys: &[&[f32]], values: &[&[f32]], kv_heads: usize, head_dim: usize) -> Vec<f32> {
    let heads = q.len() / head_dim;
    let group = heads / kv_heads; // G
    let scale = (1.0 / (head_dim as f64).sqrt()) as f32;
    let mut out = vec![0.0f32; q.len()]; // [H * hd]
    for h in 0..heads {
        let kvh = h / group;
        let (qh, span) = (&q[h * head_dim..(h + 1) * head_dim], kvh * head_dim..(kvh + 1) * head_dim);
        let scores: Vec<f32> = keys.iter()
            .map(|k| dot(qh, &k[span.clone()]) * scale)
            .collect(); // [T]
        let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect(); // [T]
        let total = exps.iter().sum::<f32>();
        let oh = &mut out[h * head_dim..(h + 1) * head_dim]; // [hd]
        for (e, v) in exps.iter().zip(values) {
            let p = e / total;
            for (o, x) in oh.iter_mut().zip(&v[span.clone()]) {
                *o += p * x;
            }
        }
    }
    out
}

/// down(silu(gate(x)) * up(x)) on x [N, D] -> [N, D]; silu(g) = g * sigmoid(g) written with tanh
/// so that it never overflows.
fn swiglu(x: &[f32], l: &Layer, d: usize, f: usize) -> Vec<f32> {
    let g = linear(x, &l.w_gate, d); // [N, F]
    let u = linear(x, &l.w_up, d); // [N, F]
    let act: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| g * (0.5 * (1.0 + (0.5 * g).tanh())) * u).collect(); // [N, F]
    linear(&act, &l.w_down, f) // [N, D]
}

// ----------------------------------------------------------------------------------------- model

/// One block's weights, each as stored in the checkpoint ([out, in] for the projections).
struct Layer {
    attn_norm: Vec<f32>, // [D]
    wq: Vec<f32>,        // [H * hd, D]
    wk: Vec<f32>,        // [KVH * hd, D]
    wv: Vec<f32>,        // [KVH * hd, D]
    wo: Vec<f32>,        // [D, H * hd]
    mlp_norm: Vec<f32>,  // [D]
    w_gate: Vec<f32>,    // [F, D]
    w_up: Vec<f32>,      // [F, D]
    w_down: Vec<f32>,    // [D, F]
}

/// The model. Where a forward's keys and values live is a `Kv`'s business: the whole sequence
/// (`forward_full`) or the blocks of a pool (`PagedRunner`).
pub struct Llama {
    pub cfg: LlamaConfig,
    embed: Vec<f32>,           // [V, D]
    layers: Vec<Layer>,        // L of them
    norm: Vec<f32>,            // [D]
    lm_head: Option<Vec<f32>>, // [V, D]; None: tied, the embedding is the output projection
}

impl std::fmt::Debug for Llama {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llama").field("cfg", &self.cfg).field("tied", &self.lm_head.is_none()).finish_non_exhaustive()
    }
}

/// The keys and values of one forward. `store` receives this pass's k, v [N, KVH * hd] of a layer;
/// `rows` then gives token n's key and value rows [T][KVH * hd], positions 0..=its own.
trait Kv {
    fn store(&mut self, layer: usize, k: &[f32], v: &[f32]);
    fn rows(&self, layer: usize, n: usize) -> (Vec<&[f32]>, Vec<&[f32]>);
}

/// forward_full's cache: this pass's own k, v, causal (token n sees tokens 0..=n).
struct FullKv {
    row: usize,  // KVH * hd
    k: Vec<f32>, // [N, KVH * hd]
    v: Vec<f32>, // [N, KVH * hd]
}

impl Kv for FullKv {
    fn store(&mut self, _layer: usize, k: &[f32], v: &[f32]) {
        self.k = k.to_vec();
        self.v = v.to_vec();
    }
    fn rows(&self, _layer: usize, n: usize) -> (Vec<&[f32]>, Vec<&[f32]>) {
        let r = self.row;
        ((0..=n).map(|t| &self.k[t * r..(t + 1) * r]).collect(), (0..=n).map(|t| &self.v[t * r..(t + 1) * r]).collect())
    }
}

impl Llama {
    /// Logits [N][V] of N tokens at the given positions, their K/V kept by `kv`.
    fn forward(&self, ids: &[u32], positions: &[usize], kv: &mut dyn Kv) -> Vec<Vec<f32>> {
        let c = &self.cfg;
        let (d, hd, eps) = (c.hidden_size, c.head_dim, c.rms_norm_eps);
        let (cos, sin) = rope_tables(positions, hd, c.rope_theta); // [N, hd] each
        let mut x: Vec<f32> = Vec::with_capacity(ids.len() * d); // [N, D]
        for &t in ids {
            x.extend_from_slice(&self.embed[t as usize * d..(t as usize + 1) * d]);
        }
        for (i, l) in self.layers.iter().enumerate() {
            let h = rmsnorm(&x, &l.attn_norm, eps); // [N, D]
            let mut q = linear(&h, &l.wq, d); // [N, H * hd]
            let mut k = linear(&h, &l.wk, d); // [N, KVH * hd]
            let v = linear(&h, &l.wv, d); // [N, KVH * hd]
            rope(&mut q, &cos, &sin, hd);
            rope(&mut k, &cos, &sin, hd);
            kv.store(i, &k, &v);
            let qw = c.num_attention_heads * hd;
            let mut ctx = Vec::with_capacity(q.len()); // [N, H * hd]
            for (n, qn) in q.chunks_exact(qw).enumerate() {
                let (keys, values) = kv.rows(i, n); // [T][KVH * hd] x2
                ctx.extend(attend(qn, &keys, &values, c.num_key_value_heads, hd));
            }
            let o = linear(&ctx, &l.wo, qw); // [N, D]
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let m = swiglu(&rmsnorm(&x, &l.mlp_norm, eps), l, d, c.intermediate_size); // [N, D]
            x.iter_mut().zip(&m).for_each(|(a, b)| *a += b);
        }
        let x = rmsnorm(&x, &self.norm, eps); // [N, D]
        let head = self.lm_head.as_ref().unwrap_or(&self.embed); // [V, D]
        linear(&x, head, d).chunks_exact(c.vocab_size).map(|r| r.to_vec()).collect() // [N][V]
    }

    /// The plain causal pass over a whole sequence from position 0, no cache: logits [T][V].
    pub fn forward_full(&self, ids: &[u32]) -> Result<Vec<Vec<f32>>, ModelError> {
        let (t, c) = (ids.len(), &self.cfg);
        if t == 0 || t > c.max_position_embeddings {
            return err(format!("forward_full: {t} tokens; a sequence needs 1..{}", c.max_position_embeddings));
        }
        if let Some(bad) = ids.iter().find(|&&x| x as usize >= c.vocab_size) {
            return err(format!("forward_full: token {bad} is outside the vocabulary [0, {})", c.vocab_size));
        }
        let positions: Vec<usize> = (0..t).collect();
        let mut kv = FullKv { row: c.num_key_value_heads * c.head_dim, k: Vec::new(), v: Vec::new() };
        Ok(self.forward(ids, &positions, &mut kv))
    }
}

// ---------------------------------------------------------------------------------------- loader

/// One tensor of a safetensors file, decoded to f32.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>, // row-major, shape.iter().product() values
}

/// IEEE half to f32 (exact: every f16 is an f32).
fn f16_to_f32(h: u16) -> f32 {
    let sign = if h >> 15 == 1 { -1.0f32 } else { 1.0 };
    let (exp, man) = ((h >> 10) & 0x1f, (h & 0x3ff) as u32);
    match exp {
        0 => sign * man as f32 * (2.0f32).powi(-24), // zero and subnormals
        31 if man == 0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => f32::from_bits(((h as u32 >> 15) << 31) | ((e as u32 + 112) << 23) | (man << 13)),
    }
}

/// Every tensor of one .safetensors file as f32 (F32, F16 and BF16 are accepted), in header order.
/// Layout: 8 bytes little-endian header length, a JSON header {name: {dtype, shape, data_offsets
/// [start, end]}, "__metadata__": {...}}, then the data; offsets count from the header's end.
pub fn read_safetensors(path: &Path) -> Result<Vec<(String, Tensor)>, ModelError> {
    let at = path.display();
    let raw = std::fs::read(path).map_err(|e| ModelError(format!("{at}: cannot read it ({e}); remedy: restore the checkpoint")))?;
    let bad = |why: String| ModelError(format!("{at}: not a safetensors file ({why}); remedy: re-export or re-download it"));
    if raw.len() < 8 {
        return Err(bad(format!("{} bytes, shorter than the 8-byte header length", raw.len())));
    }
    let header_len = u64::from_le_bytes([raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]]);
    let base = match usize::try_from(header_len).ok().and_then(|n| n.checked_add(8)) {
        Some(base) if base <= raw.len() => base,
        _ => return Err(bad(format!("header length {header_len} runs past the file's {} bytes", raw.len()))),
    };
    let text = std::str::from_utf8(&raw[8..base]).map_err(|e| bad(e.to_string()))?;
    let header = tl_json::parse(text).map_err(bad)?;
    let Json::Obj(entries) = header else { return Err(bad("the header is not a JSON object".into())) };
    let mut out: Vec<(String, Tensor)> = Vec::new();
    for (name, meta) in &entries {
        if name == "__metadata__" {
            continue;
        }
        let tensor = |why: String| ModelError(format!("{at}: tensor {name}: {why}; remedy: re-export or re-download it"));
        let dtype = match field(meta, "dtype") { Some(Json::Str(s)) => s.as_str(), _ => "" };
        let width = match dtype {
            "F32" => 4,
            "F16" | "BF16" => 2,
            _ => return err(format!("{at}: tensor {name} has dtype {}; remedy: convert to F32, F16 or BF16",
                                    field(meta, "dtype").map_or("none".to_string(), Json::dump))),
        };
        let ints = |key: &str| -> Option<Vec<usize>> {
            match field(meta, key) {
                Some(Json::Arr(a)) => a.iter().map(|v| match v { Json::Int(i) => usize::try_from(*i).ok(), _ => None }).collect(),
                _ => None,
            }
        };
        let shape = ints("shape").ok_or_else(|| tensor("its shape is not a list of non-negative integers".into()))?;
        let offsets = ints("data_offsets").filter(|o| o.len() == 2)
            .ok_or_else(|| tensor("its data_offsets are not a pair of non-negative integers".into()))?;
        let (start, end) = (offsets[0], offsets[1]);
        let need = shape.iter().try_fold(width, |n: usize, &s| n.checked_mul(s));
        if start > end || base.checked_add(end).map_or(true, |e| e > raw.len()) {
            return Err(tensor(format!("data_offsets [{start}, {end}] do not lie within the {} data bytes", raw.len() - base)));
        }
        if need != Some(end - start) {
            return Err(tensor(format!("data_offsets [{start}, {end}] hold {} bytes, shape {shape:?} of {dtype} needs {}",
                                      end - start, need.map_or("more than usize".to_string(), |n| n.to_string()))));
        }
        let bytes = &raw[base + start..base + end];
        let data: Vec<f32> = match dtype {
            "F32" => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            "F16" => bytes.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
            // BF16 is the top half of an f32
            _ => bytes.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect(),
        };
        if out.iter().any(|(n, _)| n == name) {
            return Err(tensor("the header names it twice".into()));
        }
        out.push((name.clone(), Tensor { shape, data }));
    }
    Ok(out)
}

/// HF name -> shape [out, in] of every tensor a llama of this config has (lm_head included).
fn expected_shapes(cfg: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
    let (d, f, hd) = (cfg.hidden_size, cfg.intermediate_size, cfg.head_dim);
    let (qd, kvd) = (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd);
    let mut shapes = vec![("model.embed_tokens.weight".to_string(), vec![cfg.vocab_size, d]),
                          ("model.norm.weight".to_string(), vec![d]),
                          ("lm_head.weight".to_string(), vec![cfg.vocab_size, d])];
    for i in 0..cfg.num_hidden_layers {
        for (name, shape) in [("input_layernorm.weight", vec![d]), ("post_attention_layernorm.weight", vec![d]),
                              ("self_attn.q_proj.weight", vec![qd, d]), ("self_attn.k_proj.weight", vec![kvd, d]),
                              ("self_attn.v_proj.weight", vec![kvd, d]), ("self_attn.o_proj.weight", vec![d, qd]),
                              ("mlp.gate_proj.weight", vec![f, d]), ("mlp.up_proj.weight", vec![f, d]),
                              ("mlp.down_proj.weight", vec![d, f])] {
            shapes.push((format!("model.layers.{i}.{name}"), shape));
        }
    }
    shapes
}

fn read_json(path: &Path) -> Result<Json, ModelError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ModelError(format!("{}: cannot read it ({e}); remedy: restore the checkpoint", path.display())))?;
    tl_json::parse(&text)
        .map_err(|e| ModelError(format!("{}: not valid JSON ({e}); remedy: restore the checkpoint", path.display())))
}

/// Load an HF-layout llama directory: config.json and model.safetensors (or an index of shards,
/// model.safetensors.index.json). Refuses, with a ModelError naming the culprit, a bad config, a
/// missing or unexpected tensor, or a wrong shape.
///
/// SHA256SUMS is NOT verified here, unlike the Python loader: Rust's std has no SHA-256, and the
/// judge, which owns the fixture and checks its sums in Python, is the one that must trust it.
pub fn load_llama(dir: &Path) -> Result<Llama, ModelError> {
    let root = dir.display();
    let cfg_path = dir.join("config.json");
    if !cfg_path.exists() {
        return err(format!("{root}: no config.json; remedy: point at a checkpoint directory (HF layout)"));
    }
    let index = dir.join("model.safetensors.index.json");
    let files: Vec<std::path::PathBuf> = if index.exists() {
        let mut names: Vec<String> = match field(&read_json(&index)?, "weight_map") {
            Some(Json::Obj(map)) => map.iter().filter_map(|(_, v)| match v { Json::Str(s) => Some(s.clone()), _ => None }).collect(),
            _ => return err(format!("{}: no weight_map object; remedy: restore the shard index", index.display())),
        };
        names.sort();
        names.dedup();
        names.iter().map(|n| dir.join(n)).collect()
    } else {
        vec![dir.join("model.safetensors")]
    };
    for f in &files {
        if !f.exists() {
            return err(format!("{}: missing; remedy: restore the checkpoint's weight files", f.display()));
        }
    }
    let cfg = LlamaConfig::from_json(&read_json(&cfg_path)?, &cfg_path.display().to_string())?;
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for f in &files {
        for (name, t) in read_safetensors(f)? {
            match tensors.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = t, // a later shard wins, as dict.update does
                None => tensors.push((name, t)),
            }
        }
    }
    let mut shapes = expected_shapes(&cfg);
    let has_head = tensors.iter().any(|(n, _)| n == "lm_head.weight");
    let tied = cfg.tie_word_embeddings == Some(true) || (!has_head && cfg.tie_word_embeddings.is_none());
    if tied {
        // the output projection is the embedding; HF ignores a stored lm_head then
        shapes.retain(|(n, _)| n != "lm_head.weight");
        tensors.retain(|(n, _)| n != "lm_head.weight");
    }
    for (name, shape) in &shapes {
        match tensors.iter().find(|(n, _)| n == name) {
            None => {
                return err(format!("{root}: tensor {name} is missing (expected shape {shape:?}); remedy: use a complete \
                                    checkpoint that matches config.json"))
            }
            Some((_, t)) if t.shape != *shape => {
                return err(format!("{root}: tensor {name} has shape {:?}, config.json implies {shape:?}; remedy: fix \
                                    config.json or use the matching checkpoint", t.shape))
            }
            Some(_) => {}
        }
    }
    let extra: Vec<&String> = tensors.iter().map(|(n, _)| n)
        .filter(|n| !shapes.iter().any(|(s, _)| s == *n) && !n.ends_with("rotary_emb.inv_freq")).collect();
    if let Some(first) = extra.first() {
        return err(format!("{root}: unexpected tensor {first} (and {} more); this is not a plain llama; \
                            remedy: use a llama checkpoint", extra.len() - 1));
    }
    let mut take = |name: &str| -> Vec<f32> {
        let i = tensors.iter().position(|(n, _)| n == name).expect("checked above");
        tensors.swap_remove(i).1.data
    };
    let layers = (0..cfg.num_hidden_layers).map(|i| {
        let mut w = |name: &str| take(&format!("model.layers.{i}.{name}"));
        Layer { attn_norm: w("input_layernorm.weight"), wq: w("self_attn.q_proj.weight"), wk: w("self_attn.k_proj.weight"),
                wv: w("self_attn.v_proj.weight"), wo: w("self_attn.o_proj.weight"),
                mlp_norm: w("post_attention_layernorm.weight"), w_gate: w("mlp.gate_proj.weight"),
                w_up: w("mlp.up_proj.weight"), w_down: w("mlp.down_proj.weight") }
    }).collect();
    let embed = take("model.embed_tokens.weight");
    let norm = take("model.norm.weight");
    let lm_head = if tied { None } else { Some(take("lm_head.weight")) };
    Ok(Llama { cfg, embed, layers, norm, lm_head })
}

// ---------------------------------------------------------------------------------- paged runner

/// A pool whose blocks hold this model's K/V: kv_shape = (layers, kv_heads, head_dim).
pub fn make_pool(model: &Llama, num_blocks: usize, block_tokens: usize) -> Result<KvPool, KvError> {
    let c = &model.cfg;
    KvPool::with_kv(num_blocks, block_tokens, (c.num_hidden_layers, c.num_key_value_heads, c.head_dim))
}

/// One token of a batch: its id, its position, and the block table of its request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seq<'a> {
    pub token: u32,
    pub pos: usize,
    pub table: &'a [u32],
}

/// The llama with its K/V in the blocks of a KvPool.
pub struct PagedRunner {
    model: Rc<Llama>,
    pool: KvPool,
}

/// The runner's cache: the pool's storage, [block][layer][slot][kv_head][head_dim]. Token n of the
/// batch writes at (table[pos / B], pos % B) and reads positions 0..=pos of its own table.
struct PagedKv<'p, 's> {
    pool: &'p mut KvPool,
    batch: &'p [Seq<'s>],
    layers: usize, // L
    bt: usize,     // B
    row: usize,    // KVH * hd
}

impl PagedKv<'_, '_> {
    /// Where position t of a table lives in the pool's flat storage, for one layer.
    fn at(&self, table: &[u32], layer: usize, t: usize) -> usize {
        ((table[t / self.bt] as usize * self.layers + layer) * self.bt + t % self.bt) * self.row
    }
}

impl Kv for PagedKv<'_, '_> {
    fn store(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        let r = self.row;
        for (n, s) in self.batch.iter().enumerate() {
            let at = self.at(s.table, layer, s.pos);
            self.pool.k_mut()[at..at + r].copy_from_slice(&k[n * r..(n + 1) * r]); // k [KVH * hd] into its slot
            self.pool.v_mut()[at..at + r].copy_from_slice(&v[n * r..(n + 1) * r]);
        }
    }
    fn rows(&self, layer: usize, n: usize) -> (Vec<&[f32]>, Vec<&[f32]>) {
        let (s, r) = (&self.batch[n], self.row);
        let (pk, pv) = (self.pool.k(), self.pool.v());
        let ats: Vec<usize> = (0..=s.pos).map(|t| self.at(s.table, layer, t)).collect(); // [T]
        (ats.iter().map(|&a| &pk[a..a + r]).collect(), ats.iter().map(|&a| &pv[a..a + r]).collect())
    }
}

impl PagedRunner {
    /// The pool must hold this model's K/V (see make_pool).
    pub fn new(model: Rc<Llama>, pool: KvPool) -> Result<PagedRunner, ModelError> {
        let c = &model.cfg;
        let want = (c.num_hidden_layers, c.num_key_value_heads, c.head_dim);
        let len = pool.num_blocks() * c.num_hidden_layers * pool.block_tokens() * c.num_key_value_heads * c.head_dim;
        if pool.kv_shape() != Some(want) || pool.k().len() != len || pool.v().len() != len {
            return err(format!("the pool's K/V storage has shape {:?}, this model needs {want:?}; remedy: make the pool with \
                                kv_shape=({}, {}, {}) (see make_pool)", pool.kv_shape(), want.0, want.1, want.2));
        }
        Ok(PagedRunner { model, pool })
    }

    pub fn model(&self) -> &Rc<Llama> {
        &self.model
    }

    pub fn pool(&self) -> &KvPool {
        &self.pool
    }

    pub fn pool_mut(&mut self) -> &mut KvPool {
        &mut self.pool
    }

    fn check(&self, batch: &[Seq]) -> Result<(), ModelError> {
        let (c, bt) = (&self.model.cfg, self.pool.block_tokens());
        if batch.is_empty() {
            return err("forward: an empty batch".into());
        }
        for s in batch {
            if s.token as usize >= c.vocab_size {
                return err(format!("forward: token {} is outside the vocabulary [0, {})", s.token, c.vocab_size));
            }
            if s.pos >= c.max_position_embeddings.min(s.table.len().saturating_mul(bt)) {
                return err(format!("forward: position {} is outside its table of {} blocks of {bt} (and \
                                    max_position_embeddings {}); remedy: allocate blocks first",
                                   s.pos, s.table.len(), c.max_position_embeddings));
            }
            if let Some(b) = s.table[..=s.pos / bt].iter().find(|&&b| b as usize >= self.pool.num_blocks()) {
                return err(format!("forward: block {b} of the table does not exist (the pool has blocks 0..{})",
                                   self.pool.num_blocks() - 1));
            }
        }
        for s in batch {
            let b = s.table[s.pos / bt]; // where this token's K/V goes
            let refs = self.pool.refcount(b).map_err(|e| ModelError(format!("forward: {e}")))?;
            if refs != 1 || self.pool.is_registered(b) {
                return err(format!("forward: block {b} is free, shared ({refs} references) or in the prefix index, so \
                                    writing into it would corrupt another owner; remedy: give the sequence a private copy \
                                    first (copy on write)"));
            }
        }
        Ok(())
    }

    /// Logits [N][V] for a batch of N one-token sequences: every token writes its K/V at
    /// (table[pos / B], pos % B) of every layer, then attends over positions 0..=pos of its own
    /// table, which include what earlier tokens of the same batch just wrote for the same request.
    pub fn forward(&mut self, batch: &[Seq]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.check(batch)?;
        let ids: Vec<u32> = batch.iter().map(|s| s.token).collect(); // [N]
        let positions: Vec<usize> = batch.iter().map(|s| s.pos).collect(); // [N]
        let c = &self.model.cfg;
        let mut kv = PagedKv { layers: c.num_hidden_layers, bt: self.pool.block_tokens(),
                               row: c.num_key_value_heads * c.head_dim, pool: &mut self.pool, batch };
        Ok(self.model.forward(&ids, &positions, &mut kv)) // [N][V]
    }
}

// ----------------------------------------------------------------------------------------- tests

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The model folder from TL_MODEL_DIR (fixtures/models/tiny-llama), or None with a note.
    pub(crate) fn model_dir(test: &str) -> Option<PathBuf> {
        match std::env::var_os("TL_MODEL_DIR") {
            Some(d) => Some(PathBuf::from(d)),
            None => {
                println!("{test}: skipped, TL_MODEL_DIR is not set (point it at fixtures/models/tiny-llama)");
                None
            }
        }
    }

    pub(crate) fn close(a: &[f32], b: &[f32]) -> Result<f32, String> {
        assert_eq!(a.len(), b.len());
        let mut worst = 0.0f32;
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let d = (x - y).abs();
            if d.is_nan() || d > 1e-4 + 1e-4 * y.abs() {
                return Err(format!("id {i}: {x} vs {y}"));
            }
            worst = worst.max(d);
        }
        Ok(worst)
    }

    fn floats(j: &Json) -> Vec<f32> {
        match j {
            Json::Arr(a) => a.iter().map(|v| number(v, "x", "golden").unwrap() as f32).collect(),
            _ => panic!("not an array"),
        }
    }

    #[test]
    fn forward_full_matches_golden_logits() {
        let Some(dir) = model_dir("forward_full_matches_golden_logits") else { return };
        let model = load_llama(&dir).unwrap();
        let golden = read_json(&dir.join("golden_logits.json")).unwrap();
        let ids: Vec<u32> = floats(field(&golden, "ids").unwrap()).iter().map(|&x| x as u32).collect();
        let Some(Json::Arr(want)) = field(&golden, "last_rows") else { panic!("no last_rows") };
        let got = model.forward_full(&ids).unwrap();
        assert_eq!(got.len(), ids.len());
        let mut worst = 0.0f32;
        for (i, w) in want.iter().enumerate() {
            let row = &got[ids.len() - want.len() + i];
            worst = worst.max(close(row, &floats(w)).unwrap_or_else(|e| panic!("last row {i}: {e}")));
        }
        println!("forward_full vs golden_logits.json ({} rows): max abs error {worst:.3e}", want.len());
    }

    fn lcg_ids(n: usize, vocab: u32, seed: u64) -> Vec<u32> {
        let mut s = seed;
        (0..n).map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        }).collect()
    }

    #[test]
    fn paged_runner_matches_forward_full() {
        let Some(dir) = model_dir("paged_runner_matches_forward_full") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        let pool = make_pool(&model, 32, 4).unwrap();
        let mut runner = PagedRunner::new(model.clone(), pool).unwrap();
        let a = lcg_ids(30, 256, 1);
        let b = lcg_ids(9, 256, 2);
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        for _ in 0..8 { ta.push(runner.pool_mut().alloc().unwrap()); }
        for _ in 0..3 { tb.push(runner.pool_mut().alloc().unwrap()); }
        let (fa, fb) = (model.forward_full(&a).unwrap(), model.forward_full(&b).unwrap());
        // request a in chunks; request b rides along in two of them (two tables in one batch)
        let mut fed = 0;
        let mut fed_b = 0;
        for (n, with_b) in [(1, false), (6, true), (3, false), (9, true), (11, false)] {
            let mut batch: Vec<Seq> = (fed..fed + n).map(|p| Seq { token: a[p], pos: p, table: &ta }).collect();
            let nb = if with_b { 4.min(b.len() - fed_b) } else { 0 };
            batch.splice(1..1, (fed_b..fed_b + nb).map(|p| Seq { token: b[p], pos: p, table: &tb }));
            let rows = runner.forward(&batch).unwrap();
            assert_eq!(rows.len(), n + nb);
            for (row, s) in rows.iter().zip(&batch) {
                let want = if s.table == &ta[..] { &fa[s.pos] } else { &fb[s.pos] };
                close(row, want).unwrap_or_else(|e| panic!("position {}: {e}", s.pos));
            }
            fed += n;
            fed_b += nb;
        }
    }

    #[test]
    fn paged_runner_refuses_misuse() {
        let Some(dir) = model_dir("paged_runner_refuses_misuse") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        assert!(PagedRunner::new(model.clone(), KvPool::new(4, 4).unwrap()).is_err(), "a pool without K/V storage");
        let mut runner = PagedRunner::new(model.clone(), make_pool(&model, 10, 64).unwrap()).unwrap();
        let t: Vec<u32> = (0..9).map(|_| runner.pool_mut().alloc().unwrap()).collect(); // 576 positions > 512
        let refuse = |r: &mut PagedRunner, batch: &[Seq], what: &str| {
            let e = r.forward(batch).expect_err(what);
            println!("{what}: {e}");
        };
        refuse(&mut runner, &[], "an empty batch");
        refuse(&mut runner, &[Seq { token: 256, pos: 0, table: &t }], "token V");
        refuse(&mut runner, &[Seq { token: 1, pos: 128, table: &t[..2] }], "a position past the table");
        refuse(&mut runner, &[Seq { token: 1, pos: 512, table: &t }], "a position past max_position_embeddings");
        refuse(&mut runner, &[Seq { token: 1, pos: 0, table: &[99] }], "a block that does not exist");
        refuse(&mut runner, &[Seq { token: 1, pos: 0, table: &[9] }], "a free block");
        runner.pool_mut().retain(t[1]).unwrap();
        refuse(&mut runner, &[Seq { token: 1, pos: 64, table: &t }], "a shared block");
        runner.pool_mut().set_fill(t[2], 64).unwrap();
        runner.pool_mut().register(vec![7; 64], t[2]).unwrap();
        refuse(&mut runner, &[Seq { token: 1, pos: 130, table: &t }], "a registered block");
        assert!(runner.forward(&[Seq { token: 1, pos: 511, table: &t }]).is_ok(), "the last position is fine");
        assert!(model.forward_full(&[]).is_err() && model.forward_full(&[256]).is_err() && model.forward_full(&[0; 513]).is_err());
    }

    // ---- loader tests on checkpoints written here (no model folder, no pool needed)

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tl-engine-model-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A safetensors file of (name, dtype, shape, raw little-endian bytes), offsets as given or right.
    fn safetensors(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)], offsets: Option<(usize, usize)>) -> Vec<u8> {
        let (mut header, mut data) = (vec!["\"__metadata__\":{\"format\":\"pt\"}".to_string()], Vec::<u8>::new());
        for (name, dtype, shape, bytes) in tensors {
            let (s, e) = offsets.unwrap_or((data.len(), data.len() + bytes.len()));
            header.push(format!("\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{s},{e}]}}"));
            data.extend(bytes);
        }
        let h = format!("{{{}}}", header.join(","));
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend(h.as_bytes());
        out.extend(data);
        out
    }

    fn f32_bytes(xs: &[f32]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn safetensors_decodes_f32_f16_bf16_and_refuses_bad_files() {
        let d = scratch("st");
        let p = d.join("model.safetensors");
        let f16: Vec<u8> = [0x3c00u16, 0xc000, 0x0001, 0x7c00, 0x3555].iter().flat_map(|h| h.to_le_bytes()).collect();
        let bf16: Vec<u8> = [0x3f80u16, 0xc040].iter().flat_map(|h| h.to_le_bytes()).collect();
        std::fs::write(&p, safetensors(&[("a", "F32", vec![2, 2], f32_bytes(&[1.0, -2.5, 3.25, 1e-3])),
                                         ("b", "F16", vec![5], f16), ("c", "BF16", vec![2], bf16)], None)).unwrap();
        let t = read_safetensors(&p).unwrap();
        assert_eq!(t[0], ("a".to_string(), Tensor { shape: vec![2, 2], data: vec![1.0, -2.5, 3.25, 1e-3] }));
        assert_eq!(t[1].1.data[..4], [1.0, -2.0, 2.0f32.powi(-24), f32::INFINITY]);
        assert!((t[1].1.data[4] - 1.0 / 3.0).abs() < 1e-3);
        assert_eq!(t[2].1.data, vec![1.0, -3.0]);
        let bad = |bytes: Vec<u8>, what: &str| {
            std::fs::write(&p, bytes).unwrap();
            let e = read_safetensors(&p).expect_err(what);
            println!("{what}: {e}");
        };
        bad(vec![1, 2, 3], "shorter than 8 bytes");
        bad(u64::MAX.to_le_bytes().to_vec(), "a header length past the end");
        bad(safetensors(&[("a", "F32", vec![3], f32_bytes(&[1.0, 2.0]))], None), "offsets shorter than the shape");
        bad(safetensors(&[("a", "F32", vec![1], f32_bytes(&[1.0]))], Some((0, 8))), "offsets past the data");
        bad(safetensors(&[("a", "F32", vec![1], f32_bytes(&[1.0]))], Some((4, 0))), "start after end");
        bad(safetensors(&[("a", "I64", vec![1], vec![0; 8])], None), "a dtype not supported");
        bad(safetensors(&[("a", "F32", vec![usize::MAX, 4], vec![])], None), "a shape that overflows");
        let _ = std::fs::remove_dir_all(&d);
    }

    const CONFIG: &str = r#"{"vocab_size": 8, "hidden_size": 4, "intermediate_size": 6, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 16, "hidden_act": "silu"}"#;

    fn config(extra: &str) -> Result<LlamaConfig, ModelError> {
        let text = if extra.is_empty() { CONFIG.to_string() } else { format!("{},{extra}}}", CONFIG.trim_end_matches('}')) };
        LlamaConfig::from_json(&tl_json::parse(&text).unwrap(), "config.json")
    }

    #[test]
    fn config_defaults_and_refusals() {
        let c = config("").unwrap();
        assert_eq!((c.head_dim, c.rope_theta, c.rms_norm_eps, c.tie_word_embeddings), (2, 10000.0, 1e-6, None));
        assert_eq!(config(r#""num_key_value_heads": null"#).unwrap().num_key_value_heads, 2, "null kv heads: as many as H (the last key wins)");
        assert_eq!(config(r#""num_key_value_heads": 0"#).unwrap().num_key_value_heads, 2, "0 kv heads: as many as H");
        assert_eq!(config(r#""tie_word_embeddings": true, "head_dim": 4"#).unwrap().head_dim, 4);
        for (extra, what) in [(r#""rope_scaling": {"type": "linear"}"#, "rope_scaling"), (r#""hidden_act": "gelu""#, "gelu"),
                              (r#""attention_bias": true"#, "attention bias"), (r#""mlp_bias": 1"#, "mlp bias"),
                              (r#""head_dim": 3"#, "odd head_dim"), (r#""num_key_value_heads": 2"#, "2 kv heads for 2 heads: ok"),
                              (r#""hidden_size": 0"#, "zero width"), (r#""vocab_size": "8""#, "a string size"),
                              (r#""rope_theta": "big""#, "a string theta")] {
            let r = config(extra);
            if what.ends_with("ok") { assert!(r.is_ok(), "{what}: {r:?}"); continue; }
            println!("{what}: {}", r.expect_err(what));
        }
        let missing = CONFIG.replace(r#""intermediate_size": 6,"#, "");
        assert!(LlamaConfig::from_json(&tl_json::parse(&missing).unwrap(), "c").unwrap_err().0.contains("intermediate_size"));
        assert!(config(r#""num_attention_heads": 3, "num_key_value_heads": 2"#).unwrap_err().0.contains("not a multiple"));
    }

    /// A complete random checkpoint of CONFIG (plus `extra` config keys), minus or plus some tensors.
    fn checkpoint(name: &str, extra: &str, edit: impl Fn(&mut Vec<(String, Vec<usize>)>)) -> PathBuf {
        let d = scratch(name);
        let cfg = config(extra).unwrap();
        let mut shapes = expected_shapes(&cfg);
        shapes.retain(|(n, _)| n != "lm_head.weight");
        edit(&mut shapes);
        let blobs: Vec<(String, Vec<usize>, Vec<u8>)> = shapes.iter().enumerate().map(|(i, (n, s))| {
            let k: usize = s.iter().product();
            (n.clone(), s.clone(), f32_bytes(&(0..k).map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5).collect::<Vec<_>>()))
        }).collect();
        let refs: Vec<(&str, &str, Vec<usize>, Vec<u8>)> = blobs.iter().map(|(n, s, b)| (n.as_str(), "F32", s.clone(), b.clone())).collect();
        std::fs::write(d.join("model.safetensors"), safetensors(&refs, None)).unwrap();
        let text = if extra.is_empty() { CONFIG.to_string() } else { format!("{},{extra}}}", CONFIG.trim_end_matches('}')) };
        std::fs::write(d.join("config.json"), text).unwrap();
        d
    }

    #[test]
    fn loader_checks_tensors_and_ties_embeddings() {
        let d = checkpoint("ok", "", |_| {});
        let m = load_llama(&d).unwrap();
        assert!(m.lm_head.is_none(), "no lm_head and no tie_word_embeddings: tied");
        let rows = m.forward_full(&[1, 2, 3]).unwrap();
        assert!(rows.len() == 3 && rows.iter().all(|r| r.len() == 8 && r.iter().all(|x| x.is_finite())));
        let cases: Vec<(PathBuf, &str)> = vec![
            (checkpoint("untied", r#""tie_word_embeddings": false"#, |_| {}), "lm_head.weight is missing"),
            (checkpoint("missing", "", |s| { s.remove(3); }), "is missing"),
            (checkpoint("shape", "", |s| s[0].1 = vec![8, 5]), "has shape [8, 5]"),
            (checkpoint("extra", "", |s| s.push(("model.layers.0.self_attn.q_proj.bias".into(), vec![4]))), "unexpected tensor"),
        ];
        for (dir, want) in &cases {
            let e = load_llama(dir).map(|_| ()).unwrap_err();
            assert!(e.0.contains(want), "{}: {e}", dir.display());
            println!("{e}");
        }
        let tied = checkpoint("tied-with-head", r#""tie_word_embeddings": true"#, |s| s.push(("lm_head.weight".into(), vec![8, 4])));
        assert!(load_llama(&tied).unwrap().lm_head.is_none(), "a stored lm_head is ignored when tied");
        let inv = checkpoint("inv-freq", "", |s| s.push(("model.layers.0.self_attn.rotary_emb.inv_freq".into(), vec![1])));
        assert!(load_llama(&inv).is_ok(), "rotary_emb.inv_freq is tolerated");
        assert!(load_llama(&d.join("nowhere")).unwrap_err().0.contains("no config.json"));
        std::fs::remove_file(d.join("model.safetensors")).unwrap();
        assert!(load_llama(&d).unwrap_err().0.contains("missing"));
        for (dir, _) in cases.iter().chain([(d, ""), (tied, ""), (inv, "")].iter()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
