"""Verify cases, the construction: the rows, draft and draft distributions of one case, built row by
row against the uniforms the case's own seed will draw, so the planned acceptances hold for any seed."""

from __future__ import annotations

import numpy as np

from harness.pack import Rand, f32

from .common import Q_DENOM, RefLib, Retry
from .verify_plan import VPlan


class Builder:
    """Constructs one verify case row by row, against the uniforms its seed will draw."""

    def __init__(self, lib: RefLib, plan: VPlan, r: Rand, params: dict, prompt: list[int], output: list[int], seed: int):
        self.sampling = lib.sampling
        self.plan, self.r, self.V = plan, r, plan.vocab
        self.pd = params
        self.sampling_params = lib.params(params)
        self.prompt, self.output = prompt, output
        gen = lib.generator(seed)
        self.us = [gen.next_f64() for _ in range(2 * plan.m + 1)]
        self.hist = sorted(set(prompt) | set(output))

    # rows ----------------------------------------------------------------------------------
    def random_row(self, i: int) -> list[float]:
        r, V, fl = self.r, self.V, self.plan.flavors
        scale = r.choice((1.0, 1.5, 2.0, 3.0))
        offset = r.choice((-1.0, 0.0, 0.5, 1.0, 2.0))
        row = [f32(offset + scale * r.gauss() * 1.7) for _ in range(V)]  # 1.7: spread to about unit variance
        if "hist_boost" in fl and self.hist:
            top = max(row)
            for t in self.r.distinct(0, len(self.hist), min(2, len(self.hist))):
                row[self.hist[t]] = f32(top - 0.8 * r.uniform())
        if "neg_inf" in fl:
            for t in range(V):
                if r.chance(0.3):  # about a third of the vocabulary masked
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
        return self.sampling.apply_penalties(row, self.sampling_params, self.prompt, seen)

    def dist(self, row: list[float], seen: list[int]) -> np.ndarray:
        return self.sampling.distribution(self.z(row, seen), self.sampling_params)

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
                raise Retry
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
                assert self.sampling.argmax(self.z(row, seen)) == a_tok
            if i == r_div:
                self.flip(row, a_tok, seen)
            if i == tie_row:
                tie = self.make_tie(row, seen, "tie2" in fl)
            if i == m:
                rows.append(row)
                break
            if self.sampling_params.greedy:
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
            raise Retry
        good = []
        for k in range(1, 121):  # candidates from just above the best other logit up to 3 above it
            row[a] = f32(m0 + 0.025 * k)
            if self.sampling.argmax(self.z(row, self.output)) == a and self.sampling.argmax(self.z(row, seen)) != a:
                good.append(row[a])
        if not good:
            raise Retry
        row[a] = good[len(good) // 2]

    def make_tie(self, row: list[float], seen: list[int], second: bool) -> tuple[int, int]:
        free = self.unpenalized(seen)
        if len(free) < (3 if second else 2):
            raise Retry
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
        am = self.sampling.argmax(z)
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
                raise Retry
            if not accept and u_a < P[d]:
                raise Retry
            if qs is not None:
                raise Retry
            return d
        if not accept and "neg_inf_draft" in fl:
            d = self.neg_inf_token(row, self.sampling.argmax(self.z(row, seen)))
            if qs is not None:
                qs.append(self.make_q(self.dist(row, seen), d, r.int_in(1, Q_DENOM // 2)))
            return d
        victim = None
        for _ in range(200):  # nudge logits by 1 until a token qualifies; 200 nudges is plenty for any row
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
                row[victim] = f32(row[victim] - 1.0) if row[victim] > -60.0 else float("-inf")  # far below: mask it
        else:
            raise Retry
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
            raise Retry
        return self.make_q(P, d, c)

    def reject_q(self, P, d, u_a) -> list[float]:
        c = self.natural_count(P, d)
        while u_a < P[d] / (c / Q_DENOM):
            c += 1
            if c > Q_DENOM:
                raise Retry
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

