"""Speculative decoding (chapter L10.8): drafts from the context, the verifier, KV rollback, the loop.

Letters: `p` is the target's distribution, `q` the draft's (as in Leviathan et al.). The contract,
with every rule spelled out, is `spec.pyi` beside this file; this module implements it.

The loop, one round per iteration (gpt-fast style, each step a small function):
    propose -> target.extend(pending + draft) -> verify_draft -> target.truncate(kept length)
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol, Sequence

import numpy as np

from ..kv import KvError, KvPool
from ..rng import Pcg32
from .sampling import SamplingError, SamplingParams, apply_penalties, argmax, distribution, logprob, sample

MAX_K = 16  # the runtime schema's bound on drafted tokens per round (one forward of 17 rows)
DEFAULT_MAX_NGRAM = 3  # longest suffix prompt lookup tries first
DEFAULT_MIN_NGRAM = 1  # shortest suffix it falls back to
MAX_NGRAM = 8  # the runtime schema's bound on max_ngram (config/runtime.schema.json); parse refuses more


class SpecError(ValueError):
    """A bad argument to the speculative module; the message names the argument and what is allowed."""


class Draft(Enum):
    NONE = "none"
    NGRAM = "ngram"
    PROMPT_LOOKUP = "prompt_lookup"


@dataclass(frozen=True)
class SpecConfig:
    draft: Draft
    k: int
    max_ngram: int = DEFAULT_MAX_NGRAM
    min_ngram: int = DEFAULT_MIN_NGRAM

    @classmethod
    def parse(cls, draft: str, k: int, max_ngram: int = DEFAULT_MAX_NGRAM, min_ngram: int = DEFAULT_MIN_NGRAM) -> "SpecConfig":
        names = [d.value for d in Draft]
        if draft not in names:
            raise SpecError(f"speculative draft {draft!r} is unknown: allowed {', '.join(map(repr, names))}")
        if not _is_int(k) or not 1 <= k <= MAX_K:
            raise SpecError(f"speculative k = {k!r} is out of range: allowed an integer 1 <= k <= {MAX_K}")
        _check_ngrams(max_ngram, min_ngram)
        if max_ngram > MAX_NGRAM:
            raise SpecError(f"max_ngram = {max_ngram!r} is out of range: allowed 1 <= min_ngram <= max_ngram <= {MAX_NGRAM}")
        return cls(Draft(draft), int(k), int(max_ngram), int(min_ngram))


# ---- validation helpers: every bad call is a SpecError, never an IndexError -------------------

def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _ids(xs, name: str, vocab: int | None = None) -> list[int]:
    out = []
    for x in xs:
        if not _is_int(x) or x < 0:
            raise SpecError(f"{name} must hold non-negative integer token ids, got {x!r}")
        if vocab is not None and x >= vocab:
            raise SpecError(f"{name} holds token id {int(x)}, outside the vocabulary [0, {vocab})")
        out.append(int(x))
    return out


def _count(x, name: str) -> int:
    if not _is_int(x) or x < 0:
        raise SpecError(f"{name} must be a non-negative integer, got {x!r}")
    return int(x)


def _check_ngrams(max_ngram, min_ngram) -> None:
    if not (_is_int(max_ngram) and _is_int(min_ngram) and 1 <= min_ngram <= max_ngram):
        raise SpecError(f"need integers 1 <= min_ngram <= max_ngram, got min_ngram={min_ngram!r}, max_ngram={max_ngram!r}")


def _dist(x, name: str, vocab: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or (vocab is not None and a.size != vocab):
        want = f"length {vocab}" if vocab is not None else "one non-empty row"
        raise SpecError(f"{name} must be a distribution of {want}, got shape {a.shape}")
    if not np.isfinite(a).all() or (a < 0).any():
        raise SpecError(f"{name} must hold finite non-negative probabilities")
    return a


def _unit(u, name: str) -> float:
    if not isinstance(u, (float, int, np.floating)) or not 0.0 <= u < 1.0:
        raise SpecError(f"{name} must be a uniform in [0, 1), got {u!r}")
    return float(u)


# ---- drafts from the context -------------------------------------------------------------------

def prompt_lookup(ctx: Sequence[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    ctx, k = _ids(ctx, "ctx"), _count(k, "k")
    _check_ngrams(max_ngram, min_ngram)
    t = len(ctx)
    for n in range(min(max_ngram, t - 1), min_ngram - 1, -1):  # an earlier occurrence needs n < t
        suffix = ctx[t - n:]
        for i in range(t - n - 1, -1, -1):  # most recent earlier occurrence first: start i < t - n
            if ctx[i:i + n] == suffix:
                return ctx[i + n:min(i + n + k, t)]  # may run into the suffix itself
    return []


def _most_frequent_follower(ext: list[int], m: int) -> int | None:
    suffix = ext[len(ext) - m:]
    counts: dict[int, int] = {}
    for i in range(len(ext) - m):  # an occurrence at i needs a follower ext[i + m]
        if ext[i:i + m] == suffix:
            counts[ext[i + m]] = counts.get(ext[i + m], 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda tok: (-counts[tok], tok))  # most frequent, ties to the lowest id


def ngram_draft(ctx: Sequence[int], k: int, n: int) -> list[int]:
    ext, k = _ids(ctx, "ctx"), _count(k, "k")
    if not _is_int(n) or n < 1:
        raise SpecError(f"n must be an integer >= 1, got {n!r}")
    draft: list[int] = []
    while len(draft) < k:
        nxt = None
        for m in range(min(n - 1, len(ext) - 1), 0, -1):  # longest context first, then back off
            nxt = _most_frequent_follower(ext, m)
            if nxt is not None:
                break
        if nxt is None:
            break
        draft.append(nxt)
        ext.append(nxt)  # drafted tokens count as context for the next one
    return draft


def propose(cfg: SpecConfig, ctx: Sequence[int], k: int) -> list[int]:
    if cfg.draft is Draft.NGRAM:
        return ngram_draft(ctx, k, cfg.max_ngram)
    if cfg.draft is Draft.PROMPT_LOOKUP:
        return prompt_lookup(ctx, k, cfg.max_ngram, cfg.min_ngram)
    return []


# ---- accept or resample (M07.6) ----------------------------------------------------------------

def _seq_sum(a: np.ndarray) -> float:
    return float(np.cumsum(a)[-1])  # left to right, as spec/sampling.md sums


def residual(p, q) -> np.ndarray:
    p = _dist(p, "p")
    q = _dist(q, "q", p.size)
    r = np.maximum(0.0, p - q)  # [V]
    mass = _seq_sum(r)
    if mass > 0.0:
        return r / mass
    return p / _seq_sum(p)  # p <= q everywhere: nothing was rejected, p itself is the answer


def sample_dense(p, u: float) -> int:
    p = _dist(p, "p")
    if not (p > 0.0).any():
        raise SpecError("p has no token of nonzero probability: there is nothing to sample")
    return sample(p, _unit(u, "u"))


def speculative_step(p, q, x: int, u_accept: float, u_resample: float) -> tuple[int, bool]:
    p = _dist(p, "p")
    q = _dist(q, "q", p.size)
    (x,) = _ids([x], "x", p.size)
    u_accept, u_resample = _unit(u_accept, "u_accept"), _unit(u_resample, "u_resample")
    if q[x] <= 0.0:
        raise SpecError(f"q[{x}] = 0: the draft could not have proposed token {x}")
    if not (p > 0.0).any():  # refused whatever u_accept is, before the test (as the Rust reference checks)
        raise SpecError("p has no token of nonzero probability: it rejects every x and leaves nothing to resample")
    if u_accept < p[x] / q[x]:
        return x, True
    return sample_dense(residual(p, q), u_resample), False


def dense_distribution(logits, params: SamplingParams, prompt: Sequence[int], output: Sequence[int]) -> np.ndarray:
    try:
        return distribution(apply_penalties(logits, params, prompt, output), params)
    except SamplingError as e:
        raise SpecError(str(e)) from e


# ---- the verifier ------------------------------------------------------------------------------

@dataclass
class Verified:
    tokens: list[int]
    logprobs: list[float]
    n_accepted: int


def _check_rows(rows, draft, draft_probs) -> tuple[list[np.ndarray], list[int], list[np.ndarray] | None]:
    try:
        rows = [np.asarray(r, dtype=np.float64) for r in rows]  # [m + 1][V]
    except (TypeError, ValueError) as e:
        raise SpecError(f"rows must be rows of numbers: {e}") from e
    if len(rows) != len(draft) + 1:
        raise SpecError(f"got {len(rows)} rows of logits for a draft of {len(draft)}: need len(draft) + 1 = {len(draft) + 1}")
    vocab = rows[0].size
    for i, r in enumerate(rows):
        if r.ndim != 1 or r.size == 0 or r.size != vocab:
            raise SpecError(f"row {i} has shape {r.shape}; every row must be one vector of the vocabulary size {vocab}")
    draft = _ids(draft, "draft", vocab)
    if draft_probs is not None:
        if len(draft_probs) != len(draft):
            raise SpecError(f"got {len(draft_probs)} draft distributions for a draft of {len(draft)}: need one per draft token")
        draft_probs = [_dist(q, f"draft_probs[{i}]", vocab) for i, q in enumerate(draft_probs)]
        for i, (d, q) in enumerate(zip(draft, draft_probs)):
            if q[d] <= 0.0:
                raise SpecError(f"draft_probs[{i}][{d}] = 0: the draft could not have proposed its token {d}")
    return rows, draft, draft_probs


def _one_hot(x: int, vocab: int) -> np.ndarray:
    q = np.zeros(vocab)
    q[x] = 1.0
    return q


def verify_draft(rows, draft, draft_probs, params: SamplingParams, prompt, output, rng: Pcg32) -> Verified:
    rows, draft, draft_probs = _check_rows(rows, draft, draft_probs)
    vocab = rows[0].size
    prompt, output = _ids(prompt, "prompt", vocab), _ids(output, "output", vocab)
    tokens: list[int] = []
    logprobs: list[float] = []

    def emit(z: np.ndarray, t: int) -> None:
        tokens.append(t)
        logprobs.append(logprob(z, t))

    for i, d in enumerate(draft):
        z = _penalized(rows[i], params, prompt, output + tokens)  # penalties see this round's accepted tokens
        if params.greedy:
            t, ok = argmax(z), argmax(z) == d
        else:
            q = draft_probs[i] if draft_probs is not None else _one_hot(d, vocab)
            u_accept = rng.next_f64()
            u_resample = rng.next_f64()  # drawn always, so the draw count never depends on the outcome
            t, ok = speculative_step(distribution(z, params), q, d, u_accept, u_resample)
        emit(z, t)
        if not ok:
            return Verified(tokens, logprobs, i)
    z = _penalized(rows[-1], params, prompt, output + tokens)  # the bonus token: the row after the whole draft
    emit(z, argmax(z) if params.greedy else sample(distribution(z, params), rng.next_f64()))
    return Verified(tokens, logprobs, len(draft))


def _penalized(row, params: SamplingParams, prompt: list[int], seen: list[int]) -> np.ndarray:
    try:
        z = apply_penalties(row, params, prompt, seen)
    except SamplingError as e:
        raise SpecError(str(e)) from e
    if np.isneginf(z).all():
        raise SpecError("a row of logits is -inf everywhere: the target gives no token any probability")
    return z


# ---- KV rollback -------------------------------------------------------------------------------

def blocks_for(tokens: int, block_tokens: int) -> int:
    tokens = _count(tokens, "tokens")
    if not _is_int(block_tokens) or block_tokens < 1:
        raise SpecError(f"block_tokens must be an integer >= 1, got {block_tokens!r}")
    return -(-tokens // block_tokens)  # ceil


def rollback(pool: KvPool, table: list[int], keep: int) -> int:
    b = pool.block_tokens
    keep = _count(keep, "keep")
    if keep > len(table) * b:
        raise SpecError(f"cannot keep {keep} positions: the table holds {len(table)} blocks of {b} = {len(table) * b}")
    need = blocks_for(keep, b)
    released = 0
    try:
        while len(table) > need:
            pool.release(table.pop())  # one reference: a block shared through the prefix cache survives
            released += 1
        if need:
            pool.set_fill(table[-1], keep - (need - 1) * b)  # the last kept block may be partial
    except KvError as e:
        raise SpecError(f"rollback: the pool refused: {e}") from e
    return released


# ---- the generation loop -----------------------------------------------------------------------

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
        return self.accepted / self.drafted if self.drafted else 0.0


@dataclass
class Generated:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stats: SpecStats = field(default_factory=SpecStats)
    finish_reason: str = "length"  # "length" | "eos" | "stopped"


def _one_round(target: Target, cfg: SpecConfig, prompt: list[int], out: Generated, params: SamplingParams,
               rng: Pcg32, max_new: int) -> Verified:
    ctx = prompt + out.tokens
    budget = min(cfg.k, max_new - len(out.tokens) - 1)  # never write KV past the request's budget
    draft = propose(cfg, ctx, budget) if budget > 0 else []
    pending = [out.tokens[-1]] if out.tokens else prompt
    rows = target.extend(pending + draft)
    out.stats.target_calls += 1
    if len(rows) != len(pending) + len(draft):
        raise SpecError(f"target.extend returned {len(rows)} rows for {len(pending) + len(draft)} ids")
    v = verify_draft(rows[len(rows) - len(draft) - 1:], draft, None, params, prompt, out.tokens, rng)
    out.stats.drafted += len(draft)
    out.stats.accepted += v.n_accepted
    target.truncate(target.cached() - len(draft) + v.n_accepted)  # rejected drafts' KV goes back
    return v


def generate_stream(target: Target, cfg: SpecConfig, prompt: Sequence[int], params: SamplingParams, seed: int,
                    max_new: int, eos: Sequence[int], on_token: Callable[[int, float], bool]) -> Generated:
    prompt, eos, max_new = _ids(prompt, "prompt"), set(_ids(eos, "eos")), _count(max_new, "max_new")
    if not prompt:
        raise SpecError("prompt is empty: generation needs at least one token")
    if target.cached() != 0:
        raise SpecError(f"the target already holds {target.cached()} positions; generation starts from an empty target")
    if not _is_int(seed) or not 0 <= seed < 2**64:
        raise SpecError(f"seed must be a 64-bit unsigned integer, got {seed!r}")
    rng = Pcg32.from_seed(int(seed))
    out = Generated()
    while len(out.tokens) < max_new:
        v = _one_round(target, cfg, prompt, out, params, rng, max_new)
        for t, lp in zip(v.tokens, v.logprobs):
            out.tokens.append(t)
            out.logprobs.append(lp)
            if not on_token(t, lp):
                out.finish_reason = "stopped"
                return out
            if t in eos:
                out.finish_reason = "eos"
                return out
    return out


def generate(target: Target, cfg: SpecConfig, prompt: Sequence[int], params: SamplingParams, seed: int,
             max_new: int, eos: Sequence[int]) -> Generated:
    return generate_stream(target, cfg, prompt, params, seed, max_new, eos, lambda _t, _lp: True)
