"""L10.8 -- speculative decoding. My solution.

Plan (from the chapter, section 2):
  * two cheap drafts that read the context itself: prompt lookup and n-gram counts
  * the verifier: greedy = "accept while it is the argmax", sampled = accept-or-resample (M07.6)
  * rollback of the KV block table after a round
  * the loop: draft -> one target.extend -> verify -> truncate -> stream the tokens out

Everything that comes from outside is checked first and turned into a SpecError, so the step
loop never dies with an IndexError.
"""

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol, Sequence

import numpy as np

from tinyllm.kv import KvError, KvPool
from tinyllm.rng import Pcg32
from tinyllm.infer.sampling import (SamplingError, SamplingParams, apply_penalties, argmax, distribution,
                                    logprob, sample)

MAX_K = 16
MAX_NGRAM = 8  # the runtime schema's bound
DEFAULT_MAX_NGRAM = 3
DEFAULT_MIN_NGRAM = 1


class SpecError(ValueError):
    """Bad argument to the speculative decoding module."""


class Draft(Enum):
    NONE = "none"
    NGRAM = "ngram"
    PROMPT_LOOKUP = "prompt_lookup"


# ---------------------------------------------------------------------------------------------
# input checking
# ---------------------------------------------------------------------------------------------

def _is_whole(v) -> bool:
    # bool is a subclass of int, but k=True is clearly a mistake
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _token_list(values, what: str, vocab: int | None = None) -> list[int]:
    toks = []
    for v in values:
        if not _is_whole(v):
            raise SpecError(f"{what}: token ids must be integers, found {v!r}")
        if v < 0 or (vocab is not None and v >= vocab):
            allowed = f"[0, {vocab})" if vocab is not None else ">= 0"
            raise SpecError(f"{what}: token id {v!r} is not allowed (must be in {allowed})")
        toks.append(int(v))
    return toks


def _non_negative(v, what: str) -> int:
    if not _is_whole(v) or v < 0:
        raise SpecError(f"{what} must be an integer >= 0, got {v!r}")
    return int(v)


def _ngram_range(max_ngram, min_ngram) -> None:
    if not (_is_whole(max_ngram) and _is_whole(min_ngram)) or min_ngram < 1 or max_ngram < min_ngram:
        raise SpecError(f"bad n-gram range: need 1 <= min_ngram <= max_ngram, got {min_ngram!r}..{max_ngram!r}")


def _prob_vector(values, what: str, size: int | None = None) -> np.ndarray:
    try:
        v = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{what} is not a vector of numbers ({e})") from e
    if v.ndim != 1 or len(v) == 0:
        raise SpecError(f"{what} must be a 1-D non-empty distribution, got shape {v.shape}")
    if size is not None and len(v) != size:
        raise SpecError(f"{what} has {len(v)} entries, expected {size}")
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise SpecError(f"{what} must hold finite probabilities >= 0")
    return v


def _uniform(u, what: str) -> float:
    if isinstance(u, bool) or not isinstance(u, (int, float, np.floating)) or not (0.0 <= u < 1.0):
        raise SpecError(f"{what} = {u!r}: a uniform must lie in [0, 1)")
    return float(u)


def _left_sum(values) -> float:
    # spec/sampling.md: sums go left to right (np.sum is pairwise and rounds differently)
    s = 0.0
    for v in values:
        s += float(v)
    return s


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecConfig:
    draft: Draft
    k: int
    max_ngram: int = DEFAULT_MAX_NGRAM
    min_ngram: int = DEFAULT_MIN_NGRAM

    @classmethod
    def parse(cls, draft: str, k: int, max_ngram: int = DEFAULT_MAX_NGRAM,
              min_ngram: int = DEFAULT_MIN_NGRAM) -> "SpecConfig":
        allowed = {d.value: d for d in Draft}
        if not isinstance(draft, str) or draft not in allowed:
            raise SpecError(f"[engine].speculative draft = {draft!r} is not one of {sorted(allowed)}")
        if not _is_whole(k) or k < 1 or k > MAX_K:
            raise SpecError(f"[engine].speculative k = {k!r}: must be an integer in 1..{MAX_K}")
        _ngram_range(max_ngram, min_ngram)
        if max_ngram > MAX_NGRAM:
            raise SpecError(f"[engine].speculative max_ngram = {max_ngram!r}: at most {MAX_NGRAM}")
        return cls(allowed[draft], int(k), int(max_ngram), int(min_ngram))


# ---------------------------------------------------------------------------------------------
# drafts
# ---------------------------------------------------------------------------------------------

def _last_occurrence(ctx: list[int], pattern: list[int], before: int) -> int:
    """Largest start i < before with ctx[i:i+len(pattern)] == pattern, or -1."""
    n = len(pattern)
    for i in reversed(range(before)):
        if ctx[i:i + n] == pattern:
            return i
    return -1


def prompt_lookup(ctx: Sequence[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    ctx = _token_list(ctx, "ctx")
    k = _non_negative(k, "k")
    _ngram_range(max_ngram, min_ngram)
    t = len(ctx)
    if k == 0:
        return []
    for n in range(max_ngram, min_ngram - 1, -1):
        if n >= t:
            continue  # the suffix would be the whole context: nothing earlier to match
        start = _last_occurrence(ctx, ctx[t - n:], t - n)
        if start >= 0:
            return ctx[start + n:start + n + k]  # slicing stops at t by itself
    return []


def _next_by_counts(ext: list[int], n: int) -> int | None:
    for m in range(n - 1, 0, -1):
        if m >= len(ext):
            continue
        tail = ext[-m:]
        followers = Counter(ext[i + m] for i in range(len(ext) - m) if ext[i:i + m] == tail)
        if followers:
            best = max(followers.values())
            return min(tok for tok, c in followers.items() if c == best)
    return None


def ngram_draft(ctx: Sequence[int], k: int, n: int) -> list[int]:
    ext = _token_list(ctx, "ctx")
    k = _non_negative(k, "k")
    if not _is_whole(n) or n < 1:
        raise SpecError(f"ngram_draft: n must be an integer >= 1, got {n!r}")
    out: list[int] = []
    for _ in range(k):
        tok = _next_by_counts(ext, n)
        if tok is None:
            break
        out.append(tok)
        ext.append(tok)
    return out


def propose(cfg: SpecConfig, ctx: Sequence[int], k: int) -> list[int]:
    if cfg.draft == Draft.PROMPT_LOOKUP:
        return prompt_lookup(ctx, k, cfg.max_ngram, cfg.min_ngram)
    if cfg.draft == Draft.NGRAM:
        return ngram_draft(ctx, k, cfg.max_ngram)
    return []


# ---------------------------------------------------------------------------------------------
# accept / resample
# ---------------------------------------------------------------------------------------------

def residual(p, q) -> np.ndarray:
    p = _prob_vector(p, "p")
    q = _prob_vector(q, "q", len(p))
    diff = np.maximum(p - q, 0.0)
    mass = _left_sum(diff)
    if mass == 0.0:
        # p <= q everywhere, so p == q: there is nothing to correct
        return p / _left_sum(p)
    return diff / mass


def sample_dense(p, u: float) -> int:
    p = _prob_vector(p, "p")
    u = _uniform(u, "u")
    if not np.any(p > 0.0):
        raise SpecError("sample_dense: p is all zeros, there is no token to sample")
    return sample(p, u)


def speculative_step(p, q, x: int, u_accept: float, u_resample: float) -> tuple[int, bool]:
    p = _prob_vector(p, "p")
    q = _prob_vector(q, "q", len(p))
    x = _token_list([x], "x", len(p))[0]
    u_accept = _uniform(u_accept, "u_accept")
    u_resample = _uniform(u_resample, "u_resample")
    if not q[x] > 0.0:
        raise SpecError(f"x = {x} has q(x) = 0: the draft cannot have proposed it")
    ratio = p[x] / q[x]
    if u_accept < ratio:
        return x, True
    return sample_dense(residual(p, q), u_resample), False


def dense_distribution(logits, p: SamplingParams, prompt: Sequence[int], output: Sequence[int]) -> np.ndarray:
    try:
        z = apply_penalties(logits, p, prompt, output)
        return distribution(z, p)
    except SamplingError as e:
        raise SpecError(f"dense_distribution: {e}") from e


# ---------------------------------------------------------------------------------------------
# verification
# ---------------------------------------------------------------------------------------------

@dataclass
class Verified:
    tokens: list[int]
    logprobs: list[float]
    n_accepted: int


def _rows_as_arrays(rows, n_draft: int) -> list[np.ndarray]:
    rows = list(rows)
    if len(rows) != n_draft + 1:
        raise SpecError(f"verify_draft: {len(rows)} logits rows for {n_draft} draft tokens (need {n_draft + 1})")
    out = []
    for i, r in enumerate(rows):
        try:
            a = np.array(r, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise SpecError(f"verify_draft: row {i} is not numbers ({e})") from e
        if a.ndim != 1 or a.size == 0:
            raise SpecError(f"verify_draft: row {i} must be a 1-D vector, got shape {a.shape}")
        if out and a.size != out[0].size:
            raise SpecError(f"verify_draft: row {i} has {a.size} logits but row 0 has {out[0].size}")
        out.append(a)
    return out


def _draft_dists(draft_probs, draft: list[int], vocab: int) -> list[np.ndarray]:
    if draft_probs is None:  # a deterministic draft: q is one-hot at the drafted token
        qs = []
        for d in draft:
            q = np.zeros(vocab)
            q[d] = 1.0
            qs.append(q)
        return qs
    draft_probs = list(draft_probs)
    if len(draft_probs) != len(draft):
        raise SpecError(f"verify_draft: {len(draft_probs)} draft distributions for {len(draft)} draft tokens")
    qs = [_prob_vector(q, f"draft_probs[{i}]", vocab) for i, q in enumerate(draft_probs)]
    for i, (d, q) in enumerate(zip(draft, qs)):
        if q[d] == 0.0:
            raise SpecError(f"verify_draft: draft_probs[{i}][{d}] is 0 but the draft proposed {d}")
    return qs


def _penalize(row, p: SamplingParams, prompt: list[int], seen: list[int]) -> np.ndarray:
    try:
        return apply_penalties(row, p, prompt, seen)
    except SamplingError as e:
        raise SpecError(f"verify_draft: {e}") from e


def verify_draft(rows, draft, draft_probs, p: SamplingParams, prompt, output, rng: Pcg32) -> Verified:
    draft = list(draft)
    rows = _rows_as_arrays(rows, len(draft))
    vocab = rows[0].size
    draft = _token_list(draft, "draft", vocab)
    qs = _draft_dists(draft_probs, draft, vocab)
    prompt = _token_list(prompt, "prompt", vocab)
    history = _token_list(output, "output", vocab)

    result = Verified([], [], 0)
    for i, d in enumerate(draft):
        z = _penalize(rows[i], p, prompt, history + result.tokens)
        if p.greedy:
            best = argmax(z)
            token, accepted = best, best == d
        else:
            ua = rng.next_f64()
            ur = rng.next_f64()  # always drawn: the stream must not depend on accept/reject
            token, accepted = speculative_step(distribution(z, p), qs[i], d, ua, ur)
        result.tokens.append(token)
        result.logprobs.append(logprob(z, token))
        if not accepted:
            return result
        result.n_accepted += 1

    # every draft token was accepted: one more token for free from the last row
    z = _penalize(rows[len(draft)], p, prompt, history + result.tokens)
    bonus = argmax(z) if p.greedy else sample(distribution(z, p), rng.next_f64())
    result.tokens.append(bonus)
    result.logprobs.append(logprob(z, bonus))
    return result


# ---------------------------------------------------------------------------------------------
# KV rollback
# ---------------------------------------------------------------------------------------------

def blocks_for(tokens: int, block_tokens: int) -> int:
    tokens = _non_negative(tokens, "tokens")
    if not _is_whole(block_tokens) or block_tokens <= 0:
        raise SpecError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    return (tokens + block_tokens - 1) // block_tokens


def rollback(pool: KvPool, table: list[int], keep: int) -> int:
    B = pool.block_tokens
    keep = _non_negative(keep, "keep")
    capacity = len(table) * B
    if keep > capacity:
        raise SpecError(f"rollback: keep = {keep} but the table only holds {capacity} positions")
    n_keep = blocks_for(keep, B)
    extra = table[n_keep:]
    del table[n_keep:]
    try:
        for blk in reversed(extra):
            pool.release(blk)  # drops our reference only; a shared block lives on
        if n_keep > 0:
            pool.set_fill(table[-1], keep - B * (n_keep - 1))
    except KvError as e:
        raise SpecError(f"rollback: {e}") from e
    return len(extra)


# ---------------------------------------------------------------------------------------------
# the generation loop
# ---------------------------------------------------------------------------------------------

class Target(Protocol):
    def cached(self) -> int: ...
    def extend(self, ids: list[int]) -> list: ...
    def truncate(self, length: int) -> None: ...


@dataclass
class SpecStats:
    drafted: int = 0
    accepted: int = 0
    target_calls: int = 0

    def accept_rate(self) -> float:
        if self.drafted == 0:
            return 0.0
        return self.accepted / self.drafted


@dataclass
class Generated:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stats: SpecStats = field(default_factory=SpecStats)
    finish_reason: str = "length"


def generate_stream(target: Target, cfg: SpecConfig, prompt: Sequence[int], p: SamplingParams, seed: int,
                    max_new: int, eos: Sequence[int], on_token: Callable[[int, float], bool]) -> Generated:
    prompt = _token_list(prompt, "prompt")
    stop_ids = set(_token_list(eos, "eos"))
    max_new = _non_negative(max_new, "max_new")
    if len(prompt) == 0:
        raise SpecError("generate: the prompt is empty")
    if target.cached() != 0:
        raise SpecError(f"generate: the target must start empty, it holds {target.cached()} positions")
    if not _is_whole(seed) or seed < 0 or seed >= 1 << 64:
        raise SpecError(f"generate: seed {seed!r} is not a 64-bit unsigned integer")
    rng = Pcg32.from_seed(int(seed))

    gen = Generated()
    while len(gen.tokens) < max_new:
        room = min(cfg.k, max_new - len(gen.tokens) - 1)  # don't draft past the request's end
        draft = propose(cfg, prompt + gen.tokens, room) if room > 0 else []
        feed = (gen.tokens[-1:] if gen.tokens else prompt) + draft
        rows = target.extend(feed)
        gen.stats.target_calls += 1
        if len(rows) != len(feed):
            raise SpecError(f"generate: target.extend gave {len(rows)} rows for {len(feed)} ids")
        v = verify_draft(rows[-(len(draft) + 1):], draft, None, p, prompt, gen.tokens, rng)
        gen.stats.drafted += len(draft)
        gen.stats.accepted += v.n_accepted
        target.truncate(target.cached() - (len(draft) - v.n_accepted))  # give back rejected KV

        for tok, lp in zip(v.tokens, v.logprobs):
            gen.tokens.append(tok)
            gen.logprobs.append(lp)
            if not on_token(tok, lp):
                gen.finish_reason = "stopped"
                return gen
            if tok in stop_ids:
                gen.finish_reason = "eos"
                return gen
    return gen


def generate(target: Target, cfg: SpecConfig, prompt: Sequence[int], p: SamplingParams, seed: int,
             max_new: int, eos: Sequence[int]) -> Generated:
    return generate_stream(target, cfg, prompt, p, seed, max_new, eos, lambda tok, lp: True)
