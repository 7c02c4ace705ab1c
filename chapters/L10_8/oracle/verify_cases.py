"""Verify cases: the reference's answer, the pitfall variants, and the tags of one case.

run_variant is a local copy of verify_draft that can carry one chapter pitfall; with none it must
answer what the reference answers (the build asserts it on every case), and a case shows pitfall
sNN when the variant with sNN answers differently (tokens, n_accepted or the next u32): the case's
`pitfalls` then records that answer. verify_variant is the same rule on a caller's generator, for
the generation loop's variants.

Written to the bit: the logprobs the file records are exact_logprob's (harness.pack.oracle_kit), the
correctly rounded value of each emitted token's logprob under its penalized row, not the reference's
own (its exp and ln are good to an ulp, and the C library's ln is not the same on every CPU); the
build asserts the two agree within LOGPROB_REPLAY_TOL.

Robust to the last bit: a case is kept only when every sampling decision of the reference and of
every variant has a margin of at least N_MARGIN (margins.py), so a port whose exp differs in the
last ulp answers the same tokens, n_accepted and next u32; a closer case is built again from the
case's next numbers (the file stays a function of the master seed).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.pack import exact_logprob

from .common import PENALTIES, REFUSED, VERIFY_BUGS, VERIFY_TAGS, RefLib, Retry, order_tags
from .margins import N_MARGIN, UNWATCHED, Margins, Watch, seq_sum
from .verify_builder import Builder
from .verify_plan import EDGE_SEEDS, OFF, VPlan, history, make_params, make_seed
from .verify_probes import PROBES, ProbeBuilder, probe_seed, residual_f32


# how far the reference's logprobs may be from the exact ones (spec/sampling.md, section 10: "the
# reference replays its own golden values within 1e-12"); the chapter's tests allow a port 1e-9
LOGPROB_REPLAY_TOL = 1e-12


def exact_logprobs(lib: RefLib, case: dict, tokens: list[int]) -> list[float]:
    """The exact logprob of each emitted token: token j is scored on row j, penalized with the
    request's prompt and its output followed by the tokens emitted before it."""
    params = lib.params(case["params"])
    return [exact_logprob(lib.sampling.apply_penalties(case["rows"][j], params, case["prompt"],
                                                       list(case["output"]) + tokens[:j]), t)
            for j, t in enumerate(tokens)]


def run_reference(lib: RefLib, case: dict) -> tuple:
    """verify_draft on a case (decoded rows), and the generator's next u32 afterwards."""
    rng = lib.generator(case["seed"])
    v = lib.spec.verify_draft(case["rows"], case["draft"], case["draft_probs"], lib.params(case["params"]),
                                case["prompt"], case["output"], rng)
    return v, rng.next_u32()


def run_variant(lib: RefLib, case: dict, bug: str | None,
                watch: Watch = UNWATCHED) -> tuple[list[int], list[float], int, int]:
    """verify_draft with one chapter pitfall (bug = None: a local copy of the correct rule) on a case,
    and the generator's next u32 afterwards: (tokens, logprobs, n_accepted, next_u32)."""
    rng = lib.generator(case["seed"])
    tokens, lps, n = verify_variant(lib, case["rows"], case["draft"], case["draft_probs"], lib.params(case["params"]),
                                    case["prompt"], case["output"], rng, bug, watch)
    return tokens, lps, n, rng.next_u32()


def worst_margin(lib: RefLib, case: dict) -> tuple[str, float]:
    """The closest sampling decision of the reference and of every verify pitfall on a case:
    (which variant and what it compared, its margin in margins' units)."""
    worst = ("none", float("inf"))
    for bug in (None, *VERIFY_BUGS):
        m = Margins(lib.sampling.exp)
        try:
            run_variant(lib, case, bug, m)
        except Exception:  # noqa: BLE001  (a refused variant answers "refused", whatever the numbers)
            continue
        what, margin = m.worst()
        if margin < worst[1]:
            worst = (f"{bug or 'reference'}:{what}", margin)
    return worst


def _resampled(lib: RefLib, pd: np.ndarray, q: np.ndarray, how: str) -> np.ndarray:
    """What a rejection samples from: the residual (correct), |p - q| normalized (s06), or p (s12)."""
    if how == "p":
        return pd
    if how == "f32":
        return residual_f32(pd, q)
    if how == "abs":
        r = np.abs(pd - q)
        mass = seq_sum(r)
        return r / mass if mass > 0.0 else pd / seq_sum(pd)
    return lib.spec.residual(pd, q)


def _accepts(bug: str | None, u_a: float, ratio: float) -> bool:
    """The accept test u_a < ratio; f32_accept compares both in float32 (blind mutant b39), f32_ratio the ratio only."""
    if bug == "f32_accept":
        return bool(np.float32(u_a) < np.float32(ratio))
    if bug == "f32_ratio":
        return bool(u_a < float(np.float32(ratio)))
    return u_a < ratio


def verify_variant(lib: RefLib, rows_in, draft, draft_probs, params, prompt, output, rng,
                   bug: str | None, watch: Watch = UNWATCHED) -> tuple[list[int], list[float], int]:
    """verify_draft with one chapter pitfall, drawing from `rng` (a reference Pcg32, advanced in place).

    s04 penalties ignore this round's emitted tokens; s05 accept when u_a < p(x); s06 residual
    normalize(|p - q|); s07 u_resample drawn only on rejection; s08 bonus token from the last
    draft row; s09 u_resample drawn before u_accept; s12 resample from p instead of the residual.
    Not chapter pitfalls, the float32 ports the precision probes must tell apart (verify_probes):
    f32_accept float32(u_a) < float32(ratio); f32_ratio u_a < float32(ratio); f32_residual the
    residual computed in float32.
    Any other bug (or None) is the correct rule. Returns (tokens, logprobs, n_accepted). `watch`
    is told every sampling step (margins.Margins records how close each decision was).
    """
    sp = lib.sampling
    rows = [np.asarray(r, dtype=np.float64) for r in rows_in]
    vocab = rows[0].size
    tokens: list[int] = []
    lps: list[float] = []

    def seen() -> list[int]:
        return list(output) if bug == "s04" else list(output) + tokens

    for i, d in enumerate(draft):
        z = sp.apply_penalties(rows[i], params, prompt, seen())
        if params.greedy:
            t = sp.argmax(z)
            ok = t == d
        else:
            if draft_probs is not None:
                q = np.asarray(draft_probs[i], dtype=np.float64)
            else:
                q = np.zeros(vocab)
                q[d] = 1.0
            pd = sp.distribution(z, params)
            watch.distribution(z, params, pd)
            if bug == "s09":
                u_r = rng.next_f64()
                u_a = rng.next_f64()
            elif bug == "s07":
                u_a, u_r = rng.next_f64(), None
            else:
                u_a = rng.next_f64()
                u_r = rng.next_f64()
            ratio = pd[d] if bug == "s05" else pd[d] / q[d]
            watch.accept(u_a, ratio)
            if _accepts(bug, u_a, ratio):
                t, ok = d, True
            else:
                if bug == "s07":
                    u_r = rng.next_f64()
                how = {"s06": "abs", "s12": "p", "f32_residual": "f32"}.get(bug, "residual")
                res = _resampled(lib, pd, q, how)
                if how != "f32":  # a float32 port is no honest port: its margins are not watched
                    watch.resample(pd, q, res, u_r, how)
                t, ok = sp.sample(res, u_r), False
        tokens.append(int(t))
        lps.append(sp.logprob(z, t))
        if not ok:
            return tokens, lps, i
    last = rows[-2] if (bug == "s08" and draft) else rows[-1]
    z = sp.apply_penalties(last, params, prompt, seen())
    if params.greedy:
        t = sp.argmax(z)
    else:
        pd, u = sp.distribution(z, params), rng.next_f64()
        watch.distribution(z, params, pd)
        watch.sample(pd, u)
        t = sp.sample(pd, u)
    tokens.append(int(t))
    lps.append(sp.logprob(z, t))
    return tokens, lps, len(draft)


ATTEMPTS = 60  # a case's constructions: a handful always suffice
ORDER_ATTEMPTS = 1000  # an "order" case's: the other order answers differently in 3 % of them at worst (the top_p and
# min_p case: median 29, most 173 over 60 seeds), so 1000 fail with a chance of 0.97^1000 < 1e-13; 3 ms each


def verify_case(lib: RefLib, master_seed: int, index: int, plan: VPlan) -> dict:
    """Case `index` of the plan: constructed, replayed through the reference, tagged."""
    r = lib.rand(master_seed, "verify", index)
    params = make_params(plan, r)
    probe = set(PROBES) & set(plan.flavors)
    seed = probe_seed(lib, plan.flavors, r) if probe else make_seed(plan, index, r)
    for attempt in range(ORDER_ATTEMPTS if "order" in plan.flavors else ATTEMPTS):  # a fresh history and fresh rows each time
        if "order" in plan.flavors and attempt:  # knob values under which the order cannot matter are drawn again too
            params = make_params(plan, r)
        prompt, output = history(plan, r)
        b = (ProbeBuilder if probe else Builder)(lib, plan, r, params, prompt, output, seed)
        try:
            rows, draft, qs = b.build()
        except Retry:
            continue
        case = {"rows": rows, "draft": draft, "draft_probs": qs, "params": params, "prompt": prompt,
                "output": output, "seed": seed}
        v, nxt = run_reference(lib, case)
        if v.n_accepted != plan.j:  # the construction is wrong, not the reference: stop loudly
            raise AssertionError(f"verify case {index}: planned {plan.j} acceptances, the reference accepted {v.n_accepted}")
        if run_variant(lib, case, None) != (v.tokens, v.logprobs, v.n_accepted, nxt):
            raise AssertionError(f"verify case {index}: the local copy of verify_draft disagrees with the reference")
        expect = answer(v.tokens, v.n_accepted, nxt)
        pitfalls = verify_pitfalls(lib, case, expect)
        if "s04" in plan.flavors and "s04" not in pitfalls:
            continue  # the constructed flip was masked by another penalty: build it again
        if "order" in plan.flavors and answer(*_drop_lps(run_variant(reordered(lib, params), case, None))) == expect:
            continue  # its two truncation steps in the other order would answer alike: build it again
        if worst_margin(lib, case)[1] < N_MARGIN:
            continue  # a last-ulp difference of exp could flip a decision: build it again
        if probe and any(answer(*_drop_lps(run_variant(lib, case, bug))) == expect for bug in F32_BUGS[next(iter(probe))]):
            continue  # a float32 port would answer this probe as the reference does: build it again
        lps = exact_logprobs(lib, case, v.tokens)
        if any(abs(a - b) > LOGPROB_REPLAY_TOL for a, b in zip(lps, v.logprobs)):
            raise AssertionError(f"verify case {index}: the reference's logprobs {v.logprobs} are not the exact {lps}")
        case["expect"] = {"tokens": v.tokens, "logprobs": lps, "n_accepted": v.n_accepted, "next_u32": nxt}
        case["tags"] = order_tags(_verify_tags(lib, case, plan, set(pitfalls)), VERIFY_TAGS)
        case["pitfalls"] = pitfalls
        return case
    raise RuntimeError(f"verify case {index} ({plan}) could not be constructed")


TRUNCATION = ("top_k", "top_p", "min_p")  # spec/sampling.md section 5.2, steps 4 to 6, in the stated order


class _Reordered:
    """The reference's sampler with the truncation steps a params object sets run in `order` (verify_variant reads
    lib.sampling): each step is the reference's own distribution with that knob alone, the first at the case's
    temperature, the next over the log of what the one before kept (its renormalized probabilities)."""

    def __init__(self, sampling, order: tuple[str, ...]) -> None:
        self._sampling, self._order = sampling, order

    def __getattr__(self, name: str):
        return getattr(self._sampling, name)

    def distribution(self, z, params):
        if params.greedy or not self._order:
            return self._sampling.distribution(z, params)
        probs, temperature = None, params.temperature
        with np.errstate(divide="ignore"):  # log 0 = -inf: a token a step dropped stays dropped
            for knob in self._order:
                logits = z if probs is None else np.log(probs)
                probs = self._sampling.distribution(logits, self._sampling.SamplingParams(temperature=temperature, **{knob: getattr(params, knob)}))
                temperature = 1.0
        return probs


def reordered(lib: RefLib, params: dict) -> RefLib:
    """lib with the case's truncation steps in the reverse of the stated order (a case with two: the other order)."""
    on = [k for k in TRUNCATION if params[k] != OFF[k]]
    return dataclasses.replace(lib, sampling=_Reordered(lib.sampling, tuple(reversed(on))))


# the float32 ports each probe flavour must tell from the reference (verify_variant's bugs)
F32_BUGS = {"probe_accept": ("f32_accept", "f32_ratio"), "probe_residual": ("f32_residual",)}


def _drop_lps(v: tuple) -> tuple:
    tokens, _lps, n, nxt = v
    return tokens, n, nxt


def answer(tokens: list[int], n_accepted: int, next_u32: int) -> dict:
    """A verify answer as the pitfall hints compare it (the logprobs left out)."""
    return {"tokens": list(tokens), "n_accepted": n_accepted, "next_u32": next_u32}


def verify_pitfalls(lib: RefLib, case: dict, expect: dict) -> dict:
    """{pitfall id: its variant's answer} for every verify pitfall whose answer differs from `expect`."""
    out = {}
    for bug in VERIFY_BUGS:
        try:
            toks, _lps, n, u = run_variant(lib, case, bug)
            got = answer(toks, n, u)
        except Exception:  # noqa: BLE001  (a variant the reference's code refuses answers "refused")
            got = REFUSED
        if got != expect:
            out[bug] = got
    return out


def _verify_tags(lib: RefLib, case: dict, plan: VPlan, shows: set[str]) -> set[str]:
    """What the case exercises, read off the case and the reference's answer."""
    sp = lib.sampling
    params = lib.params(case["params"])
    tags: set[str] = {"greedy" if params.greedy else "sampled"}
    active = []
    if not params.greedy and params.temperature != 1.0:
        active.append("temperature")
    for k in ("top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
        if case["params"][k] != OFF[k]:
            active.append(k)
    tags |= set(active)
    if not params.greedy:
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
        z = sp.apply_penalties(row, params, case["prompt"], case["output"] + toks[:i])
        if int(np.sum(z == np.max(z))) >= 2:
            tags.add("argmax_tie")
        if i < m:
            d = case["draft"][i]
            if row[d] == ninf:
                tags.add("neg_inf_draft")
            if not params.greedy and sp.distribution(z, params)[d] == 0.0:
                tags.add("truncated_draft")
    if case["seed"] >= 1 << 63:
        tags.add("seed_high")
    if case["seed"] in EDGE_SEEDS.values():
        tags.add("seed_edge")
    tags |= {f"probe:{f[len('probe_'):]}" for f in plan.flavors if f.startswith("probe_")}
    tags |= {f"shows:{b}" for b in shows}
    return tags

