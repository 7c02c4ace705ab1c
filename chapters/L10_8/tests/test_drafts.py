"""The drafts: prompt lookup and the n-gram table, and the configuration that picks one (chapter sections 2.1, 3, 4).

The chapter's tests (section 4) are split over four files by area; chapter.toml lists them. The
judge (this process) holds every expected value: hand computations from the chapter, the golden
fixtures the oracle wrote from the reference, the fake target and the reference's tiny llama.
"""


import pytest

from chapters.L10_8.cases import golden_mismatch, golden_section
from chapters.L10_8.judge import properties
from chapters.L10_8.judge.properties import ANSWERS, REFUSALS
from chapters.L10_8.judge.judging import case, must_refuse
from chapters.L10_8.judge.requests import cfg
from chapters.L10_8.spelling import spelling


# ---- drafts ---------------------------------------------------------------------------------------

def test_hand_example_prompt_lookup(impl, golden):
    got = impl.prompt_lookup([5, 6, 7, 8, 5, 6], 3, 3, 1)
    assert got == [7, 8, 5], f"section 3: ctx [5 6 7 8 5 6], k 3, n 3..1 drafts [7 8 5] (what followed [5 6] at 0); got {got}"
    got = impl.prompt_lookup([1, 2, 1, 2, 1, 2], 3, 3, 1)
    assert got == [1, 2], (
        f"periodic ctx [1 2 1 2 1 2], k 3: the 3-suffix [2 1 2] last occurred at 1, so the draft is ctx[4:6] = [1 2], "
        f"running into the suffix itself; got {got}")
    got = impl.prompt_lookup([1, 2, 3, 4], 3, 3, 1)
    assert got == [], f"ctx [1 2 3 4] repeats nothing, so there is no draft; got {got}"
    got = impl.prompt_lookup([1, 2, 3, 1], 3, 3, 2)
    assert got == [], (f"ctx [1 2 3 1], n 3..2: neither [2 3 1] nor [3 1] occurred earlier, and min_ngram 2 forbids "
                       f"falling back to the 1-suffix [1] (n 1 would draft [2 3 1]), so there is no draft; got {got}")
    got = impl.prompt_lookup([5, 6, 7, 8, 5, 6], 0, 3, 1)
    assert got == [], f"k = 0 drafts nothing, even on section 3's context where [5 6] recurs; got {got}"
    problems = [must_refuse(lambda a=a: impl.prompt_lookup(*a), what, spelling(impl.language)) for a, what in (
        (([5, 6, 7, 8, 5, 6], 3, 1, 2), "prompt_lookup with max_ngram 1 < min_ngram 2"),
        (([5, 6, 7, 8, 5, 6], 3, 3, 0), "prompt_lookup with min_ngram 0 (a suffix has at least one token)"),
        (([5, 6, 7, 8, 5, 6], 0, 3, 0), "prompt_lookup with min_ngram 0 and k = 0 (refused whatever k)"),
        (([5, 6, 7, 8, 5, 6], -1, 3, 1), "prompt_lookup with k = -1"),
        (([5, -6, 7, 8, 5, 6], 3, 3, 1), "prompt_lookup over a ctx holding token id -6"))]
    problems = [p for p in problems if p]
    assert not problems, f"{spelling(impl.language).contract}: these prompt_lookup calls raise SpecError:\n" + "\n".join(problems)
    problem = properties.prompt_lookup(impl, golden, REFUSALS)  # every refused kind of every parameter, drawn
    assert problem is None, problem


def test_prompt_lookup_matches_python_l8_6(impl, golden, ref):
    wrong = golden_section(impl, ref, golden, "prompt_lookup")
    if wrong:
        pytest.fail(golden_mismatch(ref, golden, "prompt_lookup", wrong))
    problem = properties.prompt_lookup(impl, golden, ANSWERS)  # what it drafts on the whole domain (refusals: the hand example)
    assert problem is None, problem


def test_ngram_draft_hand_example(impl, golden, ref):
    # the same rules over the oracle's contexts (ties where the lower id comes later, ...)
    wrong = golden_section(impl, ref, golden, "ngram")
    checks = [
        # (ctx, k, n, expected, what it shows)
        ([1, 2, 3, 1, 2, 4, 1, 2, 4, 1, 2], 1, 3, [4], "counts: after [1 2] came 3 once and 4 twice"),
        ([1, 2, 3, 1, 2, 4, 1, 2], 1, 3, [3], "ties to the lowest id: after [1 2] came 3 once and 4 once"),
        ([1, 2, 4, 1, 2, 3, 1, 2], 1, 3, [3], "ties to the lowest id, not the first seen: after [1 2] came 4, then 3"),
        ([7, 5, 7, 9, 7, 5, 7, 9, 7], 1, 2, [5], "ties to the lowest id, not the most recent: after [7] came 5, 9, 5, 9"),
        ([3, 1, 4, 2, 1, 5, 2, 1, 5, 3, 1], 1, 3, [4], "longest context first: [3 1] was followed by 4, though [1] was most often followed by 5"),
        ([1, 2, 1, 3, 4, 1], 1, 3, [2], "back-off: [4 1] never occurred before, [1] was followed by 2 and 3 (tie, lowest)"),
        ([1, 2, 3], 3, 3, [], "stop: nothing ever repeats"),
        ([1, 2, 3, 1, 2, 4, 1, 2], 3, 3, [3, 1, 2], "drafted tokens count as context: 3, then [2 3] -> 1, then [3 1] -> 2"),
        ([5, 1, 7, 6, 1, 8, 6, 1, 8, 5, 1], 1, 2, [8], "n 2 looks at one token: after [1] came 7 once and 8 twice"),
        ([4, 4], 2, 3, [4, 4], "a short context backs off to what fits: [4] -> 4, then [4 4] -> 4"),
        ([5], 3, 3, [], "one token has no earlier occurrence"),
        ([1, 2, 1, 2], 2, 1, [], "n 1 means contexts of n - 1 = 0 tokens: no draft"),
        ([1, 2, 3, 1, 2, 4, 1, 2], 0, 3, [], "k 0 drafts nothing, though [1 2] was followed by 3 and 4"),
    ]
    spell = spelling(impl.language)  # the calls and values as the student's language writes them
    for ctx, k, n, want, what in checks:
        with case(call := spell.words("ngram_draft", dict(ctx=ctx, k=k, n=n))):
            got = impl.ngram_draft(ctx, k, n)
        assert got == want, f"{what}: {call} should be {spell.value(want)!r}, got {spell.value(got)!r}"
    problem = must_refuse(lambda: impl.ngram_draft([1, 2, 1], 2, 0), "ngram_draft with n = 0", spelling(impl.language))
    assert problem is None, problem
    problem = must_refuse(lambda: impl.ngram_draft([1, 2, 1], -1, 3), "ngram_draft with k = -1", spelling(impl.language))
    assert problem is None, problem
    problem = must_refuse(lambda: impl.ngram_draft([1, -2, 1], 2, 3), "ngram_draft over a ctx holding token id -2", spelling(impl.language))
    assert problem is None, problem
    if wrong:
        pytest.fail(golden_mismatch(ref, golden, "ngram", wrong))
    problem = properties.ngram_draft(impl, golden)  # the whole domain, with contexts of 20-40 tied followers
    assert problem is None, problem


def test_config_parses_runtime_values(impl, golden):
    spell = spelling(impl.language)  # the calls and values as the student's language writes them
    for draft, k in (("none", 1), ("ngram", 4), ("prompt_lookup", 16)):
        with case(call := spell.words("spec_config_parse", dict(draft=draft, k=k))):
            got = impl.parse_config(draft, k)
        assert (got["draft"], got["k"]) == (draft, k), f"{call} gave {spell.value(got)!r}"
        assert (got["max_ngram"], got["min_ngram"]) == (3, 1), f"the defaults are max_ngram 3, min_ngram 1; got {spell.value(got)!r}"
    got = impl.parse_config("prompt_lookup", 4, max_ngram=4, min_ngram=2)
    assert (got["max_ngram"], got["min_ngram"]) == (4, 2), (
        f"{spell.words('spec_config_parse', dict(draft='prompt_lookup', k=4, max_ngram=4, min_ngram=2))} must keep them; "
        f"got {spell.value(got)!r}")
    problems = [must_refuse(lambda d=d, k=k: impl.parse_config(d, k), spell.words("spec_config_parse", dict(draft=d, k=k)), spelling(impl.language))
                for d, k in (("prompt_lookup", 0), ("prompt_lookup", 17), ("prompt-lookup", 4), ("ngarm", 4),
                             ("ngram", -1), ("ngram", 4.0), ("ngram", True))]
    problems.append(must_refuse(lambda: impl.parse_config("ngram", 4, max_ngram=2, min_ngram=3), "min_ngram 3 > max_ngram 2", spelling(impl.language)))
    problems.append(must_refuse(lambda: impl.parse_config("ngram", 4, max_ngram=3, min_ngram=0), "min_ngram 0 < 1", spelling(impl.language)))
    problems = [p for p in problems if p]
    assert not problems, "a bad [engine].speculative must fail at startup:\n" + "\n".join(problems)
    # propose, for each draft kind: its own k bounds the draft (cfg.k is the loop's business).
    for c, ctx, k, want, what in (
            (cfg("none"), [5, 6, 7, 8, 5, 6], 3, [], "draft none never drafts"),
            (cfg("prompt_lookup"), [5, 6, 7, 8, 5, 6], 3, [7, 8, 5], "prompt_lookup(ctx, 3, 3, 1): section 3's draft"),
            (cfg("ngram"), [1, 2, 3, 1, 2, 4, 1, 2], 3, [3, 1, 2], "ngram_draft(ctx, 3, n = max_ngram = 3): 3, then [2 3] -> 1, then [3 1] -> 2"),
            ({**cfg("ngram"), "max_ngram": 2}, [5, 1, 7, 6, 1, 8, 6, 1, 8, 5, 1], 1, [8],
             "max_ngram 2 is ngram_draft's n: after [1] came 7 once and 8 twice (n 3 would follow [5 1] to 7)"),
            ({**cfg("prompt_lookup"), "max_ngram": 4}, [1, 2, 3, 4, 8, 9, 2, 3, 4, 7, 1, 2, 3, 4], 3, [8, 9, 2],
             "max_ngram 4: the 4-suffix [1 2 3 4] occurred at 0, followed by [8 9 2] (n 3 would copy after [2 3 4] at 6: [7 1 2])"),
            ({**cfg("prompt_lookup"), "min_ngram": 2}, [1, 2, 3, 1], 3, [], "min_ngram 2: only the 1-suffix [1] recurs, so no draft"),
            (cfg("prompt_lookup", k=1), [5, 6, 7, 8, 5, 6], 3, [7, 8, 5], "k 3 above cfg.k 1: propose's k bounds the draft, cfg.k is not consulted"),
            (cfg("ngram", k=1), [1, 2, 3, 1, 2, 4, 1, 2], 3, [3, 1, 2], "k 3 above cfg.k 1: propose's k bounds the draft, cfg.k is not consulted"),
            (cfg("prompt_lookup"), [5, 6, 7, 8, 5, 6], 0, [], "k 0 drafts nothing"),
            (cfg("ngram"), [1, 2, 3, 1, 2, 4, 1, 2], 0, [], "k 0 drafts nothing")):
        with case(call := spell.words("propose", dict(cfg=c, ctx=ctx, k=k))):
            got = impl.propose(c, ctx, k)
        assert got == want, f"{call}: {what}: expected {spell.value(want)!r}, got {spell.value(got)!r}"
    problems = [must_refuse(lambda c=c: impl.propose(c, [5, 6, 7, 8, 5, 6], -1), spell.words("propose", dict(cfg=c, ctx=[5, 6, 7, 8, 5, 6], k=-1)), spelling(impl.language))
                for c in (cfg("ngram"), cfg("prompt_lookup"))]
    problems += [must_refuse(lambda c=c: impl.propose(c, [5, 6, -7, 8, 5, 6], 3),
                             spell.words("propose", dict(cfg=c, ctx=[5, 6, -7, 8, 5, 6], k=3)) + " (a ctx holding token id -7)", spelling(impl.language))
                 for c in (cfg("ngram"), cfg("prompt_lookup"))]
    problems = [p for p in problems if p]
    assert not problems, "a negative k or a bad ctx is refused, as ngram_draft and prompt_lookup refuse them:\n" + "\n".join(problems)
    for prop in (properties.parse_config, properties.propose):  # names in any case, every integer, bounds built without parse
        problem = prop(impl, golden)
        assert problem is None, problem
