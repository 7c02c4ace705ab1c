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

#![allow(unused_variables)] // the stub's arguments are not used yet: remove this line when you are done

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
        todo!("SpecConfig::parse_with")
    }
}

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
    todo!("prompt_lookup")
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
    todo!("ngram_draft")
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
    todo!("propose")
}

/// normalize(max(0, p - q)): each entry divided by the mass, the mass summed left to right in
/// ascending id order (spec/sampling.md).
///
/// If that mass is 0 (p <= q everywhere) returns p normalized the same way (p / its left-to-right
/// sum). p and q must be non-empty, of the same length, with finite non-negative entries, else
/// SpecError. A p with no mass at all: free (speculative_step refuses such a p).
pub fn residual(p: &[f64], q: &[f64]) -> Result<Vec<f64>, SpecError> {
    todo!("residual")
}

/// The sampler's `sample`: walk ids ascending, skip zero probabilities, return the first id
/// whose running sum exceeds u (the last nonzero id if rounding leaves u beyond the total).
/// p is used as given: not renormalized, not checked to sum to 1. Example: p [0, 0.75, 0.25],
/// u 0.8 -> 2. SpecError unless p is non-empty, finite, non-negative with at least one nonzero
/// entry, and u is in [0, 1) (NaN and the infinities are refused; -0.0 is 0.0).
pub fn sample_dense(p: &[f64], u: f64) -> Result<usize, SpecError> {
    todo!("sample_dense")
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
    todo!("speculative_step")
}

/// distribution(apply_penalties(logits, params, prompt, output), params): the target's p for one row.
///
/// The sampler's refusals come out as SpecError: an empty row, logits holding NaN or +inf, every
/// logit -inf, prompt or output ids not below logits.len().
pub fn dense_distribution(logits: &[f32], params: &SamplingParams, prompt: &[u32], output: &[u32]) -> Result<Vec<f64>, SpecError> {
    todo!("dense_distribution")
}

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
    todo!("verify_draft")
}

/// ceil(tokens / block_tokens): the blocks that `tokens` cached positions need.
/// block_tokens = 0 is a SpecError. Exact for every usize: never through f64 (wrong past 2^53),
/// never (tokens + block_tokens - 1) / block_tokens (it overflows near usize::MAX).
pub fn blocks_for(tokens: usize, block_tokens: usize) -> Result<usize, SpecError> {
    todo!("blocks_for")
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
    todo!("rollback")
}

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
        todo!("SpecStats::accept_rate")
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
    todo!("generate_stream")
}

/// generate_stream with a listener that never stops it (given).
pub fn generate(target: &mut dyn Target, cfg: &SpecConfig, prompt: &[u32], params: &SamplingParams,
                seed: u64, max_new: usize, eos: &[u32]) -> Result<Generated, SpecError> {
    generate_stream(target, cfg, prompt, params, seed, max_new, eos, &mut |_, _| true)
}
