#!/usr/bin/env python3
"""Golden cases for chapter L10.8 (speculative decoding): what the Python reference answers.

Writes `fixtures/L10.8/spec_golden.json` (format: `fixtures/L10.8/README.md` and
`fixtures/L10.8/spec_golden.schema.json`) from the reference `tinyllm.infer.spec`:

* `verify`        120 cases of `verify_draft` (tokens, logprobs, n_accepted, the next u32),
* `prompt_lookup` 150 cases of `prompt_lookup`,
* `ngram`          40 cases of `ngram_draft`.

Randomness. Everything comes from ONE master seed (`MASTER_SEED`, a module constant). Case
number `i` of section `s` draws from its own reference `Pcg32`, seeded by a splitmix64 mix of
(master seed, section code, i): no numpy random generator (its streams may change between numpy
versions), no `hash()`, no clock, no dependence on dict or set order. Normal-ish logits are
Irwin-Hall sums of four uniforms (pure float64 additions, exact on every platform), rounded to
float32. What a case *is* (its kind, draft length, planned acceptances, vocabulary, active
sampling knobs, flavours) is fixed per position by the plan below and never depends on the seed;
only the numbers do. So `build(other_seed)` gives fresh cases of the same design, with the same
ids and the same kinds at the same positions, and every property the build asserts (planned
acceptances, `shows:s04` on the constructed penalty cases, ...) holds for any seed: rows are
*constructed* against the uniforms the case's own seed will draw, not found by luck.

Pitfalls. For every case the oracle also runs small local variants of the reference with one
chapter pitfall each (`sNN`, chapter section 5) and tags the case `shows:sNN` when the variant's
answer differs from the reference's: for `verify` (tokens, n_accepted, next_u32); for the drafts
the draft itself. The build asserts s04, s07, s09 show on >= 10 verify cases, s01, s02 on >= 5
prompt-lookup cases and s03 on >= 5 n-gram cases.

Usage:
    python oracle/L10.8/spec_golden.py                 # write the fixture
    python oracle/L10.8/spec_golden.py --check         # exit 1 (and say where) if it differs
    python oracle/L10.8/spec_golden.py --out PATH [--seed N]
As a module: build(master_seed) -> dict, dumps(doc) -> bytes, write(path), check(path).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "reference") not in sys.path:
    sys.path.insert(0, str(REPO / "reference"))

import numpy as np  # noqa: E402

from tinyllm.infer import spec as S  # noqa: E402
from tinyllm.infer.sampling import (  # noqa: E402
    SamplingParams,
    apply_penalties,
    argmax,
    distribution,
    logprob,
    sample,
)
from tinyllm.rng import Pcg32  # noqa: E402

MASTER_SEED = 0x4C31302E38  # = 327242755640, the ASCII bytes of "L10.8"; the ONLY source of randomness
CHAPTER = "L10.8"
GENERATOR = "oracle/L10.8/spec_golden.py"
DEFAULT_OUT = REPO / "fixtures" / "L10.8" / "spec_golden.json"

N_VERIFY = 120
N_PROMPT_LOOKUP = 150
N_NGRAM = 40
Q_DENOM = 4096  # draft probabilities are multiples of 1/4096 summing to exactly 1 (exact in any parser)
NEG_INF = "-inf"  # how a -inf logit is written (JSON has no infinity)

KNOBS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")
PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")
VERIFY_BUGS = ("s04", "s05", "s06", "s07", "s08", "s09", "s12")
MUST_SHOW = {"s04": 10, "s07": 10, "s09": 10, "s01": 5, "s02": 5, "s03": 5}

# ---- the fixed tag vocabulary (documented in fixtures/L10.8/README.md; enumerated in the schema) ----

VERIFY_TAGS = (
    "greedy", "sampled",
    *KNOBS,
    *(f"alone:{k}" for k in KNOBS),
    "combo", "penalized", "unpenalized", "greedy_ignores_truncation",
    *(f"draft_len:{m}" for m in range(9)),
    "vocab:small", "vocab:medium", "vocab:large",
    "deterministic_draft", "stochastic_draft",
    "no_draft", "full_accept", "reject_first", "agree_then_diverge", "several_then_reject",
    "output_empty", "output_nonempty", "prompt_empty",
    "penalty_sees_accepted", "argmax_tie", "neg_inf", "neg_inf_draft", "single_finite_row",
    "truncated_draft", "seed_high", "seed_edge",
    *(f"shows:{b}" for b in VERIFY_BUGS),
)
PROMPT_LOOKUP_TAGS = (
    "hand_example", "periodic", "random_repeats", "no_match", "recent_wins", "backoff", "long_ctx",
    "single_n", "ngram_ge_ctx", "empty_ctx", "into_suffix", "end_truncated", "full_k", "empty_draft",
    "shows:s01", "shows:s02",
)
NGRAM_TAGS = (
    "n_one", "tie", "backoff", "stop", "periodic", "random", "empty_draft", "counts_drafted",
    "shows:s03",
)


def _order_tags(tags: set[str], vocab: Sequence[str]) -> list[str]:
    unknown = tags - set(vocab)
    assert not unknown, f"tags outside the vocabulary: {sorted(unknown)}"
    return [t for t in vocab if t in tags]


# ---- deterministic randomness --------------------------------------------------------------------

MASK64 = (1 << 64) - 1
SECTION_CODE = {"verify": 1, "prompt_lookup": 2, "ngram": 3}


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Rand:
    """The case generator: a reference Pcg32 per (master seed, section, case index)."""

    def __init__(self, master_seed: int, section: str, index: int) -> None:
        s = splitmix64(splitmix64(splitmix64(master_seed) ^ SECTION_CODE[section]) ^ index)
        self.g = Pcg32(s, splitmix64(s ^ 0x5EED))

    def u32(self) -> int:
        return self.g.next_u32()

    def u64(self) -> int:
        return (self.u32() << 32) | self.u32()

    def below(self, n: int) -> int:
        """Uniform integer in [0, n), unbiased (rejection)."""
        assert 1 <= n <= 1 << 32
        limit = ((1 << 32) // n) * n
        while True:
            x = self.u32()
            if x < limit:
                return x % n

    def int_in(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def uniform(self) -> float:
        return self.g.next_f64()

    def chance(self, p: float) -> bool:
        return self.uniform() < p

    def choice(self, seq: Sequence):
        return seq[self.below(len(seq))]

    def shuffle(self, xs: list) -> list:
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]
        return xs

    def distinct(self, lo: int, hi: int, k: int) -> list[int]:
        """k distinct integers from [lo, hi), in random order."""
        pool = list(range(lo, hi))
        self.shuffle(pool)
        return pool[:k]

    def gauss(self) -> float:
        """Irwin-Hall: sum of four uniforms minus 2 (mean 0, variance 1/3, support [-2, 2])."""
        return self.uniform() + self.uniform() + self.uniform() + self.uniform() - 2.0

    def weighted(self, items: Sequence[int], weights: Sequence[float]) -> int:
        total = 0.0
        for w in weights:
            total += w
        if total <= 0.0:
            return self.choice(items)
        u = self.uniform() * total
        acc = 0.0
        for it, w in zip(items, weights):
            acc += w
            if acc > u:
                return it
        return items[-1]


def f32(x: float) -> float:
    """The float32 nearest x, as the Python float (float64) that holds it exactly."""
    return float(np.float32(x))


class _Retry(Exception):
    """This attempt at constructing a case failed; try again with the next numbers."""


# ---- the verifier: the reference and the pitfall variants -----------------------------------------

def run_reference(case: dict) -> tuple[S.Verified, int]:
    """verify_draft on a case (decoded rows), and the generator's next u32 afterwards."""
    rng = Pcg32.from_seed(case["seed"])
    v = S.verify_draft(case["rows"], case["draft"], case["draft_probs"], _params(case["params"]),
                       case["prompt"], case["output"], rng)
    return v, rng.next_u32()


def _seq_sum(a) -> float:
    total = 0.0
    for x in a:
        total += float(x)
    return total


def run_variant(case: dict, bug: str | None) -> tuple[list[int], list[float], int, int]:
    """verify_draft with one chapter pitfall (bug = None: a local copy of the correct rule).

    s04 penalties ignore this round's emitted tokens; s05 accept when u_a < p(x); s06 residual
    normalize(|p - q|); s07 u_resample drawn only on rejection; s08 bonus token from the last
    draft row; s09 u_resample drawn before u_accept; s12 resample from p instead of the residual.
    """
    p = _params(case["params"])
    rows = [np.asarray(r, dtype=np.float64) for r in case["rows"]]
    draft, prompt, output = case["draft"], case["prompt"], case["output"]
    vocab = rows[0].size
    rng = Pcg32.from_seed(case["seed"])
    tokens: list[int] = []
    lps: list[float] = []

    def seen() -> list[int]:
        return list(output) if bug == "s04" else list(output) + tokens

    for i, d in enumerate(draft):
        z = apply_penalties(rows[i], p, prompt, seen())
        if p.greedy:
            t = argmax(z)
            ok = t == d
        else:
            if case["draft_probs"] is not None:
                q = np.asarray(case["draft_probs"][i], dtype=np.float64)
            else:
                q = np.zeros(vocab)
                q[d] = 1.0
            pd = distribution(z, p)
            if bug == "s09":
                u_r = rng.next_f64()
                u_a = rng.next_f64()
            elif bug == "s07":
                u_a, u_r = rng.next_f64(), None
            else:
                u_a = rng.next_f64()
                u_r = rng.next_f64()
            ratio = pd[d] if bug == "s05" else pd[d] / q[d]
            if u_a < ratio:
                t, ok = d, True
            else:
                if bug == "s07":
                    u_r = rng.next_f64()
                if bug == "s06":
                    r = np.abs(pd - q)
                    mass = _seq_sum(r)
                    res = r / mass if mass > 0.0 else pd / _seq_sum(pd)
                elif bug == "s12":
                    res = pd
                else:
                    res = S.residual(pd, q)
                t, ok = sample(res, u_r), False
        tokens.append(int(t))
        lps.append(logprob(z, t))
        if not ok:
            return tokens, lps, i, rng.next_u32()
    last = rows[-2] if (bug == "s08" and draft) else rows[-1]
    z = apply_penalties(last, p, prompt, seen())
    t = argmax(z) if p.greedy else sample(distribution(z, p), rng.next_f64())
    tokens.append(int(t))
    lps.append(logprob(z, t))
    return tokens, lps, len(draft), rng.next_u32()


def _params(d: dict) -> SamplingParams:
    return SamplingParams(**{k: d[k] for k in KNOBS})


# ---- verify: the plan (what each position is, independent of the seed) ------------------------------

@dataclass(frozen=True)
class VPlan:
    mode: str  # "greedy" | "sampled"
    knobs: tuple[str, ...]  # active knobs; "temperature" = T not in {0, 1}
    m: int  # draft length
    j: int  # planned n_accepted (== m: full acceptance, the bonus token)
    vocab: int
    stochastic: bool = False  # draft_probs given
    flavors: tuple[str, ...] = ()
    seed: str = "random"  # random | high | low | zero | half | max
    history: bool = True  # output non-empty


def _verify_plan() -> list[VPlan]:
    G, SM = "greedy", "sampled"
    R, P, F, T = "repetition_penalty", "presence_penalty", "frequency_penalty", "temperature"
    K, TP, MP = "top_k", "top_p", "min_p"
    plan: list[VPlan] = []
    # greedy, no knobs: every draft length, agreement then divergence, full acceptance
    for (m, j, v, hist) in [(0, 0, 3, False), (1, 1, 5, True), (1, 0, 8, False), (2, 1, 16, True),
                            (3, 3, 3, True), (4, 2, 32, False), (5, 0, 64, True), (6, 6, 100, True),
                            (7, 3, 512, True), (8, 5, 16, False), (8, 8, 8, True), (5, 4, 257, True)]:
        plan.append(VPlan(G, (), m, j, v, history=hist))
    plan.append(VPlan(G, (), 2, 1, 6, flavors=("no_prompt",), history=False))
    # greedy with truncation knobs set (greedy ignores them)
    plan.append(VPlan(G, (K, TP, MP), 4, 2, 12))
    plan.append(VPlan(G, (K,), 3, 3, 9))
    # greedy with penalties, history tokens made competitive
    for (knobs, m, j, v) in [((R,), 2, 0, 8), ((P,), 3, 1, 16), ((F,), 4, 4, 32), ((R, P), 5, 2, 64),
                             ((R, F), 6, 3, 5), ((P, F), 7, 7, 100), ((R, P, F), 8, 6, 20), ((R,), 1, 1, 12),
                             ((F,), 0, 0, 10), ((P,), 3, 2, 3), ((R, P, F), 6, 1, 40), ((R,), 8, 4, 24)]:
        plan.append(VPlan(G, knobs, m, j, v, flavors=("hist_boost",)))
    # greedy: a penalty on a token accepted this round changes a later argmax (s04)
    s04_knobs = [(R,), (P,), (F,), (P, F), (R, P), (R, P, F), (F,)]
    for n, (m, j, v) in enumerate([(1, 1, 6), (2, 1, 8), (2, 2, 12), (3, 2, 16), (3, 3, 24), (4, 1, 32),
                                   (4, 4, 8), (5, 3, 50), (6, 5, 10), (6, 6, 20), (7, 2, 16), (8, 7, 30),
                                   (8, 8, 12), (3, 1, 64)]):
        plan.append(VPlan(G, s04_knobs[n % len(s04_knobs)], m, j, v, flavors=("s04",)))
    # greedy: ties in the argmax (lowest id wins)
    plan.append(VPlan(G, (), 2, 1, 4, flavors=("tie",)))
    plan.append(VPlan(G, (), 3, 0, 3, flavors=("tie",), history=False))
    plan.append(VPlan(G, (), 1, 1, 10, flavors=("tie",)))
    plan.append(VPlan(G, (P,), 4, 2, 20, flavors=("tie",)))
    # greedy: -inf logits
    plan.append(VPlan(G, (), 3, 1, 6, flavors=("neg_inf", "neg_inf_draft")))
    plan.append(VPlan(G, (), 2, 0, 3, flavors=("neg_inf", "single_finite", "neg_inf_draft"), history=False))
    plan.append(VPlan(G, (R,), 5, 5, 30, flavors=("neg_inf",)))
    plan.append(VPlan(G, (F,), 4, 2, 12, flavors=("neg_inf", "neg_inf_draft", "hist_boost")))
    plan.append(VPlan(G, (), 2, 2, 512, seed="max"))

    # sampled, each knob alone (temperature alone: T != 1; every other knob at T = 1)
    mj = [(3, 1), (5, 5), (2, 0), (6, 3), (4, 2), (7, 4), (1, 1), (8, 2), (0, 0), (4, 0), (3, 3), (6, 2),
          (2, 1), (5, 3), (8, 8), (7, 6), (1, 0), (4, 4), (6, 5), (3, 2), (2, 2)]
    vs = [3, 8, 16, 32, 64, 100, 5, 12, 257, 20, 7]
    n = 0
    for knob in KNOBS:
        for rep in range(3):
            m, j = mj[n]
            fl = ("hist_boost",) if knob in PENALTIES else ()
            if rep == 1:
                fl += ("split",)
            plan.append(VPlan(SM, (knob,), m, j, vs[n % len(vs)], flavors=fl,
                              history=knob in PENALTIES or rep != 2))
            n += 1
    # sampled, knobs in combination
    for (knobs, m, j, v, fl) in [
        ((T, K), 3, 1, 10, ()), ((T, TP), 4, 4, 16, ("split",)), ((K, TP), 5, 2, 24, ("zero_p",)),
        ((TP, MP), 2, 0, 8, ("zero_p",)), ((T, MP, R), 6, 3, 32, ("hist_boost",)),
        ((T, K, TP, MP), 7, 5, 64, ("split",)), (KNOBS, 8, 4, 50, ("hist_boost",)),
        ((P, F, T), 4, 2, 12, ("hist_boost", "split")), ((R, K), 3, 3, 6, ("hist_boost",)),
        ((T, TP, F), 5, 1, 20, ("hist_boost",)), ((K, MP, P), 2, 1, 40, ("hist_boost", "zero_p")),
        (KNOBS, 6, 6, 16, ("hist_boost",))]:
        plan.append(VPlan(SM, knobs, m, j, v, flavors=fl))
    # sampled, several acceptances before a rejection
    for (knobs, m, j, v) in [((), 3, 2, 8), ((T,), 4, 2, 16), ((T, TP), 4, 3, 32), ((P,), 5, 3, 12),
                             ((T, K), 6, 4, 20), ((MP,), 7, 5, 64), ((T, R, F), 8, 6, 24),
                             ((T,), 5, 4, 3), ((F, P), 7, 3, 10), ((T, TP, MP), 6, 2, 48)]:
        plan.append(VPlan(SM, knobs, m, j, v, flavors=("split", "hist_boost") if set(knobs) & set(PENALTIES) else ("split",)))
    # sampled, full acceptance: the bonus token is sampled from the row after the draft
    for (knobs, m, v, seed) in [((T,), 1, 3, "zero"), ((), 2, 6, "half"), ((T, K), 4, 16, "random"),
                                ((TP,), 6, 12, "high"), ((T, MP, P), 8, 20, "random"), ((), 3, 512, "max")]:
        plan.append(VPlan(SM, knobs, m, m, v, seed=seed))
    # sampled, stochastic drafts with draft_probs
    for (knobs, m, j, v, fl) in [
        ((), 1, 0, 4, ()), ((), 1, 1, 3, ("ratio",)), ((T,), 2, 1, 8, ("ratio",)), ((K,), 3, 0, 10, ("zero_p",)),
        ((T, TP), 3, 3, 16, ("ratio",)), ((P,), 4, 2, 12, ("hist_boost",)), ((T,), 5, 4, 20, ("ratio",)),
        ((MP,), 6, 6, 32, ()), ((T, K, TP), 2, 0, 24, ("zero_p",)), ((R,), 4, 1, 6, ("ratio", "hist_boost")),
        ((T,), 5, 2, 64, ("ratio",)), ((F, T), 7, 3, 16, ("hist_boost",)), ((), 8, 5, 10, ("ratio",)),
        ((T, MP), 3, 2, 5, ("ratio",))]:
        plan.append(VPlan(SM, knobs, m, j, v, stochastic=True, flavors=fl))
    # sampled, no draft: one draw for the bonus token
    plan.append(VPlan(SM, (T,), 0, 0, 8, seed="high"))
    plan.append(VPlan(SM, (T, K, TP, R), 0, 0, 16, flavors=("hist_boost",)))
    # sampled, -inf logits (a -inf draft token has p = 0: rejected whatever u_accept is)
    plan.append(VPlan(SM, (), 3, 1, 8, flavors=("neg_inf", "neg_inf_draft")))
    plan.append(VPlan(SM, (T,), 2, 0, 4, flavors=("neg_inf", "single_finite", "neg_inf_draft")))
    plan.append(VPlan(SM, (K,), 4, 4, 12, flavors=("neg_inf",)))
    # sampled, ties in the rank (top_k breaks them to the lower id)
    plan.append(VPlan(SM, (K,), 2, 1, 6, flavors=("tie",)))
    plan.append(VPlan(SM, (K,), 3, 0, 5, flavors=("tie2",)))
    assert len(plan) == N_VERIFY, len(plan)
    return plan


TEMPS = (0.3, 0.5, 0.7, 0.8, 1.3, 1.5, 2.0)
TOP_KS = (1, 2, 3, 5, 10, 40)
TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95)
MIN_PS = (0.02, 0.05, 0.1, 0.2, 0.3)
REPS = (1.1, 1.3, 1.5, 2.0, 0.8)
PRESENCES = (0.5, 1.0, 1.5, -0.5)
FREQUENCIES = (0.3, 0.7, 1.0, -0.4)
EDGE_SEEDS = {"zero": 0, "half": 1 << 63, "max": MASK64}


def _make_params(plan: VPlan, r: Rand) -> dict:
    s04 = "s04" in plan.flavors  # the constructed penalty flip wants penalties that bite (> 0)
    d: dict[str, Any] = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                         "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
    if plan.mode == "sampled":
        d["temperature"] = r.choice(TEMPS) if "temperature" in plan.knobs else 1.0
    if "top_k" in plan.knobs:
        if "tie" in plan.flavors:
            d["top_k"] = 1
        elif "tie2" in plan.flavors:
            d["top_k"] = 2
        else:
            d["top_k"] = r.choice([k for k in TOP_KS if k < plan.vocab])
    if "top_p" in plan.knobs:
        d["top_p"] = r.choice(TOP_PS)
    if "min_p" in plan.knobs:
        d["min_p"] = r.choice(MIN_PS)
    if "repetition_penalty" in plan.knobs:
        d["repetition_penalty"] = r.choice(REPS[1:4] if s04 else REPS)
    if "presence_penalty" in plan.knobs:
        d["presence_penalty"] = r.choice(PRESENCES[:3] if s04 else PRESENCES)
    if "frequency_penalty" in plan.knobs:
        d["frequency_penalty"] = r.choice(FREQUENCIES[1:3] if s04 else FREQUENCIES)
    return d


def _make_seed(plan: VPlan, index: int, r: Rand) -> int:
    if plan.seed in EDGE_SEEDS:
        return EDGE_SEEDS[plan.seed]
    s = r.u64()
    if plan.seed == "high" or index % 4 == 1:
        s |= 1 << 63
    elif plan.seed == "low" or index % 4 == 2:
        s &= ~(1 << 63) & MASK64
    return s


class _Builder:
    """Constructs one verify case row by row, against the uniforms its seed will draw."""

    def __init__(self, plan: VPlan, r: Rand, params: dict, prompt: list[int], output: list[int], seed: int):
        self.plan, self.r, self.V = plan, r, plan.vocab
        self.pd = params
        self.p = _params(params)
        self.prompt, self.output = prompt, output
        gen = Pcg32.from_seed(seed)
        self.us = [gen.next_f64() for _ in range(2 * plan.m + 1)]
        self.hist = sorted(set(prompt) | set(output))

    # rows ----------------------------------------------------------------------------------
    def random_row(self, i: int) -> list[float]:
        r, V, fl = self.r, self.V, self.plan.flavors
        scale = r.choice((1.0, 1.5, 2.0, 3.0))
        offset = r.choice((-1.0, 0.0, 0.5, 1.0, 2.0))
        row = [f32(offset + scale * r.gauss() * 1.7) for _ in range(V)]
        if "hist_boost" in fl and self.hist:
            top = max(row)
            for t in self.r.distinct(0, len(self.hist), min(2, len(self.hist))):
                row[self.hist[t]] = f32(top - 0.8 * r.uniform())
        if "neg_inf" in fl:
            for t in range(V):
                if r.chance(0.3):
                    row[t] = float("-inf")
            finite = [t for t in range(V) if row[t] != float("-inf")]
            while len(finite) < 2:
                t = r.below(V)
                row[t] = f32(offset + scale * r.gauss())
                finite = [t for t in range(V) if row[t] != float("-inf")]
        if "single_finite" in fl and i == 0:
            keep = r.below(V)
            row = [row[t] if t == keep else float("-inf") for t in range(V)]
            if row[keep] == float("-inf"):
                row[keep] = f32(offset)
        return row

    def z(self, row: list[float], seen: list[int]) -> np.ndarray:
        return apply_penalties(row, self.p, self.prompt, seen)

    def dist(self, row: list[float], seen: list[int]) -> np.ndarray:
        return distribution(self.z(row, seen), self.p)

    def unpenalized(self, seen: list[int]) -> list[int]:
        if not any(self.pd[k] != d for k, d in
                   (("repetition_penalty", 1.0), ("presence_penalty", 0.0), ("frequency_penalty", 0.0))):
            return list(range(self.V))
        used = set(self.prompt) | set(self.output) | set(seen)
        return [t for t in range(self.V) if t not in used]

    # the whole case ------------------------------------------------------------------------
    def build(self) -> tuple[list[list[float]], list[int], list[list[float]] | None]:
        plan, r, V = self.plan, self.r, self.V
        m, j, fl = plan.m, plan.j, plan.flavors
        rows: list[list[float]] = []
        draft: list[int] = []
        qs: list[list[float]] | None = [] if plan.stochastic else None
        a_tok, r_div = None, None
        if "s04" in fl:
            assert j >= 1
            fresh = [t for t in range(V) if t not in set(self.prompt) | set(self.output)]
            if not fresh:
                raise _Retry
            a_tok = r.choice(fresh)
            r_div = r.int_in(1, j) if j < m else r.int_in(1, m)
        tie_row = min(j, m) if ("tie" in fl or "tie2" in fl) else None
        for i in range(m + 1):
            row = self.random_row(i)
            seen = self.output + draft  # every earlier draft token was accepted (rows <= j)
            if i > j:  # never reached: any token, any q
                if i < m:
                    d = r.below(V)
                    draft.append(d)
                    if qs is not None:
                        qs.append(self.make_q(None, d, r.int_in(1, Q_DENOM // 2)))
                rows.append(row)
                continue
            if i == 0 and a_tok is not None:
                z = self.z(row, seen)
                row[a_tok] = f32(float(np.max(z)) + 0.5 + r.uniform())
                assert argmax(self.z(row, seen)) == a_tok
            if i == r_div:
                self.flip(row, a_tok, seen)
            if i == tie_row:
                tie = self.make_tie(row, seen, "tie2" in fl)
            if i == m:
                rows.append(row)
                break
            if self.p.greedy:
                d = self.greedy_token(row, seen, i, a_tok if i == r_div else None,
                                      tie if i == tie_row else None)
            else:
                d = self.sampled_token(row, seen, i, qs, tie if i == tie_row else None)
            draft.append(d)
            rows.append(row)
        return rows, draft, qs

    def flip(self, row: list[float], a: int, seen: list[int]) -> None:
        """Set row[a] so that argmax differs with and without this round's emitted tokens."""
        z0 = self.z(row, self.output)
        others = [float(z0[t]) for t in range(self.V) if t != a]
        m0 = max(others)
        if m0 == float("-inf"):
            raise _Retry
        good = []
        for k in range(1, 121):
            row[a] = f32(m0 + 0.025 * k)
            if argmax(self.z(row, self.output)) == a and argmax(self.z(row, seen)) != a:
                good.append(row[a])
        if not good:
            raise _Retry
        row[a] = good[len(good) // 2]

    def make_tie(self, row: list[float], seen: list[int], second: bool) -> tuple[int, int]:
        free = self.unpenalized(seen)
        if len(free) < (3 if second else 2):
            raise _Retry
        pick = sorted(self.r.distinct(0, len(free), 3 if second else 2))
        top = float(np.max(self.z(row, seen)))
        val = f32(top + 0.25 + self.r.uniform())
        if second:  # a clear leader, then a tie for the second place
            lead, lo, hi = free[pick[0]], free[pick[1]], free[pick[2]]
            lead, lo = (lo, lead) if self.r.chance(0.5) else (lead, lo)
            lo, hi = min(lo, hi), max(lo, hi)
            row[lead] = f32(val + 1.0)
        else:
            lo, hi = free[pick[0]], free[pick[1]]
        row[lo] = row[hi] = val
        return lo, hi

    def greedy_token(self, row, seen, i, flip_a, tie) -> int:
        z = self.z(row, seen)
        am = argmax(z)
        if i < self.plan.j:
            return am
        # the rejection row: a token other than the argmax
        if flip_a is not None:
            assert flip_a != am
            return flip_a
        if tie is not None:
            return tie[1]
        if "neg_inf_draft" in self.plan.flavors:
            return self.neg_inf_token(row, am)
        others = [t for t in range(self.V) if t != am]
        if self.r.chance(0.5):  # the runner-up: a plausible divergence
            return max(others, key=lambda t: (float(z[t]), -t))
        return self.r.choice(others)

    def neg_inf_token(self, row, keep: int) -> int:
        cands = [t for t in range(self.V) if row[t] == float("-inf") and t != keep]
        if not cands:
            t = self.r.choice([t for t in range(self.V) if t != keep])
            row[t] = float("-inf")
            cands = [t]
        return self.r.choice(cands)

    def sampled_token(self, row, seen, i, qs, tie) -> int:
        r, V, fl = self.r, self.V, self.plan.flavors
        u_a, u_r = self.us[2 * i], self.us[2 * i + 1]
        accept = i < self.plan.j
        if tie is not None:  # the tie row: draft the tie's lower id (accept) or higher id (reject)
            P = self.dist(row, seen)
            d = tie[0] if accept else tie[1]
            if accept and not u_a < P[d]:
                raise _Retry
            if not accept and u_a < P[d]:
                raise _Retry
            if qs is not None:
                raise _Retry
            return d
        if not accept and "neg_inf_draft" in fl:
            d = self.neg_inf_token(row, argmax(self.z(row, seen)))
            if qs is not None:
                qs.append(self.make_q(self.dist(row, seen), d, r.int_in(1, Q_DENOM // 2)))
            return d
        victim = None
        for _ in range(200):
            P = self.dist(row, seen)
            if accept:
                cands = [t for t in range(V) if P[t] > u_a]  # accepted at q(t) = 1 at least
                if cands:
                    break
                t = int(np.argmax(P))
                row[t] = f32(row[t] + 1.0)
            else:
                cands = [t for t in range(V) if not u_a < P[t]]  # rejected at q(t) = 1 at most
                if cands:
                    break
                if victim is None:
                    victim = r.choice([t for t in range(V) if t != int(np.argmax(P))])
                row[victim] = f32(row[victim] - 1.0) if row[victim] > -60.0 else float("-inf")
        else:
            raise _Retry
        if accept:
            pool = cands
            if qs is not None and "ratio" in fl:
                band = [t for t in range(V) if 0.0 < P[t] <= u_a and P[t] * Q_DENOM > 1.5 * u_a]
                if band:
                    pool = band
            elif qs is None and "split" in fl:
                band = [t for t in cands if P[t] <= u_r]  # swapping u_a and u_r rejects it
                if band:
                    pool = band
            d = r.weighted(pool, [float(P[t]) for t in pool])
            if qs is not None:
                qs.append(self.accept_q(P, d, u_a))
            return d
        pool = cands
        if "zero_p" in fl and [t for t in cands if P[t] == 0.0]:
            pool = [t for t in cands if P[t] == 0.0]
        elif "split" in fl and [t for t in cands if P[t] > u_r]:
            pool = [t for t in cands if P[t] > u_r]  # swapping u_a and u_r accepts it
        elif r.chance(0.5):
            pool = [max(cands, key=lambda t: (float(P[t]), -t))]  # the most plausible rejected token
        d = r.choice(pool)
        if qs is not None:
            qs.append(self.reject_q(P, d, u_a))
        return d

    def natural_count(self, P, d) -> int:
        c = int(round((0.5 * float(P[d]) + 0.5 * self.r.uniform()) * Q_DENOM))
        return min(max(c, 1), Q_DENOM)

    def accept_q(self, P, d, u_a) -> list[float]:
        c = self.natural_count(P, d)
        while c >= 1 and not u_a < P[d] / (c / Q_DENOM):
            c = c // 2 if c > 8 and not u_a < P[d] / ((c // 2) / Q_DENOM) else c - 1
        if c < 1:
            raise _Retry
        return self.make_q(P, d, c)

    def reject_q(self, P, d, u_a) -> list[float]:
        c = self.natural_count(P, d)
        while u_a < P[d] / (c / Q_DENOM):
            c += 1
            if c > Q_DENOM:
                raise _Retry
        return self.make_q(P, d, c)

    def make_q(self, P, d: int, c: int) -> list[float]:
        """A draft distribution: multiples of 1/4096 summing to 1, q[d] = c / 4096 > 0."""
        V, r = self.V, self.r
        rest = Q_DENOM - c
        others = [t for t in range(V) if t != d]
        w = [(0.5 * float(P[t]) if P is not None else 0.0) + (0.5 * r.uniform() if r.chance(0.7) else 0.0)
             for t in others]
        total = 0.0
        for x in w:
            total += x
        if total <= 0.0:
            w, total = [1.0] * len(others), float(len(others))
        raw = [rest * x / total for x in w]
        counts = [int(x) for x in raw]
        left = rest - sum(counts)
        by_frac = sorted(range(len(others)), key=lambda n: (-(raw[n] - counts[n]), n))
        for n in by_frac[:left]:
            counts[n] += 1
        q = [0.0] * V
        q[d] = c / Q_DENOM
        for t, cnt in zip(others, counts):
            q[t] = cnt / Q_DENOM
        assert sum(counts) + c == Q_DENOM and q[d] > 0.0
        return q


def _history(plan: VPlan, r: Rand) -> tuple[list[int], list[int]]:
    V = plan.vocab
    small = min(V, 6)  # keep the history short relative to tiny vocabularies
    prompt = [] if "no_prompt" in plan.flavors else [r.below(V) for _ in range(r.int_in(1, 2 + small))]
    output = [r.below(V) for _ in range(r.int_in(1, 2 + small))] if plan.history else []
    if plan.history and r.chance(0.5) and output:
        output.append(r.choice(output))  # a repeat, so frequency counts exceed 1
    return prompt, output


def _verify_case(master_seed: int, index: int, plan: VPlan) -> dict:
    r = Rand(master_seed, "verify", index)
    params = _make_params(plan, r)
    seed = _make_seed(plan, index, r)
    for _attempt in range(60):
        prompt, output = _history(plan, r)
        b = _Builder(plan, r, params, prompt, output, seed)
        try:
            rows, draft, qs = b.build()
        except _Retry:
            continue
        case = {"rows": rows, "draft": draft, "draft_probs": qs, "params": params, "prompt": prompt,
                "output": output, "seed": seed}
        v, nxt = run_reference(case)
        if v.n_accepted != plan.j:  # the construction is wrong, not the reference: stop loudly
            raise AssertionError(f"verify case {index}: planned {plan.j} acceptances, the reference accepted {v.n_accepted}")
        if run_variant(case, None) != (v.tokens, v.logprobs, v.n_accepted, nxt):
            raise AssertionError(f"verify case {index}: the local copy of verify_draft disagrees with the reference")
        shows = {bug for bug in VERIFY_BUGS if _shows(case, bug, v, nxt)}
        if "s04" in plan.flavors and "s04" not in shows:
            continue  # the constructed flip was masked by another penalty: build it again
        case["expect"] = {"tokens": v.tokens, "logprobs": v.logprobs, "n_accepted": v.n_accepted, "next_u32": nxt}
        case["tags"] = _order_tags(_verify_tags(case, plan, shows), VERIFY_TAGS)
        return case
    raise RuntimeError(f"verify case {index} ({plan}) could not be constructed")


def _shows(case: dict, bug: str, v: S.Verified, nxt: int) -> bool:
    try:
        toks, _lps, n, u = run_variant(case, bug)
    except Exception:  # noqa: BLE001  (a variant that crashes certainly shows)
        return True
    return (toks, n, u) != (v.tokens, v.n_accepted, nxt)


def _verify_tags(case: dict, plan: VPlan, shows: set[str]) -> set[str]:
    p = _params(case["params"])
    tags: set[str] = {"greedy" if p.greedy else "sampled"}
    active = []
    if not p.greedy and p.temperature != 1.0:
        active.append("temperature")
    for k, off in (("top_k", 0), ("top_p", 1.0), ("min_p", 0.0), ("repetition_penalty", 1.0),
                   ("presence_penalty", 0.0), ("frequency_penalty", 0.0)):
        if case["params"][k] != off:
            active.append(k)
    tags |= set(active)
    if not p.greedy:
        if len(active) == 1:
            tags.add(f"alone:{active[0]}")
        elif len(active) >= 2:
            tags.add("combo")
    elif set(active) & {"top_k", "top_p", "min_p"}:
        tags.add("greedy_ignores_truncation")
    tags.add("penalized" if set(active) & set(PENALTIES) else "unpenalized")
    m, n = len(case["draft"]), case["expect"]["n_accepted"]
    V = len(case["rows"][0])
    tags.add(f"draft_len:{m}")
    tags.add("vocab:small" if V <= 8 else "vocab:large" if V >= 256 else "vocab:medium")
    tags.add("stochastic_draft" if case["draft_probs"] is not None else "deterministic_draft")
    if m == 0:
        tags.add("no_draft")
    elif n == m:
        tags.add("full_accept")
    elif n == 0:
        tags.add("reject_first")
    else:
        tags.add("agree_then_diverge")
        if n >= 2:
            tags.add("several_then_reject")
    tags.add("output_nonempty" if case["output"] else "output_empty")
    if not case["prompt"]:
        tags.add("prompt_empty")
    if "s04" in plan.flavors:
        tags.add("penalty_sees_accepted")
    ninf = float("-inf")
    if any(x == ninf for row in case["rows"] for x in row):
        tags.add("neg_inf")
    toks = case["expect"]["tokens"]
    for i in range(n + 1):  # the rows the verifier reached
        row = case["rows"][i]
        if sum(1 for x in row if x != ninf) == 1:
            tags.add("single_finite_row")
        z = apply_penalties(row, p, case["prompt"], case["output"] + toks[:i])
        if int(np.sum(z == np.max(z))) >= 2:
            tags.add("argmax_tie")
        if i < m:
            d = case["draft"][i]
            if row[d] == ninf:
                tags.add("neg_inf_draft")
            if not p.greedy and distribution(z, p)[d] == 0.0:
                tags.add("truncated_draft")
    if case["seed"] >= 1 << 63:
        tags.add("seed_high")
    if case["seed"] in EDGE_SEEDS.values():
        tags.add("seed_edge")
    tags |= {f"shows:{b}" for b in shows}
    return tags


# ---- prompt lookup ------------------------------------------------------------------------------

def _pl_variant(ctx: list[int], k: int, max_ngram: int, min_ngram: int, bug: str | None) -> tuple[list[int], int | None, int | None]:
    """prompt_lookup, optionally with s01 (first occurrence) or s02 (stop at the suffix start).

    Returns (draft, winning n, start i) so the oracle can tag what the case exercises.
    """
    t = len(ctx)
    for n in range(max_ngram, min_ngram - 1, -1):
        suffix = ctx[t - n:]
        starts = range(0, t - n) if bug == "s01" else range(t - n - 1, -1, -1)
        for i in starts:
            if ctx[i:i + n] == suffix:
                end = min(i + n + k, t - n) if bug == "s02" else min(i + n + k, t)
                return ctx[i + n:end], n, i
    return [], None, None


def _pl_plan() -> list[str]:
    kinds = (["hand"] + ["periodic"] * 25 + ["random_repeats"] * 38 + ["no_match"] * 10 + ["recent_wins"] * 20
             + ["backoff"] * 15 + ["long_ctx"] * 8 + ["single_n"] * 10 + ["ngram_ge_ctx"] * 8 + ["into_suffix"] * 15)
    assert len(kinds) == N_PROMPT_LOOKUP, len(kinds)
    return kinds


def _pl_case(master_seed: int, index: int, kind: str) -> dict:
    r = Rand(master_seed, "prompt_lookup", index)
    k = 3 if kind == "hand" else 1 + index % 16
    for _attempt in range(100):
        ctx, mx, mn = _pl_context(r, kind, k, first=index == _pl_plan().index(kind))
        draft, n_win, i_win = _pl_variant(ctx, k, mx, mn, None)
        ref = S.prompt_lookup(ctx, k, mx, mn)
        assert draft == ref, (index, kind)
        shows = {b for b in ("s01", "s02") if _pl_variant(ctx, k, mx, mn, b)[0] != ref}
        ok = {"recent_wins": "s01" in shows, "into_suffix": "s02" in shows,
              "backoff": n_win is not None and n_win < mx, "no_match": ref == [],
              "long_ctx": ref != []}.get(kind, True)
        if ok:
            break
    else:
        raise RuntimeError(f"prompt_lookup case {index} ({kind}) could not be constructed")
    t = len(ctx)
    tags = {kind} if kind in PROMPT_LOOKUP_TAGS else set()
    if kind == "hand":
        tags.add("hand_example")
    if mn == mx:
        tags.add("single_n")
    if mx >= t:
        tags.add("ngram_ge_ctx")
    if t == 0:
        tags.add("empty_ctx")
    if n_win is not None and n_win < mx:
        tags.add("backoff")
    if not ref:
        tags.add("empty_draft")
    else:
        if i_win + n_win + len(ref) > t - n_win:
            tags.add("into_suffix")
        tags.add("full_k" if len(ref) == k else "end_truncated")
    tags |= {f"shows:{b}" for b in shows}
    return {"ctx": ctx, "k": k, "max_ngram": mx, "min_ngram": mn, "expect": ref,
            "tags": _order_tags(tags, PROMPT_LOOKUP_TAGS)}


def _pl_context(r: Rand, kind: str, k: int, first: bool) -> tuple[list[int], int, int]:
    def ngrams(lo=1, hi=4):
        mx = r.int_in(lo, hi)
        return mx, r.int_in(1, mx)

    if kind == "hand":
        return [5, 6, 7, 8, 5, 6], 3, 1
    if kind in ("periodic", "single_n") and (kind == "periodic" or r.chance(0.5)):
        period = r.int_in(1, 6)
        base = r.int_in(0, 1000)
        pattern = [base + x for x in (r.distinct(0, 50, period) if r.chance(0.7) else [r.below(4) for _ in range(period)])]
        length = r.int_in(2 * period, 2 * period + 40)
        ctx = [pattern[i % period] for i in range(length)]
        if r.chance(0.3):  # a noisy prefix before the periodic part
            ctx = [base + 60 + r.below(20) for _ in range(r.int_in(1, 10))] + ctx
        mx, mn = ngrams()
        if kind == "single_n":
            mn = mx
        return ctx, mx, mn
    if kind in ("random_repeats", "single_n"):
        alpha = r.int_in(2, 8)
        base = r.int_in(0, 30000)
        ctx = [base + r.below(alpha) for _ in range(r.int_in(5, 200))]
        mx, mn = ngrams(1, 5)
        if kind == "single_n":
            mn = mx
        return ctx, mx, mn
    if kind == "no_match":
        length = r.int_in(1, 60)
        if r.chance(0.5):
            ctx = r.distinct(0, 3000, length)  # no token repeats at all
        else:  # repeats inside, but the last token is new: no suffix of any length recurs
            ctx = [r.below(5) for _ in range(length)] + [100 + r.below(100)]
        mx, mn = ngrams(1, 5)
        return ctx, mx, mn
    if kind == "recent_wins":
        n = r.int_in(1, 4)
        suffix = r.distinct(100, 200, n)
        uniq = r.distinct(300, 400, 6)
        occ = r.int_in(2, 4)
        ctx: list[int] = [r.below(100) for _ in range(r.int_in(0, 6))]
        firsts = r.distinct(200, 300, occ)  # every occurrence is followed by a different first token
        for c in range(occ):
            ctx += [uniq[c]] + suffix + [firsts[c]] + [200 + r.below(100) for _ in range(r.int_in(0, k + 2))]
            ctx += [r.below(100) for _ in range(r.int_in(0, 5))]
        ctx += [uniq[occ]] + suffix
        mx = r.int_in(n, n + 2)
        return ctx, mx, r.int_in(1, n)
    if kind == "backoff":
        mx = r.int_in(3, 6)
        s = r.int_in(1, mx - 1)
        suffix = r.distinct(100, 200, s)
        x, y = r.distinct(300, 400, 2)
        ctx = [r.below(100) for _ in range(r.int_in(0, 20))] + [x] + suffix
        ctx += [200 + r.below(100) for _ in range(r.int_in(0, 20))] + [y] + suffix
        return ctx, mx, r.int_in(1, s)
    if kind == "long_ctx":
        alpha = r.int_in(20, 300)
        length = r.int_in(1000, 5000)
        ctx = [r.below(alpha) for _ in range(length)]
        for _ in range(r.int_in(5, 20)):  # copied spans, as in code edits and quoting answers
            span = r.int_in(5, 60)
            src = r.below(len(ctx) - span)
            dst = r.int_in(src + span, len(ctx) - span) if src + span < len(ctx) - span else src
            ctx[dst:dst + span] = ctx[src:src + span]
        span = r.int_in(4, 30)  # end on a copy, so the suffix recurs
        src = r.below(len(ctx) - span)
        ctx += ctx[src:src + span]
        return ctx, r.int_in(2, 5), 1
    if kind == "ngram_ge_ctx":
        length = 0 if first else r.int_in(1, 5)
        ctx = [r.below(3) for _ in range(length)]
        mx = max(1, length + r.int_in(0, 3))
        return ctx, mx, r.int_in(1, mx)
    if kind == "into_suffix":
        n = r.int_in(1, 3)
        suffix = r.distinct(100, 200, n)
        x, y = r.distinct(300, 400, 2)
        gap = [200 + r.below(100) for _ in range(r.int_in(0, k - 1))]  # shorter than k: runs into the suffix
        ctx = [r.below(100) for _ in range(r.int_in(0, 8))] + [x] + suffix + gap
        if gap:
            ctx[-1] = y  # a token seen once: the (n+1)-suffix never recurs
        ctx += suffix
        mx = r.int_in(n, n + 2) if gap else n
        return ctx, mx, r.int_in(1, n)
    raise AssertionError(kind)


# ---- n-gram drafts ------------------------------------------------------------------------------

def _ng_variant(ctx: list[int], k: int, n: int, bug: str | None) -> tuple[list[int], set[str]]:
    """ngram_draft, with s03 (ties to the highest id) or "frozen" (drafted tokens are not appended
    to the context, so every draft token is predicted from the original context); also returns
    what the drafting exercised: tie, backoff.

    (A variant that appends drafted tokens but counts followers only inside the original context
    was tried first: it agreed with the reference on 20000 random contexts, so it is not used.)
    """
    ext = list(ctx)
    draft: list[int] = []
    seen: set[str] = set()
    while len(draft) < k:
        nxt = None
        top_m = min(n - 1, len(ext) - 1)
        for m in range(top_m, 0, -1):
            suffix = ext[len(ext) - m:]
            counts: dict[int, int] = {}
            for i in range(len(ext) - m):
                if ext[i:i + m] == suffix:
                    counts[ext[i + m]] = counts.get(ext[i + m], 0) + 1
            if counts:
                best = max(counts.values())
                winners = sorted(tok for tok, c in counts.items() if c == best)
                if len(winners) > 1:
                    seen.add("tie")
                if m < top_m:
                    seen.add("backoff")
                nxt = winners[-1] if bug == "s03" else winners[0]
                break
        if nxt is None:
            break
        draft.append(nxt)
        if bug != "frozen":
            ext.append(nxt)
    return draft, seen


def _ng_plan() -> list[str]:
    kinds = ["n_one"] * 2 + ["tie"] * 8 + ["backoff"] * 8 + ["stop"] * 6 + ["random"] * 10 + ["periodic"] * 6
    assert len(kinds) == N_NGRAM
    return kinds


def _ng_case(master_seed: int, index: int, kind: str) -> dict:
    r = Rand(master_seed, "ngram", index)
    k = 1 + index % 8
    for _attempt in range(100):
        ctx, n = _ng_context(r, kind)
        draft, seen = _ng_variant(ctx, k, n, None)
        ref = S.ngram_draft(ctx, k, n)
        assert draft == ref, (index, kind)
        shows_s03 = _ng_variant(ctx, k, n, "s03")[0] != ref
        ok = {"tie": shows_s03, "backoff": "backoff" in seen, "stop": len(ref) < k}.get(kind, True)
        if ok:
            break
    else:
        raise RuntimeError(f"ngram case {index} ({kind}) could not be constructed")
    tags = {kind} | seen
    if n == 1:
        tags.add("n_one")
    if len(ref) < k:
        tags.add("stop")
    if not ref:
        tags.add("empty_draft")
    if _ng_variant(ctx, k, n, "frozen")[0] != ref:
        tags.add("counts_drafted")
    if shows_s03:
        tags.add("shows:s03")
    return {"ctx": ctx, "k": k, "n": n, "expect": ref, "tags": _order_tags(tags, NGRAM_TAGS)}


def _ng_context(r: Rand, kind: str) -> tuple[list[int], int]:
    if kind == "n_one":
        return [r.below(4) for _ in range(r.int_in(3, 20))], 1
    if kind == "tie":
        n = r.int_in(2, 4)
        ctxt = r.distinct(100, 200, n - 1)  # the (n-1)-token context, fresh tokens
        a, b = sorted(r.distinct(200, 300, 2))
        cnt = r.int_in(1, 3)
        segs = [ctxt + [a] for _ in range(cnt)] + [ctxt + [b] for _ in range(cnt)]
        r.shuffle(segs)
        if segs[0][-1] == a:  # put the higher id first sometimes: "first seen" is not the rule
            segs.reverse()
        ctx: list[int] = []
        for s in segs:
            ctx += [r.below(100) for _ in range(r.int_in(1, 4))] + s
        ctx += [r.below(100) for _ in range(r.int_in(1, 4))] + ctxt
        return ctx, n
    if kind == "backoff":
        n = r.int_in(3, 5)
        alpha = r.int_in(2, 5)
        ctx = [r.below(alpha) for _ in range(r.int_in(8, 60))]
        ctx += [100 + r.below(50), r.below(alpha)]  # a fresh token, then a known one: only m = 1 matches
        return ctx, n
    if kind == "stop":
        if r.chance(0.3):
            return [r.below(5) for _ in range(r.int_in(0, 1))], r.int_in(2, 4)
        return [r.below(6) for _ in range(r.int_in(2, 30))] + [50 + r.below(50)], r.int_in(2, 5)
    if kind == "random":
        alpha = r.int_in(2, 6)
        return [r.below(alpha) for _ in range(r.int_in(4, 300 if r.chance(0.2) else 60))], r.int_in(2, 5)
    if kind == "periodic":
        period = r.int_in(1, 5)
        pat = r.distinct(0, 20, period)
        ctx = [pat[i % period] for i in range(r.int_in(period + 1, 40))]
        if r.chance(0.5):
            pos = r.below(len(ctx))
            ctx[pos] = 20 + r.below(5)  # one glitch: the counts are no longer unanimous
        return ctx, r.int_in(2, 5)
    raise AssertionError(kind)


# ---- the document -------------------------------------------------------------------------------

def build(master_seed: int = MASTER_SEED) -> dict:
    """The whole golden document for one master seed (ids and kinds stable per position)."""
    if not isinstance(master_seed, int) or isinstance(master_seed, bool) or not 0 <= master_seed <= MASK64:
        raise ValueError(f"master_seed must be a 64-bit unsigned integer, got {master_seed!r}")
    verify = []
    for i, plan in enumerate(_verify_plan()):
        c = _verify_case(master_seed, i, plan)
        verify.append({"id": f"v{i:03d}", **c})
    prompt_lookup = [{"id": f"pl{i:03d}", **_pl_case(master_seed, i, kind)} for i, kind in enumerate(_pl_plan())]
    ngram = [{"id": f"ng{i:03d}", **_ng_case(master_seed, i, kind)} for i, kind in enumerate(_ng_plan())]
    doc = {"chapter": CHAPTER, "master_seed": master_seed, "generator": GENERATOR,
           "verify": verify, "prompt_lookup": prompt_lookup, "ngram": ngram}
    counts = tag_counts(doc)
    for bug, least in MUST_SHOW.items():
        got = counts.get(f"shows:{bug}", 0)
        if got < least:
            raise AssertionError(f"pitfall {bug} shows on {got} cases, the design needs >= {least}")
    return doc


def tag_counts(doc: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for section in ("verify", "prompt_lookup", "ngram"):
        for c in doc[section]:
            for t in c["tags"]:
                out[t] = out.get(t, 0) + 1
    return out


# ---- canonical JSON -----------------------------------------------------------------------------

TOP_KEYS = ("chapter", "master_seed", "generator", "verify", "prompt_lookup", "ngram")
CASE_KEYS = {
    "verify": ("id", "tags", "rows", "draft", "draft_probs", "params", "prompt", "output", "seed", "expect"),
    "prompt_lookup": ("id", "tags", "ctx", "k", "max_ngram", "min_ngram", "expect"),
    "ngram": ("id", "tags", "ctx", "k", "n", "expect"),
}
SUB_KEYS = {"params": KNOBS, "expect": ("tokens", "logprobs", "n_accepted", "next_u32")}


def _enc(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _logit(x: float) -> Any:
    if x == float("-inf"):
        return NEG_INF
    assert f32(x) == x and x == x and x != float("inf"), x
    return x


def _field(section: str, key: str, value: Any) -> str:
    if section == "verify" and key == "rows":
        return _enc([[_logit(x) for x in row] for row in value])
    if section == "verify" and key in SUB_KEYS:
        assert set(value) == set(SUB_KEYS[key]), (key, sorted(value))
        return "{" + ",".join(f"{_enc(k)}:{_enc(value[k])}" for k in SUB_KEYS[key]) + "}"
    return _enc(value)


def _case_fields(section: str, case: dict) -> list[tuple[str, str]]:
    keys = CASE_KEYS[section]
    assert set(case) == set(keys), (section, sorted(case))
    return [(k, _field(section, k, case[k])) for k in keys]


def _case_line(section: str, case: dict) -> str:
    return "{" + ",".join(f"{_enc(k)}:{v}" for k, v in _case_fields(section, case)) + "}"


def dumps(doc: dict) -> bytes:
    """Canonical bytes: fixed key order, no spaces, one case per line, a trailing newline."""
    assert set(doc) == set(TOP_KEYS), sorted(doc)
    lines = ["{"]
    for n, key in enumerate(TOP_KEYS):
        last = n == len(TOP_KEYS) - 1
        if key in CASE_KEYS:
            lines.append(f"{_enc(key)}:[")
            cases = doc[key]
            for m, c in enumerate(cases):
                lines.append(_case_line(key, c) + ("," if m < len(cases) - 1 else ""))
            lines.append("]" + ("" if last else ","))
        else:
            lines.append(f"{_enc(key)}:{_enc(doc[key])}" + ("" if last else ","))
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_logit(x: Any) -> float:
    """A logit as written in the file: a number, or the string "-inf"."""
    return float("-inf") if x == NEG_INF else float(x)


def load(path: str | Path) -> dict:
    """Read a golden file; verify rows come back as float lists with -inf restored."""
    doc = json.loads(Path(path).read_bytes())
    for c in doc["verify"]:
        c["rows"] = [[decode_logit(x) for x in row] for row in c["rows"]]
    return doc


def write(path: str | Path = DEFAULT_OUT, master_seed: int = MASTER_SEED) -> bytes:
    data = dumps(build(master_seed))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def _first_diff(a: Any, b: Any, where: str) -> str | None:
    if type(a) is not type(b):
        return where
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}.{k}"
            d = _first_diff(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for n, (x, y) in enumerate(zip(a, b)):
            d = _first_diff(x, y, f"{where}[{n}]")
            if d:
                return d
        return f"{where} (length {len(a)} != {len(b)})" if len(a) != len(b) else None
    return None if a == b else where


def check(path: str | Path = DEFAULT_OUT, master_seed: int | None = None) -> str | None:
    """Regenerate in memory and compare bytes: None when equal, else where the first difference is.

    The master seed is the file's own when it can be read (else MASTER_SEED), so a fresh-seed
    file checks against its own seed.
    """
    path = Path(path)
    try:
        have = path.read_bytes()
    except OSError as e:
        return f"{path}: cannot read: {e}"
    if master_seed is None:
        master_seed = MASTER_SEED
        try:
            seed = json.loads(have)["master_seed"]
            if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MASK64:
                master_seed = seed
        except Exception:  # noqa: BLE001  (an unreadable file is compared against the default seed)
            pass
    doc = build(master_seed)
    want = dumps(doc)
    if have == want:
        return None
    hl, wl = have.split(b"\n"), want.split(b"\n")
    # map every line of the canonical text to (section, case) so the message can name the case
    where: list[tuple[str | None, dict | None]] = []
    for key in TOP_KEYS:
        if key in CASE_KEYS:
            where.append((key, None))
            where += [(key, c) for c in doc[key]]
            where.append((key, None))
        else:
            where.append((key, None))
    where = [(None, None)] + where + [(None, None), (None, None)]
    for n, w in enumerate(wl):
        h = hl[n] if n < len(hl) else None
        if h == w:
            continue
        section, case = where[n] if n < len(where) else (None, None)
        if case is None:
            return f"{path}: line {n + 1} differs outside the cases (section or field {section!r}): " \
                   f"expected {w[:80]!r}, found {(h or b'')[:80]!r}"
        return f"{path}: case {case['id']} ({section}) differs first in field {_diff_field(section, case, h)}"
    return f"{path}: {len(hl)} lines, expected {len(wl)}"


def _diff_field(section: str, case: dict, have_line: bytes | None) -> str:
    fields = _case_fields(section, case)
    if have_line is None:
        return "(line missing)"
    text = have_line.decode("utf-8", "replace").rstrip(",")
    try:
        got = json.loads(text)
        want = json.loads(_case_line(section, case))
        d = _first_diff(want, got, "")
        if d:
            return d.lstrip(".")
    except ValueError:
        pass
    # not parseable (or equal as JSON but spelled differently): locate the first differing byte
    line = _case_line(section, case)
    pos = next((n for n, (x, y) in enumerate(zip(line, text)) if x != y), min(len(line), len(text)))
    off = 1
    for k, v in fields:
        start = off + len(_enc(k)) + 1  # where the value begins
        end = start + len(v)
        if pos < end:
            if section == "verify" and k in SUB_KEYS and pos > start:
                sub_off = start + 1
                for sk in SUB_KEYS[k]:
                    sub_end = sub_off + len(_enc(sk)) + 1 + len(_enc(case[k][sk]))
                    if pos < sub_end:
                        return f"{k}.{sk}"
                    sub_off = sub_end + 1
            return k
        off = end + 1
    return fields[-1][0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare PATH with a fresh build; exit 1 on a difference")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="the fixture path (default: %(default)s)")
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=None,
                    help=f"master seed (default {MASTER_SEED}; with --check: the file's own)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.check:
        msg = check(args.out, args.seed)
        if msg:
            print(msg, file=sys.stderr)
            return 1
        print(f"{args.out}: identical to a fresh build ({time.perf_counter() - t0:.2f} s)")
        return 0
    data = write(args.out, MASTER_SEED if args.seed is None else args.seed)
    counts = tag_counts(json.loads(data))
    shows = ", ".join(f"{t}={counts.get(t, 0)}" for t in sorted(counts) if t.startswith("shows:"))
    print(f"wrote {args.out}: {len(data)} bytes in {time.perf_counter() - t0:.2f} s; {shows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
