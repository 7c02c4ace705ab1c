"""Generation cases: greedy speculative generation on the chapter's fake target, the requests of the
chapter test `greedy_spec_equals_greedy_without_spec`, with what every pitfall's loop answers.

The requests are fixed (three prompts x three draft kinds on the fake target's fixed rows), so this
section does not depend on the master seed. `run_loop` is a local copy of the reference's
`generate_stream`/`_one_round` (no EOS, no listener: the requests have neither) that can carry one
chapter pitfall: the draft ones (s01, s02, s03) change what is proposed, the verifier ones (s04..s09,
s12) how a round is verified, and the loop's own: s10 keeps the rejected drafts' KV (no truncate
after verification), s11 drafts cfg.k tokens even near max_new. A variant the fake target refuses
(when the case has a budget it holds at most len(prompt) + max_new - 1 positions) answers REFUSED.
"""

from __future__ import annotations

from chapters.L10_8.judge.fake_target import FakeTarget, FakeTargetError, greedy_reference
# the chapter test's requests, so the hints speak of what it runs
from chapters.L10_8.judge.requests import K, MAX_NEW, PROMPTS, SEED, VOCAB

from .common import GENERATE_BUGS, GENERATE_TAGS, REFUSED, VERIFY_BUGS, RefLib, order_tags
from .draft_cases import ng_variant, pl_variant
from .verify_cases import verify_variant

DRAFTS = ("none", "ngram", "prompt_lookup")  # every draft kind, in the test's order


BUDGETED = (False, True)  # the test runs each request on a target without a KV budget, then with one: without
# one, a leak (s10) and an overrun (s11) show as different answers; with one, both are refused


def generate_plan() -> list[tuple[list[int], str, bool]]:
    """(prompt, draft kind, budgeted) of every position, in file order: prompt-major, as the test loops."""
    return [(list(p), d, b) for p in PROMPTS for d in DRAFTS for b in BUDGETED]


def budget(prompt: list[int], max_new: int) -> int:
    """The positions a request's KV may ever hold: every emitted token but the last, after the prompt."""
    return len(prompt) + max_new - 1


def _propose(lib: RefLib, cfg, ctx: list[int], k: int, bug: str | None) -> list[int]:
    """The round's draft: the reference's propose, or the draft pitfall's variant of it."""
    if bug in ("s01", "s02") and cfg.draft is lib.spec.Draft.PROMPT_LOOKUP:
        return pl_variant(ctx, k, cfg.max_ngram, cfg.min_ngram, bug)[0]
    if bug == "s03" and cfg.draft is lib.spec.Draft.NGRAM:
        return ng_variant(ctx, k, cfg.max_ngram, bug)[0]
    return lib.spec.propose(cfg, ctx, k)


def _verify(lib: RefLib, rows, draft, params, prompt, output, rng, bug: str | None) -> tuple[list[int], int]:
    """(tokens, n_accepted) of the round: the reference's verify_draft, or the verifier pitfall's variant."""
    if bug in VERIFY_BUGS:
        tokens, _lps, n = verify_variant(lib, rows, draft, None, params, prompt, output, rng, bug)
        return tokens, n
    v = lib.spec.verify_draft(rows, draft, None, params, prompt, output, rng)
    return list(v.tokens), v.n_accepted


def run_loop(lib: RefLib, case: dict, bug: str | None) -> dict | str:
    """The case's generation with one pitfall (None: the correct loop): {"tokens", "cached"} or REFUSED."""
    prompt, max_new = case["prompt"], case["max_new"]
    target = FakeTarget(lib.source, case["vocab"], budget=case["budget"])
    cfg = lib.spec.SpecConfig.parse(case["cfg"]["draft"], case["cfg"]["k"])
    params = lib.sampling.SamplingParams(temperature=0.0)
    rng = lib.generator(case["seed"])
    out: list[int] = []
    try:
        while len(out) < max_new:
            room = cfg.k if bug == "s11" else min(cfg.k, max_new - len(out) - 1)
            draft = _propose(lib, cfg, prompt + out, room, bug) if room > 0 else []
            pending = [out[-1]] if out else prompt
            rows = target.extend(pending + draft)
            tokens, n = _verify(lib, rows[len(rows) - len(draft) - 1:], draft, params, prompt, out, rng, bug)
            if bug != "s10":
                target.truncate(target.cached() - len(draft) + n)
            out += tokens
    except FakeTargetError:
        return REFUSED
    return {"tokens": [int(t) for t in out], "cached": target.cached()}


def _reference(lib: RefLib, case: dict):
    """The reference's generate on the case's fake target: (Generated, cached positions after)."""
    target = FakeTarget(lib.source, case["vocab"], budget=case["budget"])
    cfg = lib.spec.SpecConfig.parse(case["cfg"]["draft"], case["cfg"]["k"])
    g = lib.spec.generate(target, cfg, case["prompt"], lib.sampling.SamplingParams(temperature=0.0), case["seed"],
                          case["max_new"], [])
    assert not target.misuse, target.misuse
    return g, target.cached()


def generate_case(lib: RefLib, index: int, prompt: list[int], draft: str, budgeted: bool) -> dict:
    """Case `index`: the request, the reference's tokens and cached positions, every pitfall's answer."""
    case = {"prompt": prompt, "cfg": {"draft": draft, "k": K}, "max_new": MAX_NEW, "seed": SEED, "vocab": VOCAB,
            "budget": budget(prompt, MAX_NEW) if budgeted else None}
    g, cached = _reference(lib, case)
    expect = {"tokens": [int(t) for t in g.tokens], "cached": cached}
    if expect["tokens"] != greedy_reference(lib.source, prompt, MAX_NEW, VOCAB):
        raise AssertionError(f"generate case {index}: greedy speculation differs from plain greedy")
    if cached != budget(prompt, MAX_NEW):
        raise AssertionError(f"generate case {index}: the reference holds {cached} positions, not the budget")
    if run_loop(lib, case, None) != expect:
        raise AssertionError(f"generate case {index}: the local copy of the loop disagrees with the reference")
    pitfalls = {b: a for b in GENERATE_BUGS if (a := run_loop(lib, case, b)) != expect}
    st = g.stats
    tags = {f"draft:{draft}"} | {f"shows:{b}" for b in pitfalls}
    if st.drafted:
        tags.add("drafted")
    if st.accepted < st.drafted:
        tags.add("rejected")
    if st.target_calls < MAX_NEW:
        tags.add("fewer_passes")
    return {**case, "tags": order_tags(tags, GENERATE_TAGS), "expect": expect, "pitfalls": pitfalls}


def generate_cases(lib: RefLib) -> list[dict]:
    """The whole section, ids g000.. in plan order (document asserts s10 and s11 show, MUST_SHOW)."""
    return [{"id": f"g{i:03d}", **generate_case(lib, i, p, d, b)} for i, (p, d, b) in enumerate(generate_plan())]
