"""What the parts of the L10.8 oracle share: the seed, the case counts, the pitfalls each section runs,
the tag vocabularies, and the reference's modules bound once per build."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Sequence

from harness.pack import Rand

# REFUSED (a variant the reference's own objects refuse), ANSWER_KEYS (a recorded answer's key order) and KNOBS
# (a verify case's params): one definition, the case schema's, so what the oracle records and what the tests
# record cannot drift apart
from chapters.L10_8.cases import ANSWER_KEYS, KNOBS, REFUSED  # noqa: F401

MASTER_SEED = 0x4C31302E38  # = 327242755640, the ASCII bytes of "L10.8"; the ONLY source of randomness

N_VERIFY = 128  # the chapter's section 4 promises 120 verification cases; 8 precision probes follow them
N_PROMPT_LOOKUP = 150  # ... and 150 prompt-lookup contexts
N_NGRAM = 40  # enough n-gram contexts for every kind below, several times over
N_ROLLBACK = 12  # one rollback case per kind of rollback_cases' plan (the kinds need 12 positions)
Q_DENOM = 4096  # draft probabilities are multiples of 1/4096 summing to exactly 1 (exact in any parser)

PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")
# the chapter pitfalls (section 5) a verify case can show: those of verify_draft
VERIFY_BUGS = ("s04", "s05", "s06", "s07", "s08", "s09", "s12")
PROMPT_LOOKUP_BUGS = ("s01", "s02")  # those of prompt_lookup
NGRAM_BUGS = ("s03",)  # that of ngram_draft
LOOP_BUGS = ("s10", "s11")  # those of the generation loop itself (truncate, draft budget)
# a generation runs every pitfall but s13 (the fake target has no block pool): drafts, verifier, loop
GENERATE_BUGS = tuple(sorted(PROMPT_LOOKUP_BUGS + NGRAM_BUGS + VERIFY_BUGS + LOOP_BUGS))
ROLLBACK_BUGS = ("s13",)  # that of rollback
# the least number of cases each pitfall must show on, for any master seed (the chapter's tests and
# the grader's pitfall hints, which want at least 3 showing cases, rely on them)
MUST_SHOW = {"s04": 10, "s07": 10, "s09": 10, "s01": 5, "s02": 5, "s03": 5, "s10": 3, "s11": 3, "s13": 5}
# each section's code in the per-case seed mix (harness.pack.oracle_kit.case_seed); `generate` draws
# nothing (its requests are the chapter test's), so it has no code
SECTION_CODE = {"verify": 1, "prompt_lookup": 2, "ngram": 3, "rollback": 5}

# ---- the fixed tag vocabulary (documented in fixtures/README.md; enumerated in the schema) ----

VERIFY_TAGS = (
    "greedy", "sampled",
    *KNOBS,
    *(f"alone:{k}" for k in KNOBS),
    "combo", "penalized", "unpenalized", "greedy_ignores_truncation",
    *(f"draft_len:{m}" for m in range(9)),
    "vocab:small", "vocab:medium", "vocab:large",
    "deterministic_draft", "stochastic_draft",
    "no_draft", "full_accept", "reject_first", "agree_then_diverge", "several_then_reject",
    "output_empty", "output_nonempty", "prompt_empty",
    "penalty_sees_accepted", "argmax_tie", "neg_inf", "neg_inf_draft", "single_finite_row",
    "truncated_draft", "seed_high", "seed_edge", "probe:accept", "probe:residual",
    *(f"shows:{b}" for b in VERIFY_BUGS),
)
PROMPT_LOOKUP_TAGS = (
    "hand_example", "periodic", "random_repeats", "no_match", "recent_wins", "backoff", "long_ctx",
    "single_n", "ngram_ge_ctx", "empty_ctx", "into_suffix", "end_truncated", "full_k", "empty_draft",
    "shows:s01", "shows:s02",
)
NGRAM_TAGS = (
    "n_one", "tie", "backoff", "stop", "periodic", "random", "empty_draft", "counts_drafted",
    "shows:s03",
)
GENERATE_TAGS = (
    "draft:none", "draft:ngram", "draft:prompt_lookup", "drafted", "rejected", "fewer_passes",
    *(f"shows:{b}" for b in GENERATE_BUGS),
)
ROLLBACK_TAGS = (
    "hand_example", "keep_zero", "keep_all", "aligned", "partial_last", "single_block",
    "release_none", "release_some", "release_all",
    "shows:s13",
)


def order_tags(tags: set[str], vocab: Sequence[str]) -> list[str]:
    """The tags in vocabulary order; a tag outside the vocabulary is a bug of the oracle."""
    unknown = tags - set(vocab)
    assert not unknown, f"tags outside the vocabulary: {sorted(unknown)}"
    return [t for t in vocab if t in tags]


class Retry(Exception):
    """This attempt at constructing a case failed; try again with the next numbers."""


@dataclass(frozen=True)
class RefLib:
    """The reference's modules the oracle uses, bound once (from a harness.subjects.reference.Reference)."""

    spec: ModuleType
    sampling: ModuleType
    rng: ModuleType
    kv: ModuleType
    source: Any  # the Reference itself, for the judge helpers that take one (the fake target)

    def params(self, d: dict):
        """The SamplingParams of a case's `params` object."""
        return self.sampling.SamplingParams(**{k: d[k] for k in KNOBS})

    def generator(self, seed: int):
        """A request's generator, as the reference makes it."""
        return self.rng.Pcg32.from_seed(seed)

    def rand(self, master_seed: int, section: str, index: int) -> Rand:
        """The case generator of case `index` of `section`."""
        return Rand(self.rng.Pcg32, master_seed, SECTION_CODE[section], index)


def bind(ref) -> RefLib:
    """The modules of `ref` (a harness.subjects.reference.Reference) the oracle calls."""
    return RefLib(ref.module("infer.spec"), ref.module("infer.sampling"), ref.module("rng"), ref.module("kv"), ref)


def shown(tags: Sequence[str]) -> set[str]:
    """The pitfall ids a case's `shows:sNN` tags name."""
    return {t[len("shows:"):] for t in tags if t.startswith("shows:")}
