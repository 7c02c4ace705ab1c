"""Whole generations the judge expects, round by round, and where an implementation's generation parts from them.

Two oracles, one shape (`Expected`: every round's fed ids, draft, emitted tokens and logprobs):

    pristine_generation   the judge's pristine reference `generate_stream` on a fresh fake target: the
                          answer for requests whose output no earlier part of the chapter can change
                          (no draft: the verifier only ever takes the bonus token), and for greedy
                          unpenalised requests (greedy speculation is greedy).
    own_parts_generation  spec.pyi's generate_stream, steps 1 to 5, run by the judge over the
                          implementation's OWN `propose` and `verify_draft` (and a fresh fake target):
                          the answer for drafted requests that are sampled or penalised, whose tokens
                          also depend on the drafts and the verifier's draws. Those parts have tests of
                          their own (the drafts', verify_matches_python_l8_6, ...); this oracle judges
                          the loop alone: what it drafts, feeds and keeps, which rows and history it
                          hands the verifier, that one generator serves the whole request, and how EOS
                          and the listener end it. On the reference's parts it is the reference's
                          generate_stream, request for request (staff_tests/test_replay.py).

The request's generator crosses rounds inside the implementation; the judge follows it from the
outside. verify_draft's op starts a generator from a seed, and Pcg32.from_seed is a bijection from
seeds to states (spec/pcg32.md section 3: state = (inc + seed) * MULTIPLIER + inc mod 2^64, and the
multiplier is odd), so the judge starts each round's verify_draft at the seed whose generator stands
where the request's does after the earlier rounds, and reads how far the call moved it from the
generator's next u32, which the op returns.
"""

from dataclasses import dataclass, field

import numpy as np

from harness.pack import MASK64, SubmissionFailure, where_differ

from ..spelling import Spelling, spelling
from .fake_target import FakeTarget, FakeTargetError
from .judging import case, short
from .requests import VOCAB
from .targets import LoggedTarget

MAX_DRAWS = 4 * 17 + 8  # u32 draws one round may take: two uniforms per draft position (k <= 16), one for the bonus


@dataclass
class Round:
    fed: list[int]  # the ids of the round's one forward pass: pending token(s), then the draft
    draft: list[int]
    tokens: list[int]  # what the round emits (before EOS or the listener cut it)
    logprobs: list[float]
    n_accepted: int


@dataclass
class Expected:
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "length"
    rounds: list[Round] = field(default_factory=list)
    cached: int = 0  # the target's positions when generation ends
    oracle: str = ""  # how the judge got it, in words, for the messages
    asked: dict = field(default_factory=dict)  # own parts: (ctx, budget) -> the draft each round took

    def stats(self) -> dict:
        return {"drafted": sum(len(r.draft) for r in self.rounds), "accepted": sum(r.n_accepted for r in self.rounds),
                "target_calls": len(self.rounds)}


class Listener:
    """on_token for the judge's own runs: says False on call `stop_at` (1-based), True otherwise."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at, self.calls = stop_at, 0

    def __call__(self, _token, _logprob) -> bool:
        self.calls += 1
        return self.stop_at is None or self.calls < self.stop_at


def pristine_generation(ref, cfg: dict, prompt, params: dict, seed: int, max_new: int, eos=(), vocab: int = VOCAB,
                        stop_at: int | None = None) -> Expected:
    """The pristine reference's generate_stream on a fresh fake target, with its rounds."""
    spec, sampling = ref.module("infer.spec"), ref.module("infer.sampling")
    target, listener = LoggedTarget(ref, vocab), Listener(stop_at)
    handed: list[tuple[int, int, float]] = []  # (round, token, logprob), in the order handed over

    def on_token(t, lp):
        handed.append((len(target.fed), int(t), float(lp)))
        return listener(t, lp)

    extra = {k: cfg[k] for k in ("max_ngram", "min_ngram") if k in cfg}
    g = spec.generate_stream(target, spec.SpecConfig.parse(cfg["draft"], cfg["k"], **extra), list(prompt),
                             sampling.SamplingParams(**params), seed, max_new, list(eos), on_token)
    want = Expected(list(g.tokens), list(g.logprobs), g.finish_reason, [], target.cached(), "the reference's generate")
    for r, (before, fed, kept) in enumerate(target.forward_passes(), start=1):
        pending = len(prompt) if r == 1 else 1
        toks = [(t, lp) for rr, t, lp in handed if rr == r]
        want.rounds.append(Round(fed, fed[pending:], [t for t, _ in toks], [lp for _, lp in toks], kept - before - pending))
    return want


def seed_at(rng, state: int) -> int:
    """The seed whose Pcg32.from_seed generator stands at `state`: from_seed leaves
    (inc + seed) * MULTIPLIER + inc (spec/pcg32.md section 3), inverted; `rng` is the judge's rng module."""
    inc = rng.Pcg32.from_seed(0).inc
    return ((state - inc) * pow(rng.MULTIPLIER, -1, 1 << 64) - inc) & MASK64


def _drawn(rng, state: int, next_u32: int) -> tuple[int, int] | None:
    """(how many u32 a generator at `state` drew before `next_u32` came out, the state it then stands at);
    None beyond MAX_DRAWS."""
    gen = rng.Pcg32.from_seed(seed_at(rng, state))
    for n in range(MAX_DRAWS + 1):
        before = gen.state
        if gen.next_u32() == next_u32:
            return n, before
    return None


Answers = dict[tuple[tuple[int, ...], int], list[int]]  # (ctx, budget) -> the draft propose gave


class PartUnusable(AssertionError):
    """The implementation's own propose or verify_draft answered what no loop can use (a draft the target refuses,
    more accepted than drafted, more draws than a round takes): a slip of that part, which its own tests judge."""


def proposed(generated: dict) -> Answers:
    """What propose answered the implementation's own generation, by its arguments: the Python worker notes each call
    its generate makes (ops.op_generate); none from a compiled port's worker, or for a loop that drafts without
    calling propose by that name. The first answer to the same arguments stands."""
    out: Answers = {}
    for ctx, k, draft in generated.get("proposed", ()):
        out.setdefault((tuple(ctx), k), list(draft))
    return out


def own_parts_generation(impl, ref, cfg: dict, prompt, params: dict, seed: int, max_new: int, eos=(), vocab: int = VOCAB,
                         stop_at: int | None = None, answers: Answers | None = None) -> Expected:
    """spec.pyi's generate_stream, steps 1 to 5, run by the judge over the implementation's own propose and
    verify_draft on a fresh fake target (the implementation's parts are called through the protocol). `answers`:
    propose's answers as the implementation's own loop got them (`proposed`), taken where the loop asked what step 1
    asks; the judge asks propose the rest. A propose that keeps state between calls answers the judge otherwise than
    it answered the loop: its answers to the loop keep that slip out of the loop's verdict, on every seed."""
    rng = ref.module("rng")
    target, listener = FakeTarget(ref, vocab), Listener(stop_at)
    want = Expected(oracle="what your own propose and verify_draft give, composed as spec.pyi's generate_stream composes them")
    prompt, eos = [int(t) for t in prompt], set(int(t) for t in eos)
    state = rng.Pcg32.from_seed(seed).state  # the request's generator, followed from outside
    answers = answers or {}
    while len(want.tokens) < max_new:
        emitted = list(want.tokens)
        budget = min(cfg["k"], max_new - len(emitted) - 1)  # step 1
        asked = (tuple(prompt + emitted), budget)
        if budget <= 0:
            draft = []
        elif asked in answers:
            draft = answers[asked]
        else:
            draft = [int(t) for t in impl.propose(cfg, prompt + emitted, budget)]
        want.asked[asked] = draft
        fed = ([emitted[-1]] if emitted else prompt) + draft  # step 2
        try:
            rows = target.extend(fed)[len(fed) - len(draft) - 1:]
        except FakeTargetError as e:  # the draft your propose gave cannot be fed: a wrong answer, not the judge's fault
            raise PartUnusable(f"your propose drafted {short(draft)} for a context of {len(prompt + emitted)} ids, "
                                 f"which the target refuses: {e}") from None
        v = impl.verify_draft([np.asarray(r).tolist() for r in rows], draft, None, params, prompt, emitted,
                              seed_at(rng, state))  # step 3
        drawn = _drawn(rng, state, v["next_u32"])
        if drawn is None:
            raise PartUnusable(f"your verify_draft drew more than {MAX_DRAWS} u32 for a draft of {len(draft)} "
                                 "(two uniforms per draft position and one for the bonus token at most)")
        state = drawn[1]
        try:
            target.truncate(target.cached() - len(draft) + v["n_accepted"])  # step 4
        except FakeTargetError as e:  # an n_accepted no rollback can give: a wrong answer
            raise PartUnusable(f"your verify_draft accepted {v['n_accepted']} of a draft of {len(draft)}: {e}") from None
        want.rounds.append(Round(fed, draft, list(v["tokens"]), list(v["logprobs"]), v["n_accepted"]))
        for t, lp in zip(v["tokens"], v["logprobs"]):  # step 5
            want.tokens.append(int(t))
            want.logprobs.append(float(lp))
            if not listener(t, lp):
                want.finish_reason = "stopped"
                break
            if t in eos:
                want.finish_reason = "eos"
                break
        if want.finish_reason != "length":
            break
    want.cached = target.cached()
    return want


def _round_of(want: Expected, index: int) -> tuple[int, int]:
    """(round number, 1-based; first token index of that round) of the token at `index` of the expected stream."""
    start = 0
    for r, rd in enumerate(want.rounds, start=1):
        if index < start + len(rd.tokens):
            return r, start
        start += len(rd.tokens)
    return len(want.rounds), start


def parting(where: str, want: Expected, got: dict, fed: list[list[int]] | None = None, cached: int | None = None,
            heard: list[int] | None = None, logprob_tol: float = 1e-9, spell: Spelling = Spelling()) -> str | None:
    """Where the implementation's generation `got` parts from `want`, in words naming the round and the token;
    None when it does not. Compared: what it fed its target round by round (`fed`, when given), the tokens,
    finish_reason, logprobs, what the listener heard (`heard`, when given), SpecStats and the positions the
    target holds at the end (`cached`); the last two only with `fed` (they follow from the rounds). `spell`: the
    student's language, which the values are written in."""
    head = f"{where}: the expected generation is {want.oracle}."
    toks = list(got["tokens"])
    j = next((i for i, (a, b) in enumerate(zip(want.tokens, toks)) if a != b), None)
    if j is None and len(toks) != len(want.tokens):
        j = min(len(toks), len(want.tokens))
    r_tok = _round_of(want, j)[0] if j is not None else None
    r_fed = next((r for r, (w, g) in enumerate(zip(want.rounds, fed or []), start=1) if w.fed != g), None)
    if r_fed is not None and (r_tok is None or r_fed <= r_tok):  # it fed something else before any token parted
        w, g = want.rounds[r_fed - 1], (fed or [])[r_fed - 1]
        emitted = sum(len(x.tokens) for x in want.rounds[:r_fed - 1])
        pending = w.fed[:len(w.fed) - len(w.draft)]
        return (f"{head}\n  Round {r_fed} (forward pass {r_fed}) comes after {emitted} emitted tokens, all as expected; it should "
                f"feed the pending {'prompt' if r_fed == 1 else 'token'} {short(pending, 8)} then the draft {w.draft} "
                f"(propose(cfg, prompt + emitted, min(k, max_new - emitted - 1)), nothing when that budget is 0),\n"
                f"  {short(w.fed, 24)}; your loop fed {short(g, 24)}")
    if j is not None:
        r, start = _round_of(want, j)
        at = want.rounds[r - 1] if want.rounds else None
        said = f"round {r} fed {short(at.fed, 12)} after {start} emitted tokens and emits {at.tokens}" if at else "there is no round at all"
        return (f"{head}\n  The generations part at token {j}, in round {r}: expected "
                f"{want.tokens[j] if j < len(want.tokens) else 'the end'}, got {toks[j] if j < len(toks) else 'the end'} "
                f"({said}).\n  expected {short(want.tokens, 40)}\n  got      {short(toks, 40)}")
    if got["finish_reason"] != want.finish_reason:
        return (f"{head}\n  Same {len(toks)} tokens, but finish_reason {spell.value(got['finish_reason'])!r}; expected "
                f"{spell.value(want.finish_reason)!r}")
    lps = list(got["logprobs"])
    if len(lps) != len(toks):
        return f"{head}\n  {len(toks)} tokens but {len(lps)} logprobs: one logprob per emitted token, cut where the tokens are cut"
    bad = next((i for i, (a, b) in enumerate(zip(want.logprobs, lps)) if not (a == b or abs(a - b) <= logprob_tol)), None)
    if bad is not None:
        r, _ = _round_of(want, bad)
        return f"{head}\n  Token {bad} (round {r}) is right, its logprob is not: expected {want.logprobs[bad]!r}, got {lps[bad]!r}"
    if heard is not None and heard != toks:
        return (f"{head}\n  The listener heard {short(heard, 40)}, generate returned {short(toks, 40)} "
                f"({where_differ(toks, heard, whose='what it heard')})")
    if fed is None:
        return None
    want_stats = want.stats()
    got_stats = {k: got["stats"][k] for k in want_stats}
    if got_stats != want_stats:
        return (f"{head}\n  Same tokens, but stats {spell.value(got_stats)!r}; expected {spell.value(want_stats)!r} over its "
                f"{len(want.rounds)} rounds")
    if cached is not None and cached != want.cached:
        return (f"{head}\n  Same tokens, but the target holds {cached} positions at the end; expected {want.cached} "
                "(every round truncates to the kept length: rejected drafts' KV goes back)")
    return None


def propose_broke_it(impl, target, prompt, k: int, max_new: int) -> bool:
    """Whether a generate that failed on its target's refusal was refused for a draft D that propose gave its loop in
    that very round's step 1 and that no propose may answer: the refused extend is the round's pending ids then D;
    the Python worker's record (`impl.proposed()`) holds step 1's call, propose(cfg, prompt + emitted,
    min(k, max_new - emitted - 1)) -> D; and D's own flaw is the refusal: ids outside the vocabulary that its
    context lacks, or more ids than asked where the asked number would have fit the budget (prompt lookup copies
    from the context and the n-gram draft follows it, at most k of them). That is propose's slip, which its own
    tests judge: the loop did what it must with the draft it was given. No record (a compiled port): never."""
    if not target.refused:
        return False
    fed, cached = target.refused[-1], target.cached()
    pending = len(prompt) if cached == 0 else 1
    ctx, draft = target.ids + fed[:pending], fed[pending:]
    if not fed or not draft or (cached == 0 and fed[:pending] != list(prompt)):
        return False
    budget = min(k, max_new - (len(ctx) - len(prompt)) - 1)
    if [ctx, budget, draft] not in impl.proposed():
        return False
    outside = [t for t in fed if not 0 <= t < target.vocab]
    if outside:  # the target's first refusal: an id outside the vocabulary
        return all(t in draft and t not in ctx for t in outside)
    return (target.budget is not None and len(draft) > budget
            and cached + pending + max(budget, 0) <= target.budget)  # what step 1 asked for would have fit


def generated(impl, target, where: str, cfg: dict, prompt, params: dict, seed: int, max_new: int, eos=(),
              on_token=None) -> dict | None:
    """impl.generate, its failures named by `where`; None when it failed because its own propose gave its loop a draft
    no propose may answer (propose_broke_it): nothing the request can say of the loop."""
    try:
        with case(where):
            return impl.generate(target, cfg, list(prompt), params, seed, max_new, list(eos), on_token=on_token)
    except Exception:
        if propose_broke_it(impl, target, prompt, cfg["k"], max_new):
            return None
        raise


def own_expected(impl, ref, cfg: dict, prompt, params: dict, seed: int, max_new: int, eos=(), stop_at: int | None = None,
                 answers: Answers | None = None) -> Expected | None:
    """own_parts_generation, or None when the implementation's own propose or verify_draft fails outright (a timeout,
    a crash, an exception) or answers what no loop can use (PartUnusable): then the request cannot judge the loop,
    and the parts' own tests judge that failure, so one slip costs those tests alone, on every seed."""
    try:
        return own_parts_generation(impl, ref, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at, answers=answers)
    except (SubmissionFailure, PartUnusable):
        return None


def check_generation(impl, ref, where: str, oracle: str, cfg: dict, prompt, params: dict, seed: int, max_new: int,
                     eos=(), stop_at: int | None = None, stream: bool = False, hint: str = "") -> dict | None:
    """Generate with the implementation on a logged fake target holding the request's KV budget, and fail with
    the round and token where it parts from the expected generation (rounds, tokens, finish, logprobs, what the
    listener heard, stats, cached positions). oracle: "reference" (pristine_generation) or "own parts"
    (own_expected, composed before the generate is asked anything, so a part that fails outright costs no
    generate; then again over propose's answers to the generate's own loop where they differ from the judge's).
    A listener is used when `stream` or `stop_at` is given; `hint` ends the message. Returns the implementation's
    answer, or None when the own parts cannot judge the request (own_expected)."""
    own = oracle != "reference"
    try:  # first: a part that fails outright fails here, before the implementation's generate is asked anything
        want = own_parts_generation(impl, ref, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at) if own else \
            pristine_generation(ref, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at)
    except SubmissionFailure:
        if own:
            return None
        raise
    except PartUnusable:  # what propose answered the judge; what it answers the generate's loop may differ
        want = None
    target = LoggedTarget(ref, VOCAB, budget=len(prompt) + max(max_new, 1) - 1)
    heard: list[int] | None = [] if (stream or stop_at is not None) else None
    listener = None
    if heard is not None:
        def listener(t, lp) -> bool:  # hear the token; go on unless told to stop there
            heard.append(int(t))
            return stop_at is None or len(heard) < stop_at
    try:
        g = generated(impl, target, where, cfg, prompt, params, seed, max_new, eos, on_token=listener)
    except Exception:
        if want is None:  # the parts answered the judge what no loop can use: that explains it
            return None
        raise
    if g is None:
        return None
    answers = proposed(g)
    if own and (want is None or any(answers.get(asked, draft) != draft for asked, draft in want.asked.items())):
        want = own_expected(impl, ref, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at, answers=answers)
        if want is None:
            return None
    assert want is not None
    assert not target.misuse, f"{where}: {target.misuse[0]}"
    problem = parting(where, want, g, fed=target.fed, cached=target.cached(), heard=heard, spell=spelling(impl.language))
    assert problem is None, problem + (f"\n  {hint}" if hint else "")
    return g
