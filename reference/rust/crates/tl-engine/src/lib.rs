//! tl-engine: the course's inference engine in Rust (std only).
//!
//! - `rng`: PCG32, the generator every request draws from (spec/pcg32.md; L10.1).
//! - `sampling`: penalties, the sampling distribution, `sample` and `logprob` (spec/sampling.md; L10.1).
//! - `kv`: the refcounted KV block pool with its prefix index (the Python reference's `tinyllm/kv.py`; L10.1).
//! - `model`: L7.9's tiny llama and its paged runner (given).
//! - `runner_target`: the production `Target` of speculative decoding (given).
//! - `spec`: speculative decoding (L10.8; the contract is spec/rust/spec.rs).
//!
//! Every module is a port of the Python reference, bit for bit where spec/rust.md says so (tokens,
//! draw counts and the generator's stream).

#![forbid(unsafe_code)]

pub mod rng;
pub mod sampling;
pub mod kv;
pub mod model;
pub mod runner_target;
pub mod spec;
