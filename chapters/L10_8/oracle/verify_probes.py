"""Precision probes: verify cases whose one sampling decision sits closer to its boundary than float32
can resolve, and far farther than the margin a last-bit difference of float64 needs.

spec/sampling.md says every probability is a float64. The other verify cases keep every decision at
least margins.N_MARGIN units of roundoff (about 2e-12, relative) from its boundary, but most sit much
farther, so a port that computes the accept ratio or the residual in float32 (whose unit roundoff is
6e-8) answers them alike. A probe moves row 0's decision to within PROBE_GAP (2e-10 to 4e-9, relative)
of its boundary:

* ``probe_accept``: row 0's draft is accepted with u_accept < p(d)/q(d) < u_accept (1 + 4e-9), and
  u_accept lies in the lower quarter of its float32 rounding interval above the float32 F it rounds
  to, so F <= u_accept < ratio < F + ulp/2: both round to F. A port comparing float32(u_accept) <
  float32(ratio) (blind mutant b39) or u_accept < float32(ratio) rejects where the reference accepts.
* ``probe_residual``: row 0's deterministic draft is rejected and the residual's first running sum
  sits within PROBE_GAP of u_resample, on the side where a residual computed in float32 (then walked
  in float64) lands on another token.

Built against the uniforms the case's seed draws (probe_seed picks a seed whose u_accept qualifies),
by bisection over the float32 logits, two logits at a time: the decision's own logit to about 1e-7,
then a logit of probability about 1e-3 to about 1e-10 (one float32 step of it moves the decision by
p_d p_t ulp(z_t)). The distribution is the reference sampler's (its exp is portable), so the probes
are the same bytes on every CPU. The gap is at least 1e-10 relative, about 900 000 units of roundoff,
over fifty times the N_MARGIN every decision keeps (verify_cases checks it as for any case): a port
whose exp or ratio differs in the last bits of float64 decides alike.
"""

from __future__ import annotations

import numpy as np

from harness.pack import Rand, f32

from .common import Q_DENOM, RefLib, Retry
from .verify_builder import Builder

PROBE_GAP = (2e-10, 4e-9)  # the distance of a probe's decision from its boundary, relative to the uniform
PROBES = ("probe_accept", "probe_residual")  # the probe flavours of verify_plan
FINE_BELOW = 7.0  # the fine logit sits this far below the row's maximum (times T): a probability of about 1e-3
BISECT = 80  # bisection steps: float64 halving reaches adjacent float32 values well within 80


def f32_ulp(x: float) -> float:
    """The spacing of float32 at x."""
    return float(np.spacing(np.float32(x)))


def accept_qualifies(u: float) -> bool:
    """u rounds down to its float32 F, in the lower quarter of the interval: F <= u < F + ulp/4."""
    F = f32(u)
    return 0.05 < u < 0.95 and F <= u < F + f32_ulp(F) / 4


def probe_seed(lib: RefLib, flavors: tuple[str, ...], r: Rand) -> int:
    """A generator seed whose first uniforms suit the probe: drawn until they do (about half qualify)."""
    for _ in range(1000):
        seed = r.u64()
        g = lib.generator(seed)
        u_a, u_r = g.next_f64(), g.next_f64()
        if "probe_accept" in flavors and accept_qualifies(u_a):
            return seed
        if "probe_residual" in flavors and u_a > 0.3 and 0.1 < u_r < 0.9:
            return seed
    raise RuntimeError("no seed qualifies for a probe in 1000 draws")


def ratio_f32_flips(u_a: float, ratio: float) -> bool:
    """Both float32 accept tests (b39's float32(u) < float32(ratio), and u < float32(ratio)) reject."""
    return not np.float32(u_a) < np.float32(ratio) and not u_a < f32(ratio)


def residual_f32(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The residual normalize(max(0, p - q)) computed in float32 (its mass summed left to right)."""
    r = np.maximum(np.float32(0.0), p.astype(np.float32) - q.astype(np.float32))
    mass = np.float32(0.0)
    for x in r:
        mass = np.float32(mass + x)
    return (r / mass).astype(np.float64) if mass > 0 else p / p.sum()


def _bisect(f, lo: float, hi: float, target: float) -> tuple[float, float]:
    """f increasing in a float32 logit x: the adjacent float32 values (a, b) with f(a) <= target < f(b)."""
    a, b = f32(lo), f32(hi)
    if not (f(a) <= target < f(b)):
        raise Retry
    for _ in range(BISECT):
        mid = f32((a + b) / 2)
        if mid in (a, b):
            break
        if f(mid) <= target:
            a = mid
        else:
            b = mid
    return a, b


def _steps(x: float, direction: float):
    """The float32 values from x outward, one ulp at a time."""
    v = np.float32(x)
    while True:
        v = np.nextafter(v, np.float32(direction))
        yield float(v)


class ProbeBuilder(Builder):
    """Builder whose row 0 is a precision probe (the other rows as usual)."""

    def __init__(self, lib: RefLib, *args) -> None:
        super().__init__(lib, *args)
        self.spec = lib.spec

    def sampled_token(self, row, seen, i, qs, tie) -> int:
        if i != 0:
            return super().sampled_token(row, seen, i, qs, tie)
        if "probe_accept" in self.plan.flavors:
            return self.accept_probe(row, seen, qs)
        return self.residual_probe(row, seen, qs)

    def _fine_token(self, row, avoid: set[int]) -> int:
        """A token set to about probability 1e-3: the second, fine tuning knob."""
        free = [t for t in range(self.V) if t not in avoid]
        t = self.r.choice(free)
        row[t] = f32(max(row) - FINE_BELOW * self.pd["temperature"])  # 1e-3 after dividing by T
        return t

    def _tune(self, row, coarse: int, fine: int, f, target: float, above: bool) -> None:
        """Set row[coarse] then row[fine] so that f(row) lies PROBE_GAP from target, above it or below.
        f is increasing in row[coarse] and decreasing in row[fine]."""

        def at(idx: int, sign: float):
            def g(x: float) -> float:
                row[idx] = x
                return sign * f()
            return g

        base = row[coarse]
        a, b = _bisect(at(coarse, 1.0), base - 40.0, base + 40.0, target)
        row[coarse] = b  # f just above target (by at most one coarse step)
        zt = row[fine]
        T = self.pd["temperature"]
        a, b = _bisect(at(fine, -1.0), zt - 2.0 * T, zt + 2.0 * T, -target)  # -f(a) <= -target < -f(b)
        # a: f(a) >= target, the last fine value at or above; b: f(b) < target, the first below
        lo, hi = (PROBE_GAP[0] * target, PROBE_GAP[1] * target)
        start, direction, sign = (a, -np.inf, 1.0) if above else (b, np.inf, -1.0)
        for x in [start, *_first(_steps(start, direction), 4000)]:
            row[fine] = x
            gap = sign * (f() - target)
            if gap > hi:
                raise Retry
            if gap >= lo:
                return
        raise Retry

    def accept_probe(self, row, seen, qs) -> int:
        u_a = self.us[0]
        d = self.r.below(self.V)
        fine = self._fine_token(row, {d})
        c = Q_DENOM if qs is None else self.r.int_in(Q_DENOM // 2, Q_DENOM)
        qd = c / Q_DENOM

        def ratio() -> float:
            return float(self.dist(row, seen)[d]) / qd

        self._tune(row, d, fine, ratio, u_a, above=True)
        P = self.dist(row, seen)
        if not (u_a < P[d] / qd and ratio_f32_flips(u_a, P[d] / qd)):
            raise Retry
        if qs is not None:
            q = self.make_q(P, d, c)
            if q[d] != qd:
                raise Retry
            qs.append(q)
        return d

    def residual_probe(self, row, seen, qs) -> int:
        if qs is not None:
            raise AssertionError("residual probes use deterministic drafts")
        u_a, u_r = self.us[0], self.us[1]
        d = self.r.below(self.V)
        row[d] = f32(min(x for x in row if x != float("-inf")) - 3.0)  # rejected: p(d) well below u_accept
        others = [t for t in range(self.V) if t != d]
        first = others[0]  # the residual's first running sum is its first token's share
        fine = self._fine_token(row, {d, first})
        q = np.zeros(self.V)
        q[d] = 1.0

        def first_share() -> float:
            return float(self.residual(row, seen, q)[first])

        sides = [True, False] if self.r.chance(0.5) else [False, True]
        saved = list(row)
        for above in sides:
            row[:] = saved
            try:
                self._tune(row, first, fine, first_share, u_r, above=above)
            except Retry:
                continue
            P = self.dist(row, seen)
            if not P[d] < 0.5 * u_a:
                continue
            res = self.residual(row, seen, q)
            if self.sampling.sample(residual_f32(P, q), u_r) != self.sampling.sample(res, u_r):
                return d
        raise Retry

    def residual(self, row, seen, q) -> np.ndarray:
        return self.spec.residual(self.dist(row, seen), q)


def _first(it, n: int):
    for k, x in enumerate(it):
        if k >= n:
            return
        yield x
