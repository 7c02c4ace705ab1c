"""One slip, one cost, whatever the seed (bench/seed_stability.py runs every row on 40 seeds): a few mutants,
s07's among them (whose score once moved between 14 and 15 with the grading seed), fail the same tests on a few
grading seeds, the shipped cases' included."""

import pytest

from harness.check.golden import fresh_golden
from harness.check.runner import CheckOptions, run_check
from harness.registry import load_chapter

SEEDS = (None, 1, 2)  # None: the shipped cases
SUBJECTS = ("mutant:s07", "mutant:s01", "mutant:s05")


def _failing(subject: str, seed: int | None, tmp_path) -> tuple[str, ...]:
    chapter = load_chapter("L10.8")
    golden = None if seed is None else str(fresh_golden(chapter, seed, tmp_path))
    rep = run_check(chapter, subject, CheckOptions(golden=golden, fresh_seed=seed))
    return tuple(sorted(t.name for t in rep.tests if not t.outcome.passed))


@pytest.mark.slow(s=150)
@pytest.mark.parametrize("subject", SUBJECTS)
def test_a_slip_fails_the_same_tests_on_every_seed(subject, tmp_path):
    got = {seed: _failing(subject, seed, tmp_path) for seed in SEEDS}
    assert len(set(got.values())) == 1, f"{subject}'s failing tests vary with the grading seed: {got}"
    assert got[None], f"{subject} should fail some test"
