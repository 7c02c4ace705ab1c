//! The sampler of L10.1, normative in spec/sampling.md; the port of `tinyllm/infer/sampling.py`.
//!
//! Order of operations for one row of logits: `apply_penalties` -> `distribution` -> `sample`
//! (and `logprob` on the penalized row). All arithmetic is f64 (the f32 logits are widened first);
//! every sum runs sequentially from 0.0 in the order the spec names (ascending id unless it says
//! "in rank order"), so the results match the Python reference to the bit, up to the last ulp of
//! `exp`/`ln` (spec/sampling.md section 9).

use std::collections::{BTreeMap, BTreeSet};

/// A sampling input is out of range or malformed; the message names the value and the allowed range.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingError(pub String);

impl std::fmt::Display for SamplingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SamplingError {}

/// The sampling knobs of one request (spec/sampling.md section 1). The default of every knob means
/// "off"; the default temperature 0 is greedy.
///
/// The fields are public, so a value can be built that the Python constructor would refuse:
/// `validate` is the constructor's check, and `apply_penalties` and `distribution` run it first.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f64,
    /// 0 means off.
    pub top_k: usize,
    /// 1 means off.
    pub top_p: f64,
    /// 0 means off.
    pub min_p: f64,
    /// 1 means off.
    pub repetition_penalty: f64,
    /// 0 means off.
    pub presence_penalty: f64,
    /// 0 means off.
    pub frequency_penalty: f64,
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
        }
    }
}

/// `Err` naming the knob, its value and the allowed range unless `ok`.
fn need(ok: bool, name: &str, value: f64, allowed: &str) -> Result<(), SamplingError> {
    if ok {
        Ok(())
    } else {
        Err(SamplingError(format!("SamplingParams.{name} = {value:?} is out of range: allowed {allowed}")))
    }
}

impl SamplingParams {
    /// The ranges of spec/sampling.md section 1 (NaN and the infinities fail every range).
    /// `top_k` is a `usize`: every value is in range.
    pub fn validate(&self) -> Result<(), SamplingError> {
        let t = self.temperature;
        need(t.is_finite() && t >= 0.0, "temperature", t, "a finite number >= 0 (0 = greedy)")?;
        let p = self.top_p;
        need(p.is_finite() && 0.0 < p && p <= 1.0, "top_p", p, "0 < top_p <= 1 (1 = off)")?;
        let m = self.min_p;
        need(m.is_finite() && (0.0..=1.0).contains(&m), "min_p", m, "0 <= min_p <= 1 (0 = off)")?;
        let r = self.repetition_penalty;
        need(r.is_finite() && r > 0.0, "repetition_penalty", r, "a finite number > 0 (1 = off)")?;
        let pp = self.presence_penalty;
        need(pp.is_finite(), "presence_penalty", pp, "a finite number (0 = off)")?;
        let fp = self.frequency_penalty;
        need(fp.is_finite(), "frequency_penalty", fp, "a finite number (0 = off)")
    }

    /// Temperature 0: the sampler takes the argmax.
    pub fn greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// Every id must lie in [0, vocab); the first that does not is named.
fn check_ids(ids: &[u32], vocab: usize, what: &str) -> Result<(), SamplingError> {
    match ids.iter().find(|&&t| t as usize >= vocab) {
        Some(t) => Err(SamplingError(format!("{what} holds token id {t}, outside the vocabulary [0, {vocab})"))),
        None => Ok(()),
    }
}

/// Penalized f64 logits: repetition over prompt and output, then frequency and presence over
/// output (spec/sampling.md section 3).
pub fn apply_penalties(logits: &[f32], params: &SamplingParams, prompt: &[u32], output: &[u32]) -> Result<Vec<f64>, SamplingError> {
    params.validate()?;
    let mut x: Vec<f64> = logits.iter().map(|&l| l as f64).collect(); // [V], widened exactly
    if x.is_empty() {
        return Err(SamplingError("logits must be one non-empty row, got an empty row".to_string()));
    }
    if x.iter().any(|v| v.is_nan() || *v == f64::INFINITY) {
        return Err(SamplingError("logits hold NaN or +inf; every logit must be finite or -inf".to_string()));
    }
    let vocab = x.len();
    check_ids(prompt, vocab, "prompt")?;
    check_ids(output, vocab, "output")?;
    let theta = params.repetition_penalty;
    if theta != 1.0 {
        // each distinct id of prompt and output once, in ascending id order
        let seen: BTreeSet<u32> = prompt.iter().chain(output).copied().collect();
        for t in seen {
            let t = t as usize;
            x[t] = if x[t] > 0.0 { x[t] / theta } else { x[t] * theta }; // 0 stays 0, -inf stays -inf
        }
    }
    if params.frequency_penalty != 0.0 || params.presence_penalty != 0.0 {
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new(); // occurrences in the output only
        for &t in output {
            *counts.entry(t).or_insert(0) += 1;
        }
        for (t, c) in counts {
            // the amount is computed first, then subtracted once
            x[t as usize] -= c as f64 * params.frequency_penalty + params.presence_penalty;
        }
    }
    Ok(x)
}

/// The lowest id among the maxima (numpy's `argmax`: the first NaN, if any, counts as the
/// maximum; a row that is -inf everywhere gives 0). An empty slice gives 0.
pub fn argmax(logits: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate().skip(1) {
        if logits[best].is_nan() {
            break; // numpy stops at the first NaN
        }
        if v > logits[best] || v.is_nan() {
            best = i; // strictly greater: a tie keeps the lower id
        }
    }
    best
}

/// numpy's `max` of a non-empty row: NaN if any entry is NaN, else the largest entry.
fn np_max(x: &[f64]) -> f64 {
    let mut m = x[0];
    for &v in x {
        if v.is_nan() {
            return f64::NAN;
        }
        if v > m {
            m = v;
        }
    }
    m
}

/// Left-to-right f64 sum from 0.0 (numpy's `sum` is pairwise, which rounds differently).
fn seq_sum<I: IntoIterator<Item = f64>>(values: I) -> f64 {
    let mut total = 0.0;
    for v in values {
        total += v;
    }
    total
}

/// f64 probabilities over the whole vocabulary, dropped tokens exactly 0 (spec/sampling.md
/// section 5). `penalized` is `apply_penalties`' output; a row that is -inf everywhere (or empty)
/// is refused.
pub fn distribution(penalized: &[f64], params: &SamplingParams) -> Result<Vec<f64>, SamplingError> {
    params.validate()?;
    let x = penalized;
    let vocab = x.len();
    if x.iter().all(|&v| v == f64::NEG_INFINITY) {
        return Err(SamplingError("every logit is -inf: there is nothing to sample".to_string()));
    }
    if params.greedy() {
        let mut probs = vec![0.0; vocab];
        probs[argmax(x)] = 1.0;
        return Ok(probs);
    }
    // 1. temperature softmax
    let z: Vec<f64> = x.iter().map(|&v| v / params.temperature).collect(); // a division, not * (1/T)
    let zmax = np_max(&z);
    let e: Vec<f64> = z.iter().map(|&v| (v - zmax).exp()).collect(); // [V] numerators, exp(-inf) = 0
    let total_e = seq_sum(e.iter().copied());
    let s: Vec<f64> = e.iter().map(|&v| v / total_e).collect(); // [V] softmax
    // 2. a token whose softmax underflowed to exactly 0 is dropped for good
    let mut keep: Vec<bool> = s.iter().map(|&v| v > 0.0).collect();
    // 3. rank: probability descending, then id ascending (a stable sort of the ids, which start ascending)
    let mut rank: Vec<usize> = (0..vocab).collect();
    rank.sort_by(|&a, &b| s[b].total_cmp(&s[a])); // total_cmp equals < here: s holds no -0.0
    // 4. top_k: every id ranked at position >= top_k goes
    if params.top_k > 0 {
        for &i in rank.iter().skip(params.top_k) {
            keep[i] = false;
        }
    }
    // 5. top_p: keep a token while the kept mass ranked before it, renormalized, is < top_p
    if params.top_p < 1.0 {
        let kept_total = seq_sum((0..vocab).filter(|&i| keep[i]).map(|i| s[i]));
        let mut before = 0.0;
        for &i in &rank {
            if !keep[i] {
                continue;
            }
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // the spec's words: "if not (before < top_p)"
            if !(before < params.top_p) {
                keep[i] = false;
            }
            before += s[i] / kept_total; // kept or not, its mass counts for the next
        }
    }
    // 6. min_p: drop every token below min_p times the best kept one (at the floor stays)
    if params.min_p > 0.0 {
        let mut kept = (0..vocab).filter(|&i| keep[i]).map(|i| s[i]);
        let first = kept.next().ok_or_else(|| SamplingError("no token is left to sample".to_string()))?;
        let best = kept.fold(first, |m, v| if v > m { v } else { m }); // Python's max(): replace when greater
        let floor = params.min_p * best;
        for i in 0..vocab {
            keep[i] = keep[i] && s[i] >= floor;
        }
    }
    // 7. renormalize over the kept: probs = (e / S) / total, two divisions
    let total = seq_sum((0..vocab).filter(|&i| keep[i]).map(|i| s[i]));
    Ok((0..vocab).map(|i| if keep[i] { s[i] / total } else { 0.0 }).collect())
}

/// Walk ids ascending over nonzero probabilities; the first whose running sum exceeds u, or the
/// last nonzero id when rounding leaves u at or beyond the total (spec/sampling.md section 6).
pub fn sample(probs: &[f64], u: f64) -> Result<usize, SamplingError> {
    let mut acc = 0.0;
    let mut last = None;
    for (i, &p) in probs.iter().enumerate() {
        if p <= 0.0 {
            continue; // zero-probability ids are skipped entirely
        }
        acc += p;
        last = Some(i);
        if acc > u {
            return Ok(i); // strictly greater
        }
    }
    last.ok_or_else(|| SamplingError("the distribution has no token of nonzero probability".to_string()))
}

/// `x[token] - logsumexp(x)` on penalized f64 logits, before temperature and truncation
/// (spec/sampling.md section 7): the max-shifted form, the sum sequential in ascending id order.
pub fn logprob(penalized: &[f64], token: usize) -> Result<f64, SamplingError> {
    let x = penalized;
    if token >= x.len() {
        let vocab = x.len();
        return Err(SamplingError(format!("logprob's token holds token id {token}, outside the vocabulary [0, {vocab})")));
    }
    let m = np_max(x);
    Ok(x[token] - (m + seq_sum(x.iter().map(|&v| (v - m).exp())).ln()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Pcg32;

    fn sampled(temperature: f64) -> SamplingParams {
        SamplingParams { temperature, ..SamplingParams::default() }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12)
    }

    #[test]
    fn validate_names_the_knob() {
        assert!(SamplingParams::default().validate().is_ok());
        let bad = SamplingParams { top_p: 0.0, ..SamplingParams::default() };
        let e = bad.validate().unwrap_err();
        assert_eq!(e.0, "SamplingParams.top_p = 0.0 is out of range: allowed 0 < top_p <= 1 (1 = off)");
        for p in [
            SamplingParams { temperature: -1.0, ..SamplingParams::default() },
            SamplingParams { temperature: f64::NAN, ..SamplingParams::default() },
            SamplingParams { min_p: 1.1, ..SamplingParams::default() },
            SamplingParams { repetition_penalty: 0.0, ..SamplingParams::default() },
            SamplingParams { presence_penalty: f64::INFINITY, ..SamplingParams::default() },
            SamplingParams { frequency_penalty: f64::NAN, ..SamplingParams::default() },
        ] {
            assert!(p.validate().is_err(), "{p:?}");
            assert!(apply_penalties(&[0.0], &p, &[], &[]).is_err());
        }
        assert!(SamplingParams::default().greedy() && !sampled(0.5).greedy());
    }

    #[test]
    fn penalties_section_3() {
        let p = SamplingParams { repetition_penalty: 2.0, frequency_penalty: 0.5, presence_penalty: 0.25, ..SamplingParams::default() };
        let x = apply_penalties(&[2.0, -1.0, 0.5, 3.0], &p, &[0, 1], &[1, 3, 3]).unwrap();
        assert_eq!(x, [1.0, -2.75, 0.5, 0.25]);
        let x = apply_penalties(&[f32::NEG_INFINITY, 0.0], &p, &[0, 1], &[]).unwrap();
        assert_eq!(x, [f64::NEG_INFINITY, 0.0], "-inf stays -inf, 0 stays 0");
        assert!(apply_penalties(&[], &p, &[], &[]).is_err());
        assert!(apply_penalties(&[f32::NAN, 0.0], &p, &[], &[]).is_err());
        assert!(apply_penalties(&[f32::INFINITY, 0.0], &p, &[], &[]).is_err());
        assert!(apply_penalties(&[0.0, 0.0], &p, &[2], &[]).is_err());
        assert!(apply_penalties(&[0.0, 0.0], &p, &[], &[2]).is_err());
    }

    #[test]
    fn argmax_lowest_id_among_maxima() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 0.0]), 1);
        assert_eq!(argmax(&[f64::NEG_INFINITY, f64::NEG_INFINITY, -5.0]), 2);
        assert_eq!(argmax(&[f64::NEG_INFINITY; 3]), 0);
        assert_eq!(argmax(&[0.0, f64::NAN, 9.0, f64::NAN]), 1, "numpy: the first NaN");
    }

    #[test]
    fn distribution_examples() {
        let ln = f64::ln;
        assert_eq!(distribution(&[1.0, 3.0, 3.0, 0.0], &SamplingParams::default()).unwrap(), [0.0, 1.0, 0.0, 0.0]);
        let d = distribution(&[0.0, ln(2.0), ln(3.0), ln(4.0)], &sampled(1.0)).unwrap();
        assert!(close(&d, &[0.1, 0.2, 0.3, 0.4]), "{d:?}");
        let d = distribution(&[f64::NEG_INFINITY, 0.0, 0.0], &sampled(1.0)).unwrap();
        assert_eq!(d, [0.0, 0.5, 0.5]);
        let d = distribution(&[0.0, -800.0, 1.0], &sampled(1.0)).unwrap();
        assert_eq!(d[1], 0.0, "exp(-801) underflows: dropped");
        let p = SamplingParams { top_k: 2, ..sampled(1.0) };
        let d = distribution(&[ln(4.0), ln(2.0), 0.0, ln(2.0)], &p).unwrap();
        assert!(close(&d, &[2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0]), "{d:?}");
        let p = SamplingParams { top_p: 0.5, ..sampled(1.0) };
        assert_eq!(distribution(&[0.0; 4], &p).unwrap(), [0.5, 0.5, 0.0, 0.0]);
        let p = SamplingParams { top_p: 0.5000001, ..sampled(1.0) };
        let d = distribution(&[0.0; 4], &p).unwrap();
        assert!(close(&d, &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0]), "{d:?}");
        let p = SamplingParams { min_p: 0.3, ..sampled(1.0) };
        let d = distribution(&[ln(8.0), ln(4.0), ln(2.0), 0.0], &p).unwrap();
        assert!(close(&d, &[2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0]), "{d:?}");
        assert!(distribution(&[f64::NEG_INFINITY; 2], &sampled(1.0)).is_err());
        assert!(distribution(&[], &sampled(1.0)).is_err());
    }

    #[test]
    fn end_to_end_section_8() {
        let p = SamplingParams {
            temperature: 0.5,
            top_k: 3,
            top_p: 0.8,
            min_p: 0.3,
            repetition_penalty: 2.0,
            presence_penalty: 0.25,
            frequency_penalty: 0.5,
        };
        let x = apply_penalties(&[2.0, -1.0, 0.5, 3.0], &p, &[0, 1], &[1, 3, 3]).unwrap();
        let probs = distribution(&x, &p).unwrap();
        assert!(close(&probs, &[0.7310585786300049, 0.0, 0.26894142136999516, 0.0]), "{probs:?}");
        let u = Pcg32::from_seed(42).next_f64();
        assert_eq!(sample(&probs, u).unwrap(), 2);
        assert!((logprob(&x, 2).unwrap() - -1.2430866641561589).abs() <= 1e-15);
    }

    #[test]
    fn sample_walks_ascending() {
        assert_eq!(sample(&[0.0, 0.75, 0.25], 0.8).unwrap(), 2);
        assert_eq!(sample(&[0.25, 0.25, 0.5], 0.25).unwrap(), 1);
        assert_eq!(sample(&[0.25, 0.25, 0.5], 0.5).unwrap(), 2);
        assert_eq!(sample(&[0.25, 0.25, 0.5], 0.0).unwrap(), 0);
        let mut tenths = vec![0.1; 10];
        tenths.push(0.0);
        assert_eq!(sample(&tenths, 0.9999999999999999).unwrap(), 9, "the last NONZERO id");
        assert!(sample(&[0.0, 0.0], 0.5).is_err());
    }

    #[test]
    fn logprob_chapter_example() {
        let lp = logprob(&[0.0, 1.0, 3.0, 0.5], 2).unwrap();
        assert!((lp - -0.2368155424308167).abs() <= 1e-15, "{lp}");
        assert!(logprob(&[0.0, 1.0], 2).is_err());
        assert!(logprob(&[], 0).is_err());
    }
}
