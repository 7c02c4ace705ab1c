"""Verify cases, the plan: what each of the 128 positions is (fixed, whatever the seed), and the
seed-drawn choices every case starts from: its sampling parameters, generator seed and history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.pack import MASK64, Rand

from .common import KNOBS, N_VERIFY, PENALTIES


@dataclass(frozen=True)
class VPlan:
    """What one verify position is: its mode, knobs, draft length, planned acceptances, vocabulary."""

    mode: str  # "greedy" | "sampled"
    knobs: tuple[str, ...]  # active knobs; "temperature" = T not in {0, 1}
    m: int  # draft length
    j: int  # planned n_accepted (== m: full acceptance, the bonus token)
    vocab: int
    stochastic: bool = False  # draft_probs given
    flavors: tuple[str, ...] = ()
    seed: str = "random"  # random | high | low | zero | half | max
    history: bool = True  # output non-empty


def verify_plan() -> list[VPlan]:
    """The 128 positions, in file order."""
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
    # sampled, knobs in combination ("order": two truncation steps that do not commute, built so that the other order
    # answers differently: spec/sampling.md 5.2 states the order)
    for (knobs, m, j, v, fl) in [
        ((T, K), 3, 1, 10, ()), ((T, TP), 4, 4, 16, ("split",)), ((K, TP), 5, 2, 24, ("zero_p", "order")),
        ((TP, MP), 2, 0, 8, ("zero_p", "order")), ((T, MP, R), 6, 3, 32, ("hist_boost",)),
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
    # precision probes (verify_probes): row 0's accept test or residual draw within 4e-9 of its boundary,
    # closer than float32 resolves, farther than a last-bit difference of float64 reaches
    for (knobs, m, j, v, stochastic) in [((), 1, 1, 8, False), ((T,), 2, 1, 16, False), ((), 1, 1, 6, True),
                                         ((T, P), 3, 3, 12, False)]:
        fl = ("probe_accept", "hist_boost") if P in knobs else ("probe_accept",)
        plan.append(VPlan(SM, knobs, m, j, v, stochastic=stochastic, flavors=fl))
    for (knobs, m, v) in [((), 1, 6), ((T,), 2, 16), ((), 3, 10), ((T, F), 1, 24)]:
        fl = ("probe_residual", "hist_boost") if F in knobs else ("probe_residual",)
        plan.append(VPlan(SM, knobs, m, 0, v, flavors=fl))
    assert len(plan) == N_VERIFY, len(plan)
    return plan


# the values a knob takes when it is on: short decimals, exact in any parser; both sides of 1 for T
TEMPS = (0.3, 0.5, 0.7, 0.8, 1.3, 1.5, 2.0)
TOP_KS = (1, 2, 3, 5, 10, 40)  # only those below the case's vocabulary are drawn
TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95)
MIN_PS = (0.02, 0.05, 0.1, 0.2, 0.3)
REPS = (1.1, 1.3, 1.5, 2.0, 0.8)  # 0.8 < 1 rewards repeats; the s04 cases take only 1.3..2.0
PRESENCES = (0.5, 1.0, 1.5, -0.5)  # a negative one rewards; the s04 cases take only the positive
FREQUENCIES = (0.3, 0.7, 1.0, -0.4)  # likewise; the s04 cases take 0.7 and 1.0
# the named edge seeds of the generator: 0, 2^63 and 2^64 - 1
EDGE_SEEDS = {"zero": 0, "half": 1 << 63, "max": MASK64}


# each knob's value when it is off (temperature 0: greedy)
OFF: dict[str, Any] = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                       "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def make_params(plan: VPlan, r: Rand) -> dict:
    """The case's seven sampling parameters: off, except the plan's knobs at drawn values."""
    s04 = "s04" in plan.flavors  # the constructed penalty flip wants penalties that bite (> 0)
    d = dict(OFF)
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


def make_seed(plan: VPlan, index: int, r: Rand) -> int:
    """The case's generator seed: a named edge, or drawn (the top bit set on every fourth case from 1, clear from 2)."""
    if plan.seed in EDGE_SEEDS:
        return EDGE_SEEDS[plan.seed]
    s = r.u64()
    if plan.seed == "high" or index % 4 == 1:
        s |= 1 << 63
    elif plan.seed == "low" or index % 4 == 2:
        s &= ~(1 << 63) & MASK64
    return s


def history(plan: VPlan, r: Rand) -> tuple[list[int], list[int]]:
    """The request's prompt and the output of earlier rounds (what the penalties see)."""
    V = plan.vocab
    small = min(V, 6)  # keep the history short relative to tiny vocabularies
    prompt = [] if "no_prompt" in plan.flavors else [r.below(V) for _ in range(r.int_in(1, 2 + small))]
    output = [r.below(V) for _ in range(r.int_in(1, 2 + small))] if plan.history else []
    if plan.history and r.chance(0.5) and output:
        output.append(r.choice(output))  # a repeat, so frequency counts exceed 1
    return prompt, output

