"""The sampler of spec/sampling.md, one hand-computed case per step and knob."""
import decimal
import math

import numpy as np
import pytest

from tinyllm.infer.sampling import (SamplingError, SamplingParams, apply_penalties, argmax, distribution,
                                    logprob, sample)

ln = math.log
INF = math.inf


def P(**kw):
    return SamplingParams(**kw)


def approx(xs):
    return pytest.approx(xs, rel=1e-12, abs=1e-15)


# --- parameters ---------------------------------------------------------------------------------

def test_defaults_are_off():
    p = P()
    assert (p.temperature, p.top_k, p.top_p, p.min_p) == (0.0, 0, 1.0, 0.0)
    assert (p.repetition_penalty, p.presence_penalty, p.frequency_penalty) == (1.0, 0.0, 0.0)
    assert p.greedy


@pytest.mark.parametrize("knob,value", [
    ("temperature", -0.1), ("temperature", math.nan), ("temperature", INF),
    ("top_k", -1), ("top_k", 1.5), ("top_k", True),
    ("top_p", 0.0), ("top_p", 1.1), ("top_p", -0.5), ("top_p", math.nan),
    ("min_p", -0.1), ("min_p", 1.1), ("min_p", math.nan),
    ("repetition_penalty", 0.0), ("repetition_penalty", -1.0), ("repetition_penalty", INF),
    ("presence_penalty", math.nan), ("presence_penalty", -INF),
    ("frequency_penalty", INF), ("frequency_penalty", math.nan),
])
def test_out_of_range_params_refused(knob, value):
    with pytest.raises(SamplingError, match=knob):
        P(**{knob: value})


@pytest.mark.parametrize("knob,value", [("top_p", 1.0), ("min_p", 1.0), ("min_p", 0.0), ("top_k", 0),
                                        ("presence_penalty", -2.0), ("frequency_penalty", -0.5)])
def test_range_edges_accepted(knob, value):
    P(**{knob: value})


def test_sampling_error_is_a_value_error():
    assert issubclass(SamplingError, ValueError)


# --- penalties ----------------------------------------------------------------------------------

def test_repetition_penalty_divides_positive_and_multiplies_negative():
    # ids 0 (2.0 -> 1.0) and 1 (-1.0 -> -2.0) were seen; 2 and 3 were not; 0 stays 0
    x = apply_penalties([2.0, -1.0, 0.5, 3.0, 0.0], P(repetition_penalty=2.0), prompt=[0, 4], output=[1, 1, 1])
    assert list(x) == [1.0, -2.0, 0.5, 3.0, 0.0]


def test_repetition_counts_each_id_once():
    x = apply_penalties([8.0, -8.0], P(repetition_penalty=2.0), prompt=[0, 0, 1], output=[0, 1, 1])
    assert list(x) == [4.0, -16.0]


def test_repetition_keeps_minus_inf():
    x = apply_penalties([-INF, 1.0], P(repetition_penalty=3.0), prompt=[0], output=[])
    assert x[0] == -INF


def test_frequency_and_presence_count_output_only():
    # output has id 1 twice, id 2 once; id 0 only in the prompt is untouched
    x = apply_penalties([1.0, 1.0, 1.0, 1.0], P(frequency_penalty=0.5, presence_penalty=0.25),
                        prompt=[0, 0, 3], output=[1, 2, 1])
    assert list(x) == [1.0, 1.0 - (2 * 0.5 + 0.25), 1.0 - (0.5 + 0.25), 1.0]


def test_negative_presence_is_a_bonus():
    x = apply_penalties([0.0, 0.0], P(presence_penalty=-1.0), prompt=[], output=[1])
    assert list(x) == [0.0, 1.0]


def test_repetition_then_frequency_presence():
    # spec section 3: [2,-1,0.5,3] -> repetition over {0,1,3}: [1,-2,0.5,1.5]
    # -> id1 -= 1*0.5+0.25, id3 -= 2*0.5+0.25
    x = apply_penalties([2.0, -1.0, 0.5, 3.0], P(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25),
                        prompt=[0, 1], output=[1, 3, 3])
    assert list(x) == [1.0, -2.75, 0.5, 0.25]


def test_penalties_do_not_modify_the_input():
    logits = np.array([2.0, 1.0])
    apply_penalties(logits, P(repetition_penalty=2.0), [0], [])
    assert list(logits) == [2.0, 1.0]


@pytest.mark.parametrize("bad", [[0.0, math.nan], [INF, 0.0]])
def test_nan_and_plus_inf_logits_refused(bad):
    with pytest.raises(SamplingError, match="NaN or \\+inf"):
        apply_penalties(bad, P(), [], [])


@pytest.mark.parametrize("logits", [[], [[1.0, 2.0]]])
def test_logits_must_be_one_nonempty_row(logits):
    with pytest.raises(SamplingError):
        apply_penalties(logits, P(), [], [])


@pytest.mark.parametrize("prompt,output", [([4], []), ([], [4]), ([-1], []), ([], [0, 99])])
def test_out_of_vocabulary_ids_refused(prompt, output):
    with pytest.raises(SamplingError, match="outside the vocabulary"):
        apply_penalties([0.0, 0.0, 0.0, 0.0], P(), prompt, output)


# --- argmax and greedy --------------------------------------------------------------------------

def test_argmax_lowest_id_among_maxima():
    assert argmax([1.0, 3.0, 3.0, 0.0]) == 1
    assert argmax([-INF, 2.0, 2.0]) == 1
    assert argmax([5.0]) == 0


def test_greedy_is_one_hot_at_argmax_and_ignores_truncation():
    probs = distribution([1.0, 3.0, 3.0, 0.0], P(top_k=1, top_p=0.1, min_p=0.9))
    assert list(probs) == [0.0, 1.0, 0.0, 0.0]


def test_greedy_sees_penalties():
    # 2.0 / 2 = 1.0 < 1.5, so the repeated id 0 loses
    x = apply_penalties([2.0, 1.5], P(repetition_penalty=2.0), [], [0])
    assert list(distribution(x, P())) == [0.0, 1.0]


def test_greedy_sample_any_u():
    probs = distribution([0.0, 7.0, 1.0], P())
    assert [sample(probs, u) for u in (0.0, 0.5, 1 - 2**-53)] == [1, 1, 1]


# --- temperature softmax --------------------------------------------------------------------------

def test_softmax_at_temperature_one():
    probs = distribution([0.0, ln(2), ln(3), ln(4)], P(temperature=1.0))
    assert probs == approx([0.1, 0.2, 0.3, 0.4])


def test_softmax_divides_by_temperature():
    # z = 2x: numerators 1, 4, 9, 16
    probs = distribution([0.0, ln(2), ln(3), ln(4)], P(temperature=0.5))
    assert probs == approx([1 / 30, 4 / 30, 9 / 30, 16 / 30])
    probs = distribution([0.0, ln(4)], P(temperature=2.0))  # z = [0, ln 2]
    assert probs == approx([1 / 3, 2 / 3])


def test_softmax_is_shift_invariant_for_large_logits():
    assert distribution([1000.0, 1000.0 + ln(3)], P(temperature=1.0)) == approx([0.25, 0.75])


def test_minus_inf_is_exactly_zero():
    probs = distribution([-INF, 0.0, 0.0], P(temperature=1.0))
    assert list(probs) == [0.0, 0.5, 0.5]


def test_underflowed_token_is_dropped_exactly():
    # exp(-801) underflows to 0.0: id 1 is exactly 0 and the others are 1/(1+e), e/(1+e)
    probs = distribution([0.0, -800.0, 1.0], P(temperature=1.0))
    assert probs[1] == 0.0
    assert probs == approx([1 / (1 + math.e), 0.0, math.e / (1 + math.e)])


def test_all_minus_inf_refused():
    with pytest.raises(SamplingError, match="-inf"):
        distribution([-INF, -INF], P(temperature=1.0))


# --- top_k --------------------------------------------------------------------------------------

def test_top_k_tie_broken_by_id():
    # softmax [4, 2, 1, 2]/9; ids 1 and 3 tie, id 1 ranks first; top_k = 2 keeps 0 and 1
    probs = distribution([ln(4), ln(2), 0.0, ln(2)], P(temperature=1.0, top_k=2))
    assert probs[2] == probs[3] == 0.0
    assert probs == approx([2 / 3, 1 / 3, 0.0, 0.0])


def test_top_k_one_is_argmax():
    probs = distribution([0.0, 2.0, 2.0], P(temperature=1.0, top_k=1))
    assert list(probs) == [0.0, 1.0, 0.0]


def test_top_k_larger_than_vocab_is_off():
    assert distribution([0.0, ln(3)], P(temperature=1.0, top_k=10)) == approx([0.25, 0.75])


# --- top_p --------------------------------------------------------------------------------------

def test_top_p_keeps_the_crossing_token_and_drops_the_next():
    # softmax [0.1, 0.4, 0.3, 0.2]: rank 1, 2, 3, 0; before-mass 0, 0.4, 0.7, 0.9
    # top_p = 0.6: id 1 (0 < .6) kept, id 2 (0.4 < .6, crosses) kept, id 3 (0.7) dropped
    probs = distribution([ln(0.1), ln(0.4), ln(0.3), ln(0.2)], P(temperature=1.0, top_p=0.6))
    assert probs[0] == probs[3] == 0.0
    assert probs == approx([0.0, 4 / 7, 3 / 7, 0.0])


def test_top_p_mass_exactly_at_threshold_is_dropped():
    # four exact 0.25's: before-mass of id 2 is exactly 0.5, and 0.5 < 0.5 is false
    probs = distribution([0.0, 0.0, 0.0, 0.0], P(temperature=1.0, top_p=0.5))
    assert list(probs) == [0.5, 0.5, 0.0, 0.0]
    probs = distribution([0.0, 0.0, 0.0, 0.0], P(temperature=1.0, top_p=0.5000001))
    assert probs == approx([1 / 3, 1 / 3, 1 / 3, 0.0])


def test_top_p_tiny_keeps_the_top_token():
    probs = distribution([0.0, 1.0, 0.5], P(temperature=1.0, top_p=1e-9))
    assert list(probs) == [0.0, 1.0, 0.0]


def test_top_p_renormalizes_over_tokens_top_k_kept():
    # softmax [.4,.3,.2,.1], top_k=3 keeps mass 0.9; before-mass 0, .4/.9, .7/.9 = .777 >= .75
    # (over the whole vocabulary id 2's before-mass would be 0.7 < 0.75 and it would stay)
    probs = distribution([ln(0.4), ln(0.3), ln(0.2), ln(0.1)], P(temperature=1.0, top_k=3, top_p=0.75))
    assert probs == approx([4 / 7, 3 / 7, 0.0, 0.0])


# --- min_p --------------------------------------------------------------------------------------

def test_min_p_against_the_max_kept_probability():
    # softmax [8,4,2,1]/15; min_p 0.2: floor 1.6/15 drops id 3; min_p 0.3: floor 2.4/15 drops 2 and 3
    logits = [ln(8), ln(4), ln(2), 0.0]
    assert distribution(logits, P(temperature=1.0, min_p=0.2)) == approx([8 / 14, 4 / 14, 2 / 14, 0.0])
    assert distribution(logits, P(temperature=1.0, min_p=0.3)) == approx([2 / 3, 1 / 3, 0.0, 0.0])


def test_min_p_token_at_the_floor_stays():
    # four exact 0.25's; min_p = 1: floor = 1 * 0.25, and 0.25 >= 0.25 keeps them all
    probs = distribution([0.0, 0.0, 0.0, 0.0], P(temperature=1.0, min_p=1.0))
    assert list(probs) == [0.25, 0.25, 0.25, 0.25]


def test_min_p_one_keeps_only_the_maxima():
    probs = distribution([1.0, 2.0, 2.0], P(temperature=1.0, min_p=1.0))
    assert list(probs) == [0.0, 0.5, 0.5]


def test_end_to_end_section_8():
    # penalties -> [1, -2.75, 0.5, 0.25]; T=0.5 -> z = [2, -5.5, 1, 0.5]; top_k=3 drops id 1;
    # top_p=0.8: before-mass of id 3 is (1 + e^-1) / (1 + e^-1 + e^-1.5) = 0.8598 >= 0.8, dropped;
    # min_p=0.3 floor = 0.3 * s0 < s2 = e^-1 * s0: id 2 stays. probs = [1, 0, e^-1, 0] / (1 + e^-1).
    p = P(temperature=0.5, top_k=3, top_p=0.8, min_p=0.3, repetition_penalty=2.0,
          frequency_penalty=0.5, presence_penalty=0.25)
    x = apply_penalties([2.0, -1.0, 0.5, 3.0], p, [0, 1], [1, 3, 3])
    probs = distribution(x, p)
    c = 1 + math.exp(-1)
    assert probs == approx([1 / c, 0.0, math.exp(-1) / c, 0.0])
    assert sample(probs, 0.7615582825100964) == 2  # 1/c = 0.731 is not > u; 1.0 is


def test_dropped_tokens_are_exactly_zero_and_kept_sum_to_one():
    # rank by logit: 1, 5, 3, 0, 4, 2; top_k = 4 drops ids 4 and 2
    probs = distribution([0.3, 2.0, -1.0, 1.2, 0.0, 1.9], P(temperature=0.7, top_k=4, top_p=0.8, min_p=0.1))
    assert math.fsum(probs) == pytest.approx(1.0, rel=1e-15)
    assert set(np.flatnonzero(probs == 0.0)) >= {2, 4}


# --- sample -------------------------------------------------------------------------------------

def test_sample_chapter_example():
    assert sample([0.0, 0.75, 0.25], 0.8) == 2  # running sums 0.75, 1.0


def test_sample_running_sum_must_exceed_u():
    assert sample([0.25, 0.25, 0.5], 0.25) == 1  # 0.25 is not > 0.25
    assert sample([0.25, 0.25, 0.5], 0.5) == 2
    assert sample([0.25, 0.25, 0.5], 0.0) == 0
    assert sample([0.25, 0.25, 0.5], 0.2499999) == 0


def test_sample_skips_zero_probability_tokens():
    probs = [0.0, 0.5, 0.0, 0.5, 0.0]
    for u in (0.0, 0.25, 0.5, 0.75, 1 - 2**-53):
        assert sample(probs, u) in (1, 3)
    assert sample(probs, 0.5) == 3


def test_sample_fallback_is_last_nonzero_id():
    # the sequential sum of ten 0.1's is 1 - 2^-53 = the largest u: nothing exceeds it
    probs = [0.1] * 10 + [0.0]
    assert sum(probs[:10]) == 1 - 2**-53
    assert sample(probs, 1 - 2**-53) == 9
    assert sample([0.3, 0.3, 0.0], 0.95) == 1  # an unnormalized row: fallback to id 1, never 2


def test_sample_nothing_to_sample():
    with pytest.raises(SamplingError):
        sample([0.0, 0.0], 0.5)


# --- logprob ------------------------------------------------------------------------------------

def test_logprob_chapter_example():
    want = 3 - ln(math.exp(0) + math.exp(1) + math.exp(3) + math.exp(0.5))
    assert logprob([0.0, 1.0, 3.0, 0.5], 2) == pytest.approx(want, rel=1e-15)


def test_logprob_uses_penalized_logits_before_temperature():
    p = P(temperature=0.25, top_k=1, repetition_penalty=2.0)
    x = apply_penalties([2.0, 0.0], p, [0], [])  # [1, 0]
    want = 0 - ln(math.e + 1)  # the dropped id 1 still has its untruncated, T=1 log-probability
    assert logprob(x, 1) == pytest.approx(want, rel=1e-15)


def test_logprob_of_minus_inf_token():
    assert logprob([-INF, 0.0], 0) == -INF
    assert logprob([-INF, 0.0], 1) == 0.0


@pytest.mark.parametrize("token", [-1, 4, 100])
def test_logprob_out_of_vocabulary_refused(token):
    with pytest.raises(SamplingError, match="outside the vocabulary"):
        logprob([0.0, 1.0, 3.0, 0.5], token)


# --- exp: the same bits on every CPU -------------------------------------------------------------

def _exact_exp(x: float):
    return decimal.Context(prec=60).exp(decimal.Decimal(x))


def _edge_and_spread_inputs() -> np.ndarray:
    """The exponents distribution and logprob feed exp (z - max <= 0): the edges, and a spread of
    every magnitude from 1e-17 to 745, drawn from a fixed seed."""
    rng = np.random.default_rng(20261203)
    spread = -np.exp(rng.uniform(np.log(1e-17), np.log(745.0), 20000))
    edges = [0.0, -0.0, -5e-324, -1e-300, -1e-17, -0.5 * math.log(2), -math.log(2), -1.0, -708.0, -708.4, -745.0]
    return np.concatenate([np.array(edges), spread, -rng.uniform(0.0, 1.0, 5000)])


def test_exp_is_faithful_over_the_exponents_the_sampler_feeds_it():
    """Within 1 ulp of the exact value (the margin analysis of spec/sampling.md section 10 assumes
    it of every exp), checked against 60-digit decimal arithmetic in the normal range."""
    from tinyllm.infer.sampling import exp
    xs = _edge_and_spread_inputs()
    got = exp(xs)
    worst = 0.0
    for x, y in zip(xs, got):
        want = _exact_exp(float(x))
        if float(want) < 2.3e-308:
            continue  # subnormal results: the sampler drops exponents below -700 from its margins
        worst = max(worst, float(abs(type(want)(float(y)) - want) / type(want)(math.ulp(float(want)))))
    assert worst < 1.0, f"exp is {worst:.3f} ulp from the exact value"


def test_exp_edges():
    from tinyllm.infer.sampling import exp
    got = exp([-INF, -746.0, -1e4, 0.0, 800.0, math.nan])
    assert list(got[:4]) == [0.0, 0.0, 0.0, 1.0] and got[4] == INF and math.isnan(got[5])
    assert exp([-745.0])[0] > 0.0  # the smallest subnormal region still counts
    assert exp(np.zeros((2, 3))).shape == (2, 3)


def test_distribution_and_logprob_use_the_portable_exp(monkeypatch):
    """The sampler's exp is the module's own (a test could otherwise pass with numpy's, whose bits
    depend on the CPU): moving it moves the answers."""
    import tinyllm.infer.sampling as sampling
    z = [0.0, 1.0, 3.0, 0.5]
    before = (distribution(z, P(temperature=1.0)).tolist(), logprob(z, 2))
    monkeypatch.setattr(sampling, "exp", lambda x: np.asarray(x, dtype=np.float64) * 0.0 + 1.0)
    assert distribution(z, P(temperature=1.0)).tolist() == [0.25] * 4
    assert logprob(z, 2) == 3.0 - (3.0 + math.log(4.0)) and before[1] != logprob(z, 2)


def test_exact_logprob_is_correctly_rounded_on_hand_cases():
    """harness.pack.oracle_kit.exact_logprob, which writes the golden logprobs: section 3's hand example,
    a uniform row, -inf entries and a term far below the maximum."""
    from harness.pack.oracle_kit import exact_logprob
    assert exact_logprob([0.0, 1.0, 3.0, 0.5], 2) == -0.23681554243081673  # 3 - ln(e^0 + e^1 + e^3 + e^0.5) to 50 digits
    assert exact_logprob([0.0] * 4, 1) == -1.3862943611198906  # -ln 4
    assert exact_logprob([2.0, -INF, 2.0], 0) == -0.6931471805599453  # -ln 2; -inf counts nothing
    assert exact_logprob([0.0, -1000.0], 0) == 0.0 and exact_logprob([0.0, -1000.0], 1) == -1000.0
    assert exact_logprob([5.0], 0) == 0.0
