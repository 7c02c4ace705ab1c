"""The precision probes (oracle/verify_probes.py, tags probe:accept and probe:residual) tell a float32
port from an honest float64 one: the reference with its accept ratio or its residual moved by one ulp of
float64 answers every golden verify case as recorded, and the reference with either in float32 does not.
"""

import numpy as np
import pytest

from chapters.L10_8 import oracle
from chapters.L10_8.oracle.verify_probes import PROBE_GAP, residual_f32
from harness.pack import pristine

REF = pristine("L10.8")
LIB = oracle.bind(REF)
SPEC = LIB.spec
DOC = oracle.load(oracle.DEFAULT_OUT)
V_CASES = DOC["verify"]
PROBES = {kind: [c["id"] for c in V_CASES if f"probe:{kind}" in c["tags"]] for kind in ("accept", "residual")}


def _step_with(accepts, residual):
    """The reference's speculative_step with its accept test and residual replaced."""
    reference_step = SPEC.speculative_step

    def step(p, q, x, u_accept, u_resample):
        reference_step(p, q, x, u_accept, u_resample)  # its refusals, unchanged
        p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        if accepts(u_accept, p[x] / q[x]):
            return x, True
        return SPEC.sample_dense(residual(p, q), u_resample), False
    return step


def _nudged(direction: float):
    return lambda u, ratio: u < float(np.nextafter(ratio, direction))


def _residual_nudged(direction: float):
    def residual(p, q):
        r = SPEC.residual(p, q)
        return np.where(r > 0.0, np.nextafter(r, direction), r)  # a zero stays zero in every port
    return residual


VARIANTS = {
    "ratio +1 ulp": (_nudged(np.inf), SPEC.residual),
    "ratio -1 ulp": (_nudged(-np.inf), SPEC.residual),
    "residual +1 ulp": (lambda u, r: u < r, _residual_nudged(np.inf)),
    "residual -1 ulp": (lambda u, r: u < r, _residual_nudged(-np.inf)),
    "f32 accept (b39)": (lambda u, r: bool(np.float32(u) < np.float32(r)), SPEC.residual),
    "f32 ratio": (lambda u, r: u < float(np.float32(r)), SPEC.residual),
    "f32 residual": (lambda u, r: u < r, residual_f32),
}


def _wrong_cases(monkeypatch, variant: str) -> list[str]:
    """The ids of the golden verify cases the reference, with `variant`, answers otherwise than recorded."""
    monkeypatch.setattr(SPEC, "speculative_step", _step_with(*VARIANTS[variant]))
    wrong = []
    for c in V_CASES:
        v, nxt = oracle.run_reference(LIB, c)
        e = c["expect"]
        if (v.tokens, v.n_accepted, nxt) != (e["tokens"], e["n_accepted"], e["next_u32"]):
            wrong.append(c["id"])
    return wrong


def test_the_file_holds_probes_of_both_kinds():
    assert len(PROBES["accept"]) >= 4 and len(PROBES["residual"]) >= 4, PROBES


@pytest.mark.parametrize("variant", [v for v in VARIANTS if "ulp" in v])
def test_a_last_bit_difference_of_float64_passes_every_case(monkeypatch, variant):
    assert _wrong_cases(monkeypatch, variant) == []


@pytest.mark.parametrize("variant, kind", [("f32 accept (b39)", "accept"), ("f32 ratio", "accept"),
                                           ("f32 residual", "residual")])
def test_a_float32_port_fails_every_probe_of_its_kind(monkeypatch, variant, kind):
    wrong = _wrong_cases(monkeypatch, variant)
    assert PROBES[kind] and set(PROBES[kind]) <= set(wrong), (variant, wrong)


def test_each_probe_sits_within_its_gap_of_the_boundary():
    """Row 0's decision: u_accept below the ratio (accept) or u_resample beside the residual's first
    running sum (residual), by PROBE_GAP relative: under float32's half ulp, over the oracle's margin."""
    for c in V_CASES:
        kind = next((t[len("probe:"):] for t in c["tags"] if t.startswith("probe:")), None)
        if kind is None:
            continue
        g = LIB.generator(c["seed"])
        u_a, u_r = g.next_f64(), g.next_f64()
        params = LIB.params(c["params"])
        z = LIB.sampling.apply_penalties(c["rows"][0], params, c["prompt"], c["output"])
        p = LIB.sampling.distribution(z, params)
        d = c["draft"][0]
        q = np.zeros(p.size) if c["draft_probs"] is None else np.asarray(c["draft_probs"][0])
        if c["draft_probs"] is None:
            q[d] = 1.0
        if kind == "accept":
            gap, u = p[d] / q[d] - u_a, u_a
        else:
            res = SPEC.residual(p, q)
            first = next(i for i in range(p.size) if res[i] > 0)
            gap, u = abs(res[first] - u_r), u_r
        assert PROBE_GAP[0] * u <= gap <= PROBE_GAP[1] * u, (c["id"], gap / u)
        assert gap / (2.0 ** -53 * u) >= 50 * oracle.N_MARGIN, c["id"]  # over 50 times the oracle's margin
