"""The sampler of L10.1, normative in spec/sampling.md.

Order of operations for one row of logits: `apply_penalties` -> `distribution` -> `sample`.
All arithmetic is float64; every sum runs sequentially in the order the spec names (ascending id
unless it says "in rank order"), so an implementation in another language can match it to the bit.
`exp` is this module's own (below), so the reference answers the same bits on every CPU.
"""

from dataclasses import dataclass
import math

import numpy as np


class SamplingError(ValueError):
    """A sampling input is out of range or malformed; the message names the value and the allowed range."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 means off
    top_p: float = 1.0  # 1 means off
    min_p: float = 0.0  # 0 means off
    repetition_penalty: float = 1.0  # 1 means off
    presence_penalty: float = 0.0  # 0 means off
    frequency_penalty: float = 0.0  # 0 means off

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, allowed: str) -> None:
            if not ok:
                raise SamplingError(f"SamplingParams.{name} = {getattr(self, name)!r} is out of range: allowed {allowed}")

        finite = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        need(finite(self.temperature) and self.temperature >= 0, "temperature", "a finite number >= 0 (0 = greedy)")
        need(isinstance(self.top_k, int) and not isinstance(self.top_k, bool) and self.top_k >= 0, "top_k", "an integer >= 0 (0 = off)")
        need(finite(self.top_p) and 0 < self.top_p <= 1, "top_p", "0 < top_p <= 1 (1 = off)")
        need(finite(self.min_p) and 0 <= self.min_p <= 1, "min_p", "0 <= min_p <= 1 (0 = off)")
        need(finite(self.repetition_penalty) and self.repetition_penalty > 0, "repetition_penalty", "a finite number > 0 (1 = off)")
        need(finite(self.presence_penalty), "presence_penalty", "a finite number (0 = off)")
        need(finite(self.frequency_penalty), "frequency_penalty", "a finite number (0 = off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


# exp, written here because numpy's and the C library's are not the same function on every CPU:
# numpy picks its float64 exp kernel by the CPU at run time (AVX-512, AVX2, baseline), and those
# kernels differ in the last bit on some inputs, as glibc's FMA and SSE2 builds of exp may. Every
# operation below is one IEEE-754 float64 operation (numpy never fuses two ufuncs), so the result
# is the same bits everywhere. Cody-Waite reduction x = k ln2 + r with |r| <= ln2 / 2, a degree-13
# Taylor polynomial (its truncation error is below 2^-60 there), then 2^k exactly. Faithful: within
# 1 ulp of the exact value (measured at most 0.84 ulp over 300,000 inputs in [-700, 0] against
# 50-digit decimal arithmetic; tests/unit/test_sampling.py), like any libm a port uses.
_LN2_HI = 6.93147180369123816490e-01  # ln 2 with its low 32 bits zero: k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
_INV_LN2 = 1.44269504088896338700e00
_INV_FACTORIALS = tuple(1.0 / math.factorial(n) for n in range(2, 14))  # 1/2! .. 1/13!
_EXP_UNDERFLOW = -746.0  # exp(x) rounds to 0 below about -745.13
_EXP_OVERFLOW = 709.79  # and to +inf above about 709.78


def exp(x) -> np.ndarray:
    """Float64 exp of every entry of x (exp(-inf) = 0), the same bits on every CPU."""
    x = np.asarray(x, dtype=np.float64)
    live = (x > _EXP_UNDERFLOW) & (x < _EXP_OVERFLOW)
    xs = np.where(live, x, 0.0)
    k = np.rint(xs * _INV_LN2)
    hi = xs - k * _LN2_HI  # exact: k * _LN2_HI is exact and within a factor 2 of xs (Sterbenz)
    r = hi - k * _LN2_LO
    lo = (hi - r) - k * _LN2_LO  # what rounding r lost
    tail = np.full_like(r, _INV_FACTORIALS[-1])
    for c in reversed(_INV_FACTORIALS[:-1]):
        tail = tail * r + c  # (exp(r) - 1 - r) / r^2, by Horner
    e_r = 1.0 + (r + (lo + (r * r) * tail))
    dead = np.where(x > 0.0, np.inf, np.where(np.isnan(x), np.nan, 0.0))  # overflow, NaN, underflow and -inf
    return np.where(live, np.ldexp(e_r, k.astype(np.int64)), dead)


def _check_ids(ids, vocab: int, what: str) -> None:
    for t in ids:
        if not 0 <= int(t) < vocab:
            raise SamplingError(f"{what} holds token id {int(t)}, outside the vocabulary [0, {vocab})")


def apply_penalties(logits, params: SamplingParams, prompt, output) -> np.ndarray:
    """Penalized float64 logits: repetition over prompt and output, then frequency and presence over output."""
    x = np.array(logits, dtype=np.float64)  # [V]
    if x.ndim != 1 or x.size == 0:
        raise SamplingError(f"logits must be one non-empty row, got shape {x.shape}")
    if np.isnan(x).any() or np.isposinf(x).any():
        raise SamplingError("logits hold NaN or +inf; every logit must be finite or -inf")
    vocab = x.size
    _check_ids(prompt, vocab, "prompt")
    _check_ids(output, vocab, "output")
    theta = params.repetition_penalty
    if theta != 1.0:
        for t in sorted(set(int(t) for t in prompt) | set(int(t) for t in output)):
            x[t] = x[t] / theta if x[t] > 0 else x[t] * theta
    if params.frequency_penalty != 0.0 or params.presence_penalty != 0.0:
        counts: dict[int, int] = {}
        for t in output:
            counts[int(t)] = counts.get(int(t), 0) + 1
        for t in sorted(counts):
            x[t] -= counts[t] * params.frequency_penalty + params.presence_penalty
    return x


def argmax(logits) -> int:
    """The lowest id among the maxima."""
    return int(np.argmax(np.asarray(logits)))


def _seq_sum(values) -> float:
    """Left-to-right float64 sum (numpy's sum is pairwise, which rounds differently)."""
    total = 0.0
    for v in values:
        total += float(v)
    return total


def distribution(penalized_logits, params: SamplingParams) -> np.ndarray:
    """Float64 probabilities over the whole vocabulary; dropped tokens are exactly 0."""
    x = np.asarray(penalized_logits, dtype=np.float64)  # [V]
    vocab = x.size
    if np.isneginf(x).all():
        raise SamplingError("every logit is -inf: there is nothing to sample")
    if params.greedy:
        probs = np.zeros(vocab)
        probs[argmax(x)] = 1.0
        return probs
    z = x / params.temperature
    e = exp(z - z.max())  # [V] softmax numerators
    s = e / _seq_sum(e)  # [V] softmax
    keep = s > 0.0
    rank = sorted(range(vocab), key=lambda i: (-s[i], i))  # probability descending, then id ascending
    if params.top_k > 0:
        for i in rank[params.top_k:]:
            keep[i] = False
    if params.top_p < 1.0:
        kept_total = _seq_sum(s[i] for i in range(vocab) if keep[i])
        before = 0.0
        for i in rank:
            if not keep[i]:
                continue
            if not before < params.top_p:
                keep[i] = False
            before += s[i] / kept_total
    if params.min_p > 0.0:
        floor = params.min_p * max(s[i] for i in range(vocab) if keep[i])
        keep &= s >= floor
    total = _seq_sum(s[i] for i in range(vocab) if keep[i])
    return np.where(keep, s / total, 0.0)


def sample(probs, u: float) -> int:
    """Walk ids ascending over nonzero probabilities; the first whose running sum exceeds u."""
    acc = 0.0
    last = -1
    for i, p in enumerate(np.asarray(probs, dtype=np.float64)):
        if p <= 0.0:
            continue
        acc += float(p)
        last = i
        if acc > u:
            return i
    if last < 0:
        raise SamplingError("the distribution has no token of nonzero probability")
    return last


def logprob(penalized_logits, token: int) -> float:
    """logit[token] - logsumexp(logits), on penalized float64 logits, before temperature and truncation."""
    x = np.asarray(penalized_logits, dtype=np.float64)
    _check_ids([token], x.size, "logprob's token")
    m = float(x.max())
    return float(x[token]) - (m + math.log(_seq_sum(exp(x - m))))
