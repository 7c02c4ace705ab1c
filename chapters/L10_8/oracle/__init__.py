"""Golden cases for chapter L10.8 (speculative decoding): what the Python reference answers.

Writes `chapters/L10_8/fixtures/spec_golden.json` (format: `fixtures/README.md` and
`fixtures/spec_golden.schema.json` of the chapter pack) from the reference's `infer.spec`:

* `verify`        128 cases of `verify_draft` (tokens, logprobs, n_accepted, the next u32), the last 8 precision probes (verify_probes),
* `prompt_lookup` 150 cases of `prompt_lookup`,
* `ngram`          40 cases of `ngram_draft`,
* `generate`       18 greedy generations on the chapter's fake target (tokens, cached positions),
* `rollback`       12 cases of `rollback` on the reference's KvPool (released, fills left).

Randomness. Everything comes from ONE master seed (`MASTER_SEED`). Case number `i` of section `s`
draws from its own reference `Pcg32`, seeded by a splitmix64 mix of (master seed, section code, i)
(harness.pack.oracle_kit.Rand): no numpy random generator (its streams may change between numpy
versions), no `hash()`, no clock, no dependence on dict or set order. Normal-ish logits are
Irwin-Hall sums of four uniforms (pure float64 additions, exact on every platform), rounded to
float32. What a case *is* (its kind, draft length, planned acceptances, vocabulary, active
sampling knobs, flavours) is fixed per position by the plans (verify_plan, draft_cases) and never
depends on the seed; only the numbers do. So `build(ref, other_seed)` gives fresh cases of the
same design, with the same ids and the same kinds at the same positions, and every property the
build asserts (planned acceptances, `shows:s04` on the constructed penalty cases, ...) holds for
any seed: rows are *constructed* against the uniforms the case's own seed will draw, not found by
luck. `generate` draws nothing: its requests are the chapter test's, on the fake target's fixed rows.

Pitfalls. For every case the oracle also runs small local variants of the reference with one
chapter pitfall each (`sNN`, chapter section 5) and, when the variant's answer differs from the
reference's, tags the case `shows:sNN` and records the answer in the case's `pitfalls` object
(the grader's pitfall hints compare a submission's answers with these, re-running no mutant):
for `verify` {tokens, n_accepted, next_u32}; for the drafts the draft; for `generate` {tokens,
cached}; for `rollback` {released, fills}; "refused" when the reference's own objects refuse the
variant (the fake target's KV budget, the pool's fill bound). verify runs s04..s09 and s12, prompt
lookup s01 and s02, n-gram s03, generate s01..s12 (its loop carries the drafts and the verifier),
rollback s13. The build asserts the tags name exactly the recorded pitfalls, and that s04, s07, s09
show on >= 10 cases, s01, s02, s03, s13 on >= 5 and s10, s11 on >= 3 (common.MUST_SHOW).

Robust to the last bit. A port's exp may differ from numpy's in the last ulp. Every sampling
decision of a verify case (running sums against a uniform, the accept ratio, the top_p cut, the
min_p floor, the rank, the residual's signs), of the reference and of each pitfall variant, keeps
a margin of at least margins.N_MARGIN units of roundoff (16452 u, twice the worst error bound of
a one-ulp exp through V = 512 terms); a case closer than that is built again from its next
numbers. So tokens, n_accepted and the next u32 are bit-exact in any honest port, and the
pitfall answers too; only logprobs carry a tolerance (spec/sampling.md, section 10).

The parts: common (seed, counts, pitfall lists, tag vocabularies, the reference's modules bound
once per build), verify_plan, verify_builder and verify_cases (the verify section), margins (the
decisions' margins, and the error bound behind N_MARGIN), draft_cases
(the two drafts), generate_cases, rollback_cases, document (build, canonical bytes, load, check).
`ref` below is a harness.subjects.reference.Reference, e.g. `harness.subjects.reference.pristine("L10.8")`.

Usage, from the repository root:
    python -m chapters.L10_8.oracle                 # write the fixture
    python -m chapters.L10_8.oracle --check         # exit 1 (and say where) if it differs
    python -m chapters.L10_8.oracle --out PATH [--seed N]
As a module: build(ref, master_seed) -> dict, dumps(doc) -> bytes, load(path) -> dict,
write(path, ref, master_seed) -> bytes, check(path, ref) -> str | None, tag_counts(doc).
"""

from .common import (
    GENERATE_BUGS,
    GENERATE_TAGS,
    KNOBS,
    MASTER_SEED,
    NGRAM_BUGS,
    NGRAM_TAGS,
    PROMPT_LOOKUP_BUGS,
    PROMPT_LOOKUP_TAGS,
    Q_DENOM,
    REFUSED,
    ROLLBACK_BUGS,
    ROLLBACK_TAGS,
    VERIFY_BUGS,
    VERIFY_TAGS,
    RefLib,
    bind,
    shown,
)
from .document import DEFAULT_OUT, GENERATOR, SECTIONS, build, check, dumps, load, tag_counts, write
from .margins import N_MARGIN, Margins
from .verify_cases import run_reference, run_variant, worst_margin

__all__ = [
    "MASTER_SEED", "build", "dumps", "load", "check", "tag_counts", "write", "DEFAULT_OUT", "GENERATOR", "SECTIONS",
    "KNOBS", "Q_DENOM", "VERIFY_TAGS", "PROMPT_LOOKUP_TAGS", "NGRAM_TAGS", "GENERATE_TAGS", "ROLLBACK_TAGS",
    "VERIFY_BUGS", "PROMPT_LOOKUP_BUGS", "NGRAM_BUGS", "GENERATE_BUGS", "ROLLBACK_BUGS", "REFUSED",
    "RefLib", "bind", "shown", "run_reference", "run_variant", "worst_margin", "N_MARGIN", "Margins",
]
