"""Properties of the reference speculative-decoding module over the fake target (hypothesis).

The chapter's tests (chapters/L10_8/tests) hold any implementation to fixed cases; these hold the reference
to the chapter's claims over many generated requests.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from chapters.L10_8.judge import stats
from chapters.L10_8.judge.fake_target import FakeTarget, greedy_reference
from harness.pack import pristine
from harness.pack import load_chapter
from harness.pack import open_impl
from tinyllm.infer import spec
from tinyllm.infer.sampling import SamplingParams
from tinyllm.kv import KvPool

VOCAB = 16
REF = pristine("L10.8")  # the judge's reference: the fake target's generator
GREEDY = SamplingParams()
DRAFTS = ("none", "ngram", "prompt_lookup")

# A repetitive prompt: a short random base repeated, the text prompt lookup is made for.
repetitive_prompts = st.lists(st.integers(0, VOCAB - 1), min_size=2, max_size=6).flatmap(
    lambda base: st.integers(2, 4).map(lambda n: base * n))
any_prompts = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(prompt=any_prompts, draft=st.sampled_from(DRAFTS), k=st.integers(1, 8), max_new=st.integers(1, 48))
def test_greedy_speculation_is_greedy(prompt, draft, k, max_new):
    target = FakeTarget(REF, VOCAB, budget=len(prompt) + max_new - 1)
    g = spec.generate(target, spec.SpecConfig.parse(draft, k), prompt, GREEDY, 0, max_new, [])
    assert g.tokens == greedy_reference(REF, prompt, max_new, VOCAB)
    assert target.cached() == len(prompt) + max_new - 1  # the same cached positions as plain greedy
    assert g.stats.target_calls == target.calls <= max_new
    assert g.finish_reason == "length"


@settings(max_examples=40, deadline=None)
@given(prompt=repetitive_prompts, k=st.integers(2, 8))
def test_prompt_lookup_needs_strictly_fewer_passes_on_repetitive_text(prompt, k):
    max_new = 48
    target = FakeTarget(REF, VOCAB)
    g = spec.generate(target, spec.SpecConfig.parse("prompt_lookup", k), prompt, GREEDY, 0, max_new, [])
    assert target.calls < max_new, f"{target.calls} passes for {max_new} tokens"
    assert g.stats.accepted > 0 and 0.0 < g.stats.accept_rate() <= 1.0


@settings(max_examples=40, deadline=None)
@given(prompt=any_prompts, draft=st.sampled_from(DRAFTS), max_new=st.integers(1, 40), which=st.integers(0, 39))
def test_generation_stops_at_max_new_and_right_after_eos(prompt, draft, max_new, which):
    plain = greedy_reference(REF, prompt, max_new, VOCAB)
    eos = plain[which % len(plain)]
    g = spec.generate(FakeTarget(REF, VOCAB), spec.SpecConfig.parse(draft, 4), prompt, GREEDY, 0, max_new, [eos])
    stop = plain.index(eos)
    assert g.tokens == plain[:stop + 1] and g.finish_reason == "eos"
    assert len(spec.generate(FakeTarget(REF, VOCAB), spec.SpecConfig.parse(draft, 4), prompt, GREEDY, 0, max_new, []).tokens) == max_new


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_rollback_keeps_blocks_equal_to_positions_and_leaks_nothing(data):
    b = data.draw(st.integers(1, 6), label="block_tokens")
    pool = KvPool(48, b)
    table, cached = [], 0
    for _ in range(data.draw(st.integers(1, 12), label="rounds")):
        grow = data.draw(st.integers(1, 9), label="pending + draft")
        if spec.blocks_for(cached + grow, b) > len(table) + pool.free_blocks():
            break
        for pos in range(cached, cached + grow):
            if pos % b == 0:
                table.append(pool.alloc())
            pool.set_fill(table[-1], pos % b + 1)
        cached += grow
        keep = data.draw(st.integers(cached - grow + 1, cached), label="kept")  # pending always kept
        spec.rollback(pool, table, keep)
        cached = keep
        assert len(table) == spec.blocks_for(cached, b)
        assert pool.fill(table[-1]) == cached - (len(table) - 1) * b
        assert pool.free_blocks() == 48 - len(table)
    spec.rollback(pool, table, 0)
    assert table == [] and pool.free_blocks() == 48


BAD_CALLS = [
    ("k", lambda: spec.SpecConfig.parse("ngram", 17)),
    ("'prompt-lookup'", lambda: spec.SpecConfig.parse("prompt-lookup", 4)),
    ("min_ngram", lambda: spec.prompt_lookup([1, 2], 2, 1, 2)),
    ("k", lambda: spec.prompt_lookup([1, 2], -1, 3, 1)),
    ("n", lambda: spec.ngram_draft([1, 2], 2, 0)),
    ("q", lambda: spec.residual([0.5, 0.5], [1.0])),
    ("u", lambda: spec.sample_dense([0.5, 0.5], 1.0)),
    ("q[0] = 0", lambda: spec.speculative_step([0.5, 0.5], [0.0, 1.0], 0, 0.1, 0.1)),
    ("rows", lambda: spec.verify_draft([[0.0, 1.0]], [1], None, GREEDY, [], [], None)),
    ("vocabulary", lambda: spec.verify_draft([[0.0, 1.0], [0.0, 1.0]], [2], None, GREEDY, [], [], None)),
    ("draft distributions", lambda: spec.verify_draft([[0.0, 1.0], [0.0, 1.0]], [1], [], SamplingParams(temperature=1.0), [], [], None)),
    ("vocabulary", lambda: spec.dense_distribution([0.0, 1.0], GREEDY, [5], [])),
    ("block_tokens", lambda: spec.blocks_for(3, 0)),
    ("keep", lambda: spec.rollback(KvPool(4, 2), [], 3)),
    ("prompt", lambda: spec.generate(FakeTarget(REF, VOCAB), spec.SpecConfig.parse("none", 1), [], GREEDY, 0, 4, [])),
    ("seed", lambda: spec.generate(FakeTarget(REF, VOCAB), spec.SpecConfig.parse("none", 1), [1], GREEDY, -1, 4, [])),
]


@pytest.mark.parametrize("named, call", BAD_CALLS, ids=[f"{i}-{n}" for i, (n, _) in enumerate(BAD_CALLS)])
def test_a_bad_call_is_a_spec_error_that_names_the_argument(named, call):
    with pytest.raises(spec.SpecError) as e:
        call()
    assert named in str(e.value), f"the message should name {named!r}: {e.value}"


def test_sampled_verification_draws_two_uniforms_per_position_and_one_for_the_bonus():
    from tinyllm.rng import Pcg32

    rows = [np.zeros(4, dtype=np.float32)] * 4  # uniform p: p(d)/q(d) = 1/4 per one-hot draft
    for seed in range(50):
        rng = Pcg32.from_seed(seed)
        v = spec.verify_draft(rows, [1, 2, 3], None, SamplingParams(temperature=1.0), [], [], rng)
        draws = 2 * (v.n_accepted + 1) if v.n_accepted < 3 else 2 * 3 + 1
        ref = Pcg32.from_seed(seed)
        for _ in range(2 * draws):
            ref.next_u32()
        assert rng.next_u32() == ref.next_u32(), f"seed {seed}: expected {draws} uniforms"


def test_the_statistical_check_drafts_what_prompt_lookup_drafts():
    assert spec.prompt_lookup(stats.PROMPT, stats.K, 3, 1) == stats.DRAFT
    # and its batch is the first round of generation: same first token as generate_stream, seed by seed
    impl = open_impl(load_chapter("L10.8"), "reference")
    for seed in stats.seeds(0)[:25]:
        g = spec.generate_stream(FakeTarget(REF, VOCAB), spec.SpecConfig.parse("prompt_lookup", stats.K), stats.PROMPT,
                                 SamplingParams(**stats.PARAMS), seed, stats.K + 1, [], lambda t, lp: False)
        rows = FakeTarget(REF, VOCAB).extend(stats.PROMPT + stats.DRAFT)[len(stats.PROMPT) - 1:]
        assert impl.verify_first_tokens([r.tolist() for r in rows], stats.DRAFT, None, stats.PARAMS, stats.PROMPT, [], [seed]) == g.tokens[:1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=2, max_size=20), st.integers(0, 2**32 - 1))
def test_the_checks_pearson_statistic_is_scipys_chisquare(expected_counts, seed):
    """judge/stats.pearson (scipy.special.chdtrc, so a check need not import scipy.stats) returns what
    scipy.stats.chisquare does, on counts drawn around random expectations of the same total."""
    from scipy.stats import chisquare

    rng = np.random.default_rng(seed)
    e = np.asarray(expected_counts, dtype=float)
    o = rng.multinomial(int(e.sum()), e / e.sum()).astype(float)
    e = e * (o.sum() / e.sum())  # chisquare wants equal totals
    want = chisquare(o, e)
    got = stats.pearson(o, e)
    assert got[0] == pytest.approx(float(want.statistic), rel=1e-12, abs=1e-12)
    assert got[1] == pytest.approx(float(want.pvalue), rel=1e-9, abs=1e-300)

