//! Speculative decoding in the engine (chapter L10.8): the Rust contract of `tl_engine::spec`.
//!
//! This file is the contract (spec/rust.md explains every amendment to the chapter's section 4);
//! `ol start L10.8 --lang rust` copies it as your stub. Replace each `todo!()` with your code.
//! Letters: `p` is only ever the target's distribution, `q` the draft's; the sampling parameters
//! are `params`. Every rule is the Python specification's (`spec.pyi`): the same drafts, the same
//! draws in the same order, the same refusals.
//!
//! Errors: every bad argument is `Err(SpecError)`, never a panic (an index out of bounds, an
//! `unwrap` on `None`, an overflow: each fails the test that sent it). Bad, everywhere: a token id
//! not below V wherever a vocabulary size V is known (the length of the rows or of `p`); wrong
//! lengths; the ranges each function names. The message should name the argument and what is
//! allowed; its wording is free. Negative ids and counts, a float `k`, a matrix where a row is due:
//! the types rule them out, and the judge's worker refuses them for you before your code runs.
//!
//! Domain: every value of every parameter's type, and the tests draw from all of it, edges first
//! (spec/rust.md section 7): a usize up to usize::MAX (k, n, block_tokens, tokens, keep, max_new:
//! never an overflow, never an f64 in between), a u32 id up to u32::MAX, empty and one-element
//! slices, every f64 class (NaN, +inf, -inf, -0.0, subnormals; each function says which it refuses).

// The Rust reference (reference/rust/crates/tl-engine/src/spec.rs): the contract above with its
// bodies written, a port of the Python reference `reference/tinyllm/infer/spec.py`, function for
// function. The loop, one round per iteration (gpt-fast style, each step a small function):
//     propose -> target.extend(pending + draft) -> verify_draft -> target.truncate(kept length)
// Numbers follow spec/sampling.md: f64 throughout, every sum left to right in ascending id order.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::kv::KvPool;
use crate::rng::Pcg32;
use crate::sampling::SamplingParams;
#[allow(unused_imports)]
use crate::sampling::{apply_penalties, argmax, distribution, logprob, sample, SamplingError};

/// The largest k the runtime accepts (one forward of 17 rows).
pub const MAX_K: usize = 16;
/// The longest suffix prompt lookup tries first.
pub const DEFAULT_MAX_NGRAM: usize = 3;
/// The shortest suffix it falls back to.
pub const DEFAULT_MIN_NGRAM: usize = 1;
/// The largest max_ngram the runtime accepts (config/runtime.schema.json); parse refuses more.
pub const MAX_NGRAM: usize = 8;

/// A bad argument to this module. The message names the argument and the allowed values.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draft {
    None,
    Ngram,
    PromptLookup,
}

impl Draft {
    /// The runtime's name of this draft: "none", "ngram" or "prompt_lookup".
    pub fn name(self) -> &'static str {
        match self {
            Draft::None => "none",
            Draft::Ngram => "ngram",
            Draft::PromptLookup => "prompt_lookup",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpecConfig {
    pub draft: Draft,
    pub k: usize,
    pub max_ngram: usize,
    pub min_ngram: usize,
}

impl SpecConfig {
    /// The runtime's `[engine].speculative = { draft = ..., k = ... }` as a SpecConfig, with
    /// max_ngram = DEFAULT_MAX_NGRAM and min_ngram = DEFAULT_MIN_NGRAM: `parse_with(draft, k, 3, 1)`.
    pub fn parse(draft: &str, k: i64) -> Result<SpecConfig, SpecError> {
        SpecConfig::parse_with(draft, k, DEFAULT_MAX_NGRAM as i64, DEFAULT_MIN_NGRAM as i64)
    }

    /// draft must be exactly "none", "ngram" or "prompt_lookup" (case included: "NGRAM" is refused);
    /// 1 <= k <= MAX_K; 1 <= min_ngram <= max_ngram <= MAX_NGRAM (a negative bound is refused: it
    /// is no usize). Anything else is a SpecError naming the bad value and the allowed ones (a typo
    /// such as "prompt-lookup" is refused).
    pub fn parse_with(draft: &str, k: i64, max_ngram: i64, min_ngram: i64) -> Result<SpecConfig, SpecError> {
        let kinds = [Draft::None, Draft::Ngram, Draft::PromptLookup];
        let Some(kind) = kinds.into_iter().find(|d| d.name() == draft) else {
            return Err(SpecError(format!(
                "speculative draft {draft:?} is unknown: allowed \"none\", \"ngram\", \"prompt_lookup\""
            )));
        };
        if !(1..=MAX_K as i64).contains(&k) {
            return Err(SpecError(format!(
                "speculative k = {k} is out of range: allowed an integer 1 <= k <= {MAX_K}"
            )));
        }
        // a negative bound is out of range too: it does not even convert to usize
        let (Ok(max), Ok(min)) = (usize::try_from(max_ngram), usize::try_from(min_ngram)) else {
            return Err(ngram_bounds_error(max_ngram, min_ngram));
        };
        check_ngrams(max, min)?;
        if max > MAX_NGRAM {
            return Err(SpecError(format!(
                "max_ngram = {max} is out of range: allowed 1 <= min_ngram <= max_ngram <= {MAX_NGRAM}"
            )));
        }
        Ok(SpecConfig { draft: kind, k: k as usize, max_ngram: max, min_ngram: min })
    }
}

// ---- validation helpers: every bad call is a SpecError, never a panic --------------------------

/// The sampler's refusal (a SamplingError), answered as this module's.
fn refused(e: SamplingError) -> SpecError {
    SpecError(e.0)
}

/// Every id must lie below the vocabulary size; the first that does not is named.
fn check_ids(ids: &[u32], name: &str, vocab: usize) -> Result<(), SpecError> {
    match ids.iter().find(|&&t| t as usize >= vocab) {
        Some(t) => Err(SpecError(format!("{name} holds token id {t}, outside the vocabulary [0, {vocab})"))),
        None => Ok(()),
    }
}

/// The refusal of n-gram bounds outside 1 <= min_ngram <= max_ngram, naming both.
fn ngram_bounds_error(max_ngram: impl std::fmt::Display, min_ngram: impl std::fmt::Display) -> SpecError {
    SpecError(format!(
        "need integers 1 <= min_ngram <= max_ngram, got min_ngram={min_ngram}, max_ngram={max_ngram}"
    ))
}

/// 1 <= min_ngram <= max_ngram, else the refusal naming both.
fn check_ngrams(max_ngram: usize, min_ngram: usize) -> Result<(), SpecError> {
    if 1 <= min_ngram && min_ngram <= max_ngram {
        Ok(())
    } else {
        Err(ngram_bounds_error(max_ngram, min_ngram))
    }
}

/// A distribution: non-empty (of length `vocab` when given), finite, non-negative entries.
fn check_dist(a: &[f64], name: &str, vocab: Option<usize>) -> Result<(), SpecError> {
    let right_len = match vocab {
        Some(v) => a.len() == v,
        None => true,
    };
    if a.is_empty() || !right_len {
        let want = match vocab {
            Some(v) => format!("length {v}"),
            None => "one non-empty row".to_string(),
        };
        return Err(SpecError(format!("{name} must be a distribution of {want}, got length {}", a.len())));
    }
    if a.iter().any(|&x| !x.is_finite() || x < 0.0) {
        return Err(SpecError(format!("{name} must hold finite non-negative probabilities")));
    }
    Ok(())
}

/// A uniform must lie in [0, 1) (NaN does not).
fn check_unit(u: f64, name: &str) -> Result<f64, SpecError> {
    if (0.0..1.0).contains(&u) {
        Ok(u)
    } else {
        Err(SpecError(format!("{name} must be a uniform in [0, 1), got {u:?}")))
    }
}

// ---- drafts from the context -------------------------------------------------------------------

/// Copy what followed the most recent earlier occurrence of the context's suffix.
///
/// With t = ctx.len(): for n = max_ngram down to min_ngram, take the last n tokens ctx[t-n..]
/// and find the largest start i < t - n with ctx[i..i+n] == ctx[t-n..]. The draft is
/// ctx[i+n .. min(i+n+k, t)]: it may run into the suffix itself, and never invents tokens past
/// the end. The first n with a match wins. No match for any n (or n >= t) gives [].
/// k = 0 gives []. Example: ctx [5 6 7 8 5 6], k 3, n 3..1 -> [7 8 5].
/// Refused with SpecError, whatever ctx and k: min_ngram < 1, max_ngram < min_ngram.
/// Admitted: every k up to usize::MAX (it copies up to the end), max_ngram up to 2^16 (past it: free).
pub fn prompt_lookup(ctx: &[u32], k: usize, max_ngram: usize, min_ngram: usize) -> Result<Vec<u32>, SpecError> {
    check_ngrams(max_ngram, min_ngram)?;
    let t = ctx.len();
    let longest = max_ngram.min(t.saturating_sub(1)); // an earlier occurrence needs n < t
    for n in (min_ngram..=longest).rev() {
        let suffix = &ctx[t - n..];
        for i in (0..t - n).rev() {
            // most recent earlier occurrence first: start i < t - n
            if &ctx[i..i + n] == suffix {
                let start = i + n;
                return Ok(ctx[start..start + k.min(t - start)].to_vec()); // may run into the suffix itself
            }
        }
    }
    Ok(Vec::new())
}

/// The most frequent follower of the last m tokens of `ext` over its earlier occurrences, ties to
/// the lowest id; None when they never occurred before.
fn most_frequent_follower(ext: &[u32], m: usize) -> Option<u32> {
    let suffix = &ext[ext.len() - m..];
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for i in 0..ext.len() - m {
        // an occurrence at i needs a follower ext[i + m]
        if &ext[i..i + m] == suffix {
            *counts.entry(ext[i + m]).or_insert(0) += 1;
        }
    }
    // the largest (count, Reverse(id)): most frequent, then the lowest id
    counts.into_iter().max_by_key(|&(tok, count)| (count, Reverse(tok))).map(|(tok, _)| tok)
}

/// Draft up to k tokens from follower counts over the context itself.
///
/// Per drafted token, over the extended context e (ctx plus the tokens drafted so far):
/// for m = n-1 down to 1, count, for every start i with i + m < e.len() and
/// e[i..i+m] == e[e.len()-m..], the follower e[i+m]. The first m with any count decides: the
/// most frequent follower, ties to the lowest id. Append it to the draft and to e. Stop after
/// k tokens or when no m matches. n = 1 drafts nothing; k = 0 drafts nothing. n = 0 is a SpecError.
/// Every n up to 2^16 is admitted (past it: free); ties go to the lowest id however many followers tie.
pub fn ngram_draft(ctx: &[u32], k: usize, n: usize) -> Result<Vec<u32>, SpecError> {
    if n < 1 {
        return Err(SpecError(format!("n must be an integer >= 1, got {n}")));
    }
    let mut ext = ctx.to_vec();
    let mut draft = Vec::new();
    while draft.len() < k {
        let longest = (n - 1).min(ext.len().saturating_sub(1)); // an earlier occurrence of m tokens needs m < e.len()
        // longest context first, then back off
        let Some(next) = (1..=longest).rev().find_map(|m| most_frequent_follower(&ext, m)) else {
            break;
        };
        draft.push(next);
        ext.push(next); // drafted tokens count as context for the next one
    }
    Ok(draft)
}

/// The draft of `cfg.draft`, of at most k tokens.
///
/// None -> []; Ngram -> ngram_draft(ctx, k, cfg.max_ngram);
/// PromptLookup -> prompt_lookup(ctx, k, cfg.max_ngram, cfg.min_ngram).
/// k is the round's budget and bounds the draft alone: cfg.k is not consulted here (the loop
/// passes min(cfg.k, ...)), so k > cfg.k drafts up to k tokens. k = 0 gives [] for every kind.
/// A cfg built without parse is refused, whatever k (0 included), where its function refuses its
/// bounds: PromptLookup's min_ngram < 1 or max_ngram < min_ngram, Ngram's max_ngram = 0 (free:
/// Ngram's min_ngram, never read, and every bad cfg with None).
pub fn propose(cfg: &SpecConfig, ctx: &[u32], k: usize) -> Result<Vec<u32>, SpecError> {
    match cfg.draft {
        Draft::None => Ok(Vec::new()),
        Draft::Ngram => ngram_draft(ctx, k, cfg.max_ngram),
        Draft::PromptLookup => prompt_lookup(ctx, k, cfg.max_ngram, cfg.min_ngram),
    }
}

// ---- accept or resample (M07.6) ----------------------------------------------------------------

/// Left-to-right f64 sum from 0.0, as spec/sampling.md sums (numpy's pairwise sum rounds differently).
fn seq_sum(a: &[f64]) -> f64 {
    let mut total = 0.0;
    for &x in a {
        total += x;
    }
    total
}

/// normalize(max(0, p - q)): each entry divided by the mass, the mass summed left to right in
/// ascending id order (spec/sampling.md).
///
/// If that mass is 0 (p <= q everywhere) returns p normalized the same way (p / its left-to-right
/// sum). p and q must be non-empty, of the same length, with finite non-negative entries, else
/// SpecError. A p with no mass at all: free (speculative_step refuses such a p).
pub fn residual(p: &[f64], q: &[f64]) -> Result<Vec<f64>, SpecError> {
    check_dist(p, "p", None)?;
    check_dist(q, "q", Some(p.len()))?;
    // [V] max(0, p - q), as numpy's maximum(0.0, d): 0.0 unless d > 0
    let r: Vec<f64> = p.iter().zip(q).map(|(&pi, &qi)| if pi - qi > 0.0 { pi - qi } else { 0.0 }).collect();
    let mass = seq_sum(&r);
    if mass > 0.0 {
        return Ok(r.iter().map(|&ri| ri / mass).collect()); // divided, not multiplied by 1 / mass
    }
    let total = seq_sum(p); // p <= q everywhere: nothing was rejected, p itself is the answer
    Ok(p.iter().map(|&pi| pi / total).collect())
}

/// The sampler's `sample`: walk ids ascending, skip zero probabilities, return the first id
/// whose running sum exceeds u (the last nonzero id if rounding leaves u beyond the total).
/// p is used as given: not renormalized, not checked to sum to 1. Example: p [0, 0.75, 0.25],
/// u 0.8 -> 2. SpecError unless p is non-empty, finite, non-negative with at least one nonzero
/// entry, and u is in [0, 1) (NaN and the infinities are refused; -0.0 is 0.0).
pub fn sample_dense(p: &[f64], u: f64) -> Result<usize, SpecError> {
    check_dist(p, "p", None)?;
    if !p.iter().any(|&x| x > 0.0) {
        return Err(SpecError("p has no token of nonzero probability: there is nothing to sample".to_string()));
    }
    let u = check_unit(u, "u")?;
    sample(p, u).map_err(refused)
}

/// Accept-or-resample for one proposed token x ~ q.
///
/// Accept, returning (x, true), when u_accept < p[x] / q[x]; otherwise return
/// (sample_dense(residual(p, q), u_resample), false). p and q are used as given (neither is
/// renormalized). Example: p [0.2 0.5 0.3], q [0.6 0.2 0.2], x 0: u_accept 0.3 -> (0, true);
/// u_accept 0.5, u_resample 0.8 -> (2, false).
/// SpecError unless: p and q are as residual requires; x < p.len(); u_accept and u_resample are
/// each in [0, 1) (both checked on every call, even when x is accepted); q[x] > 0 (a draft with
/// q[x] == 0 could not have proposed x); p has some mass.
pub fn speculative_step(p: &[f64], q: &[f64], x: usize, u_accept: f64, u_resample: f64) -> Result<(usize, bool), SpecError> {
    check_dist(p, "p", None)?;
    check_dist(q, "q", Some(p.len()))?;
    if x >= p.len() {
        return Err(SpecError(format!("x holds token id {x}, outside the vocabulary [0, {})", p.len())));
    }
    let u_accept = check_unit(u_accept, "u_accept")?;
    let u_resample = check_unit(u_resample, "u_resample")?; // checked even when x is accepted
    if q[x] <= 0.0 {
        return Err(SpecError(format!("q[{x}] = 0: the draft could not have proposed token {x}")));
    }
    if !p.iter().any(|&pi| pi > 0.0) {
        return Err(SpecError("p has no token of nonzero probability: it rejects every x and leaves nothing to resample".to_string()));
    }
    if u_accept < p[x] / q[x] {
        return Ok((x, true)); // kept with probability min(1, p(x) / q(x))
    }
    Ok((sample_dense(&residual(p, q)?, u_resample)?, false))
}

/// distribution(apply_penalties(logits, params, prompt, output), params): the target's p for one row.
///
/// The sampler's refusals come out as SpecError: an empty row, logits holding NaN or +inf, every
/// logit -inf, prompt or output ids not below logits.len().
pub fn dense_distribution(logits: &[f32], params: &SamplingParams, prompt: &[u32], output: &[u32]) -> Result<Vec<f64>, SpecError> {
    let x = apply_penalties(logits, params, prompt, output).map_err(refused)?;
    distribution(&x, params).map_err(refused)
}

// ---- the verifier ------------------------------------------------------------------------------

/// One round's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// Emitted this round: accepted drafts, then one correction or bonus token.
    pub tokens: Vec<u32>,
    /// The sampler's logprob of each emitted token under its row.
    pub logprobs: Vec<f64>,
    /// Draft tokens accepted (0 <= n_accepted <= draft.len()).
    pub n_accepted: usize,
}

/// Every shape rule of verify_draft, checked before the walk; the vocabulary size V.
fn check_rows(rows: &[Vec<f32>], draft: &[u32], draft_probs: Option<&[Vec<f64>]>) -> Result<usize, SpecError> {
    if rows.len() != draft.len() + 1 {
        return Err(SpecError(format!(
            "got {} rows of logits for a draft of {}: need draft.len() + 1 = {}",
            rows.len(),
            draft.len(),
            draft.len() + 1
        )));
    }
    let vocab = rows[0].len();
    for (i, r) in rows.iter().enumerate() {
        if r.is_empty() || r.len() != vocab {
            return Err(SpecError(format!(
                "row {i} has {} logits; every row must be one non-empty vector of the vocabulary size {vocab}",
                r.len()
            )));
        }
    }
    if u32::try_from(vocab - 1).is_err() {
        return Err(SpecError(format!("rows of {vocab} logits: token ids are u32, so V must be at most 2^32")));
    }
    check_ids(draft, "draft", vocab)?;
    if let Some(qs) = draft_probs {
        if qs.len() != draft.len() {
            return Err(SpecError(format!(
                "got {} draft distributions for a draft of {}: need one per draft token",
                qs.len(),
                draft.len()
            )));
        }
        for (i, q) in qs.iter().enumerate() {
            check_dist(q, &format!("draft_probs[{i}]"), Some(vocab))?;
        }
        for (i, (&d, q)) in draft.iter().zip(qs).enumerate() {
            if q[d as usize] <= 0.0 {
                return Err(SpecError(format!(
                    "draft_probs[{i}][{d}] = 0: the draft could not have proposed its token {d}"
                )));
            }
        }
    }
    Ok(vocab)
}

/// A deterministic draft's q: all its mass on x.
fn one_hot(x: u32, vocab: usize) -> Vec<f64> {
    let mut q = vec![0.0; vocab];
    q[x as usize] = 1.0;
    q
}

/// Emit token t of the penalized row z: the token, and its logprob under z.
fn emit(tokens: &mut Vec<u32>, logprobs: &mut Vec<f64>, z: &[f64], t: usize) -> Result<(), SpecError> {
    tokens.push(t as u32); // t < V, and V ids fit u32 (check_rows)
    logprobs.push(logprob(z, t).map_err(refused)?);
    Ok(())
}

/// The penalized f64 logits of one row, the sampler's refusals as SpecError.
fn penalized(row: &[f32], params: &SamplingParams, prompt: &[u32], seen: &[u32]) -> Result<Vec<f64>, SpecError> {
    let z = apply_penalties(row, params, prompt, seen).map_err(refused)?;
    if z.iter().all(|&v| v == f64::NEG_INFINITY) {
        return Err(SpecError("a row of logits is -inf everywhere: the target gives no token any probability".to_string()));
    }
    Ok(z)
}

/// Walk the draft against the target's rows (chapter section 2.2).
///
/// Shapes: rows.len() == draft.len() + 1, all rows one non-zero vocabulary size V; draft, prompt
/// and output ids below V; draft_probs None (a deterministic draft: q_i is one-hot at d_i) or one
/// length-V distribution (finite, non-negative) per draft token with q_i[d_i] > 0. Anything else
/// is a SpecError, found before the walk: a bad entry after the first rejection is refused too.
/// draft_probs are checked the same way at every temperature: greedy never reads their values,
/// but a malformed draft_probs is a SpecError at temperature 0 as well.
/// A row the walk reaches whose logits hold NaN or +inf is a SpecError (the sampler's refusal).
/// A reached row that is -inf everywhere, and whether a row the walk never reaches is looked at
/// beyond its shape: free.
///
/// For row i the penalized logits are apply_penalties(rows[i], params, prompt, output + emitted),
/// emitted being the tokens this round emitted before row i.
/// Greedy (params.temperature == 0): accept d_i while it equals argmax of row i; the first
/// mismatch emits that argmax and stops. No draws.
/// Sampled: for each d_i draw u_accept = rng.next_f64() THEN u_resample = rng.next_f64(),
/// both always; (t, ok) = speculative_step(distribution(row i), q_i, d_i, u_accept, u_resample);
/// emit t; stop if not ok.
/// After all draft.len() acceptances emit the bonus token from row draft.len(): argmax
/// (greedy) or sample(distribution, rng.next_f64()) (one draw).
/// logprobs[j] = logprob(penalized row, tokens[j]) (before temperature and truncation).
pub fn verify_draft(rows: &[Vec<f32>], draft: &[u32], draft_probs: Option<&[Vec<f64>]>, params: &SamplingParams,
                    prompt: &[u32], output: &[u32], rng: &mut Pcg32) -> Result<Verified, SpecError> {
    let vocab = check_rows(rows, draft, draft_probs)?;
    check_ids(prompt, "prompt", vocab)?;
    check_ids(output, "output", vocab)?;
    let mut tokens: Vec<u32> = Vec::new();
    let mut logprobs: Vec<f64> = Vec::new();

    for (i, &d) in draft.iter().enumerate() {
        // penalties see the tokens this round accepted so far
        let z = penalized(&rows[i], params, prompt, &[output, &tokens[..]].concat())?;
        let (t, ok) = if params.greedy() {
            let t = argmax(&z);
            (t, t == d as usize)
        } else {
            let q = match draft_probs {
                Some(qs) => qs[i].clone(),
                None => one_hot(d, vocab),
            };
            let u_accept = rng.next_f64();
            let u_resample = rng.next_f64(); // drawn always, so the draw count never depends on the outcome
            let p = distribution(&z, params).map_err(refused)?;
            speculative_step(&p, &q, d as usize, u_accept, u_resample)?
        };
        emit(&mut tokens, &mut logprobs, &z, t)?;
        if !ok {
            return Ok(Verified { tokens, logprobs, n_accepted: i });
        }
    }
    // the bonus token: the row after the whole draft
    let z = penalized(&rows[draft.len()], params, prompt, &[output, &tokens[..]].concat())?;
    let t = if params.greedy() {
        argmax(&z)
    } else {
        let p = distribution(&z, params).map_err(refused)?;
        sample(&p, rng.next_f64()).map_err(refused)? // one draw
    };
    emit(&mut tokens, &mut logprobs, &z, t)?;
    Ok(Verified { tokens, logprobs, n_accepted: draft.len() })
}

// ---- KV rollback -------------------------------------------------------------------------------

/// ceil(tokens / block_tokens): the blocks that `tokens` cached positions need.
/// block_tokens = 0 is a SpecError. Exact for every usize: never through f64 (wrong past 2^53),
/// never (tokens + block_tokens - 1) / block_tokens (it overflows near usize::MAX).
pub fn blocks_for(tokens: usize, block_tokens: usize) -> Result<usize, SpecError> {
    if block_tokens < 1 {
        return Err(SpecError(format!("block_tokens must be an integer >= 1, got {block_tokens}")));
    }
    Ok(tokens.div_ceil(block_tokens))
}

/// Shrink a sequence's block table (in place) to hold exactly `keep` positions.
///
/// With B = pool.block_tokens(): keep > table.len() * B is a SpecError. Keep the first
/// blocks_for(keep, B) blocks; release every later block once (pool.release drops ONE reference:
/// a block shared with another sequence survives for its other owner); set the last kept block's
/// fill to keep - (kept - 1) * B (it may be partial). Returns the number of blocks released.
/// Example: B 4, table of 3 blocks (fills 4 4 2), keep 5 -> releases the third block, the
/// second's fill becomes 1, returns 1.
/// The bound is the table's capacity, table.len() * B, not the positions the fills say are cached:
/// a keep above the cached positions but within the capacity is admitted and sets the last kept
/// block's fill to keep - (kept - 1) * B like any other (fills 4 4 2, keep 11 -> nothing released,
/// the third block's fill becomes 3). Only the last kept block's fill is set: earlier kept blocks
/// keep their fills, full or not (fills 2 4 3, keep 5 -> the first block's fill stays 2). The
/// count returned is of blocks taken off the table (references dropped), not of blocks the pool
/// freed: a released block another sequence still shares counts 1 though it stays live.
/// A block the pool refuses (its release or set_fill is a KvError, e.g. a block that is already
/// free) is a SpecError, not the pool's KvError; what the table and the pool hold after that
/// refusal: free.
pub fn rollback(pool: &mut KvPool, table: &mut Vec<u32>, keep: usize) -> Result<usize, SpecError> {
    let b = pool.block_tokens();
    let capacity = table.len().saturating_mul(b);
    if keep > capacity {
        return Err(SpecError(format!(
            "cannot keep {keep} positions: the table holds {} blocks of {b} = {capacity}",
            table.len()
        )));
    }
    let need = blocks_for(keep, b)?;
    let pool_refused = |e: crate::kv::KvError| SpecError(format!("rollback: the pool refused: {e}"));
    let mut released = 0;
    for block in table.drain(need..).rev() {
        // the last block first, as Python's table.pop(); one reference each: a block shared
        // through the prefix cache survives for its other owner
        pool.release(block).map_err(pool_refused)?;
        released += 1;
    }
    if need > 0 {
        pool.set_fill(table[need - 1], keep - (need - 1) * b).map_err(pool_refused)?; // the last kept block may be partial
    }
    Ok(released)
}

// ---- the generation loop -----------------------------------------------------------------------

/// What the loop decodes against: the engine's RunnerTarget, or the judge's fake.
/// Every method may fail (the judge's target answers through the worker, and refuses misuse).
pub trait Target {
    /// How many positions the target holds KV for.
    fn cached(&mut self) -> Result<usize, SpecError>;
    /// Cache ids after the held positions in one forward; one logits row per id, in order.
    fn extend(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, SpecError>;
    /// Drop every cached position from `len` on (the runner goes through `rollback`).
    fn truncate(&mut self, len: usize) -> Result<(), SpecError>;
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecStats {
    /// Draft tokens proposed, over all rounds.
    pub drafted: usize,
    /// Of those, accepted by the verifier.
    pub accepted: usize,
    /// target.extend calls (forward passes).
    pub target_calls: usize,
}

impl SpecStats {
    /// accepted / drafted, 0.0 when nothing was drafted.
    pub fn accept_rate(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// Exactly max_new tokens were emitted.
    Length,
    /// An EOS token was emitted (it is the last token).
    Eos,
    /// The listener answered false (the token it refused is the last one).
    Stopped,
}

impl FinishReason {
    /// "length", "eos" or "stopped".
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Eos => "eos",
            FinishReason::Stopped => "stopped",
        }
    }
}

/// What a request generated.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub tokens: Vec<u32>,
    pub logprobs: Vec<f64>,
    pub stats: SpecStats,
    pub finish_reason: FinishReason,
}

/// One round: propose, one forward over pending + draft, verify, give the rejected drafts' KV back.
fn one_round(target: &mut dyn Target, cfg: &SpecConfig, prompt: &[u32], out: &mut Generated, params: &SamplingParams,
             rng: &mut Pcg32, max_new: usize) -> Result<Verified, SpecError> {
    let ctx = [prompt, &out.tokens[..]].concat(); // prompt + emitted
    let budget = cfg.k.min(max_new - out.tokens.len() - 1); // never write KV past the request's budget
    let draft = if budget > 0 { propose(cfg, &ctx, budget)? } else { Vec::new() };
    let pending = match out.tokens.last() {
        Some(&last) => vec![last], // the previous round's last token is not cached yet
        None => prompt.to_vec(),   // the first round feeds the whole prompt
    };
    let fed = [pending, draft.clone()].concat();
    let rows = target.extend(&fed)?;
    out.stats.target_calls += 1;
    if rows.len() != fed.len() {
        return Err(SpecError(format!("target.extend returned {} rows for {} ids", rows.len(), fed.len())));
    }
    let verifier_rows = &rows[rows.len() - draft.len() - 1..]; // the last draft.len() + 1 rows
    let v = verify_draft(verifier_rows, &draft, None, params, prompt, &out.tokens, rng)?;
    out.stats.drafted += draft.len();
    out.stats.accepted += v.n_accepted;
    let held = target.cached()?;
    // held - draft.len() + n_accepted: the rejected drafts' KV goes back
    let keep = held.checked_add(v.n_accepted).and_then(|n| n.checked_sub(draft.len())).ok_or_else(|| {
        SpecError(format!("the target holds {held} positions, fewer than the {} drafts it was just fed", draft.len()))
    })?;
    target.truncate(keep)?;
    Ok(v)
}

/// Speculative generation, handing each emitted token to on_token as its round is verified.
///
/// The target must start empty (cached() == 0, else SpecError); the prompt must be non-empty;
/// the request's generator is Pcg32::from_seed(seed).
/// Each round, while fewer than max_new tokens were emitted:
///   1. budget = min(cfg.k, max_new - emitted - 1); draft = propose(cfg, prompt + emitted,
///      budget) when budget > 0, else [].
///   2. pending = [last emitted token], or the whole prompt in the first round;
///      rows = target.extend(pending + draft) (one call, counted in stats.target_calls);
///      it must return exactly one row per id fed, else SpecError (a broken target);
///      the last draft.len() + 1 rows are the verifier's.
///   3. v = verify_draft(those rows, draft, None, params, prompt, emitted, rng);
///      stats.drafted += draft.len(); stats.accepted += v.n_accepted.
///   4. target.truncate(target.cached() - draft.len() + v.n_accepted): the rejected drafts'
///      KV goes back; the last emitted token is not cached yet (it is the next pending).
///   5. hand v's tokens, in order, to on_token(token, logprob): a false answer ends generation
///      at once (finish Stopped, that token included); an EOS token ends it right after it is
///      handed over (finish Eos; later tokens of the round are dropped). An EOS token the
///      listener answers false on ends with finish Stopped: its answer is looked at first.
///
/// Ends with finish Length after exactly max_new tokens (max_new = 0: no target call), unless the
/// max_new-th token is EOS or the listener's stop: step 5 comes before the length test, so an EOS
/// that is also the max_new-th token finishes Eos (and one the listener stops on, Stopped).
/// max_new = 0 still refuses an empty prompt and a target that is not empty. eos ids not below V
/// are admitted: never emitted, they end nothing.
#[allow(clippy::too_many_arguments)] // the chapter's signature
pub fn generate_stream(target: &mut dyn Target, cfg: &SpecConfig, prompt: &[u32], params: &SamplingParams,
                       seed: u64, max_new: usize, eos: &[u32],
                       on_token: &mut dyn FnMut(u32, f64) -> bool) -> Result<Generated, SpecError> {
    if prompt.is_empty() {
        return Err(SpecError("prompt is empty: generation needs at least one token".to_string()));
    }
    let held = target.cached()?;
    if held != 0 {
        return Err(SpecError(format!(
            "the target already holds {held} positions; generation starts from an empty target"
        )));
    }
    let mut rng = Pcg32::from_seed(seed);
    let mut out = Generated {
        tokens: Vec::new(),
        logprobs: Vec::new(),
        stats: SpecStats::default(),
        finish_reason: FinishReason::Length,
    };
    while out.tokens.len() < max_new {
        let v = one_round(target, cfg, prompt, &mut out, params, &mut rng, max_new)?;
        for (&t, &lp) in v.tokens.iter().zip(&v.logprobs) {
            out.tokens.push(t);
            out.logprobs.push(lp);
            if !on_token(t, lp) {
                out.finish_reason = FinishReason::Stopped; // the listener's answer is looked at first
                return Ok(out);
            }
            if eos.contains(&t) {
                out.finish_reason = FinishReason::Eos; // later tokens of the round are dropped
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// generate_stream with a listener that never stops it (given).
pub fn generate(target: &mut dyn Target, cfg: &SpecConfig, prompt: &[u32], params: &SamplingParams,
                seed: u64, max_new: usize, eos: &[u32]) -> Result<Generated, SpecError> {
    generate_stream(target, cfg, prompt, params, seed, max_new, eos, &mut |_, _| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greedy() -> SamplingParams {
        SamplingParams::default()
    }

    fn sampled(temperature: f64) -> SamplingParams {
        SamplingParams { temperature, ..SamplingParams::default() }
    }

    /// Section 3's greedy round.
    fn hand_rows() -> Vec<Vec<f32>> {
        vec![vec![0.0, 1.0, 3.0, 0.5], vec![0.0, 1.0, 0.5, 2.0], vec![5.0, 0.0, 0.0, 0.0]]
    }

    const HAND_SEED: u64 = 12345;
    const FIRST_U32_OF_HAND_SEED: u32 = 1411482639;

    fn lse(row: &[f32]) -> f64 {
        row.iter().map(|&x| (x as f64).exp()).sum::<f64>().ln()
    }

    fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn hand_example_prompt_lookup() {
        assert_eq!(prompt_lookup(&[5, 6, 7, 8, 5, 6], 3, 3, 1), Ok(vec![7, 8, 5]));
        assert_eq!(prompt_lookup(&[1, 2, 1, 2, 1, 2], 3, 3, 1), Ok(vec![1, 2]), "runs into the suffix itself");
        assert_eq!(prompt_lookup(&[1, 2, 3, 4], 3, 3, 1), Ok(vec![]));
        assert_eq!(prompt_lookup(&[1, 2, 3, 1], 3, 3, 2), Ok(vec![]), "min_ngram 2 forbids the 1-suffix");
        assert_eq!(prompt_lookup(&[5, 6, 7, 8, 5, 6], 0, 3, 1), Ok(vec![]));
        assert_eq!(prompt_lookup(&[], 3, 3, 1), Ok(vec![]));
        assert_eq!(prompt_lookup(&[7], 3, 3, 1), Ok(vec![]));
        assert_eq!(prompt_lookup(&[4, 4], 5, 9, 1), Ok(vec![4]), "max_ngram past the context backs off to what fits");
        assert_eq!(prompt_lookup(&[1, 9, 1, 8, 1], 1, 1, 1), Ok(vec![8]), "the most recent occurrence wins");
        assert!(prompt_lookup(&[5, 6, 7, 8, 5, 6], 3, 1, 2).is_err());
        assert!(prompt_lookup(&[5, 6, 7, 8, 5, 6], 3, 3, 0).is_err());
        assert!(prompt_lookup(&[5, 6, 7, 8, 5, 6], 0, 3, 0).is_err(), "refused whatever k");
        assert!(prompt_lookup(&[], 0, 0, 0).is_err(), "refused whatever ctx");
        assert_eq!(prompt_lookup(&[5, 6, 7, 8, 5, 6], usize::MAX, 3, 1), Ok(vec![7, 8, 5, 6]), "no overflow on a huge k");
    }

    #[test]
    fn ngram_draft_hand_example() {
        let checks: [(&[u32], usize, usize, &[u32]); 11] = [
            (&[1, 2, 3, 1, 2, 4, 1, 2, 4, 1, 2], 1, 3, &[4]), // counts
            (&[1, 2, 3, 1, 2, 4, 1, 2], 1, 3, &[3]),          // ties to the lowest id
            (&[3, 1, 4, 2, 1, 5, 2, 1, 5, 3, 1], 1, 3, &[4]), // longest context first
            (&[1, 2, 1, 3, 4, 1], 1, 3, &[2]),                // back-off
            (&[1, 2, 3], 3, 3, &[]),                          // stop
            (&[1, 2, 3, 1, 2, 4, 1, 2], 3, 3, &[3, 1, 2]),    // drafted tokens count as context
            (&[5, 1, 7, 6, 1, 8, 6, 1, 8, 5, 1], 1, 2, &[8]), // n 2 looks at one token
            (&[4, 4], 2, 3, &[4, 4]),                         // a short context backs off to what fits
            (&[5], 3, 3, &[]),                                // one token has no earlier occurrence
            (&[1, 2, 1, 2], 2, 1, &[]),                       // n 1: no draft
            (&[1, 2, 3, 1, 2, 4, 1, 2], 0, 3, &[]),           // k 0
        ];
        for (ctx, k, n, want) in checks {
            assert_eq!(ngram_draft(ctx, k, n), Ok(want.to_vec()), "ngram_draft({ctx:?}, {k}, {n})");
        }
        assert_eq!(ngram_draft(&[], 3, 3), Ok(vec![]));
        assert!(ngram_draft(&[1, 2, 1], 2, 0).is_err());
    }

    #[test]
    fn config_parses_runtime_values() {
        for (draft, k, kind) in [("none", 1, Draft::None), ("ngram", 4, Draft::Ngram), ("prompt_lookup", 16, Draft::PromptLookup)] {
            let c = SpecConfig::parse(draft, k).unwrap();
            assert_eq!(c, SpecConfig { draft: kind, k: k as usize, max_ngram: 3, min_ngram: 1 });
            assert_eq!(c.draft.name(), draft);
        }
        let c = SpecConfig::parse_with("prompt_lookup", 4, 4, 2).unwrap();
        assert_eq!((c.max_ngram, c.min_ngram), (4, 2));
        for (draft, k) in [("prompt_lookup", 0), ("prompt_lookup", 17), ("prompt-lookup", 4), ("ngarm", 4), ("ngram", -1)] {
            assert!(SpecConfig::parse(draft, k).is_err(), "{draft:?} {k}");
        }
        assert!(SpecConfig::parse_with("ngram", 4, 2, 3).is_err());
        assert!(SpecConfig::parse_with("ngram", 4, 3, 0).is_err());
        assert!(SpecConfig::parse_with("ngram", 4, -1, -2).is_err());
        let e = SpecConfig::parse("prompt-lookup", 4).unwrap_err();
        assert!(e.0.contains("\"prompt-lookup\"") && e.0.contains("\"prompt_lookup\""), "{e}");
    }

    #[test]
    fn propose_uses_its_own_k() {
        let cfg = |draft, k, max_ngram, min_ngram| SpecConfig { draft, k, max_ngram, min_ngram };
        let pl = [5, 6, 7, 8, 5, 6];
        let ng = [1, 2, 3, 1, 2, 4, 1, 2];
        assert_eq!(propose(&cfg(Draft::None, 4, 3, 1), &pl, 3), Ok(vec![]));
        assert_eq!(propose(&cfg(Draft::PromptLookup, 4, 3, 1), &pl, 3), Ok(vec![7, 8, 5]));
        assert_eq!(propose(&cfg(Draft::Ngram, 4, 3, 1), &ng, 3), Ok(vec![3, 1, 2]));
        assert_eq!(propose(&cfg(Draft::Ngram, 4, 2, 1), &[5, 1, 7, 6, 1, 8, 6, 1, 8, 5, 1], 1), Ok(vec![8]));
        let ctx = [1, 2, 3, 4, 8, 9, 2, 3, 4, 7, 1, 2, 3, 4];
        assert_eq!(propose(&cfg(Draft::PromptLookup, 4, 4, 1), &ctx, 3), Ok(vec![8, 9, 2]));
        assert_eq!(propose(&cfg(Draft::PromptLookup, 4, 3, 2), &[1, 2, 3, 1], 3), Ok(vec![]));
        assert_eq!(propose(&cfg(Draft::PromptLookup, 1, 3, 1), &pl, 3), Ok(vec![7, 8, 5]), "cfg.k is not consulted");
        assert_eq!(propose(&cfg(Draft::Ngram, 1, 3, 1), &ng, 3), Ok(vec![3, 1, 2]));
        assert_eq!(propose(&cfg(Draft::PromptLookup, 4, 3, 1), &pl, 0), Ok(vec![]));
        assert_eq!(propose(&cfg(Draft::Ngram, 4, 3, 1), &ng, 0), Ok(vec![]));
    }

    #[test]
    fn hand_example_greedy_verify() {
        let rows = hand_rows();
        let mut rng = Pcg32::from_seed(HAND_SEED);
        let v = verify_draft(&rows, &[2, 1], None, &greedy(), &[], &[], &mut rng).unwrap();
        assert_eq!((v.tokens.clone(), v.n_accepted), (vec![2, 3], 1));
        assert!((v.logprobs[0] - -0.2368155424308167).abs() <= 1e-12, "3 - ln(e^0 + e^1 + e^3 + e^0.5): {}", v.logprobs[0]);
        assert!(close(&v.logprobs, &[3.0 - lse(&rows[0]), 2.0 - lse(&rows[1])], 1e-12), "{:?}", v.logprobs);
        assert_eq!(rng.next_u32(), FIRST_U32_OF_HAND_SEED, "greedy draws nothing");

        let mut rng = Pcg32::from_seed(HAND_SEED);
        let v = verify_draft(&rows, &[2, 3], None, &greedy(), &[], &[], &mut rng).unwrap();
        assert_eq!((v.tokens.clone(), v.n_accepted), (vec![2, 3, 0], 2), "the bonus is row 2's argmax");
        assert!((v.logprobs[2] - (5.0 - lse(&rows[2]))).abs() <= 1e-12);
        assert_eq!(rng.next_u32(), FIRST_U32_OF_HAND_SEED, "the bonus token draws nothing either");

        let qs = vec![vec![0.1, 0.1, 0.7, 0.1], vec![0.1, 0.7, 0.1, 0.1]]; // checked, never read at T = 0
        let mut rng = Pcg32::from_seed(HAND_SEED);
        let v = verify_draft(&rows, &[2, 1], Some(&qs), &greedy(), &[], &[], &mut rng).unwrap();
        assert_eq!((v.tokens, v.n_accepted), (vec![2, 3], 1));
        assert_eq!(rng.next_u32(), FIRST_U32_OF_HAND_SEED);

        let v = verify_draft(&[vec![0.3], vec![0.7]], &[0], None, &greedy(), &[], &[], &mut rng).unwrap();
        assert_eq!(v.tokens, [0, 0], "a vocabulary of one token is a valid shape");
    }

    #[test]
    fn sampled_verify_draws_two_uniforms_per_draft_token_and_one_for_the_bonus() {
        // a target that is sure of token 0: draft [0 0] is accepted (p(0) = 1 > u_accept), bonus 0
        let rows = vec![vec![30.0, -30.0, -30.0]; 3];
        let mut rng = Pcg32::from_seed(7);
        let v = verify_draft(&rows, &[0, 0], None, &sampled(1.0), &[], &[], &mut rng).unwrap();
        assert_eq!((v.tokens, v.n_accepted), (vec![0, 0, 0], 2));
        let mut fresh = Pcg32::from_seed(7);
        for _ in 0..2 * (2 * 2 + 1) {
            fresh.next_u32();
        }
        assert_eq!(rng.next_u32(), fresh.next_u32(), "5 uniforms: 2 per draft token, 1 for the bonus");
        // draft [1]: p(1) = e^-60 / ..., so u_accept >= p/q rejects and the residual gives 0; 2 uniforms
        let mut rng = Pcg32::from_seed(7);
        let v = verify_draft(&rows[..2], &[1], None, &sampled(1.0), &[], &[], &mut rng).unwrap();
        assert_eq!((v.tokens, v.n_accepted), (vec![0], 0));
        let mut fresh = Pcg32::from_seed(7);
        for _ in 0..4 {
            fresh.next_u32();
        }
        assert_eq!(rng.next_u32(), fresh.next_u32(), "u_resample is drawn even though it decided");
    }

    #[test]
    fn hand_example_sampled_step() {
        let (p, q) = ([0.2, 0.5, 0.3], [0.6, 0.2, 0.2]);
        assert_eq!(speculative_step(&p, &q, 0, 0.3, 0.8), Ok((0, true)));
        assert_eq!(speculative_step(&p, &q, 0, 0.5, 0.8), Ok((2, false)));
        assert!(close(&residual(&p, &q).unwrap(), &[0.0, 0.75, 0.25], 1e-12));
        assert_eq!(sample_dense(&[0.0, 0.75, 0.25], 0.8), Ok(2));
        assert!(speculative_step(&p, &[0.0, 0.5, 0.5], 0, 0.3, 0.8).is_err(), "q(0) = 0 could not propose 0");
        assert_eq!(speculative_step(&[0.25, 0.75], &[0.5, 0.5], 0, 0.5, 0.1), Ok((1, false)), "== is not <");
        assert_eq!(speculative_step(&p, &q, 0, 0.0, 0.8), Ok((0, true)));
        assert!(close(&residual(&[0.2, 0.8], &[0.2, 0.8]).unwrap(), &[0.2, 0.8], 1e-12));
        assert_eq!(sample_dense(&[0.5, 0.5], 0.5), Ok(1));
        let mut tenths = vec![0.1; 10];
        tenths.push(0.0);
        assert_eq!(sample_dense(&tenths, 0.9999999999999999), Ok(9));
        assert_eq!(sample_dense(&[0.9999999999999999, 0.0], 0.9999999999999999), Ok(0));
        assert!(close(&residual(&[0.1, 0.1], &[0.5, 0.5]).unwrap(), &[0.5, 0.5], 1e-12));
        // summed left to right, exact to the bit
        let mut one_hot_10 = vec![0.0; 10];
        one_hot_10.push(1.0);
        let mut want = vec![0.1 / 0.9999999999999999; 10];
        want.push(0.0);
        assert_eq!(residual(&tenths, &one_hot_10).unwrap(), want);
        assert_eq!(residual(&[0.1; 10], &[0.5; 10]).unwrap(), want[..10].to_vec());
        assert_eq!(sample_dense(&[0.0, 2.0, 2.0], 0.5), Ok(1), "p is used as given");
        assert_eq!(speculative_step(&[0.4, 1.0], &[0.8, 0.2], 0, 0.45, 0.5), Ok((0, true)));
        assert_eq!(speculative_step(&[1.0], &[1.0], 0, 0.5, 0.5), Ok((0, true)));
    }

    #[test]
    fn dense_distribution_by_hand() {
        let e = |x: f64| x.exp();
        let z = e(0.0) + e(0.5) + e(1.0);
        let d = dense_distribution(&[0.0, 1.0, 2.0], &sampled(2.0), &[], &[]).unwrap();
        assert!(close(&d, &[1.0 / z, e(0.5) / z, e(1.0) / z], 1e-12), "{d:?}");
        assert_eq!(dense_distribution(&[0.0, 3.0, 1.0], &greedy(), &[], &[]).unwrap(), [0.0, 1.0, 0.0]);
        let top_p = SamplingParams { top_p: 0.5, ..sampled(1.0) };
        assert_eq!(dense_distribution(&[0.0, 0.0], &top_p, &[], &[]).unwrap(), [1.0, 0.0]);
        let min_p = SamplingParams { min_p: 1.0, ..sampled(1.0) };
        assert_eq!(dense_distribution(&[0.0, 0.0, -1.0], &min_p, &[], &[]).unwrap(), [0.5, 0.5, 0.0]);
        let d = dense_distribution(&[800.0, 799.0, 0.0], &sampled(1.0), &[], &[]).unwrap();
        assert!(close(&d, &[0.7310585786300049, 0.2689414213699951, 0.0], 1e-12), "{d:?}");
        let d = dense_distribution(&[0.0, -50.0], &sampled(1.0), &[], &[]).unwrap();
        assert!(d[1] > 0.0 && (d[1] / e(-50.0) - 1.0).abs() < 1e-9, "top_p 1 is off");
        assert_eq!(dense_distribution(&[0.5], &greedy(), &[], &[]).unwrap(), [1.0]);
    }

    #[test]
    fn verify_rejects_bad_shapes() {
        let rows = hand_rows();
        let q = vec![0.25; 4];
        let zero_at_1 = vec![0.5, 0.0, 0.5, 0.0];
        let surely_rejected: Vec<Vec<f32>> = [vec![vec![30.0, -30.0, 0.0, 0.0]], rows[1..].to_vec()].concat();
        let nan_row: Vec<Vec<f32>> = [vec![vec![f32::NAN, 1.0, 3.0, 0.5]], rows[1..].to_vec()].concat();
        let inf_row: Vec<Vec<f32>> = [vec![vec![0.0, f32::INFINITY, 3.0, 0.5]], rows[1..].to_vec()].concat();
        let ragged = vec![rows[0].clone(), rows[1][..3].to_vec(), rows[2].clone()];
        let mut rows4 = rows.clone();
        rows4.push(rows[0].clone());
        let (g, s) = (greedy(), sampled(1.0));
        let mut rng = Pcg32::from_seed(1);
        let mut verify = |rows: &[Vec<f32>], draft: &[u32], qs: Option<&[Vec<f64>]>, params: &SamplingParams, prompt: &[u32], output: &[u32]| {
            verify_draft(rows, draft, qs, params, prompt, output, &mut rng)
        };
        assert!(verify(&rows[..2], &[2, 1], None, &g, &[], &[]).is_err());
        assert!(verify(&rows4, &[2, 1], None, &g, &[], &[]).is_err());
        assert!(verify(&ragged, &[2, 1], None, &g, &[], &[]).is_err());
        assert!(verify(&rows, &[2, 4], None, &g, &[], &[]).is_err());
        assert!(verify(&[], &[], None, &g, &[], &[]).is_err());
        assert!(verify(&[vec![]], &[], None, &g, &[], &[]).is_err());
        for params in [&g, &s] {
            assert!(verify(&rows, &[2, 1], Some(std::slice::from_ref(&q)), params, &[], &[]).is_err());
            assert!(verify(&rows, &[2, 1], Some(&[q.clone(), q[..3].to_vec()]), params, &[], &[]).is_err());
            assert!(verify(&rows, &[2, 1], Some(&[q.clone(), zero_at_1.clone()]), params, &[], &[]).is_err());
        }
        assert!(verify(&surely_rejected, &[1, 1], Some(&[q.clone(), zero_at_1.clone()]), &s, &[], &[]).is_err());
        assert!(verify(&surely_rejected, &[1, 1], Some(&[q.clone(), q[..3].to_vec()]), &s, &[], &[]).is_err());
        assert!(verify(&rows, &[2, 1], Some(&[q.clone(), vec![f64::NAN, 0.5, 0.25, 0.25]]), &s, &[], &[]).is_err());
        assert!(verify(&rows, &[2, 1], None, &g, &[4], &[]).is_err());
        assert!(verify(&rows, &[2, 1], None, &g, &[], &[4]).is_err());
        assert!(verify(&nan_row, &[2, 1], None, &g, &[], &[]).is_err());
        assert!(verify(&inf_row, &[2, 1], None, &s, &[], &[]).is_err());
        assert!(dense_distribution(&[0.0, 1.0], &g, &[2], &[]).is_err());
        assert!(dense_distribution(&[f32::NAN, 0.0], &g, &[], &[]).is_err());
        assert!(dense_distribution(&[f32::NEG_INFINITY; 2], &s, &[], &[]).is_err());
        assert!(dense_distribution(&[], &g, &[], &[]).is_err());
        assert!(speculative_step(&[-0.1, 0.6, 0.5], &[0.2, 0.4, 0.4], 1, 0.3, 0.8).is_err());
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.5, 0.5], 0, 0.3, 0.8).is_err());
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.2, 0.5, 0.3], 3, 0.3, 0.8).is_err());
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.6, 0.2, 0.2], 0, 1.0, 0.8).is_err());
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.6, 0.2, 0.2], 0, 0.1, 1.0).is_err(), "both uniforms are checked");
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.6, 0.2, 0.2], 0, -0.1, 0.8).is_err());
        assert!(speculative_step(&[0.2, 0.5, 0.3], &[0.6, 0.2, 0.2], 0, f64::NAN, 0.8).is_err());
        assert!(speculative_step(&[0.0, 0.0, 0.0], &[0.6, 0.2, 0.2], 0, 0.3, 0.8).is_err());
        assert!(residual(&[0.2, 0.5, 0.3], &[0.5, 0.5]).is_err());
        assert!(residual(&[], &[]).is_err());
        assert!(residual(&[0.5, 0.5], &[f64::INFINITY, 0.0]).is_err());
        assert!(sample_dense(&[0.5, 0.5], -0.1).is_err());
        assert!(sample_dense(&[0.5, 0.5], 1.0).is_err());
        assert!(sample_dense(&[0.0, 0.0, 0.0], 0.5).is_err());
        assert!(sample_dense(&[], 0.5).is_err());
    }

    /// Section 3's rollback pool: fills 4 4 2 on blocks 0 1 2 of a pool of 8.
    fn filled_table(pool: &mut KvPool, fills: &[usize]) -> Vec<u32> {
        fills
            .iter()
            .map(|&f| {
                let b = pool.alloc().unwrap();
                pool.set_fill(b, f).unwrap();
                b
            })
            .collect()
    }

    #[test]
    fn rollback_hand_example() {
        let mut pool = KvPool::new(8, 4).unwrap();
        let mut table = filled_table(&mut pool, &[4, 4, 2]);
        assert_eq!(rollback(&mut pool, &mut table, 5), Ok(1));
        assert_eq!(table, [0, 1]);
        assert_eq!(pool.fill(1), Ok(1), "the second block holds 1 kept position");
        assert_eq!((pool.refcount(2), pool.free_blocks()), (Ok(0), 6));
        assert_eq!(rollback(&mut pool, &mut table, 4), Ok(1));
        assert_eq!((table.clone(), pool.fill(0)), (vec![0], Ok(4)), "a full block stays full");
        assert_eq!(rollback(&mut pool, &mut table, 0), Ok(1));
        assert_eq!((table.len(), pool.free_blocks()), (0, 8), "keep 0 releases everything");
        for (tokens, b, want) in [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (8, 4, 2), (9, 4, 3), (5, 1, 5)] {
            assert_eq!(blocks_for(tokens, b), Ok(want), "blocks_for({tokens}, {b})");
        }
        assert!(blocks_for(5, 0).is_err());
        assert_eq!(blocks_for(usize::MAX, 2), Ok(usize::MAX / 2 + 1), "no overflow");
        let mut table = filled_table(&mut pool, &[4, 1]);
        assert!(rollback(&mut pool, &mut table, 9).is_err(), "a 2-block table holds 8 at most");
        pool.release(table[1]).unwrap(); // freed behind the table's back
        let e = rollback(&mut pool, &mut table, 4).unwrap_err();
        assert!(e.0.starts_with("rollback: the pool refused"), "{e}");
    }

    #[test]
    fn rollback_drops_one_reference_only() {
        let mut pool = KvPool::new(6, 4).unwrap();
        let mut a = filled_table(&mut pool, &[4, 4, 3]);
        let shared = a[2];
        pool.retain(shared).unwrap(); // another sequence shares the last block
        assert_eq!(rollback(&mut pool, &mut a, 4), Ok(2));
        assert_eq!(a, [0]);
        assert_eq!((pool.refcount(shared), pool.refcount(1)), (Ok(1), Ok(0)));
        assert_eq!(pool.free_blocks(), 4);
    }

    /// The judge's fake target (chapters/L10_8/judge/fake_target.py): the row after a context
    /// depends on its last two tokens (a, b): noise from Pcg32::from_seed(1_000_003 (a + 1) + b)
    /// plus 3.0 at (7 b + 3 (a + 1) + 1) mod V. An optional budget of positions it may hold.
    struct FakeTarget {
        vocab: usize,
        budget: Option<usize>,
        ids: Vec<u32>,
        calls: usize,
    }

    impl FakeTarget {
        fn new(vocab: usize, budget: Option<usize>) -> FakeTarget {
            FakeTarget { vocab, budget, ids: Vec::new(), calls: 0 }
        }
    }

    fn fake_row(ctx: &[u32], vocab: usize) -> Vec<f32> {
        let a: i64 = if ctx.len() >= 2 { ctx[ctx.len() - 2] as i64 } else { -1 };
        let b = ctx[ctx.len() - 1] as i64;
        let mut rng = Pcg32::from_seed((1_000_003 * (a + 1) + b) as u64);
        let mut noise: Vec<f64> = (0..vocab).map(|_| (rng.next_u32() >> 8) as f64 / 16777216.0 * 2.0).collect();
        noise[((7 * b + 3 * (a + 1) + 1) as usize) % vocab] += 3.0;
        noise.iter().map(|&x| x as f32).collect()
    }

    impl Target for FakeTarget {
        fn cached(&mut self) -> Result<usize, SpecError> {
            Ok(self.ids.len())
        }
        fn extend(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, SpecError> {
            if ids.is_empty() || ids.iter().any(|&i| i as usize >= self.vocab) {
                return Err(SpecError(format!("fake target: bad extend {ids:?}")));
            }
            if self.budget.is_some_and(|b| self.ids.len() + ids.len() > b) {
                return Err(SpecError("fake target: past the budget".to_string()));
            }
            self.calls += 1;
            let mut rows = Vec::new();
            for &i in ids {
                self.ids.push(i);
                rows.push(fake_row(&self.ids, self.vocab));
            }
            Ok(rows)
        }
        fn truncate(&mut self, len: usize) -> Result<(), SpecError> {
            if len > self.ids.len() {
                return Err(SpecError(format!("fake target: truncate({len}) of {}", self.ids.len())));
            }
            self.ids.truncate(len);
            Ok(())
        }
    }

    fn greedy_reference(prompt: &[u32], max_new: usize, vocab: usize) -> Vec<u32> {
        let mut ctx = prompt.to_vec();
        for _ in 0..max_new {
            let row: Vec<f64> = fake_row(&ctx, vocab).iter().map(|&x| x as f64).collect();
            ctx.push(argmax(&row) as u32);
        }
        ctx[prompt.len()..].to_vec()
    }

    #[test]
    fn greedy_spec_equals_greedy_without_spec() {
        let (vocab, max_new) = (16, 40);
        for prompt in [&[1u32, 2, 3, 4, 5][..], &[3, 3, 3, 3], &[9, 1, 9, 1, 9, 2]] {
            let want = greedy_reference(prompt, max_new, vocab);
            for draft in ["none", "ngram", "prompt_lookup"] {
                let cfg = SpecConfig::parse(draft, 4).unwrap();
                let mut target = FakeTarget::new(vocab, Some(prompt.len() + max_new - 1));
                let g = generate(&mut target, &cfg, prompt, &greedy(), 7, max_new, &[]).unwrap();
                assert_eq!(g.tokens, want, "{draft} on {prompt:?}");
                assert_eq!(g.logprobs.len(), max_new);
                assert_eq!(g.finish_reason, FinishReason::Length);
                assert_eq!(target.ids.len(), prompt.len() + max_new - 1, "the last token is not cached");
                assert_eq!(g.stats.target_calls, target.calls);
                if draft == "prompt_lookup" {
                    assert!(g.stats.target_calls < max_new, "fewer passes with prompt lookup");
                    assert!(g.stats.accept_rate() > 0.0);
                }
            }
        }
    }

    #[test]
    fn eos_and_stop_end_generation() {
        let prompt = [1, 2, 3, 4, 5];
        let cfg = SpecConfig::parse("prompt_lookup", 4).unwrap();
        let want = greedy_reference(&prompt, 40, 16);
        let eos = want[20];
        let first = want.iter().position(|&t| t == eos).unwrap();
        let g = generate(&mut FakeTarget::new(16, None), &cfg, &prompt, &greedy(), 7, 40, &[eos]).unwrap();
        assert_eq!((g.tokens.as_slice(), g.finish_reason), (&want[..=first], FinishReason::Eos));
        let mut heard = Vec::new();
        let mut listener = |t: u32, _lp: f64| {
            heard.push(t);
            heard.len() < 7
        };
        let g = generate_stream(&mut FakeTarget::new(16, None), &cfg, &prompt, &greedy(), 7, 40, &[], &mut listener).unwrap();
        assert_eq!((g.tokens.as_slice(), g.finish_reason), (&want[..7], FinishReason::Stopped));
        assert_eq!(heard, &want[..7]);
        let mut stop_at_eos = |t: u32, _lp: f64| t != eos;
        let g = generate_stream(&mut FakeTarget::new(16, None), &cfg, &prompt, &greedy(), 7, 40, &[eos], &mut stop_at_eos).unwrap();
        assert_eq!(g.finish_reason, FinishReason::Stopped, "the listener's answer is looked at first");
        let mut target = FakeTarget::new(16, None);
        let g = generate(&mut target, &cfg, &prompt, &greedy(), 7, 0, &[]).unwrap();
        assert_eq!((g.tokens.len(), target.calls, g.stats.accept_rate()), (0, 0, 0.0), "max_new 0: no target call");
        assert!(generate(&mut target, &cfg, &[], &greedy(), 7, 4, &[]).is_err(), "an empty prompt");
        target.ids.push(1);
        assert!(generate(&mut target, &cfg, &prompt, &greedy(), 7, 4, &[]).is_err(), "a target that is not empty");
    }

    /// A broken target: extend returns `extra` rows more than the ids it was fed.
    struct MiscountingTarget {
        extra: isize,
        held: usize,
    }

    impl Target for MiscountingTarget {
        fn cached(&mut self) -> Result<usize, SpecError> {
            Ok(self.held)
        }
        fn extend(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, SpecError> {
            self.held += ids.len();
            Ok(vec![vec![0.0, 1.0, 0.0, 0.0]; (ids.len() as isize + self.extra) as usize])
        }
        fn truncate(&mut self, len: usize) -> Result<(), SpecError> {
            self.held = len;
            Ok(())
        }
    }

    #[test]
    fn a_broken_target_is_refused() {
        let cfg = SpecConfig::parse("none", 1).unwrap();
        for extra in [-1, 1] {
            let mut target = MiscountingTarget { extra, held: 0 };
            assert!(generate(&mut target, &cfg, &[1, 2, 3], &greedy(), 7, 1, &[]).is_err(), "extra {extra}");
        }
    }
}
