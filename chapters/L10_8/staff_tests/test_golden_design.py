"""The L10.8 golden fixture's case design (d): the tags its design needs, on the committed file and on
fresh seeds, and the draft pitfalls' tags confirmed by independent re-implementations. (a) to (c) are
test_golden.py's."""

import json
from collections import Counter
from pathlib import Path

import pytest

from chapters.L10_8 import oracle
from chapters.L10_8.oracle import document
from harness.pack import pristine

PACK = Path(__file__).resolve().parents[1]  # the chapter pack chapters/L10_8
FIXTURE = PACK / "fixtures" / "spec_golden.json"
REF = pristine("L10.8")  # the judge's pristine reference, loaded by path
RAW = FIXTURE.read_bytes()
DOC = oracle.load(FIXTURE)
V_CASES, PL_CASES, NG_CASES = DOC["verify"], DOC["prompt_lookup"], DOC["ngram"]
PITFALLS = [f"s{i:02d}" for i in range(1, 14)]  # the chapter's section 5 table, s01..s13


# ---- (d) the case design ---------------------------------------------------------------------------

REQUIRED_VERIFY_TAGS = [
    "greedy", "sampled", "penalized", "unpenalized", "combo",
    *(f"alone:{k}" for k in oracle.KNOBS),
    *(f"draft_len:{m}" for m in range(9)),
    "deterministic_draft", "stochastic_draft", "no_draft", "full_accept", "reject_first",
    "agree_then_diverge", "several_then_reject", "output_nonempty", "penalty_sees_accepted",
    "argmax_tie", "neg_inf", "neg_inf_draft", "truncated_draft", "seed_high", "seed_edge",
    "greedy_ignores_truncation", "probe:accept", "probe:residual",
]
REQUIRED_VERIFY_COMBOS = [  # kinds that need two tags on the same case
    ("greedy", "penalized"), ("greedy", "unpenalized"), ("greedy", "full_accept"),
    ("greedy", "agree_then_diverge"), ("greedy", "argmax_tie"), ("greedy", "neg_inf"),
    ("sampled", "full_accept"), ("sampled", "agree_then_diverge"), ("sampled", "several_then_reject"),
    ("sampled", "stochastic_draft"), ("sampled", "no_draft"), ("sampled", "neg_inf_draft"),
    ("sampled", "argmax_tie"), ("penalized", "output_nonempty"), ("stochastic_draft", "full_accept"),
    ("stochastic_draft", "agree_then_diverge"), ("stochastic_draft", "reject_first"),
]
REQUIRED_PL_TAGS = ["hand_example", "periodic", "random_repeats", "no_match", "recent_wins", "backoff",
                    "long_ctx", "single_n", "ngram_ge_ctx", "empty_ctx", "into_suffix", "end_truncated",
                    "full_k", "empty_draft"]
REQUIRED_NG_TAGS = ["n_one", "tie", "backoff", "stop", "empty_draft", "counts_drafted"]
REQUIRED_R_TAGS = ["hand_example", "keep_zero", "keep_all", "aligned", "partial_last", "single_block",
                   "release_none", "release_some", "release_all"]  # the chapter's rollbacks: partial, full, keep 0
# every pitfall on at least 3 cases (what a pitfall hint needs); the constructed ones on more
MIN_SHOWS = {**{b: 3 for b in PITFALLS}, "s01": 5, "s02": 5, "s03": 5, "s04": 5, "s07": 5, "s09": 5, "s13": 5}


def _design_problems(doc: dict) -> list[str]:
    problems = []
    per = {s: Counter(t for c in doc[s] for t in c["tags"]) for s in document.SECTIONS}
    tags_of = lambda s: [set(c["tags"]) for c in doc[s]]  # noqa: E731
    if len(doc["verify"]) != 128 or len(doc["prompt_lookup"]) != 150 or len(doc["ngram"]) < 30:
        problems.append("case counts")
    for t in REQUIRED_VERIFY_TAGS:
        if per["verify"][t] == 0:
            problems.append(f"verify: no case tagged {t}")
    for combo in REQUIRED_VERIFY_COMBOS:
        if not any(set(combo) <= ts for ts in tags_of("verify")):
            problems.append(f"verify: no case tagged {' + '.join(combo)}")
    for t in REQUIRED_PL_TAGS:
        if per["prompt_lookup"][t] == 0:
            problems.append(f"prompt_lookup: no case tagged {t}")
    for t in REQUIRED_NG_TAGS:
        if per["ngram"][t] == 0:
            problems.append(f"ngram: no case tagged {t}")
    for t in REQUIRED_R_TAGS:
        if per["rollback"][t] == 0:
            problems.append(f"rollback: no case tagged {t}")
    all_tags = sum(per.values(), Counter())
    for bug, least in MIN_SHOWS.items():
        if all_tags[f"shows:{bug}"] < least:
            problems.append(f"shows:{bug} on {all_tags[f'shows:{bug}']} cases, need >= {least}")
    for ts in tags_of("verify"):
        if "penalty_sees_accepted" in ts and "shows:s04" not in ts:
            problems.append("a penalty_sees_accepted case does not show s04")
    # read off the data, not the tags
    lens = {len(c["draft"]) for c in doc["verify"]}
    if lens != set(range(9)):
        problems.append(f"draft lengths {sorted(lens)}, need exactly 0..8")
    vocabs = {len(c["rows"][0]) for c in doc["verify"]}
    if min(vocabs) != 3 or max(vocabs) != 512:
        problems.append(f"vocabularies {min(vocabs)}..{max(vocabs)}, need 3 and 512")
    if not any(c["seed"] >= 2**63 for c in doc["verify"]) or not any(c["seed"] < 2**63 for c in doc["verify"]):
        problems.append("seeds on both sides of 2^63")
    ks = {c["k"] for c in doc["prompt_lookup"]}
    if not set(range(1, 17)) <= ks:
        problems.append(f"prompt_lookup k values {sorted(ks)}, need 1..16")
    if not any(c["min_ngram"] == c["max_ngram"] for c in doc["prompt_lookup"]):
        problems.append("no prompt lookup with min_ngram == max_ngram")
    if not any(c["max_ngram"] >= len(c["ctx"]) for c in doc["prompt_lookup"]):
        problems.append("no prompt lookup with n >= len(ctx)")
    if not any(len(c["ctx"]) >= 1000 for c in doc["prompt_lookup"]):
        problems.append("no long prompt-lookup context")
    if not any(c["expect"] == [] for c in doc["prompt_lookup"]):
        problems.append("no empty prompt-lookup draft")
    for s in document.SECTIONS:
        for c in doc[s]:
            if oracle.shown(c["tags"]) != set(c["pitfalls"]):
                problems.append(f"{c['id']}: shows:sNN tags {sorted(oracle.shown(c['tags']))} != pitfalls {sorted(c['pitfalls'])}")
    if [(c["prompt"], c["cfg"]["draft"], c["budget"] is not None) for c in doc["generate"]] != [
            (p, d, b) for p in ([1, 2, 3, 4, 5], [3, 3, 3, 3], [9, 1, 9, 1, 9, 2]) for d in ("none", "ngram", "prompt_lookup")
            for b in (False, True)]:
        problems.append("generate: not the requests of greedy_spec_equals_greedy_without_spec")
    ids = [c["id"] for s in document.SECTIONS for c in doc[s]]
    want = ([f"v{i:03d}" for i in range(128)] + [f"pl{i:03d}" for i in range(150)]
            + [f"ng{i:03d}" for i in range(len(doc["ngram"]))] + [f"g{i:03d}" for i in range(18)]
            + [f"r{i:03d}" for i in range(len(doc["rollback"]))])
    if ids != want:
        problems.append("ids are not v000.., pl000.., ng000.., g000.., r000.. in order")
    return problems


def test_case_design_of_the_fixture():
    problems = _design_problems(json.loads(RAW))
    assert not problems, problems


@pytest.mark.parametrize("seed", [1, 2**64 - 1])
def test_case_design_holds_for_a_fresh_seed(seed):
    """Fresh grading cases come from build(other_seed): same ids and kinds, same guarantees."""
    doc = oracle.build(REF, seed)
    assert doc["master_seed"] == seed
    problems = _design_problems(doc)
    assert not problems, problems
    base = json.loads(RAW)
    for s in document.SECTIONS:
        assert [c["id"] for c in doc[s]] == [c["id"] for c in base[s]]
    assert doc["generate"] == base["generate"]  # the fake target's requests draw nothing from the seed
    # the planned structure is per position: draft length and k do not depend on the seed
    assert [len(c["draft"]) for c in doc["verify"]] == [len(c["draft"]) for c in base["verify"]]
    assert [c["expect"]["n_accepted"] for c in doc["verify"]] == [c["expect"]["n_accepted"] for c in base["verify"]]
    assert [c["k"] for c in doc["prompt_lookup"]] == [c["k"] for c in base["prompt_lookup"]]


def test_pitfall_tags_of_the_drafts_are_true():
    """Independent little re-implementations of s01, s02, s03 confirm the draft tags both ways."""
    def lookup(ctx, k, mx, mn, first=False, stop_at_suffix=False):
        t = len(ctx)
        for n in range(mx, mn - 1, -1):
            starts = list(range(t - n - 1, -1, -1))
            for i in (reversed(starts) if first else starts):
                if ctx[i:i + n] == ctx[t - n:]:
                    return ctx[i + n:min(i + n + k, t - n if stop_at_suffix else t)]
        return []

    for c in PL_CASES:
        args = (c["ctx"], c["k"], c["max_ngram"], c["min_ngram"])
        assert (lookup(*args, first=True) != c["expect"]) == ("shows:s01" in c["tags"]), c["id"]
        assert (lookup(*args, stop_at_suffix=True) != c["expect"]) == ("shows:s02" in c["tags"]), c["id"]

    def ngram_highest(ctx, k, n):
        ext, out = list(ctx), []
        while len(out) < k:
            nxt = None
            for m in range(min(n - 1, len(ext) - 1), 0, -1):
                cnt = Counter(ext[i + m] for i in range(len(ext) - m) if ext[i:i + m] == ext[len(ext) - m:])
                if cnt:
                    nxt = max(cnt, key=lambda tok: (cnt[tok], tok))
                    break
            if nxt is None:
                break
            out.append(nxt)
            ext.append(nxt)
        return out

    for c in NG_CASES:
        assert (ngram_highest(c["ctx"], c["k"], c["n"]) != c["expect"]) == ("shows:s03" in c["tags"]), c["id"]


def test_s07_shows_exactly_when_a_sampled_draft_token_was_accepted():
    """Drawing u_resample only on rejection leaves one uniform undrawn per acceptance, so the next
    u32 moves whenever a sampled round accepted anything (and never in greedy rounds)."""
    for c in V_CASES:
        sampled = c["params"]["temperature"] > 0
        accepted = c["expect"]["n_accepted"] > 0
        assert ("shows:s07" in c["tags"]) == (sampled and accepted), c["id"]
