"""Margins: how far each sampling decision of a verify case is from flipping in an honest port.

A port computes what the reference computes, with the same IEEE-754 float64 operations in the same
order (spec/sampling.md), except `exp`: its libm and numpy's vectorised exp may disagree in the
last ulp (Rust's f64::exp and numpy's do on about 4.6 % of inputs). A case is *robust* when no such
disagreement can change its tokens, n_accepted or draw count: every comparison the verifier makes
on a number that depends on exp has a margin of more than N_MARGIN units of roundoff u = 2^-53 of
the magnitude compared (N u |x| is between N/2 and N ulps of x).

The error analysis (first order in u; the neglected terms are below (N u)^2, about 1e-24). Let K be
the ulps by which the port's exp may differ (one ulp of e is at most 2u e), V the vocabulary. Every
other operation rounds the same way on the same inputs, but can round differently on inputs that
already differ: |fl(a' o b') - fl(a o b)| <= |a' o b' - a o b| + u |a' o b'| + u |a o b|. So, in
units of u relative to the value, a left-to-right sum of n nonnegative terms adds 2n to its terms'
error and a division adds the two operands' errors plus 2:

    e_i = exp(z_i - m)        2K
    S   = sum e               2K + 2V
    s_i = e_i / S             4K + 2V + 2
    top_p's before-mass       8K + 8V + 6   (kept mass, then s_i / mass, then the running sum)
    min_p: s_i vs the floor   8K + 4V + 6   (both sides)
    neighbours in the rank    8K + 4V + 4   (s_a vs s_b, both sides)
    p_i = s_i / total         8K + 6V + 6   (= e_p)
    accept ratio p_d / q_d    8K + 6V + 8   (q is exact: multiples of 1/4096)
    sample's running sum      8K + 8V + 6   (bonus token, resampling from p)
    residual running sum      (2 e_p + 4V + 6) / mass <= (16K + 16V + 18) / mass

The residual max(0, p - q) cancels: its entries carry the absolute error of p (e_p u p_i), so its
running sums carry an absolute error of about 2 e_p u, divided by the residual's mass. Its margins
are therefore measured in units of u / mass, and its sign decisions (p_i > q_i) in units of u
max(p_i, q_i). The worst bound at K = 1 and V = 512 (the largest vocabulary of the design) is
16 + 8192 + 18 = 8226; N_MARGIN = 16452 is twice that: at V = 512 it covers any K <= 515.

Decisions that need no margin: greedy rows (argmax of penalized logits: no exp, exact arithmetic),
top_k (given the rank, checked here), a token of probability exactly 0 (a -inf logit or a dropped
token is 0 in every port), and exact ties (equal inputs to exp give equal outputs in any libm).

verify_variant (verify_cases) calls a Watch at each sampling step; Margins is the one that records.
"""

from __future__ import annotations

import math

import numpy as np

UNIT_ROUNDOFF = 2.0 ** -53  # u: round-to-nearest float64 lands within u |x| of the exact result
EXP_ULPS = 1  # K: Rust's f64::exp and numpy's exp are both faithfully rounded, so they differ by <= 1 ulp
V_MAX = 512  # the largest vocabulary of verify_plan; the bound below is computed for it
# the worst first-order bound of the table above, in units of u (the residual's in units of u / mass)
WORST_BOUND = 16 * EXP_ULPS + 16 * V_MAX + 18
# N: the margin a golden case needs, twice the worst bound (16452): room for a libm that is off by
# two ulps, and for the first-order terms the table drops
HEADROOM = 2
N_MARGIN = HEADROOM * WORST_BOUND
# exp(-700) is about 1e-304, a normal float64 (exp goes subnormal below about -708.4, where its
# error stops being relative): a finite logit this far below the maximum still counts in every port
EXP_FLOOR = -700.0


def seq_sum(values) -> float:
    """The left-to-right sum of spec/sampling.md (the reference's residual sums so too; numpy's pairwise sum
    can round differently)."""
    total = 0.0
    for v in values:
        total += float(v)
    return total


class Watch:
    """What verify_variant tells about each sampling step; this one ignores it (an ordinary run)."""

    def distribution(self, z, params, probs) -> None:
        """distribution(z, params) answered `probs`."""

    def accept(self, u_accept: float, ratio: float) -> None:
        """The accept test u_accept < ratio."""

    def sample(self, probs, u: float) -> None:
        """sample(probs, u) on a distribution (the bonus token)."""

    def resample(self, p, q, res, u: float, how: str) -> None:
        """The rejection's draw with u from `res`: "residual" max(0, p - q) normalized, "abs" |p - q|
        normalized (s06), "p" p itself (s12)."""


UNWATCHED = Watch()  # an ordinary run: nobody listens


class Margins(Watch):
    """Records every decision's margin, in units of u times the magnitude its error bound scales with."""

    def __init__(self, exp) -> None:
        self.exp = exp  # the reference sampler's exp: the watch recomputes its distribution to the bit
        self.decisions: list[tuple[str, float]] = []  # (what was compared, margin in units)

    def note(self, what: str, a: float, b: float, scale: float) -> None:
        """The comparison of a with b, whose port-to-reference error is bounded in units of u * scale."""
        gap = abs(float(a) - float(b))
        self.decisions.append((what, math.inf if scale == 0.0 else gap / (UNIT_ROUNDOFF * scale)))

    def worst(self) -> tuple[str, float]:
        """The closest decision: (what, margin); ("none", inf) when nothing depended on exp."""
        return min(self.decisions, key=lambda d: d[1], default=("none", math.inf))

    # ---- the sampler's steps, recomputed here to see the intermediate numbers -------------------

    def distribution(self, z, params, probs) -> None:
        if params.greedy:
            return  # the argmax: exact comparisons of penalized logits
        x = np.asarray(z, dtype=np.float64) / params.temperature
        assert x.size <= V_MAX, f"vocabulary {x.size}: the error bound behind N_MARGIN is for V <= {V_MAX}"
        d = x - x.max()  # the exponents: a port feeds its exp exactly these
        finite = d[np.isfinite(d)]
        if float(finite.min()) < EXP_FLOOR:
            self.decisions.append(("exp_underflow", 0.0))
        e = self.exp(d)
        s = e / seq_sum(e)
        keep = s > 0.0
        rank = sorted(range(s.size), key=lambda i: (-s[i], i))
        if params.top_k > 0 or params.top_p < 1.0:
            self._rank(rank, s, d)
        if params.top_k > 0:
            for i in rank[params.top_k:]:
                keep[i] = False
        if params.top_p < 1.0:
            kept_mass = seq_sum(s[i] for i in range(s.size) if keep[i])
            before = 0.0
            for i in rank:
                if not keep[i]:
                    continue
                self.note("top_p", before, params.top_p, max(before, params.top_p))
                if not before < params.top_p:
                    keep[i] = False
                before += s[i] / kept_mass
        if params.min_p > 0.0:
            floor = params.min_p * max(s[i] for i in range(s.size) if keep[i])
            for i in np.flatnonzero(keep):
                self.note("min_p", s[i], floor, max(s[i], floor))
            keep &= s >= floor
        total = seq_sum(s[i] for i in range(s.size) if keep[i])
        mine = np.where(keep, s / total, 0.0)
        assert np.array_equal(mine, probs), "the margin watch recomputed another distribution than the reference"

    def _rank(self, rank: list[int], s: np.ndarray, d: np.ndarray) -> None:
        """Neighbours in rank keep their order in a port: tied exponents (equal in any libm) or a margin."""
        ranked = [i for i in rank if s[i] > 0.0]
        for a, b in zip(ranked, ranked[1:]):
            if d[a] != d[b]:
                self.note("rank", s[a], s[b], max(s[a], s[b]))

    def accept(self, u_accept: float, ratio: float) -> None:
        if ratio != 0.0:  # p(d) = 0 exactly is 0 in every port: rejected whatever u_accept is
            self.note("accept", u_accept, ratio, max(u_accept, ratio))

    def sample(self, probs, u: float) -> None:
        self._walk("sample", probs, u, lambda acc: max(acc, u))

    def resample(self, p, q, res, u: float, how: str) -> None:
        p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        if how == "p":
            self._walk("resample_p", res, u, lambda acc: max(acc, u))
            return
        if how == "residual":
            for i in np.flatnonzero(p > 0.0):  # max(0, p - q): p_i = 0 is 0 in every port, q_i is exact
                self.note("residual_sign", p[i], q[i], max(p[i], q[i]))
            r = np.maximum(0.0, p - q)
        else:
            r = np.abs(p - q)
        mass = seq_sum(r)
        if mass > 0.0:
            assert np.array_equal(r / mass, res), "the margin watch recomputed another residual than the reference"
            self._walk("residual", res, u, lambda acc: 1.0 / mass)
        elif how == "residual":  # p <= q everywhere: the reference samples p over its own sum
            self._walk("residual_p", res, u, lambda acc: max(acc, u))
        else:  # |p - q| = 0 everywhere: any port's rounding would give it a mass
            self.decisions.append(("residual_mass", 0.0))

    def _walk(self, what: str, probs, u: float, scale) -> None:
        """sample's walk: every running sum it compares with u, up to the one that exceeds it."""
        acc = 0.0
        for p in np.asarray(probs, dtype=np.float64):
            if p <= 0.0:
                continue
            acc += float(p)
            self.note(what, acc, u, scale(acc))
            if acc > u:
                return
