"""The statistical check behind `sampled_spec_keeps_the_target_distribution`.

What it does. For each of SEEDS fixed seeds, the first round of sampled speculative generation
(prompt lookup, k 3, temperature 1) on the fake target from PROMPT: prompt lookup drafts DRAFT =
[3 1 2], the target scores PROMPT + DRAFT, and verify_draft runs with Pcg32.from_seed(seed); the
first emitted token is counted (one batch call, `verify_first_tokens`; a unit test checks it equals
generate_stream's first token seed by seed). Under a correct verifier that token follows the
target's distribution p = softmax(row after PROMPT) exactly, whatever the draft proposed (chapter
section 2.3). DRAFT's first token has middling probability, so rejections are common and a wrong
residual shows.

Statistic. Pearson's chi-square goodness of fit (scipy.stats.chisquare's statistic and p-value, `pearson`:
the p-value is scipy.special.chdtrc, without importing scipy.stats, half a second of every check) of the observed counts
against SEEDS * p. Bins: every token with expected count >= MIN_EXPECTED is its own bin; tokens
below that are pooled into one bin (merged into the smallest bin if the pool itself is below
MIN_EXPECTED). Verdict: pass when the p-value > ALPHA. Deterministic: fixed seeds, no flakiness.

Measured size and power (bench/chi_square_power.py with its defaults; disjoint blocks of 4000
seeds, block b = seeds(b) = splitmix64(SEED_BASE + b * SEEDS + i), blocks 1..N so block 0, the
test's, is left out). Every token's expected count is >= 54, so the statistic has 16 bins, one per
token, and 15 degrees of freedom: p <= ALPHA means chi-square >= 37.7.
    block 0       the reference's p-value is 0.777 (chi-square 10.6), far from ALPHA; every correct
                  port draws what the reference draws, so it sees the same. s06 gives p = 0
                  (chi-square ~1.8e4), s12 p = 1.2e-43 (chi-square 245).
    power         s06 (residual |p - q|) rejected in 40 of 40 blocks, s12 (resample from p) in
                  40 of 40 (each 95% Clopper-Pearson CI [0.912, 1]); the largest p-value seen for
                  s12 was 1.2e-23.
    size          the reference, through the harness, rejected in 1 of 200 blocks at ALPHA (rate
                  0.005, 95% Clopper-Pearson CI [0.00013, 0.028], which contains 1e-3; KS test of
                  its 200 p-values against U(0, 1): D = 0.058, p = 0.49). A vectorized replica of
                  the reference's first token (token-identical to it through the harness on blocks
                  0..2) over 20000 blocks: 16 rejections, rate 0.0008, CI [0.00046, 0.0013]; at
                  0.01 / 0.05 / 0.1 the rates are 0.0109 / 0.0505 / 0.1002, each CI containing its
                  level; KS test of the p-values against U(0, 1): D = 0.0035, p = 0.97. The check
                  is calibrated: a correct verifier fails about 1 seed set in 1000.
    why mixed     with the former consecutive seeds SEED_BASE + b * SEEDS + i the replica rejects
                  at 0.00245 (49 of 20000, CI [0.0018, 0.0032]; KS p = 4e-7), about 2.5 x ALPHA,
                  because their Pcg32.from_seed states differ by the multiplier and the first
                  uniforms of neighbouring seeds are correlated; splitmix64 in front removes that.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import chdtrc  # the chi-square survival function, which scipy.stats.chisquare's p-value is

from harness.pack import load_chapter, remembered, splitmix64, version_of

from .fake_target import FakeTarget
from ..oracle.common import MASTER_SEED
from .requests import VOCAB  # the fake target's vocabulary, the generation tests'

SEEDS = 4000  # the chapter's number: enough to see a 0.03 shift in one bin's probability
ALPHA = 1e-3  # the chapter's threshold: a correct verifier fails about 1 run in 1000 over random seed sets
MIN_EXPECTED = 5.0  # the usual rule for Pearson's approximation to hold in every bin
PROMPT = [1, 2, 3, 1, 2]  # prompt lookup drafts [3 1 2]: what followed [1 2] at position 0
K = 3
DRAFT = [3, 1, 2]  # what prompt lookup drafts after PROMPT with k K (checked against the judge's prompt_lookup in tests)
PARAMS = {"temperature": 1.0}
SEED_BASE = 0x5EED_0000_0000  # block b's seeds are splitmix64(SEED_BASE + b * SEEDS + i), i < SEEDS


def first_u32(ref, seed: int) -> int:
    return ref.module("rng").Pcg32.from_seed(seed).next_u32()


def target_distribution(ref) -> np.ndarray:
    """p: the target's distribution after PROMPT, from the judge's pristine sampler."""
    sampling = ref.module("infer.sampling")
    row = FakeTarget(ref, VOCAB).row_after(PROMPT)
    params = sampling.SamplingParams(**PARAMS)
    return sampling.distribution(sampling.apply_penalties(row, params, PROMPT, []), params)


def seeds(block: int = 0) -> list[int]:
    """Block b's seeds: splitmix64(SEED_BASE + b * SEEDS + i). Raw consecutive seeds would give
    Pcg32.from_seed states a multiplier apart, whose first uniforms are correlated (measured: the
    check then rejects a correct verifier at about 2.5 x ALPHA); mixed, they are not."""
    start = SEED_BASE + block * SEEDS
    return [splitmix64(start + i) for i in range(SEEDS)]


def first_tokens(impl, ref, block: int = 0) -> list[int]:
    """The first emitted token of each seed's first round. Prompt lookup drafts DRAFT after PROMPT
    (k = K), the target scores PROMPT + DRAFT, and verify_draft runs once per seed on those rows:
    exactly the first round of generate(prompt lookup, k K) on the fake target, in one batch call."""
    target = FakeTarget(ref, VOCAB)
    rows = target.extend(PROMPT + DRAFT)[len(PROMPT) - 1:]  # the rows scoring each draft position and the bonus
    return [int(t) for t in impl.verify_first_tokens([r.tolist() for r in rows], DRAFT, None, PARAMS, PROMPT, [], seeds(block))]


@dataclass
class ChiSquare:
    statistic: float
    p_value: float
    bins: list[tuple[str, int, float]]  # (label, observed, expected)

    def explain(self) -> str:
        worst = sorted(self.bins, key=lambda b: -((b[1] - b[2]) ** 2 / b[2]))[:4]
        rows = "\n".join(f"    token {label:>8}: observed {o:5d}, expected {e:8.1f}" for label, o, e in worst)
        return (f"over {SEEDS} seeds the first token does not follow the target's distribution: chi-square {self.statistic:.1f}, "
                f"p-value {self.p_value:.3g} <= {ALPHA}. Worst bins:\n{rows}\n"
                "Accept-or-resample must keep p exactly: accept d with probability min(1, p(d)/q(d)), "
                "otherwise sample the residual normalize(max(0, p - q)).")


def chi_square(tokens: list[int], p: np.ndarray) -> ChiSquare:
    n = len(tokens)
    observed = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=p.size).astype(float)
    if observed.size > p.size:  # a token outside the vocabulary: put it where it can only hurt
        p = np.concatenate([p, np.zeros(observed.size - p.size)])
    expected = n * p
    big = expected >= MIN_EXPECTED
    bins = [(str(i), int(observed[i]), float(expected[i])) for i in np.flatnonzero(big)]
    rest_o, rest_e = float(observed[~big].sum()), float(expected[~big].sum())
    if rest_e >= MIN_EXPECTED:
        bins.append(("(pooled)", int(rest_o), rest_e))
    elif rest_o or rest_e:
        label, o, e = min(bins, key=lambda b: b[2])
        bins[bins.index((label, o, e))] = (label + "+pooled", int(o + rest_o), e + rest_e)
    if any(o > 0 and e == 0 for _, o, e in bins):  # impossible tokens were emitted
        return ChiSquare(float("inf"), 0.0, bins)
    stat, pv = pearson([o for _, o, _ in bins], [e for _, _, e in bins])
    return ChiSquare(stat, pv, bins)


def pearson(observed, expected) -> tuple[float, float]:
    """Pearson's chi-square statistic and its p-value over len(bins) - 1 degrees of freedom: what
    scipy.stats.chisquare(observed, expected) returns (staff_tests/test_spec_properties.py checks it is)."""
    o, e = np.asarray(observed, dtype=float), np.asarray(expected, dtype=float)
    stat = float(((o - e) ** 2 / e).sum())
    return stat, float(chdtrc(o.size - 1, stat))


def block_of(grading_seed: int, reference, ref) -> int:
    """The block of seeds a check uses: block 0 for the shipped cases' public seed (MASTER_SEED), else one the grading
    seed picks, so that no table of the shipped check's calls answers a graded one. A correct port draws exactly
    what the reference draws, so it sees the reference's own p-value on the block: a block where the reference
    itself falls at or below ALPHA (about 1 in 1000) is passed over for the next, and no correct port ever fails."""
    if grading_seed == MASTER_SEED:
        return 0

    def first_the_reference_passes() -> int:
        block = 1 + splitmix64(grading_seed) % 2**40
        while first_token_chi_square(reference, ref, block).p_value <= ALPHA:
            block += 1
        return block

    # Kept on disk by its grading seed and the harness's version (harness.kernel.memo): the reference's SEEDS verify
    # calls cost 1.5 to 3 s of every check of a fresh seed, and a class graded on one seed pays them once, not once
    # a submission (each is judged in its own process).
    digest = version_of(load_chapter("L10.8"))["digest"]
    return remembered("chi-square-block", f"L10.8 chi-square block, grading seed {grading_seed}, harness {digest}",
                      first_the_reference_passes)


def first_token_chi_square(impl, ref, block: int = 0) -> ChiSquare:
    return chi_square(first_tokens(impl, ref, block), target_distribution(ref))
