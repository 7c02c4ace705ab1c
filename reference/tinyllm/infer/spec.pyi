"""The contract of `tinyllm.infer.spec`: speculative decoding (chapter L10.8).

This file is the specification: every function's docstring states its rule. `ol start L10.8`
turns it into your stub. Letters: `p` is only ever the target's distribution, `q` the draft's.
Names: the chapter's section 4 calls the sampling parameters `p: &SamplingParams`; here they are
`params: SamplingParams` (the same argument, in the same position), so that `p` keeps its one meaning.

Errors: every bad argument raises `SpecError` -- never an IndexError, a numpy broadcast error or
a panic. Bad, everywhere: a token id that is negative (ctx, prompt, output, eos, draft, x), or
not below V wherever a vocabulary size V is known (the length of the rows or of p); a count that
is negative (k, max_new, keep, tokens); wrong shapes. Each docstring adds its own rules (ranges,
shapes, a draft distribution that could not have proposed its token). The message should name
the argument and what is allowed; its wording is free: any answer passes (the tests check only
that SpecError is raised). A value of the wrong Python type (a bool or a float where an integer
is expected, a string where a number is): free: any answer passes, except in SpecConfig.parse,
which refuses a bool or a float k (the Rust port's types rule the rest out).

Arguments are left as given: no function changes a list, a row or a dict its caller passed (ctx, rows,
draft, draft_probs, prompt, output, eos, p, q, logits, params), whatever it answers, a refusal included;
copy one before changing it. The one exception is rollback's `table`, which it shrinks in place. The
worker checks this after every call: a change is a wrong answer naming the call and the argument.

Domain (every function, and the tests draw from all of it, edges first: rules.toml [[domain]]): token
ids are integers 0 <= id < 2**32 (Rust's u32); counts (k, n, max_ngram, min_ngram, max_new, keep,
tokens, block_tokens) are integers 0 <= c < 2**64 (Rust's usize on a 64-bit machine; a seed is a u64);
each function answers for EVERY such value as its docstring says, 2**64 - 1 included: never an
overflow, never a float in between (2**53 + 1 stays exact), a huge k only bounds the answer. An id or
count past those limits (Python's int has none): free, any answer passes. Sequences may be empty or
hold one element wherever the docstring does not refuse them. Floats: every class is in the domain
(NaN, +inf, -inf, -0.0, subnormals, 1e300): -0.0 is 0.0, and each docstring says which it refuses.

Depends on (L10.1): `tinyllm.rng.Pcg32` (spec/pcg32.md), `tinyllm.infer.sampling`
(`SamplingParams`, `apply_penalties`, `distribution`, `argmax`, `sample`, `logprob`;
spec/sampling.md) and `tinyllm.kv.KvPool`.
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Protocol, Sequence

import numpy as np

from ..kv import KvPool
from ..rng import Pcg32
from .sampling import SamplingParams

MAX_K: int = 16  # the largest k the runtime accepts
DEFAULT_MAX_NGRAM: int = 3  # the longest suffix prompt lookup tries first
DEFAULT_MIN_NGRAM: int = 1  # the shortest suffix it falls back to
MAX_NGRAM: int = 8  # the largest max_ngram the runtime accepts (config/runtime.schema.json)


class SpecError(ValueError):
    """A bad argument to this module. The message names the argument and the allowed values."""


class Draft(Enum):
    NONE = "none"
    NGRAM = "ngram"
    PROMPT_LOOKUP = "prompt_lookup"


@dataclass(frozen=True)
class SpecConfig:
    draft: Draft
    k: int
    max_ngram: int = 3
    min_ngram: int = 1

    @classmethod
    def parse(cls, draft: str, k: int, max_ngram: int = 3, min_ngram: int = 1) -> "SpecConfig":
        """The runtime's `[engine].speculative = { draft = ..., k = ... }` as a SpecConfig.

        draft must be exactly "none", "ngram" or "prompt_lookup"; k an integer (not a bool, not
        a float such as 4.0) with 1 <= k <= 16; integers 1 <= min_ngram <= max_ngram <= MAX_NGRAM
        = 8 (the runtime schema's bounds). Anything else raises SpecError naming the bad value and
        the allowed ones (a typo such as "prompt-lookup" is refused, and so is "NGRAM": names are
        compared exactly, case included).
        """


def prompt_lookup(ctx: Sequence[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    """Copy what followed the most recent earlier occurrence of the context's suffix.

    With t = len(ctx): for n = max_ngram down to min_ngram, take the last n tokens
    ctx[t-n:] and find the largest start i < t - n with ctx[i:i+n] == ctx[t-n:]. The draft is
    ctx[i+n : min(i+n+k, t)]: it may run into the suffix itself, and never invents tokens past
    the end. The first n with a match wins. No match for any n (or n >= t) gives [].
    k = 0 gives []. Example: ctx [5 6 7 8 5 6], k 3, n 3..1 -> [7 8 5].
    Refused with SpecError, whatever ctx and k: min_ngram < 1, max_ngram < min_ngram, k < 0.
    Admitted: any k up to 2**64 - 1 (it copies up to the end of the context), max_ngram and
    min_ngram up to 2**16 (not capped here: n >= t simply never matches), an empty ctx ([]).
    A bound past 2**16 is free: the loop over every n from max_ngram down may take that long.
    """


def ngram_draft(ctx: Sequence[int], k: int, n: int) -> list[int]:
    """Draft up to k tokens from follower counts over the context itself.

    Per drafted token, over the extended context e (ctx plus the tokens drafted so far):
    for m = n-1 down to 1, count, for every start i with i + m < len(e) and
    e[i:i+m] == e[len(e)-m:], the follower e[i+m]. The first m with any count decides: the
    most frequent follower, ties to the lowest id. Append it to the draft and to e. Stop after
    k tokens or when no m matches. n = 1 drafts nothing; k = 0 drafts nothing. n < 1 and k < 0
    are SpecErrors. Any n up to 2**16 is admitted (m starts at min(n - 1, len(e) - 1)); past it, free
    (a loop over every m may take that long); ties
    are broken by id however many followers tie (40 tied followers: the lowest id, whatever order
    they occurred in). The draft grows to k tokens on a context that keeps matching, so k is the
    answer's length: the tests keep it small.
    """


def propose(cfg: SpecConfig, ctx: Sequence[int], k: int) -> list[int]:
    """The draft of `cfg.draft`, of at most k tokens.

    NONE -> []; NGRAM -> ngram_draft(ctx, k, cfg.max_ngram);
    PROMPT_LOOKUP -> prompt_lookup(ctx, k, cfg.max_ngram, cfg.min_ngram).
    k is the round's budget and bounds the draft alone: cfg.k is not consulted here (the loop
    passes min(cfg.k, ...)), so k > cfg.k drafts up to k tokens. k = 0 gives [] for every draft
    kind. NGRAM and PROMPT_LOOKUP refuse a negative k or a bad ctx with SpecError, as those
    functions do, and a cfg built without parse (SpecConfig(Draft.PROMPT_LOOKUP, 4, 1, 2), say)
    whose bounds they refuse, whatever k, k = 0 included: PROMPT_LOOKUP refuses min_ngram < 1 or
    max_ngram < min_ngram, NGRAM refuses max_ngram < 1 (ngram_draft's n); NGRAM with a bad
    min_ngram alone (it never reads it): free. A hand-built max_ngram above MAX_NGRAM is not
    refused here (the functions take any). With NONE, whether a bad ctx, k or cfg is refused is
    free: any answer passes (the draft is [] either way).
    """


def residual(p: Sequence[float], q: Sequence[float]) -> np.ndarray:
    """normalize(max(0, p - q)), float64: each entry divided by the mass, the mass summed left
    to right in ascending id order (spec/sampling.md; numpy's pairwise sum rounds differently).

    If that mass is 0 (p <= q everywhere) returns p normalized the same way (p / its left-to-right
    sum). p and q must be 1-D, non-empty, of the same length, with finite non-negative entries,
    else SpecError (NaN, +inf, -inf and any negative entry are refused; -0.0, subnormals and huge
    finite entries such as 1e300 are admitted and computed as IEEE doubles do, exactly). A p with no mass at all (every entry 0, so nothing to normalize):
    free: any answer passes (speculative_step refuses such a p).
    """


def sample_dense(p: Sequence[float], u: float) -> int:
    """The sampler's `sample`: walk ids ascending, skip zero probabilities, return the first id
    whose running sum exceeds u (the last nonzero id if rounding leaves u beyond the total).
    p is used as given: not renormalized, not checked to sum to 1. Example: p [0, 0.75, 0.25],
    u 0.8 -> 2. SpecError unless p is 1-D, non-empty, finite, non-negative with at least one
    nonzero entry, and u is in [0, 1): NaN, +inf, -inf, 1.0 and every negative u are refused
    (a NaN compares false both ways: `u < 0 or u >= 1` lets it through); -0.0 is 0.0, admitted."""


def speculative_step(p: Sequence[float], q: Sequence[float], x: int, u_accept: float,
                     u_resample: float) -> tuple[int, bool]:
    """Accept-or-resample for one proposed token x ~ q.

    Accept, returning (x, True), when u_accept < p[x] / q[x]; otherwise return
    (sample_dense(residual(p, q), u_resample), False). p and q are used as given (neither is
    renormalized). Example: p [0.2 0.5 0.3], q [0.6 0.2 0.2], x 0: u_accept 0.3 -> (0, True);
    u_accept 0.5, u_resample 0.8 -> (2, False).
    SpecError unless: p and q are as residual requires; x is in [0, len(p)); u_accept and
    u_resample are each in [0, 1) as sample_dense's u (NaN refused) -- both checked on every call,
    even when x is accepted and u_resample goes unused; q[x] > 0 (a draft with q[x] == 0 could not have proposed x); p has
    some mass (a p of all zeros rejects every x and leaves nothing to resample from).
    """


def dense_distribution(logits: Sequence[float], params: SamplingParams, prompt: Sequence[int],
                       output: Sequence[int]) -> np.ndarray:
    """distribution(apply_penalties(logits, params, prompt, output), params): the target's p for one row.

    The sampler's refusals come out as SpecError: logits not one non-empty row, logits holding
    NaN or +inf, every logit -inf, prompt or output ids outside [0, len(logits))."""


@dataclass
class Verified:
    tokens: list[int]  # emitted this round: accepted drafts, then one correction or bonus token
    logprobs: list[float]  # the sampler's logprob of each emitted token under its row
    n_accepted: int  # draft tokens accepted (0 <= n_accepted <= len(draft))


def verify_draft(rows: Sequence[Sequence[float]], draft: Sequence[int],
                 draft_probs: Sequence[Sequence[float]] | None, params: SamplingParams,
                 prompt: Sequence[int], output: Sequence[int], rng: Pcg32) -> Verified:
    """Walk the draft against the target's rows (chapter section 2.2).

    Shapes: len(rows) == len(draft) + 1 (no rows at all is refused, whatever the draft), all rows
    one non-empty vocabulary size V (an empty row is refused; V = 1 is admitted); draft, prompt and
    output ids in [0, V); draft_probs None (a deterministic draft: q_i is one-hot at d_i) or one
    length-V distribution (finite, non-negative) per draft token with q_i[d_i] > 0. Anything
    else is a SpecError, found before the walk: a bad entry after the first rejection is refused
    too. draft_probs are checked the same way at every temperature: greedy never reads their
    values, but a malformed draft_probs is a SpecError at temperature 0 as well.
    A row the walk reaches whose logits hold NaN or +inf is a SpecError (the sampler's refusal).
    A reached row that is -inf everywhere, and whether a row the walk never reaches is looked at
    beyond its shape: free: any answer passes.

    For row i the penalized logits are apply_penalties(rows[i], params, prompt, output + emitted),
    emitted being the tokens this round emitted before row i.
    Greedy (params.temperature == 0): accept d_i while it equals argmax of row i; the first
    mismatch emits that argmax and stops. No draws.
    Sampled: for each d_i draw u_accept = rng.next_f64() THEN u_resample = rng.next_f64(),
    both always; (t, ok) = speculative_step(distribution(row i), q_i, d_i, u_accept,
    u_resample); emit t; stop if not ok.
    After all len(draft) acceptances emit the bonus token from row len(draft): argmax
    (greedy) or sample(distribution, rng.next_f64()) (one draw).
    logprobs[j] = logprob(penalized row, tokens[j]) (before temperature and truncation).
    """


def blocks_for(tokens: int, block_tokens: int) -> int:
    """ceil(tokens / block_tokens): the blocks that `tokens` cached positions need.

    tokens < 0 or block_tokens < 1 is a SpecError. Exact for every count up to 2**64 - 1:
    integer division, never a float (ceil(t / b) in floats is wrong past 2**53), and never
    (t + b - 1) // b in a fixed-width integer (it overflows for t near 2**64)."""


def rollback(pool: KvPool, table: list[int], keep: int) -> int:
    """Shrink a sequence's block table (in place) to hold exactly `keep` positions.

    With B = pool.block_tokens: keep > len(table) * B (or keep < 0) is a SpecError. Keep the
    first blocks_for(keep, B) blocks; release every later block once (pool.release drops ONE
    reference: a block shared with another sequence survives for its other owner); set the
    last kept block's fill to keep - (kept - 1) * B (it may be partial). Returns the number of
    blocks released. Example: B 4, table of 3 blocks (fills 4 4 2), keep 5 -> releases the
    third block, the second's fill becomes 1, returns 1.
    The bound is the table's capacity, len(table) * B, not the positions the fills say are cached: a
    keep above the cached positions but within the capacity is admitted and sets the last kept block's
    fill to keep - (kept - 1) * B like any other (fills 4 4 2, keep 11 -> nothing released, the third
    block's fill becomes 3). Only the last kept block's fill is set: earlier kept blocks keep their
    fills, full or not (fills 2 4 3, keep 5 -> the first block's fill stays 2, the second's becomes 1).
    The count returned is of blocks taken off the table (references dropped), not of blocks the pool
    freed: a released block that another sequence still shares counts 1 though it stays live.
    A block the pool refuses (its release or set_fill raises KvError, e.g. a block that is
    already free) is a SpecError, not the pool's KvError; what the table and the pool hold after
    that refusal: free: any answer passes.
    """


class Target(Protocol):
    """What the loop decodes against: the engine's runner, or a test's fake."""

    def cached(self) -> int:
        """How many positions the target holds KV for."""

    def extend(self, ids: list[int]) -> list[Sequence[float]]:
        """Cache ids after the held positions in one forward; one logits row per id, in order."""

    def truncate(self, length: int) -> None:
        """Drop every cached position from `length` on (the runner goes through `rollback`)."""


@dataclass
class SpecStats:
    drafted: int = 0  # draft tokens proposed, over all rounds
    accepted: int = 0  # of those, accepted by the verifier
    target_calls: int = 0  # target.extend calls (forward passes)

    def accept_rate(self) -> float:
        """accepted / drafted, 0.0 when nothing was drafted."""


@dataclass
class Generated:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stats: SpecStats = field(default_factory=SpecStats)
    finish_reason: str = "length"  # "length" | "eos" | "stopped"


def generate_stream(target: Target, cfg: SpecConfig, prompt: Sequence[int], params: SamplingParams,
                    seed: int, max_new: int, eos: Sequence[int],
                    on_token: Callable[[int, float], bool]) -> Generated:
    """Speculative generation, handing each emitted token to on_token as its round is verified.

    The target must start empty (cached() == 0, else SpecError); the prompt must be non-empty;
    max_new >= 0; seed is a 64-bit unsigned integer (0 <= seed < 2**64) and the request's
    generator is Pcg32.from_seed(seed).
    Each round, while fewer than max_new tokens were emitted:
      1. budget = min(cfg.k, max_new - emitted - 1); draft = propose(cfg, prompt + emitted,
         budget) when budget > 0, else [].
      2. pending = [last emitted token], or the whole prompt in the first round;
         rows = target.extend(pending + draft) (one call, counted in stats.target_calls);
         it must return exactly one row per id fed, else SpecError (a broken target);
         the last len(draft) + 1 rows are the verifier's.
      3. v = verify_draft(those rows, draft, None, params, prompt, emitted, rng);
         stats.drafted += len(draft); stats.accepted += v.n_accepted.
      4. target.truncate(target.cached() - len(draft) + v.n_accepted): the rejected drafts'
         KV goes back; the last emitted token is not cached yet (it is the next pending).
      5. hand v's tokens, in order, to on_token(token, logprob): a False answer ends generation
         at once (finish "stopped", that token included); an EOS token ends it right after it
         is handed over (finish "eos"; later tokens of the round are dropped). An EOS token the
         listener answers False on ends with finish "stopped": its answer is looked at first.
         The listener's answer counts by its truth value, as `if not on_token(t, lp)` reads it:
         None, 0, "" and any other falsy answer stop generation as False does (finish "stopped");
         a truthy answer that is not True (1, "yes") goes on as True does.
    Ends with finish "length" after exactly max_new tokens (max_new = 0: no target call), unless the
    max_new-th token is EOS or the listener's stop: step 5 comes before the length test, so an EOS
    that is also the max_new-th token finishes "eos" (and one the listener stops on, "stopped").
    max_new = 0 still refuses a request that cannot start: an empty prompt, a negative id, a bad
    seed, a target that is not empty (cached() is asked; extend never is). A prompt id not below V
    is refused by the first round's verify_draft; with max_new = 0 no row tells V: free.
    eos: any ids (empty included); one not below V is admitted and, never emitted, ends nothing.
    """


def generate(target: Target, cfg: SpecConfig, prompt: Sequence[int], params: SamplingParams,
             seed: int, max_new: int, eos: Sequence[int]) -> Generated:
    """generate_stream with a listener that never stops it."""
