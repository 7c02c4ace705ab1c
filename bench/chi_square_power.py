"""Size and power of the chi-square check behind `sampled_spec_keeps_the_target_distribution`.

The test runs harness.stats.first_token_chi_square on block 0 (seeds harness.stats.seeds(0)) and
passes when the p-value > ALPHA = 1e-3. Here the same check runs on many disjoint blocks of 4000
seeds (block b = harness.stats.seeds(b) = splitmix64(SEED_BASE + b * 4000 + i), i < 4000; blocks
1..N, so block 0, the test's, is not counted) and counts how often it rejects.

Part 1, through the harness (harness.impls.open_impl, in-process, exactly what the test calls):
  size    the reference, a correct verifier: its rejection rate at ALPHA with a 95% Clopper-Pearson
          interval, which must contain ALPHA. At 1e-3 a few hundred blocks see about no rejection,
          so calibration is also checked on the whole distribution: the p-values across blocks must
          be uniform on [0, 1] (scipy.stats.kstest), and the rates at 0.01, 0.05, 0.1 match them.
  power   mutants s06 (residual |p - q|) and s12 (resample from p, not the residual), the two
          pitfalls the chapter says this test catches: the rejection rate should be 1.
  Block 0's p-value, the one the test sees, is reported for each.

Part 2, a vectorized replica of the reference's first token (for a precise size): the fake target's
first row gives p; prompt lookup drafts d (one-hot q), so the first token is d when u_a < p(d),
else the residual (p without d, renormalized) sampled with u_r; u_a, u_r are the first two uniforms
of Pcg32.from_seed(seed), computed for 4000 seeds at once in numpy uint64. Before it is used, the
bench's vectorized splitmix64 is checked against harness.stats.seeds, and the replica is checked
token for token against the reference through the harness on blocks 0..2 (the harness's seeds).
It measures the size on --replica-blocks blocks under two seedings of the same blocks:
  splitmix64    splitmix64(SEED_BASE + b * 4000 + i), what harness.stats.seeds gives (the main figure)
  consecutive   SEED_BASE + b * 4000 + i unmixed, what harness.stats used before (the comparison)
Consecutive seeds make the first PCG outputs of neighbouring seeds correlated (their states differ
by the multiplier, a Weyl sequence in the high bits): with them the check rejected a correct
verifier at about 2.5 x ALPHA, which is why harness.stats mixes its seeds. The replica also gives
block 0's reference p-value under each scheme (under consecutive seeds, what the test saw before).

Run: .venv/bin/python bench/chi_square_power.py [--blocks 200] [--mutant-blocks 40]
     [--replica-blocks 20000] [--jobs 2] [--out bench/out/chi_square_power.json]
Time: part 1 costs about 1.5 s per block per idle core (about 2.5 s on a shared machine); part 2
about 1.5 ms per block per scheme. The defaults take about 4 minutes on 2 idle cores, about 7 on 2
shared ones.
"""

import argparse
from concurrent.futures import ProcessPoolExecutor
import json
import os
from pathlib import Path
import platform
import sys
import time

import numpy as np
from scipy import stats as sps

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from harness import stats  # noqa: E402  (puts the reference on sys.path)
from harness.impls import open_impl  # noqa: E402
from harness.registry import load_chapter  # noqa: E402
from tinyllm.infer import spec as ref_spec  # noqa: E402  (the reference, judge side)
from tinyllm.rng import DEFAULT_INITSEQ, MULTIPLIER  # noqa: E402

SUBJECTS = ("reference", "mutant:s06", "mutant:s12")
EXTRA_LEVELS = (0.01, 0.05, 0.1)  # calibration at levels where a few hundred blocks see rejections
_impls: dict = {}


# ---- part 1: the harness path ------------------------------------------------------------------

def _impl(subject: str):
    if subject not in _impls:
        _impls[subject] = open_impl(load_chapter("L10.8"), subject)
    return _impls[subject]


def _block(job: tuple[str, int]) -> tuple[str, int, float, float]:
    subject, block = job
    r = stats.first_token_chi_square(_impl(subject), block)
    return subject, block, r.p_value, r.statistic


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def calibration(p: np.ndarray) -> dict:
    """Rejection rates at ALPHA and the extra levels (95% CIs) and a KS test of uniformity."""
    ks = sps.kstest(p, "uniform")
    levels = []
    for a in (stats.ALPHA, *EXTRA_LEVELS):
        k = int((p <= a).sum())
        levels.append({"alpha": a, "rejected": k, "rate": k / p.size, "ci95": list(clopper_pearson(k, p.size)),
                       "consistent": clopper_pearson(k, p.size)[0] <= a <= clopper_pearson(k, p.size)[1]})
    return {"blocks": int(p.size), "levels": levels, "ks_uniform": {"statistic": float(ks.statistic), "p_value": float(ks.pvalue)}}


def summarize(subject: str, pv: dict[int, float], st: dict[int, float], blocks: list[int]) -> dict:
    p = np.array([pv[b] for b in blocks])
    k = int((p <= stats.ALPHA).sum())
    lo, hi = clopper_pearson(k, len(blocks))
    out = {"subject": subject, "blocks": len(blocks), "block_range": [blocks[0], blocks[-1]],
           "block0_p_value": pv[0], "block0_statistic": st[0], "block0_rejected": pv[0] <= stats.ALPHA,
           "rejected": k, "rejection_rate": k / len(blocks), "ci95": [lo, hi],
           "p_value_min": float(p.min()), "p_value_median": float(np.median(p)), "p_value_max": float(p.max()),
           "statistic_median": float(np.median([st[b] for b in blocks]))}
    if subject == "reference":
        out["calibration"] = calibration(p)
        out["block0_p_value_rank"] = float((p <= pv[0]).mean())  # where block 0 sits among the others
    return out


# ---- part 2: the vectorized replica ----------------------------------------------------------------

U64 = np.uint64
_M, _INC = U64(MULTIPLIER), U64(((DEFAULT_INITSEQ << 1) | 1) & (2**64 - 1))


def pcg_u32s(seeds: np.ndarray, n: int) -> np.ndarray:
    """The first n next_u32 of Pcg32.from_seed(s) for every s in seeds: [n, len(seeds)]."""
    with np.errstate(over="ignore"):
        st = (_INC + seeds.astype(U64)) * _M + _INC  # Pcg32.__init__: step from 0, add the seed, step
        out = []
        for _ in range(n):
            old, st = st, st * _M + _INC
            xs = (((old >> U64(18)) ^ old) >> U64(27)) & U64(0xFFFFFFFF)
            rot = old >> U64(59)
            out.append(((xs >> rot) | (xs << ((U64(32) - rot) & U64(31)))) & U64(0xFFFFFFFF))
    return np.stack(out)


def splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x.astype(U64) + U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        return z ^ (z >> U64(31))


class Replica:
    """The reference's first token for a block of seeds, vectorized (see the module docstring)."""

    def __init__(self) -> None:
        self.p = stats.target_distribution()
        self.d = ref_spec.prompt_lookup(stats.PROMPT, stats.K, ref_spec.DEFAULT_MAX_NGRAM, ref_spec.DEFAULT_MIN_NGRAM)[0]
        r = self.p.copy()
        r[self.d] = 0.0
        self.cum = np.cumsum(r / np.cumsum(r)[-1])  # the residual's running sum, as sample() walks it

    def tokens(self, seeds: np.ndarray) -> np.ndarray:
        u = pcg_u32s(seeds, 4)
        f64 = lambda a, b: ((a >> U64(5)).astype(np.float64) * 67108864.0 + (b >> U64(6)).astype(np.float64)) / 9007199254740992.0
        u_a, u_r = f64(u[0], u[1]), f64(u[2], u[3])
        resampled = np.minimum(np.searchsorted(self.cum, u_r, side="right"), self.p.size - 1)
        return np.where(u_a < self.p[self.d], self.d, resampled)


def consecutive(b: int) -> np.ndarray:
    """Block b's seeds unmixed, the scheme harness.stats used before (kept as the comparison)."""
    return U64(stats.SEED_BASE + b * stats.SEEDS) + np.arange(stats.SEEDS, dtype=U64)


def mixed(b: int) -> np.ndarray:
    """Block b's seeds as harness.stats.seeds gives them, vectorized (checked in check_replica)."""
    return splitmix64(consecutive(b))


SCHEMES = {"splitmix64": mixed, "consecutive": consecutive}


def _p_values_replica(n: int, scheme: str) -> np.ndarray:
    rep, seeds_of = Replica(), SCHEMES[scheme]
    return np.array([stats.chi_square(rep.tokens(seeds_of(b)).tolist(), rep.p).p_value for b in range(1, n + 1)])


def block0_replica(scheme: str) -> float:
    rep = Replica()
    return stats.chi_square(rep.tokens(SCHEMES[scheme](0)).tolist(), rep.p).p_value


def check_replica() -> list[int]:
    """The vectorized seeds are the harness's, and the replica draws what the reference draws."""
    rep = Replica()
    checked = []
    for b in range(3):
        harness_seeds = stats.seeds(b)
        if mixed(b).tolist() != harness_seeds:
            raise SystemExit(f"the bench's splitmix64 seeds differ from harness.stats.seeds({b}): fix the bench")
        got = rep.tokens(np.array(harness_seeds, dtype=U64)).tolist()
        want = stats.first_tokens(_impl("reference"), b)
        if got != want:
            raise SystemExit(f"the replica differs from the reference on block {b}: the replica is wrong, not measuring")
        checked.append(b)
    return checked


# ---- main ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=200, help="reference blocks 1..N through the harness (default 200)")
    ap.add_argument("--mutant-blocks", type=int, default=40, help="blocks 1..M per mutant through the harness (default 40)")
    ap.add_argument("--replica-blocks", type=int, default=20000, help="blocks for the replica's size, 0 to skip (default 20000)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: every core)")
    ap.add_argument("--out", default=str(REPO / "bench/out/chi_square_power.json"))
    a = ap.parse_args()
    if a.blocks < 1 or a.mutant_blocks < 1 or a.replica_blocks < 0:
        ap.error("--blocks and --mutant-blocks must be >= 1, --replica-blocks >= 0")

    # part 1
    n_blocks = {"reference": a.blocks, "mutant:s06": a.mutant_blocks, "mutant:s12": a.mutant_blocks}
    jobs = sorted(((s, b) for s in SUBJECTS for b in range(0, n_blocks[s] + 1)), key=lambda j: j[1])
    pv: dict[str, dict[int, float]] = {s: {} for s in SUBJECTS}
    st: dict[str, dict[int, float]] = {s: {} for s in SUBJECTS}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for i, (s, b, p, x) in enumerate(pool.map(_block, jobs, chunksize=4), 1):
            pv[s][b], st[s][b] = p, x
            if i % 50 == 0 or i == len(jobs):
                print(f"  harness: {i}/{len(jobs)} blocks, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    wall1 = time.perf_counter() - t0
    rows = [summarize(s, pv[s], st[s], list(range(1, n_blocks[s] + 1))) for s in SUBJECTS]

    # part 2
    replica = None
    if a.replica_blocks:
        t1 = time.perf_counter()
        checked = check_replica()
        with ProcessPoolExecutor(max_workers=a.jobs) as pool:
            futures = {scheme: pool.submit(_p_values_replica, a.replica_blocks, scheme) for scheme in SCHEMES}
            p_rep = {scheme: f.result() for scheme, f in futures.items()}
        replica = {"checked_against_reference_on_blocks": checked, "blocks": a.replica_blocks,
                   "harness_scheme": "splitmix64",
                   **{scheme: calibration(p_rep[scheme]) for scheme in SCHEMES},
                   "block0_reference_p_value": {scheme: block0_replica(scheme) for scheme in SCHEMES},
                   "wall_s": time.perf_counter() - t1}

    # report
    print(f"\nchi-square check: {stats.SEEDS} seeds per block, ALPHA = {stats.ALPHA}, prompt lookup k {stats.K} "
          f"on the fake target (V {stats.VOCAB}); blocks 1..N (block 0 is the test's)")
    print(f"\npart 1, through the harness ({wall1:.0f} s on {a.jobs} workers)\n")
    print(f"{'subject':<12} {'blocks':>6} {'rejected':>8} {'rate':>8} {'95% CI (Clopper-Pearson)':>26} "
          f"{'block-0 p':>10} {'median p':>9} {'max p':>9}")
    for r in rows:
        ci = f"[{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
        print(f"{r['subject']:<12} {r['blocks']:>6} {r['rejected']:>8} {r['rejection_rate']:>8.4f} {ci:>26} "
              f"{r['block0_p_value']:>10.3g} {r['p_value_median']:>9.3g} {r['p_value_max']:>9.3g}")
    ref = rows[0]

    def show_cal(c: dict, indent: str = "  ") -> None:
        print(f"{indent}KS test of the p-values against U(0, 1): D = {c['ks_uniform']['statistic']:.4f}, p = {c['ks_uniform']['p_value']:.3g}")
        for lv in c["levels"]:
            print(f"{indent}at alpha {lv['alpha']:<6}: rejected {lv['rejected']:>5} of {c['blocks']} = {lv['rate']:.5f}, "
                  f"95% CI [{lv['ci95'][0]:.5f}, {lv['ci95'][1]:.5f}]{'' if lv['consistent'] else '  <- excludes alpha'}")

    print(f"\nreference calibration over blocks 1..{ref['blocks']}:")
    show_cal(ref["calibration"])
    print(f"  block 0 (the test's) p = {ref['block0_p_value']:.3g}; {ref['block0_p_value_rank']:.0%} of the other blocks have a smaller p")
    if replica:
        print(f"\npart 2, the vectorized replica (token-identical to the reference through the harness on blocks "
              f"{checked}, the harness's seeds), blocks 1..{replica['blocks']} ({replica['wall_s']:.0f} s)")
        labels = {"splitmix64": "splitmix64 (harness.stats.seeds, what the test uses)",
                  "consecutive": "consecutive (unmixed, the former scheme; the comparison)"}
        for scheme in SCHEMES:
            print(f"  seeds {labels[scheme]}:")
            show_cal(replica[scheme], "    ")
            print(f"    block 0 (the test's) reference p = {replica['block0_reference_p_value'][scheme]:.3g}")

    out = {"seeds_per_block": stats.SEEDS, "alpha": stats.ALPHA, "jobs": a.jobs, "harness_wall_s": wall1,
           "python": platform.python_version(), "machine": platform.machine(),
           "command": "python bench/chi_square_power.py " + " ".join(sys.argv[1:]),
           "subjects": rows, "replica": replica,
           "p_values": {s: [pv[s][b] for b in sorted(pv[s])] for s in SUBJECTS}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
