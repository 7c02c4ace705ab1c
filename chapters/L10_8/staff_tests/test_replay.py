"""The judge's round-by-round oracles (chapters/L10_8/judge/replay.py) on the reference.

own_parts_generation runs spec.pyi's generate_stream steps over an implementation's own propose and
verify_draft, following the request's generator from outside (seed_at). On the reference's parts it must be
the reference's generate_stream, round for round, whatever the request; and the parting message must name
the round and the token where two generations part.
"""

from hypothesis import given, settings, strategies as st
import pytest

from chapters.L10_8.judge.fake_target import FakeTarget, FakeTargetError
from chapters.L10_8.judge.replay import (Expected, Round, check_generation, own_parts_generation, parting, pristine_generation,
                                         propose_broke_it, proposed, seed_at)
from harness.pack import pristine
from harness.pack import load_chapter
from harness.pack import open_impl

REF = pristine("L10.8")
IMPL = open_impl(load_chapter("L10.8"), "reference")
IMPL.start_budget(10**9)
PARAMS = [{"temperature": 0.0}, {"temperature": 0.8}, {"temperature": 1.0, "top_k": 5},
          {"temperature": 0.7, "top_p": 0.9, "repetition_penalty": 1.3, "frequency_penalty": 0.3, "presence_penalty": 0.2},
          {"temperature": 0.0, "repetition_penalty": 1.5, "frequency_penalty": 0.4}]


def test_seed_at_inverts_from_seed():
    Pcg32 = REF.module("rng").Pcg32
    for seed in (0, 1, 11, 2**63, 2**64 - 1):
        g = Pcg32.from_seed(seed)
        for _ in range(7):
            g.next_u32()
        h = Pcg32.from_seed(seed_at(REF.module("rng"), g.state))
        assert (h.state, h.inc) == (g.state, g.inc)
        assert [h.next_u32() for _ in range(5)] == [g.next_u32() for _ in range(5)]


@settings(max_examples=80, deadline=None)
@given(base=st.lists(st.integers(0, 15), min_size=1, max_size=7), repeat=st.integers(1, 3),
       draft=st.sampled_from(["none", "ngram", "prompt_lookup"]), k=st.integers(1, 8), params=st.sampled_from(PARAMS),
       seed=st.integers(0, 2**64 - 1), max_new=st.integers(0, 30), eos=st.lists(st.integers(0, 15), max_size=1),
       stop_at=st.none() | st.integers(1, 30))
def test_own_parts_of_the_reference_are_the_reference(base, repeat, draft, k, params, seed, max_new, eos, stop_at):
    cfg, prompt = {"draft": draft, "k": k}, base * repeat
    want = pristine_generation(REF, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at)
    got = own_parts_generation(IMPL, REF, cfg, prompt, params, seed, max_new, eos, stop_at=stop_at)
    assert (got.tokens, got.finish_reason, got.cached, got.stats()) == (want.tokens, want.finish_reason, want.cached, want.stats())
    assert [(r.fed, r.draft, r.n_accepted) for r in got.rounds] == [(r.fed, r.draft, r.n_accepted) for r in want.rounds]
    assert len(got.logprobs) == len(want.logprobs) and all(abs(a - b) <= 1e-12 for a, b in zip(got.logprobs, want.logprobs))
    as_answer = {"tokens": want.tokens, "logprobs": want.logprobs, "finish_reason": want.finish_reason, "stats": want.stats()}
    assert parting("x", got, as_answer, fed=[r.fed for r in want.rounds], cached=want.cached) is None


def test_parting_names_the_round_and_the_token():
    want = Expected([1, 2, 3, 4, 5], [-1.0] * 5, "length", [Round([7, 8], [8], [1, 2], [-1.0] * 2, 1), Round([2, 3], [3], [3], [-1.0], 0),
                                                            Round([3], [], [4, 5], [-1.0] * 2, 0)], 9, "the judge's")
    got = {"tokens": [1, 2, 3, 9, 5], "logprobs": [-1.0] * 5, "finish_reason": "length",
           "stats": {"drafted": 2, "accepted": 1, "target_calls": 3}}
    message = parting("here", want, got)
    assert "part at token 3, in round 3: expected 4, got 9" in message, message
    message = parting("here", want, {**got, "tokens": [1, 2, 3, 4, 5]}, fed=[[7, 8], [2, 3, 4], [3]])
    assert "Round 2 (forward pass 2)" in message and "your loop fed [2 3 4]" in message, message
    message = parting("here", want, {**got, "tokens": [1, 2, 3, 4, 5], "finish_reason": "eos"})
    assert "finish_reason 'eos'" in message, message


def test_a_propose_that_keeps_state_is_judged_by_what_it_answered_the_loop():
    """A propose that remembers what it was asked (its first answer to each arguments, then nothing) answers the
    judge's composition one draft and the implementation's loop another: the judge composes the expected generation
    from propose's answers to the loop itself (the Python worker's record, replay.proposed), so the loop, the
    reference's, passes; without the record it would be blamed for propose's state."""
    spec = IMPL.transport.session.module("infer.spec")
    real, asked = spec.propose, set()

    def forgetful(cfg, ctx, k):
        key = (tuple(ctx), k)
        if key in asked:
            return []
        asked.add(key)
        return real(cfg, ctx, k)

    cfg, prompt = {"draft": "ngram", "k": 4}, [1, 2, 3, 1, 2, 3, 1, 2]
    spec.propose = forgetful
    try:
        g = check_generation(IMPL, REF, "a drafted request", "own parts", cfg, prompt, PARAMS[4], 5, 16)
        judged = own_parts_generation(IMPL, REF, cfg, prompt, PARAMS[4], 5, 16)  # every argument asked before: no drafts
        asked.clear()
        fresh = own_parts_generation(IMPL, REF, cfg, prompt, PARAMS[4], 5, 16)
    finally:
        spec.propose = real
    assert g is not None and proposed(g) and not any(proposed(g).values()), "the loop was answered nothing, on record"
    assert not judged.stats()["drafted"] and fresh.stats()["drafted"], "the judge's first asking drew drafts"


class _Recorded:
    """An implementation that is only its record of propose's calls to the loop."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def proposed(self) -> list:
        return self.calls


def test_a_refused_draft_is_proposes_slip_only_when_step_1_asked_for_it_and_its_flaw_is_the_refusal():
    prompt = [1, 2, 3]
    target = FakeTarget(REF, 16)
    with pytest.raises(FakeTargetError):
        target.extend([1, 2, 3, 40])  # the prompt, then a draft holding an id outside the vocabulary
    broke = lambda calls, t=target, k=2, max_new=10: propose_broke_it(_Recorded(calls), t, prompt, k, max_new)
    assert broke([[[1, 2, 3], 2, [40]]]), "step 1 asked for 2 and propose drafted 40, which its context lacks"
    assert not broke([[[1, 2, 3], 2, [3]]]), "propose drafted [3]: the loop fed 40 itself"
    assert not broke([[[1, 2], 2, [40]]]) and not broke([[[1, 2, 3], 4, [40]]]), "not step 1's call: the loop asked otherwise"
    assert not broke([]), "no record (a compiled port): the loop's failure stands"
    full = FakeTarget(REF, 16, budget=4)  # len(prompt) + max_new - 1 with max_new 2: step 1 asks for min(k, 1) = 1
    with pytest.raises(FakeTargetError):
        full.extend([1, 2, 3, 1, 2])
    assert broke([[[1, 2, 3], 1, [1, 2]]], full, 2, 2), "asked for 1, drafted 2: propose's slip, 1 would have fit"
    assert not broke([[[1, 2, 3], 2, [1, 2]]], full, 2, 2), "the loop asked for 2 past the budget: its own slip"
    assert not broke([[[1, 2, 3], 2, [40]]], FakeTarget(REF, 16)), "nothing refused"


def test_the_worker_notes_propose_as_it_is_called_and_leaves_a_module_as_it_found_it():
    """ops._noting wraps a submission's propose for one generate: a call by any names is noted and answered as
    propose answers it, attributes read through the wrapper are propose's, the module gets its own propose back, and a
    submission that drafts without a propose of its own gets nothing wrapped (nothing to fail on)."""
    from types import SimpleNamespace

    from chapters.L10_8 import ops

    cfg = SimpleNamespace(draft="ngram", k=4, max_ngram=3, min_ngram=1)

    def propose(config, context, budget):
        return list(context[:budget])
    propose.cache_clear = lambda: "cleared"
    spec, asked = SimpleNamespace(propose=propose), []
    with ops._noting(spec, cfg, asked):
        assert spec.propose(cfg, [5, 6, 7], 2) == [5, 6] and spec.propose(config=cfg, context=[8, 9], budget=1) == [8]
        assert spec.propose(SimpleNamespace(draft="prompt_lookup", k=4, max_ngram=3, min_ngram=1), [1], 1) == [1]
        assert spec.propose.cache_clear() == "cleared" and spec.propose.__name__ == "propose"
    assert spec.propose is propose
    assert asked == [[[5, 6, 7], 2, [5, 6]], [[8, 9], 1, [8]]], "each call with the request's configuration, by any names"
    bare = SimpleNamespace()
    with ops._noting(bare, cfg, asked):
        pass
    assert not hasattr(bare, "propose")


def test_the_worker_never_consumes_an_iterator_and_forwards_every_attribute():
    """A context or a draft that is an iterator goes unnoted and reaches the loop whole; a callable object's methods
    and a cache's cache_clear are read through the wrapper; a propose that changes its context goes unnoted."""
    from collections import namedtuple
    from functools import lru_cache
    from types import SimpleNamespace

    from chapters.L10_8 import ops

    cfg = namedtuple("SpecConfig", "draft k max_ngram min_ngram")("ngram", 4, 3, 1)  # hashable, as a frozen dataclass is

    class Proposer:
        def __call__(self, cfg, ctx, k):
            return iter(list(ctx)[:k])

        def forget(self):
            return "forgot"

    spec, asked = SimpleNamespace(propose=Proposer()), []
    with ops._noting(spec, cfg, asked):
        assert list(spec.propose(cfg, iter([4, 5, 6]), 2)) == [4, 5] and spec.propose.forget() == "forgot"
        assert list(spec.propose(cfg, [4, 5, 6], 2)) == [4, 5]
    assert asked == [], "neither an iterator context nor an iterator draft is noted"

    @lru_cache
    def cached(cfg, ctx, k):
        return ctx[:k]
    spec = SimpleNamespace(propose=cached)
    with ops._noting(spec, cfg, asked):
        assert spec.propose(cfg, (7, 8), 1) == (7,) and spec.propose.cache_info().hits == 0
        spec.propose.cache_clear()

    def eats(cfg, ctx, k):
        ctx.append(9)
        return [9]
    spec = SimpleNamespace(propose=eats)
    with ops._noting(spec, cfg, asked):
        spec.propose(cfg, [1, 2], 1)
    assert asked == [[[7, 8], 1, [7]]], asked
