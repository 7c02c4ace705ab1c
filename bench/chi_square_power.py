"""Size and power of the chi-square check behind `sampled_spec_keeps_the_target_distribution`.

The test runs chapters.L10_8.judge.stats.first_token_chi_square(impl, ref) on block 0 (seeds
stats.seeds(0)) and passes when the p-value > ALPHA = 1e-3. Here the same check runs on many
disjoint blocks of 4000 seeds (block b = stats.seeds(b) = splitmix64(SEED_BASE + b * 4000 + i),
i < 4000; blocks 1..N, so block 0, the test's, is not counted) and counts how often it rejects.

Part 1, through the harness (harness.subjects.open.open_impl, in-process, exactly what the test calls,
with the judge's pristine reference from harness.subjects.reference.pristine):
  size    the reference, a correct verifier: its rejection rate at ALPHA with a 95% Clopper-Pearson
          interval, which must contain ALPHA. At 1e-3 a few hundred blocks see about no rejection,
          so calibration is also checked on the whole distribution: the p-values across blocks must
          be uniform on [0, 1] (scipy.stats.kstest), and the rates at 0.01, 0.05, 0.1 match them.
  power   mutants s06 (residual |p - q|) and s12 (resample from p, not the residual), the two
          pitfalls the chapter says this test catches: the rejection rate should be 1.
  Block 0's p-value, the one the test sees, is reported for each.

Part 2, a vectorized replica of the reference's first token (for a precise size): the fake target's
first row gives p; the draft's first token d = stats.DRAFT[0] (one-hot q), so the first token is d
when u_a < p(d), else the residual (p without d, renormalized) sampled with u_r; u_a, u_r are the
first two uniforms of Pcg32.from_seed(seed), computed for 4000 seeds at once in numpy uint64. Before
it is used, the bench's vectorized splitmix64 is checked against stats.seeds, and the replica is
checked token for token against the reference through the harness on blocks 0..2 (the harness's
seeds). It measures the size on --replica-blocks blocks under two seedings of the same blocks:
  splitmix64    splitmix64(SEED_BASE + b * 4000 + i), what stats.seeds gives (the main figure)
  consecutive   SEED_BASE + b * 4000 + i unmixed, what the check used before (the comparison)
Consecutive seeds make the first PCG outputs of neighbouring seeds correlated (their states differ
by the multiplier, a Weyl sequence in the high bits): with them the check rejected a correct
verifier at about 2.5 x ALPHA, which is why stats mixes its seeds. The replica also gives block 0's
reference p-value under each scheme (under consecutive seeds, what the test saw before).

The bench fails (exit 1) when the replica or its seeds disagree with the harness, or when block 0
does not give the test's verdicts (the reference passes, s06 and s12 are rejected).

Run: .venv/bin/python bench/chi_square_power.py [--blocks 200] [--mutant-blocks 40]
     [--replica-blocks 20000] [--jobs N] [--out bench/out/chi_square_power.json] [--quick]
--quick: blocks 0..1 of every subject, the replica checked on block 0 and run on 20 blocks (seconds).
Time: part 1 costs about 0.6 s per block per idle core (about 1.1 s on a shared machine), part 2
about 1.6 ms per block per scheme: the defaults took 2 minutes on 2 idle cores (part 1 82 s), 3.3 on
2 shared ones (part 1 162 s); --quick takes about 5 s.
"""

import argparse
from concurrent.futures import ProcessPoolExecutor
import os
from pathlib import Path
import platform
import sys
import time

import numpy as np
from scipy import stats as sps

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))  # the repository root: harness/ and chapters/ (the reference comes from pristine("L10.8"))
from chapters.L10_8.judge import stats  # noqa: E402
from harness.subjects.reference import pristine  # noqa: E402
from harness.registry import load_chapter  # noqa: E402
from harness.subjects.open import open_impl  # noqa: E402

CHAPTER = "L10.8"  # the chapter whose statistical test is measured
SUBJECTS = ("reference", "mutant:s06", "mutant:s12")  # a correct verifier (size), the two pitfalls this test catches (power)
EXTRA_LEVELS = (0.01, 0.05, 0.1)  # calibration at levels where a few hundred blocks see rejections
CONFIDENCE = 0.95  # the Clopper-Pearson intervals' level, as the docstring of stats quotes them
BLOCKS = 200  # reference blocks: about 20 rejections at 0.1, enough to check the rates at 0.01-0.1 and the KS uniformity
MUTANT_BLOCKS = 40  # per mutant: 40 of 40 rejected bounds the power below by 0.91 (Clopper-Pearson)
REPLICA_BLOCKS = 20000  # about 20 rejections expected at ALPHA: the size itself, to about +-50% (95% CI)
CHECK_BLOCKS = 3  # blocks 0..2 on which the replica must draw what the reference draws
QUICK = {"blocks": 1, "mutant_blocks": 1, "replica_blocks": 20, "check_blocks": 1}  # the smallest real run: seconds
PROGRESS_EVERY = 50  # harness blocks between progress lines on stderr
CHUNKSIZE = 4  # blocks a pool worker takes at once: few round trips, still balanced over 2 cores
U64 = np.uint64  # PCG32 and splitmix64 are 64-bit unsigned arithmetic, modulo 2^64
_impls: dict = {}  # subject -> its open Impl, one per process (a pool worker opens its own)


# ---- part 1: the harness path ------------------------------------------------------------------

def _impl(subject: str):
    if subject not in _impls:
        _impls[subject] = open_impl(load_chapter(CHAPTER), subject)
    return _impls[subject]


def close_impls() -> None:
    while _impls:
        _impls.popitem()[1].close()


def _block(job: tuple[str, int]) -> tuple[str, int, float, float]:
    """One block's check on one subject (run in a pool worker): (subject, block, p-value, statistic)."""
    subject, block = job
    r = stats.first_token_chi_square(_impl(subject), pristine("L10.8"), block)
    return subject, block, r.p_value, r.statistic


def harness_p_values(n_blocks: dict[str, int], jobs: int) -> tuple[dict, dict]:
    """p-values and statistics of blocks 0..n_blocks[s] for every subject s, over `jobs` processes."""
    work = sorted(((s, b) for s in SUBJECTS for b in range(n_blocks[s] + 1)), key=lambda j: j[1])
    pv: dict[str, dict[int, float]] = {s: {} for s in SUBJECTS}
    st: dict[str, dict[int, float]] = {s: {} for s in SUBJECTS}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, (s, b, p, x) in enumerate(pool.map(_block, work, chunksize=CHUNKSIZE), 1):
            pv[s][b], st[s][b] = p, x
            if i % PROGRESS_EVERY == 0 or i == len(work):
                print(f"  harness: {i}/{len(work)} blocks, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return pv, st


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return float(ci.low), float(ci.high)


def level(p: np.ndarray, alpha: float) -> dict:
    """The rejection rate at `alpha` with its CI, and whether the CI contains alpha."""
    k = int((p <= alpha).sum())
    lo, hi = clopper_pearson(k, p.size)
    return {"alpha": alpha, "rejected": k, "rate": k / p.size, "ci95": [lo, hi], "consistent": lo <= alpha <= hi}


def calibration(p: np.ndarray) -> dict:
    """Rejection rates at ALPHA and the extra levels (95% CIs) and a KS test of uniformity."""
    ks = sps.kstest(p, "uniform")
    return {"blocks": int(p.size), "levels": [level(p, a) for a in (stats.ALPHA, *EXTRA_LEVELS)],
            "ks_uniform": {"statistic": float(ks.statistic), "p_value": float(ks.pvalue)}}


def summarize(subject: str, pv: dict[int, float], st: dict[int, float], blocks: list[int]) -> dict:
    p = np.array([pv[b] for b in blocks])
    at_alpha = level(p, stats.ALPHA)
    out = {"subject": subject, "blocks": len(blocks), "block_range": [blocks[0], blocks[-1]],
           "block0_p_value": pv[0], "block0_statistic": st[0], "block0_rejected": pv[0] <= stats.ALPHA,
           "rejected": at_alpha["rejected"], "rejection_rate": at_alpha["rate"], "ci95": at_alpha["ci95"],
           "p_value_min": float(p.min()), "p_value_median": float(np.median(p)), "p_value_max": float(p.max()),
           "statistic_median": float(np.median([st[b] for b in blocks]))}
    if subject == "reference":
        out["calibration"] = calibration(p)
        out["block0_p_value_rank"] = float((p <= pv[0]).mean())  # where block 0 sits among the others
    return out


def binning(ref) -> dict:
    """The check's bins under the target distribution (stats.chi_square's own binning, which depends
    only on the expected counts), their degrees of freedom and the statistic ALPHA rejects at."""
    p = stats.target_distribution(ref)
    bins = len(stats.chi_square([0] * stats.SEEDS, p).bins)
    return {"bins": bins, "min_expected": float(stats.SEEDS * p.min()), "dof": bins - 1,
            "critical_statistic": float(sps.chi2.isf(stats.ALPHA, bins - 1))}


def verdict_problems(rows: list[dict]) -> list[str]:
    """Block 0 must give the test's verdicts: the reference passes, every mutant is rejected."""
    problems = []
    for r in rows:
        want_rejected = r["subject"] != "reference"
        if r["block0_rejected"] != want_rejected:
            problems.append(f"{r['subject']}: block 0 p = {r['block0_p_value']:.3g}, "
                            f"{'not ' if want_rejected else ''}rejected at ALPHA {stats.ALPHA}")
    return problems


# ---- part 2: the vectorized replica ----------------------------------------------------------------

class VectorPcg32:
    """Pcg32.from_seed for many seeds at once, with the constants of the judge's reference rng."""

    def __init__(self, rng_module) -> None:
        self.mult = U64(rng_module.MULTIPLIER)
        self.inc = U64(((rng_module.DEFAULT_INITSEQ << 1) | 1) & (2**64 - 1))

    def u32s(self, seeds: np.ndarray, n: int) -> np.ndarray:
        """The first n next_u32 of Pcg32.from_seed(s) for every s in seeds: [n, len(seeds)]."""
        with np.errstate(over="ignore"):
            state = (self.inc + seeds.astype(U64)) * self.mult + self.inc  # __init__: step from 0, add the seed, step
            out = []
            for _ in range(n):
                old, state = state, state * self.mult + self.inc
                xorshifted = (((old >> U64(18)) ^ old) >> U64(27)) & U64(0xFFFFFFFF)
                rot = old >> U64(59)
                out.append(((xorshifted >> rot) | (xorshifted << ((U64(32) - rot) & U64(31)))) & U64(0xFFFFFFFF))
        return np.stack(out)


def to_f64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """next_f64 from its two u32 draws a then b: 27 + 26 bits over 2^53."""
    return ((a >> U64(5)).astype(np.float64) * 67108864.0 + (b >> U64(6)).astype(np.float64)) / 9007199254740992.0


def splitmix64(x: np.ndarray) -> np.ndarray:
    """harness.pack.oracle_kit.splitmix64 over a uint64 array (checked against stats.seeds in check_replica)."""
    with np.errstate(over="ignore"):
        z = x.astype(U64) + U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        return z ^ (z >> U64(31))


class Replica:
    """The reference's first token for a block of seeds, vectorized (see the module docstring)."""

    def __init__(self, ref) -> None:
        self.pcg = VectorPcg32(ref.module("rng"))
        self.p = stats.target_distribution(ref)
        self.d = stats.DRAFT[0]
        r = self.p.copy()
        r[self.d] = 0.0
        self.cum = np.cumsum(r / np.cumsum(r)[-1])  # the residual's running sum, as sample() walks it

    def tokens(self, seeds: np.ndarray) -> np.ndarray:
        u = self.pcg.u32s(seeds, 4)  # two uniforms: u_accept, then u_resample (drawn always)
        u_a, u_r = to_f64(u[0], u[1]), to_f64(u[2], u[3])
        resampled = np.minimum(np.searchsorted(self.cum, u_r, side="right"), self.p.size - 1)
        return np.where(u_a < self.p[self.d], self.d, resampled)

    def p_value(self, seeds: np.ndarray) -> float:
        return stats.chi_square(self.tokens(seeds).tolist(), self.p).p_value


def consecutive(b: int) -> np.ndarray:
    """Block b's seeds unmixed, the scheme the check used before (kept as the comparison)."""
    return U64(stats.SEED_BASE + b * stats.SEEDS) + np.arange(stats.SEEDS, dtype=U64)


def mixed(b: int) -> np.ndarray:
    """Block b's seeds as stats.seeds gives them, vectorized (checked in check_replica)."""
    return splitmix64(consecutive(b))


SCHEMES = {"splitmix64": mixed, "consecutive": consecutive}  # the harness's seeding, and the former one for comparison


def _p_values_replica(job: tuple[int, str]) -> np.ndarray:
    """Replica p-values of blocks 1..n under one seeding (run in a pool worker)."""
    n, scheme = job
    rep, seeds_of = Replica(pristine("L10.8")), SCHEMES[scheme]
    return np.array([rep.p_value(seeds_of(b)) for b in range(1, n + 1)])


def check_replica(ref, blocks: int) -> list[str]:
    """Problems, if any: the vectorized seeds must be the harness's, and the replica must draw what
    the reference draws through the harness, on blocks 0..blocks-1."""
    rep, problems = Replica(ref), []
    for b in range(blocks):
        harness_seeds = stats.seeds(b)
        if mixed(b).tolist() != harness_seeds:
            problems.append(f"the bench's splitmix64 seeds differ from stats.seeds({b}): fix the bench")
            continue
        got = rep.tokens(np.array(harness_seeds, dtype=U64)).tolist()
        if got != stats.first_tokens(_impl("reference"), ref, b):
            problems.append(f"the replica differs from the reference on block {b}: the replica is wrong, not measuring")
    return problems


def replica_size(n: int, jobs: int) -> dict[str, dict]:
    """Calibration of the replica's p-values over blocks 1..n under every seeding."""
    with ProcessPoolExecutor(max_workers=min(jobs, len(SCHEMES))) as pool:
        p = dict(zip(SCHEMES, pool.map(_p_values_replica, [(n, s) for s in SCHEMES])))
    ref = Replica(pristine("L10.8"))
    return {"blocks": n, "harness_scheme": "splitmix64",
            **{s: calibration(p[s]) for s in SCHEMES},
            "block0_reference_p_value": {s: ref.p_value(SCHEMES[s](0)) for s in SCHEMES}}


# ---- report ---------------------------------------------------------------------------------------

def print_subjects(rows: list[dict], bins: dict, wall: float, jobs: int) -> None:
    print(f"\nchi-square check: {stats.SEEDS} seeds per block, ALPHA = {stats.ALPHA}, prompt lookup k {stats.K} "
          f"on the fake target (V {stats.VOCAB}); blocks 1..N (block 0 is the test's)")
    print(f"{bins['bins']} bins (smallest expected count {bins['min_expected']:.0f}), {bins['dof']} degrees of freedom: "
          f"p <= ALPHA means chi-square >= {bins['critical_statistic']:.1f}")
    print(f"\npart 1, through the harness ({wall:.0f} s on {jobs} workers)\n")
    print(f"{'subject':<12} {'blocks':>6} {'rejected':>8} {'rate':>8} {'95% CI (Clopper-Pearson)':>26} "
          f"{'block-0 p':>10} {'block-0 chi2':>12} {'median p':>9} {'max p':>9}")
    for r in rows:
        ci = f"[{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
        print(f"{r['subject']:<12} {r['blocks']:>6} {r['rejected']:>8} {r['rejection_rate']:>8.4f} {ci:>26} "
              f"{r['block0_p_value']:>10.3g} {r['block0_statistic']:>12.4g} {r['p_value_median']:>9.3g} {r['p_value_max']:>9.3g}")


def print_calibration(c: dict, indent: str = "  ") -> None:
    ks = c["ks_uniform"]
    print(f"{indent}KS test of the p-values against U(0, 1): D = {ks['statistic']:.4f}, p = {ks['p_value']:.3g}")
    for lv in c["levels"]:
        print(f"{indent}at alpha {lv['alpha']:<6}: rejected {lv['rejected']:>5} of {c['blocks']} = {lv['rate']:.5f}, "
              f"95% CI [{lv['ci95'][0]:.5f}, {lv['ci95'][1]:.5f}]{'' if lv['consistent'] else '  <- excludes alpha'}")


def print_reference(ref_row: dict) -> None:
    print(f"\nreference calibration over blocks 1..{ref_row['blocks']}:")
    print_calibration(ref_row["calibration"])
    print(f"  block 0 (the test's) p = {ref_row['block0_p_value']:.3g}; "
          f"{ref_row['block0_p_value_rank']:.0%} of the other blocks have a smaller p")


def print_replica(replica: dict) -> None:
    print(f"\npart 2, the vectorized replica (token-identical to the reference through the harness on blocks "
          f"{replica['checked_against_reference_on_blocks']}, the harness's seeds), blocks 1..{replica['blocks']} "
          f"({replica['wall_s']:.0f} s)")
    labels = {"splitmix64": "splitmix64 (stats.seeds, what the test uses)",
              "consecutive": "consecutive (unmixed, the former scheme; the comparison)"}
    for scheme in SCHEMES:
        print(f"  seeds {labels[scheme]}:")
        print_calibration(replica[scheme], "    ")
        print(f"    block 0 (the test's) reference p = {replica['block0_reference_p_value'][scheme]:.3g}")


# ---- main ---------------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=BLOCKS, help=f"reference blocks 1..N through the harness (default {BLOCKS})")
    ap.add_argument("--mutant-blocks", type=int, default=MUTANT_BLOCKS, help=f"blocks 1..M per mutant through the harness (default {MUTANT_BLOCKS})")
    ap.add_argument("--replica-blocks", type=int, default=REPLICA_BLOCKS, help=f"blocks for the replica's size, 0 to skip (default {REPLICA_BLOCKS})")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: every core)")
    add_common(ap, "chi_square_power", ", ".join(f"{k} {v}" for k, v in QUICK.items()))
    a = ap.parse_args()
    a.check_blocks = CHECK_BLOCKS
    if a.quick:
        for k, v in QUICK.items():
            setattr(a, k, v)
    if a.blocks < 1 or a.mutant_blocks < 1 or a.replica_blocks < 0 or a.jobs < 1:
        ap.error("--blocks, --mutant-blocks and --jobs must be >= 1, --replica-blocks >= 0")
    a.out = out_path(a, "chi_square_power")
    return a


def main() -> int:
    a = parse_args()
    ref = pristine("L10.8")
    n_blocks = {s: a.blocks if s == "reference" else a.mutant_blocks for s in SUBJECTS}
    t0 = time.perf_counter()
    pv, st = harness_p_values(n_blocks, a.jobs)
    wall1 = time.perf_counter() - t0
    rows = [summarize(s, pv[s], st[s], list(range(1, n_blocks[s] + 1))) for s in SUBJECTS]
    problems = verdict_problems(rows)

    replica = None
    if a.replica_blocks:
        t1 = time.perf_counter()
        try:
            replica_problems = check_replica(ref, a.check_blocks)
        finally:
            close_impls()
        problems += replica_problems
        if not replica_problems:
            replica = {"checked_against_reference_on_blocks": list(range(a.check_blocks)),
                       **replica_size(a.replica_blocks, a.jobs), "wall_s": time.perf_counter() - t1}

    bins = binning(ref)
    print_subjects(rows, bins, wall1, a.jobs)
    print_reference(rows[0])
    if replica:
        print_replica(replica)
    out = {"seeds_per_block": stats.SEEDS, "alpha": stats.ALPHA, "jobs": a.jobs, "harness_wall_s": wall1, "quick": a.quick,
           "python": platform.python_version(), "machine": platform.machine(),
           "command": "python bench/chi_square_power.py " + " ".join(sys.argv[1:]),
           "binning": bins, "subjects": rows, "replica": replica, "problems": problems,
           "p_values": {s: [pv[s][b] for b in sorted(pv[s])] for s in SUBJECTS}}
    write_figures(a.out, out, indent=1)
    print(f"\nwrote {a.out}")
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
