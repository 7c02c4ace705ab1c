"""The chapter's 16 tests (L10.8, section 4), run against any implementation through `impl`.

The judge (this process) holds every expected value: hand computations from the chapter, the
golden fixtures the oracle wrote from the reference, the fake target, and the reference's tiny
llama. The implementation only answers calls. Names are the chapter's, one test per row.
"""

import math
import random

import numpy as np
import pytest

from chapters.L10_8.judge.fake_target import FakeTarget, greedy_reference
from chapters.L10_8.judge.judging import case, must_refuse, short, uniforms_drawn
from chapters.L10_8.judge import stats, tiny_llama
from chapters.L10_8.judge.answers import golden_mismatch, golden_section
from chapters.L10_8.judge.bad_inputs import bad_inputs
from chapters.L10_8.judge.targets import LoggedTarget, WatchedTarget, eos_inside_accepted_run, filled_table, misuse

GREEDY = dict(temperature=0.0)
LOGPROB_TOL = 1e-9  # absolute; logprobs are float64 log-softmax values, a port may sum in another order
PROMPTS = ([1, 2, 3, 4, 5], [3, 3, 3, 3], [9, 1, 9, 1, 9, 2])  # three prompts of the fake target
VOCAB = 16  # the fake target's vocabulary in the generation tests
MAX_NEW = 40


def cfg(draft: str, k: int = 4) -> dict:
    return {"draft": draft, "k": k}


def budget_target(ref, prompt, max_new: int) -> FakeTarget:
    """A fake target that refuses KV past what the request can ever need: len(prompt) + max_new - 1."""
    return FakeTarget(ref, VOCAB, budget=len(prompt) + max_new - 1)


# ---- drafts ---------------------------------------------------------------------------------------

def test_hand_example_prompt_lookup(impl):
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
    problems = [must_refuse(lambda a=a: impl.prompt_lookup(*a), what) for a, what in (
        (([5, 6, 7, 8, 5, 6], 3, 1, 2), "prompt_lookup with max_ngram 1 < min_ngram 2"),
        (([5, 6, 7, 8, 5, 6], 3, 3, 0), "prompt_lookup with min_ngram 0 (a suffix has at least one token)"),
        (([5, 6, 7, 8, 5, 6], 0, 3, 0), "prompt_lookup with min_ngram 0 and k = 0 (refused whatever k)"),
        (([5, 6, 7, 8, 5, 6], -1, 3, 1), "prompt_lookup with k = -1"),
        (([5, -6, 7, 8, 5, 6], 3, 3, 1), "prompt_lookup over a ctx holding token id -6"))]
    problems = [p for p in problems if p]
    assert not problems, "spec.pyi: these prompt_lookup calls raise SpecError:\n" + "\n".join(problems)


def test_prompt_lookup_matches_python_l8_6(impl, golden):
    wrong = []
    for c in golden["prompt_lookup"]:
        with case(f"case {c['id']} (tags {', '.join(c['tags'])})"):
            got = impl.prompt_lookup(c["ctx"], c["k"], c["max_ngram"], c["min_ngram"])
        impl.record(c["id"], got)  # for pitfall hints (harness.hints)
        if got != c["expect"]:
            wrong.append((c, got))
    if wrong:
        c, got = wrong[0]
        pytest.fail(f"{len(wrong)} of {len(golden['prompt_lookup'])} contexts differ from the Python reference. First: "
                    f"case {c['id']} (tags {', '.join(c['tags'])}): ctx {short(c['ctx'][-24:], 24)} (last 24 of {len(c['ctx'])}), "
                    f"k {c['k']}, n {c['max_ngram']}..{c['min_ngram']}: expected {c['expect']}, got {got}")


def test_ngram_draft_hand_example(impl, golden):
    wrong = []
    for c in golden["ngram"]:  # the same rules over the oracle's contexts (ties where the lower id comes later, ...)
        with case(f"case {c['id']} (tags {', '.join(c['tags'])})"):
            got = impl.ngram_draft(c["ctx"], c["k"], c["n"])
        impl.record(c["id"], got)  # for pitfall hints (harness.hints)
        if got != c["expect"]:
            wrong.append((c, got))
    checks = [
        # (ctx, k, n, expected, what it shows)
        ([1, 2, 3, 1, 2, 4, 1, 2, 4, 1, 2], 1, 3, [4], "counts: after [1 2] came 3 once and 4 twice"),
        ([1, 2, 3, 1, 2, 4, 1, 2], 1, 3, [3], "ties to the lowest id: after [1 2] came 3 once and 4 once"),
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
    for ctx, k, n, want, what in checks:
        with case(f"ngram_draft({ctx}, k={k}, n={n})"):
            got = impl.ngram_draft(ctx, k, n)
        assert got == want, f"{what}: ngram_draft({ctx}, k={k}, n={n}) should be {want}, got {got}"
    problem = must_refuse(lambda: impl.ngram_draft([1, 2, 1], 2, 0), "ngram_draft with n = 0")
    assert problem is None, problem
    problem = must_refuse(lambda: impl.ngram_draft([1, 2, 1], -1, 3), "ngram_draft with k = -1")
    assert problem is None, problem
    if wrong:
        c, got = wrong[0]
        pytest.fail(f"{len(wrong)} of {len(golden['ngram'])} golden n-gram contexts differ from the Python reference. First: "
                    f"case {c['id']} (tags {', '.join(c['tags'])}): ctx {short(c['ctx'][-24:], 24)} (last 24 of {len(c['ctx'])}), "
                    f"k {c['k']}, n {c['n']}: expected {c['expect']}, got {got}")


def test_config_parses_runtime_values(impl):
    for draft, k in (("none", 1), ("ngram", 4), ("prompt_lookup", 16)):
        with case(f"SpecConfig.parse({draft!r}, {k})"):
            got = impl.parse_config(draft, k)
        assert (got["draft"], got["k"]) == (draft, k), f"SpecConfig.parse({draft!r}, {k}) gave {got}"
        assert (got["max_ngram"], got["min_ngram"]) == (3, 1), f"the defaults are max_ngram 3, min_ngram 1; got {got}"
    got = impl.parse_config("prompt_lookup", 4, max_ngram=4, min_ngram=2)
    assert (got["max_ngram"], got["min_ngram"]) == (4, 2), f"SpecConfig.parse('prompt_lookup', 4, max_ngram=4, min_ngram=2) must keep them; got {got}"
    problems = [must_refuse(lambda d=d, k=k: impl.parse_config(d, k), f"SpecConfig.parse({d!r}, {k!r})")
                for d, k in (("prompt_lookup", 0), ("prompt_lookup", 17), ("prompt-lookup", 4), ("ngarm", 4),
                             ("ngram", -1), ("ngram", 4.0), ("ngram", True))]
    problems.append(must_refuse(lambda: impl.parse_config("ngram", 4, max_ngram=2, min_ngram=3), "min_ngram 3 > max_ngram 2"))
    problems.append(must_refuse(lambda: impl.parse_config("ngram", 4, max_ngram=3, min_ngram=0), "min_ngram 0 < 1"))
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
        with case(f"propose({c}, {ctx}, {k})"):
            got = impl.propose(c, ctx, k)
        assert got == want, f"propose({c}, {ctx}, k={k}): {what}: expected {want}, got {got}"
    problems = [must_refuse(lambda c=c: impl.propose(c, [5, 6, 7, 8, 5, 6], -1), f"propose({c}, ctx, k=-1)")
                for c in (cfg("ngram"), cfg("prompt_lookup"))]
    assert problems == [None, None], "a negative k is refused, as ngram_draft and prompt_lookup refuse it:\n" + "\n".join(p for p in problems if p)


# ---- the verifier -----------------------------------------------------------------------------------

HAND_ROWS = [[0, 1, 3, 0.5], [0, 1, 0.5, 2], [5, 0, 0, 0]]
HAND_SEED = 12345


def _lse(row) -> float:
    return math.log(sum(math.exp(x) for x in row))


def test_hand_example_greedy_verify(impl, ref):
    first_u32 = stats.first_u32(ref, HAND_SEED)
    v = impl.verify_draft(HAND_ROWS, [2, 1], None, GREEDY, [], [], HAND_SEED)
    assert (v["tokens"], v["n_accepted"]) == ([2, 3], 1), f"draft [2 1]: accept 2, row 1's argmax 3 != 1 -> emit [2 3], one accepted; got {v['tokens']}, n_accepted {v['n_accepted']}"
    want = [3 - _lse(HAND_ROWS[0]), 2 - _lse(HAND_ROWS[1])]
    assert np.allclose(v["logprobs"], want, atol=LOGPROB_TOL, rtol=0), f"logprobs should be {want} (3 - ln(e^0 + e^1 + e^3 + e^0.5), ...); got {v['logprobs']}"
    assert v["next_u32"] == first_u32, f"greedy verification draws nothing, but the generator moved on by {uniforms_drawn(ref, HAND_SEED, v['next_u32'])}"
    v = impl.verify_draft(HAND_ROWS, [2, 3], None, GREEDY, [], [], HAND_SEED)
    assert (v["tokens"], v["n_accepted"]) == ([2, 3, 0], 2), (
        f"draft [2 3]: both accepted, then the bonus token is row 2's argmax 0 -> [2 3 0]; got {v['tokens']} "
        f"(n_accepted {v['n_accepted']}); the bonus comes from the row after the whole draft, not the last draft's row")
    assert abs(v["logprobs"][2] - (5 - _lse(HAND_ROWS[2]))) <= LOGPROB_TOL, f"the bonus token's logprob is 5 - ln(e^5 + 3); got {v['logprobs'][2]}"
    assert v["next_u32"] == first_u32, "greedy verification draws nothing, the bonus token included"
    qs = [[0.1, 0.1, 0.7, 0.1], [0.1, 0.7, 0.1, 0.1]]  # valid draft distributions, which greedy never reads
    v = impl.verify_draft(HAND_ROWS, [2, 1], qs, GREEDY, [], [], HAND_SEED)
    assert (v["tokens"], v["n_accepted"], v["next_u32"]) == ([2, 3], 1, first_u32), (
        f"at temperature 0 draft distributions are checked but never read: draft [2 1] still emits [2 3] with one accepted "
        f"and no draws, as with draft_probs None; got {v['tokens']}, n_accepted {v['n_accepted']}, "
        f"{uniforms_drawn(ref, HAND_SEED, v['next_u32'])} drawn")


def test_hand_example_sampled_step(impl):
    p, q = [0.2, 0.5, 0.3], [0.6, 0.2, 0.2]
    got = impl.speculative_step(p, q, 0, 0.3, 0.8)
    assert got == (0, True), f"p(0)/q(0) = 1/3 and u_accept 0.3 < 1/3: accept 0; got {got}"
    got = impl.speculative_step(p, q, 0, 0.5, 0.8)
    assert got == (2, False), f"u_accept 0.5 >= 1/3: reject; the residual [0 0.75 0.25] with u_resample 0.8 lands on 2; got {got}"
    r = impl.residual(p, q)
    assert np.allclose(r, [0.0, 0.75, 0.25], atol=1e-12), f"residual = normalize(max(0, p - q)) = [0 0.75 0.25]; got {r}"
    got = impl.sample_dense([0.0, 0.75, 0.25], 0.8)
    assert got == 2, f"u 0.8 walks the running sum 0, 0.75, 1.0 and lands on id 2; got {got}"
    problem = must_refuse(lambda: impl.speculative_step(p, [0.0, 0.5, 0.5], 0, 0.3, 0.8), "a q with q(0) = 0 proposing x = 0")
    assert problem is None, problem + " (the draft could not have proposed 0: that is a caller's bug)"
    # The boundaries of the rule, by hand.
    got = impl.speculative_step([0.25, 0.75], [0.5, 0.5], 0, 0.5, 0.1)
    assert got == (1, False), f"u_accept 0.5 == p(0)/q(0) is not < : reject, and the residual [0 1] gives 1; got {got}"
    got = impl.speculative_step(p, q, 0, 0.0, 0.8)
    assert got == (0, True), f"u_accept 0.0 < 1/3: accept; got {got}"
    r = impl.residual([0.2, 0.8], [0.2, 0.8])
    assert np.allclose(r, [0.2, 0.8], atol=1e-12), f"p <= q everywhere leaves no residual mass: residual is p itself, [0.2 0.8]; got {r}"
    got = impl.sample_dense([0.5, 0.5], 0.5)
    assert got == 1, f"the running sum must exceed u: 0.5 is not > 0.5, so u 0.5 lands on id 1; got {got}"
    tenths = [0.1] * 10 + [0.0]  # summed left to right they make 0.9999999999999999, the largest u below 1
    got = impl.sample_dense(tenths, 0.9999999999999999)
    assert got == 9, f"when rounding leaves u at or beyond the total, the answer is the last id of nonzero probability, 9; got {got}"
    got = impl.sample_dense([0.9999999999999999, 0.0], 0.9999999999999999)
    assert got == 0, f"the fallback is the last id of nonzero probability, here the first: 0; got {got}"
    r = impl.residual([0.1, 0.1], [0.5, 0.5])
    assert np.allclose(r, [0.5, 0.5], atol=1e-12), f"with no residual mass the answer is p normalized, [0.5 0.5]; got {r}"
    # The mass is summed left to right (spec/sampling.md), so residual is exact to the bit.
    r = impl.residual([0.1] * 10 + [0.0], [0.0] * 10 + [1.0])
    want = [0.1 / 0.9999999999999999] * 10 + [0.0]
    assert list(r) == want, (
        f"a one-hot draft on id 10, which p gives 0: the residual is p's ten 0.1's over their mass, summed left to right "
        f"0.9999999999999999 (numpy's pairwise sum gives 1.0), so each entry is 0.1 / 0.9999999999999999 = {want[0]!r} "
        f"exactly (divided, not multiplied by a reciprocal); got {list(r)}")
    r = impl.residual([0.1] * 10, [0.5] * 10)
    assert list(r) == want[:10], (f"p <= q everywhere: p over its own left-to-right sum 0.9999999999999999, each entry "
                                  f"{want[0]!r} exactly; got {list(r)}")
    got = impl.sample_dense([0.0, 2.0, 2.0], 0.5)
    assert got == 1, f"p is used as given, not renormalized: the running sum 2.0 at id 1 exceeds u 0.5, so 1; got {got}"
    got = impl.speculative_step([0.4, 1.0], [0.8, 0.2], 0, 0.45, 0.5)
    assert got == (0, True), f"p and q are used as given: p(0)/q(0) = 0.4/0.8 = 0.5 and u_accept 0.45 < 0.5: accept 0; got {got}"
    got = impl.speculative_step([1.0], [1.0], 0, 0.5, 0.5)
    assert got == (0, True), f"a vocabulary of one token: p(0)/q(0) = 1, accept; got {got}"
    # The target's p comes from the sampler: dense_distribution, by hand.
    for logits, params, want, what in (
            ([0.0, 1.0, 2.0], {"temperature": 2.0}, [math.exp(x / 2) / sum(math.exp(y / 2) for y in (0, 1, 2)) for x in (0, 1, 2)],
             "softmax of logits / temperature"),
            ([0.0, 3.0, 1.0], {"temperature": 0.0}, [0.0, 1.0, 0.0], "greedy is one-hot at the argmax"),
            ([0.0, 0.0], {"temperature": 1.0, "top_p": 0.5}, [1.0, 0.0], "top_p 0.5: id 0 ranks first on the tie; the mass before id 1 is 0.5, not < 0.5"),
            ([0.0, 0.0, -1.0], {"temperature": 1.0, "min_p": 1.0}, [0.5, 0.5, 0.0], "min_p 1 keeps the tokens as likely as the best"),
            ([800.0, 799.0, 0.0], {"temperature": 1.0}, [0.7310585786300049, 0.2689414213699951, 0.0], "large logits: subtract the max first"),
            ([1.0, 2.0, 0.5], {"temperature": 1.0, "repetition_penalty": 1.5},
             [math.exp(x) / sum(math.exp(y) for y in (1.0, 2.0 / 1.5, 0.5)) for x in (1.0, 2.0 / 1.5, 0.5)],
             "repetition penalty 1.5 on the prompt's token 1: its positive logit 2 becomes 2 / 1.5, in float64"),
            ([0.5], {"temperature": 0.0}, [1.0], "a vocabulary of one token")):
        got = impl.dense_distribution(logits, params, [1] if "repetition_penalty" in params else [], [])
        assert np.allclose(got, want, atol=1e-12, rtol=0), f"dense_distribution({logits}, {params}): {what}: expected {want}, got {got}"
    got = impl.dense_distribution([0.0, -50.0], {"temperature": 1.0}, [], [])
    assert got[1] > 0 and abs(got[1] / math.exp(-50) - 1) < 1e-9, (
        f"top_p 1 means off: a token of probability e^-50 keeps it; got {got[1]} (is top_p applied at 1?)")


def test_verify_matches_python_l8_6(impl, golden, ref):
    wrong = []
    for c in golden["verify"]:
        with case(f"case {c['id']} (tags {', '.join(c['tags'])})"):
            got = impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"], c["output"], c["seed"])
        e = c["expect"]
        impl.record(c["id"], {f: got[f] for f in ("tokens", "n_accepted", "next_u32")})  # for pitfall hints
        fields = [f for f in ("tokens", "n_accepted", "next_u32") if got[f] != e[f]]
        if not fields and not np.allclose(got["logprobs"], e["logprobs"], atol=LOGPROB_TOL, rtol=0):
            fields = ["logprobs"]
        if fields:
            wrong.append((c, got, fields))
    if wrong:
        c, got, fields = wrong[0]
        e = c["expect"]
        lines = [f"{len(wrong)} of {len(golden['verify'])} verification cases differ from the Python reference. First: "
                 f"case {c['id']} (tags {', '.join(c['tags'])}), draft {c['draft']}, params "
                 f"{ {k: v for k, v in c['params'].items() if v not in (0, 0.0, 1.0) or k == 'temperature'} }:"]
        for f in fields:
            lines.append(f"  {f}: expected {e[f]}, got {got[f]}")
        lines.append(f"  draws: the reference drew {uniforms_drawn(ref, c['seed'], e['next_u32'])}, yours {uniforms_drawn(ref, c['seed'], got['next_u32'])}")
        pytest.fail("\n".join(lines))


def test_verify_rejects_bad_shapes(impl):
    sampled = dict(temperature=1.0)
    bad = bad_inputs(impl, HAND_ROWS, GREEDY, sampled)
    problems = [p for p in (must_refuse(fn, what) for what, fn in bad) if p]
    got = impl.verify_draft([[0.3], [0.7]], [0], None, GREEDY, [], [], 1)
    assert got["tokens"] == [0, 0], f"a vocabulary of one token is a valid shape: draft [0] is accepted, bonus 0; got {got['tokens']}"
    assert not problems, "bad shapes must raise SpecError, never crash the step loop:\n" + "\n".join(problems)


# ---- generation ---------------------------------------------------------------------------------------

def test_greedy_spec_equals_greedy_without_spec(impl, golden, ref):
    wrong = golden_section(impl, ref, golden, "generate")  # the same requests as the oracle recorded them
    for prompt in PROMPTS:
        want = greedy_reference(ref, prompt, MAX_NEW, VOCAB)
        for draft in ("none", "ngram", "prompt_lookup"):
            where = f"draft {draft}, prompt {prompt}, max_new {MAX_NEW}"
            target = LoggedTarget(ref, VOCAB)  # first without a budget, so a KV leak shows as what it is
            with case(where):
                g = impl.generate(target, cfg(draft), prompt, GREEDY, 7, MAX_NEW, [])
            assert not target.misuse, f"{where}: {target.misuse[0]}"
            assert target.cached() == len(prompt) + MAX_NEW - 1, (
                f"{where}: after generation the target holds {target.cached()} positions; it must hold exactly "
                f"len(prompt) + max_new - 1 = {len(prompt) + MAX_NEW - 1} (every emitted token but the last). More means "
                "KV kept for rejected drafts (truncate to the kept length after each round) or written past the request's budget")
            assert g["tokens"] == want, f"{where}: greedy with speculation must equal greedy without it.\n  expected {short(want, 40)}\n  got      {short(g['tokens'], 40)}"
            assert g["stats"]["target_calls"] == target.calls, f"{where}: stats.target_calls says {g['stats']['target_calls']}, the target counted {target.calls}"
            assert abs(g["stats"]["accept_rate"] - (g["stats"]["accepted"] / g["stats"]["drafted"] if g["stats"]["drafted"] else 0.0)) < 1e-12, (
                f"{where}: accept_rate() {g['stats']['accept_rate']} must be accepted / drafted (0 when nothing was drafted)")
            want_stats = target.observed_stats(len(prompt))
            got_stats = {k: g["stats"][k] for k in want_stats}
            assert got_stats == want_stats, f"{where}: SpecStats {got_stats}, but the target saw {want_stats} (drafted: ids fed after the pending token; accepted: drafted positions kept)"
            if draft == "none":
                assert g["stats"]["drafted"] == 0 and target.calls == MAX_NEW, f"{where}: no draft means one token per forward pass; {target.calls} passes, {g['stats']['drafted']} drafted"
            if draft == "prompt_lookup":
                assert target.calls < MAX_NEW, f"{where}: {target.calls} forward passes for {MAX_NEW} tokens: prompt lookup should need fewer than plain greedy's {MAX_NEW}"
            target = budget_target(ref, prompt, MAX_NEW)  # then with the request's KV budget: no draft may run past it
            with case(where + ", with a KV budget"):
                impl.generate(target, cfg(draft), prompt, GREEDY, 7, MAX_NEW, [])
            assert not target.misuse, f"{where}: {target.misuse[0]}"
    assert not wrong, golden_mismatch(golden, "generate", wrong)


def test_eos_and_max_tokens_end_generation(impl, ref):
    prompt = PROMPTS[0]
    for max_new in (1, 2, 5, 17):
        target = budget_target(ref, prompt, max_new)
        with case(f"max_new {max_new}"):
            g = impl.generate(target, cfg("prompt_lookup"), prompt, GREEDY, 7, max_new, [])
        assert len(g["tokens"]) == max_new, f"max_new {max_new}: got {len(g['tokens'])} tokens{misuse(target)}"
        assert g["finish_reason"] == "length", f"max_new {max_new}: finish_reason should be 'length', got {g['finish_reason']!r}"
    periodic = [1, 2, 1, 2, 1, 2]  # prompt lookup surely drafts here
    target = LoggedTarget(ref, VOCAB)
    with case("max_new 2 on a periodic prompt"):
        impl.generate(target, cfg("prompt_lookup"), periodic, GREEDY, 7, 2, [])
    assert target.log and target.log[0][2] == len(periodic) + 1, (
        f"max_new 2: the first round drafts min(k, max_new - 0 - 1) = 1 token, so it feeds the prompt plus 1; "
        f"it fed {target.log[0][2] if target.log else 0} ids for a prompt of {len(periodic)}")
    for seed in (0, 2**64 - 1):
        with case(f"seed {seed}"):
            g = impl.generate(budget_target(ref, prompt, 5), cfg("prompt_lookup"), prompt, GREEDY, seed, 5, [])
        assert len(g["tokens"]) == 5, f"seed {seed} is a valid 64-bit seed"
    problems = [must_refuse(lambda s=s: impl.generate(FakeTarget(ref, VOCAB), cfg("none"), prompt, GREEDY, s, 5, []), f"seed {s}")
                for s in (-1, 2**64)]
    assert problems == [None, None], "\n".join(p for p in problems if p)
    target = FakeTarget(ref, VOCAB)
    with case("max_new 0"):
        g = impl.generate(target, cfg("prompt_lookup"), prompt, GREEDY, 7, 0, [])
    assert (g["tokens"], g["finish_reason"], target.calls) == ([], "length", 0), (
        f"max_new 0: no tokens, finish 'length', and no forward pass at all; got {g['tokens']}, {g['finish_reason']!r}, {target.calls} passes")
    held = FakeTarget(ref, VOCAB)
    held.extend([1, 2])  # a target that already holds 2 positions
    problems = [must_refuse(fn, what) for fn, what in (
        (lambda: impl.generate(held, cfg("none"), prompt, GREEDY, 7, 5, []), "a target already holding 2 positions (generation starts from an empty one)"),
        (lambda: impl.generate(FakeTarget(ref, VOCAB), cfg("none"), [], GREEDY, 7, 5, []), "an empty prompt"),
        (lambda: impl.generate(FakeTarget(ref, VOCAB), cfg("none"), prompt, GREEDY, 7, -1, []), "max_new -1"),
        (lambda: impl.generate(FakeTarget(ref, VOCAB), cfg("none"), prompt, GREEDY, 7, 5, [-1]), "an EOS id of -1"))]
    problems = [p for p in problems if p]
    assert not problems, "a request that cannot start is refused with SpecError:\n" + "\n".join(problems)
    prompt = PROMPTS[2]  # its greedy text copies a token it has not emitted yet from the prompt: EOS can sit inside a run
    j, eos = eos_inside_accepted_run(ref, prompt, VOCAB, MAX_NEW)
    want = greedy_reference(ref, prompt, MAX_NEW, VOCAB)[:j + 1]
    target = budget_target(ref, prompt, MAX_NEW)
    with case(f"eos {eos}"):
        g = impl.generate(target, cfg("prompt_lookup"), prompt, GREEDY, 7, MAX_NEW, [eos])
    assert g["tokens"] == want, (f"EOS {eos} is emitted at index {j}, inside a run of accepted drafts: generation stops right after it, "
                                 f"dropping the rest of the round.\n  expected {short(want, 40)}\n  got      {short(g['tokens'], 40)}")
    assert g["finish_reason"] == "eos", f"finish_reason should be 'eos', got {g['finish_reason']!r}"


def test_sampled_spec_keeps_the_target_distribution(impl, ref):
    result = stats.first_token_chi_square(impl, ref)
    assert result.p_value > stats.ALPHA, result.explain()


def test_generate_stream_hands_over_each_token_and_stops_when_told(impl, ref):
    prompt = PROMPTS[2]
    heard: list = []
    target = WatchedTarget(heard, ref, VOCAB, budget=len(prompt) + MAX_NEW - 1)
    listener = lambda t, lp: heard.append((t, lp)) or True
    with case("a listener that never stops"):
        g = impl.generate(target, cfg("prompt_lookup"), prompt, GREEDY, 7, MAX_NEW, [], on_token=listener)
    assert [t for t, _ in heard] == g["tokens"], f"the listener heard {short([t for t, _ in heard], 40)}, generate returned {short(g['tokens'], 40)}"
    assert np.allclose([lp for _, lp in heard], g["logprobs"], atol=LOGPROB_TOL), "the listener's logprobs differ from the returned ones"
    assert g["tokens"] == greedy_reference(ref, prompt, MAX_NEW, VOCAB), "generate_stream must emit what greedy emits"
    # As soon as a round is verified its tokens go to the listener: so when the next forward pass
    # starts, everything emitted so far has been heard, the pending token it feeds last of all.
    for r, (n_heard, cached, ids) in enumerate(target.passes[1:], start=2):
        emitted = cached - len(prompt) + 1  # every emitted token is cached but the pending one, fed now
        assert n_heard == emitted and ids[0] == heard[n_heard - 1][0], (
            f"forward pass {r} starts after {emitted} emitted tokens, but the listener had heard {n_heard}: each round's "
            "tokens must be handed over as soon as the round is verified, before the next forward pass")
    # Sampled, the loop draws from the request's generator, Pcg32.from_seed(seed): the same tokens as
    # the reference's loop on the same fake target, seed for seed. No draft, so only the loop and the
    # bonus draw are judged here (drafts and their draws have tests of their own).
    spec = ref.module("infer.spec")
    sampled = {"temperature": 0.8}
    want = spec.generate(FakeTarget(ref, VOCAB), spec.SpecConfig.parse("none", 4), prompt,
                         ref.module("infer.sampling").SamplingParams(**sampled), 11, MAX_NEW, []).tokens
    heard = []
    with case("a sampled request, seed 11"):
        g = impl.generate(FakeTarget(ref, VOCAB), cfg("none"), prompt, sampled, 11, MAX_NEW, [], on_token=listener)
    assert g["tokens"] == want == [t for t, _ in heard], (
        f"sampled at temperature 0.8 with seed 11, the stream must be the reference's (the request's generator is "
        f"Pcg32.from_seed(seed), drawn as verify_draft draws):\n  expected {short(want, 40)}\n  got      {short(g['tokens'], 40)}")
    stop_after = 5
    heard = []
    target = WatchedTarget(heard, ref, VOCAB, budget=len(prompt) + MAX_NEW - 1)
    stopper = lambda t, lp: heard.append((t, lp)) or len(heard) < stop_after
    with case("a listener that says stop"):
        g = impl.generate(target, cfg("prompt_lookup"), prompt, GREEDY, 7, MAX_NEW, [], on_token=stopper)
    want = greedy_reference(ref, prompt, MAX_NEW, VOCAB)[:stop_after]
    assert g["tokens"] == want, f"the listener said stop at token {stop_after}: generation returns the {stop_after} tokens handed over, {want}; got {g['tokens']}"
    assert len(heard) == stop_after, f"the listener was called {len(heard)} times after saying stop at call {stop_after}"
    late = [ids for n, _, ids in target.passes if n >= stop_after]
    assert not late, f"{len(late)} forward passes ran after the listener said stop (first fed {late[0]})"
    assert g["finish_reason"] == "stopped", f"finish_reason should be 'stopped', got {g['finish_reason']!r}"
    # EOS and stop on the same token: the listener's answer is looked at first, so the finish is "stopped".
    plain = greedy_reference(ref, prompt, MAX_NEW, VOCAB)
    j = next(i for i in range(4, MAX_NEW) if plain[i] not in plain[:i])  # EOS = plain[j] ends nothing earlier
    heard = []
    stop_at_eos = lambda t, lp: heard.append((t, lp)) or len(heard) <= j  # False on call j + 1, the EOS token
    with case(f"EOS {plain[j]}, on which the listener says stop"):
        g = impl.generate(FakeTarget(ref, VOCAB), cfg("prompt_lookup"), prompt, GREEDY, 7, MAX_NEW, [plain[j]], on_token=stop_at_eos)
    assert g["tokens"] == plain[:j + 1] == [t for t, _ in heard], (
        f"EOS {plain[j]} at index {j} is handed over, then ends generation: expected {plain[:j + 1]}, got {g['tokens']} "
        f"(the listener heard {[t for t, _ in heard]})")
    assert g["finish_reason"] == "stopped", (
        f"token {plain[j]} at index {j} is EOS and the listener answered False on it: its answer is looked at first, "
        f"so finish_reason is 'stopped'; got {g['finish_reason']!r}")


# ---- rollback ---------------------------------------------------------------------------------------------

def test_rollback_hand_example(impl, golden, ref):
    wrong = golden_section(impl, ref, golden, "rollback")  # the oracle's rollbacks: partial, full, keep 0
    pool = impl.new_pool(8, 4)
    table = filled_table(pool, [4, 4, 2])  # 10 cached positions
    r = impl.rollback(pool, table, 5)
    assert r["released"] == 1 and r["table"] == table[:2], f"keep 5 of 10 with B 4 needs ceil(5/4) = 2 blocks: release block 3 only; got {r}"
    assert pool.fill(table[1]) == 1, f"the second block still holds 1 kept position; its fill is {pool.fill(table[1])}"
    assert pool.refcount(table[2]) == 0 and pool.free_blocks() == 6, "the released block must be free again"
    r = impl.rollback(pool, r["table"], 4)
    assert r["released"] == 1 and r["table"] == table[:1] and pool.fill(table[0]) == 4, f"keep 4: one full block stays, fill 4; got {r}"
    r = impl.rollback(pool, r["table"], 0)
    assert r["released"] == 1 and r["table"] == [] and pool.free_blocks() == 8, f"keep 0 releases everything; got {r}, free {pool.free_blocks()}"
    for tokens, b, want in ((0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (8, 4, 2), (9, 4, 3), (5, 1, 5)):
        got = impl.blocks_for(tokens, b)
        assert got == want, f"blocks_for({tokens}, {b}) = ceil({tokens}/{b}) = {want}; got {got}"
    problem = must_refuse(lambda: impl.blocks_for(5, 0), "blocks_for(5, 0): a block holds at least one position")
    assert problem is None, problem
    problem = must_refuse(lambda: impl.blocks_for(-1, 4), "blocks_for(-1, 4): a negative count of positions")
    assert problem is None, problem
    table = filled_table(pool, [4, 1])
    problems = [must_refuse(lambda: impl.rollback(pool, table, 9), "keep 9 positions of a 2-block table (8 at most)"),
                must_refuse(lambda: impl.rollback(pool, table, -1), "keep -1 positions")]
    assert problems == [None, None], "\n".join(p for p in problems if p)
    pool.release(table[1])  # freed behind the table's back: releasing it again is the pool's KvError
    problem = must_refuse(lambda: impl.rollback(pool, table, 4), "keep 4 of a table whose second block is already free")
    assert problem is None, problem + " (the pool refuses to release a free block; rollback turns that into SpecError)"
    assert not wrong, golden_mismatch(golden, "rollback", wrong)


def test_rollback_drops_one_reference_only(impl):
    pool = impl.new_pool(6, 4)
    a = filled_table(pool, [4, 4, 3])
    pool.retain(a[2])  # another sequence shares the last block (forked from this one)
    r = impl.rollback(pool, a, 4)
    assert r["released"] == 2 and r["table"] == a[:1], f"keep 4 releases blocks 2 and 3 of the table; got {r}"
    assert pool.refcount(a[2]) == 1, f"the shared block lost {2 - pool.refcount(a[2])} references: release drops ONE, its other owner keeps it"
    assert pool.refcount(a[1]) == 0, "the unshared block must be free"
    assert pool.free_blocks() == 4, f"exactly one block (the unshared one) returns to the pool; free blocks {pool.free_blocks()}, expected 4"


def test_blocks_conserved_across_rollbacks(impl):
    rng = random.Random(20261130)  # 200 seeded requests, the same every run
    block_tokens, num_blocks = 4, 64
    pool = impl.new_pool(num_blocks, block_tokens)
    live = {}  # request -> (table, cached)
    for req in range(200):
        table, cached = [], 0
        for _round in range(rng.randint(1, 6)):
            m = rng.randint(0, 8)  # pending + draft positions written by one forward
            grow = 1 + m
            for pos in range(cached, cached + grow):
                if pos % block_tokens == 0:
                    table.append(pool.alloc())
                pool.set_fill(table[-1], pos % block_tokens + 1)
            cached += grow
            keep = cached - m + rng.randint(0, m)  # many rejections: most drafts are cut
            with case(f"request {req}, keep {keep} of {cached}"):
                r = impl.rollback(pool, table, keep)
            want_blocks = -(-keep // block_tokens)
            assert r["table"] == table[:want_blocks], f"request {req}: keep {keep} needs {want_blocks} blocks, the table is now {r['table']}"
            table, cached = r["table"], keep
            if table:
                want_fill = keep - (len(table) - 1) * block_tokens
                assert pool.fill(table[-1]) == want_fill, f"request {req}: the last block's fill is {pool.fill(table[-1])}, it holds {want_fill}"
        live[req] = (table, cached)
        if len(live) > 3:  # a few requests at once; the oldest ends and gives everything back
            old = min(live)
            t, _ = live.pop(old)
            impl.rollback(pool, t, 0)
        held = sum(len(t) for t, _ in live.values())
        assert pool.free_blocks() == num_blocks - held, f"after request {req}: {num_blocks - held - pool.free_blocks()} blocks leaked"
    for t, _ in live.values():
        impl.rollback(pool, t, 0)
    assert pool.free_blocks() == num_blocks, f"after all requests ended {num_blocks - pool.free_blocks()} blocks are still held"


# ---- the real model ---------------------------------------------------------------------------------------------

def test_runner_target_scores_every_fed_position(impl, ref, chapter):
    tiny_llama.check_runner_target(impl, ref, chapter.data["model"])
