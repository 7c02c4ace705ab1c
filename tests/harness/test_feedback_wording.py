"""Feedback wording (issue 26, item 4): an untouched stub's error is one line, `not implemented: f`, naming
the contract's function the test called (not the protocol's op), and the one whose stub ran when that is
another."""

import numpy as np

from chapters.L10_8.client import Client
from chapters.L10_8.judge.judging import short, tokens_differ
from chapters.L10_8.judge.replay import Expected, parting
from harness.kernel.errors import Raised
from harness.languages import language as language_named
from harness.transport.feedback import call_text, expected_got, where_differ
from harness.registry import load_chapter
from harness.languages.stub import make_stub


def _stub_error(op: str, args: dict, message: str, language: str) -> str:
    e = Raised(op, {"type": "NotImplementedError", "message": message}, language, language_named(language).words)
    e.name_call(Client.called(op, args, language))
    return str(e)


def test_a_python_stub_names_the_function_the_test_called():
    assert _stub_error("spec_config_parse", {"draft": "none", "k": 1}, "SpecConfig.parse: not implemented yet",
                       "python") == "not implemented: SpecConfig.parse"
    assert _stub_error("verify_first_tokens", {}, "verify_draft: not implemented yet", "python") == \
        "not implemented: verify_draft"
    assert _stub_error("rollback", {}, "rollback: not implemented yet", "python") == "not implemented: rollback"


def test_a_rust_stub_names_the_function_the_test_called():
    assert _stub_error("spec_config_parse", {"max_ngram": 4}, "not yet implemented: SpecConfig::parse_with", "rust") == \
        "not implemented: SpecConfig::parse_with"
    # the worker calls SpecConfig::parse when no bound is given: its stub is reached through parse
    assert _stub_error("spec_config_parse", {}, "not yet implemented: SpecConfig::parse_with", "rust") == \
        "not implemented: SpecConfig::parse_with (the test called SpecConfig::parse, which needs it)"
    assert _stub_error("prompt_lookup", {}, "not yet implemented: prompt_lookup", "rust") == \
        "not implemented: prompt_lookup"


def test_a_stub_reached_through_another_function_names_both():
    got = _stub_error("generate", {"stream": True}, "not yet implemented: SpecConfig::parse_with", "rust")
    assert got == "not implemented: SpecConfig::parse_with (the test called generate_stream, which needs it)"
    got = _stub_error("runner_target_call", {"method": "extend"}, "blocks_for: not implemented yet", "python")
    assert got == "not implemented: blocks_for (the test called RunnerTarget.extend, which needs it)"


def test_an_older_stub_message_still_names_the_method():
    """Stubs written before the class was named in the message say `parse: not implemented yet`."""
    assert _stub_error("spec_config_parse", {}, "parse: not implemented yet", "python") == "not implemented: SpecConfig.parse"


def test_the_python_stub_names_each_method_with_its_class():
    text = make_stub(load_chapter("L10.8"))
    assert 'raise NotImplementedError("SpecConfig.parse: not implemented yet")' in text
    assert 'raise NotImplementedError("prompt_lookup: not implemented yet")' in text


# ---- an error names the call and its input, as a failure does ----

def _raised(op: str, args: dict, data: dict, language: str = "python") -> str:
    """What Impl.call makes of an exception the implementation raised inside `op(args)`."""
    e = Raised(op, data, language, language_named(language).words)
    e.name_call(Client.called(op, args, language), Client.call_words(op, args, language))
    return str(e)


def test_an_exception_names_the_call_and_its_input():
    got = _raised("prompt_lookup", dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1),
                  {"type": "IndexError", "message": "list index out of range",
                   "frames": [{"file": "tinyllm/infer/spec.py", "line": 106, "function": "prompt_lookup",
                               "source": "return [ctx[t + 1]]"}]})
    assert got == ("prompt_lookup([5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1) raised IndexError: list index out of range\n"
                   "  tinyllm/infer/spec.py, line 106, in prompt_lookup\n    return [ctx[t + 1]]")


def test_a_rust_panic_names_the_call_and_its_input():
    got = _raised("blocks_for", dict(tokens=5, block_tokens=0),
                  {"type": "panic", "message": "your code panicked at crates/tl-engine/src/spec.rs:3:9: attempt to divide by zero",
                   "frames": [{"file": "crates/tl-engine/src/spec.rs", "line": 3, "source": "tokens / block_tokens"}]}, "rust")
    assert got == ("blocks_for(5, 0) panicked at crates/tl-engine/src/spec.rs:3:9: attempt to divide by zero\n"
                   "  --> crates/tl-engine/src/spec.rs:3\n   | tokens / block_tokens")


def test_the_call_shows_the_contracts_arguments_not_the_protocols():
    boom = {"type": "KeyError", "message": "'x'"}
    assert _raised("generate", dict(target="judge", cfg={"draft": "none", "k": 4}, prompt=[1, 2], params={"temperature": 0.0},
                                    seed=7, max_new=3, eos=[], stream=True), boom).startswith(
        "generate_stream(target, cfg={'draft': 'none', 'k': 4}, prompt=[1, 2], params={'temperature': 0.0}, seed=7, "
        "max_new=3, eos=[], on_token=listener) raised KeyError: 'x'")
    assert _raised("verify_draft", dict(rows=[[0.0, 1.0]], draft=[], draft_probs=None, params={}, prompt=[0], output=[], seed=9),
                   boom).startswith("verify_draft([[0.0, 1.0]], draft=[], draft_probs=None, params={}, prompt=[0], output=[], "
                                    "rng=Pcg32.from_seed(9)) raised")
    assert _raised("pool_call", dict(pool=3, method="fill", args=[2]), boom).startswith("KvPool.fill(2) raised")
    assert _raised("runner_target_call", dict(target=1, method="extend", ids=[4, 5]), boom, "rust").startswith(
        "RunnerTarget::extend(&[4, 5]) raised")
    assert _raised("rollback", dict(pool=3, table=[0, 1], keep=4), boom).startswith("rollback(pool, table=[0, 1], keep=4) raised")


def test_a_long_input_is_cut_naming_what_was_left_out_and_shown_literally():
    ctx = list(range(100, 150))
    got = _raised("prompt_lookup", dict(ctx=ctx, k=5, max_ngram=4, min_ngram=3), {"type": "IndexError", "message": "m"})
    assert got.startswith("prompt_lookup([100, 101, 102, 103, 104, 105, ... 38 more ..., 144, 145, 146, 147, 148, 149], k=5,"), got
    rows = [[0.5] * 20 for _ in range(30)]
    got = _raised("verify_draft", dict(rows=rows, draft=[1], draft_probs=None, params={}, prompt=[0], output=[], seed=1),
                  {"type": "KeyError", "message": "'x'"})
    first = got.split(", draft=", 1)[0]
    assert len(first) < 200 and "... 28 more ..." in first and "... 18 more ..." in first, first
    got = _raised("spec_config_parse", dict(draft="ngr\x1bam\u202e", k=4), {"type": "TypeError", "message": "m"})
    assert got.startswith("SpecConfig.parse('ngr\\x1bam\\u202e', k=4) raised TypeError: m"), got


def test_an_error_the_judge_did_not_name_keeps_the_op():
    """Raised made outside Impl.call (no call to name) still says what ran."""
    assert str(Raised("load", {"type": "OSError", "message": "m"})) == "load: your code raised OSError: m"


# ---- a message never reads "expected X, got X" ----

def test_values_that_print_alike_say_where_they_differ():
    """Each pair prints alike through str (or short); the message names the type, the length or the item."""
    assert expected_got([1, 2], (1, 2), str) == "expected [1, 2], got (1, 2)"  # prints differently: nothing added
    assert expected_got(4, 4.0, lambda v: f"{v:g}") == "expected 4, got 4 (they print alike; yours is 4.0 (float), not 4 (int))"
    assert expected_got(True, 1, int) == "expected 1, got 1 (they print alike; yours is 1 (int), not True (bool))"
    assert expected_got([1, 2], (1, 2), short) == "expected [1 2], got [1 2] (they print alike; yours is a tuple, not a list)"
    assert expected_got(0.1, 0.1 + 2 ** -56, lambda v: f"{v:.6f}") == (
        "expected 0.100000, got 0.100000 (they print alike; yours is 0.10000000000000002, not 0.1)")
    assert expected_got([0.5], [np.float64(0.5)], short) == (
        f"expected [0.5], got [0.5] (they print alike; item 0: yours is {np.float64(0.5)!r} (numpy.float64), not 0.5 (float))")
    assert expected_got(list(range(50)), list(range(49)) + [7], lambda xs: short(xs, 40)) == (
        f"expected {short(range(50), 40)}, got {short(range(50), 40)} (they print alike; item 49: yours is 7, not 49)")


def test_a_listener_that_heard_other_tokens_is_named():
    """The sampled stream's check compared three lists and printed two: 'expected X, got X' when only the
    listener was wrong."""
    want = list(range(40))
    got = tokens_differ(want, list(want), want[:39])
    assert got == (f"\n  expected {short(want, 40)}\n  got      {short(want, 40)}\n"
                   f"  heard    {short(want[:39], 40)} (that has 39 items, 1 fewer than 40; the first 39 are the same)")
    assert "heard" not in tokens_differ(want, want[:3], want), "a listener that heard the expected tokens is not named"
    assert expected_got([13, 5, 1], [13, 5, 1], repr, also={"the listener heard": [13, 5]}) == (
        "expected [13, 5, 1], got [13, 5, 1]; the listener heard [13, 5] (that has 2 items, 1 fewer than 3; the first 2 "
        "are the same)")


def test_where_differ_names_the_first_difference():
    assert where_differ([1, 2, 3], [1, 2, 3]) == ""
    assert where_differ([1, 2, 3], [1, 5]) == "yours has 2 items, 1 fewer than 3; first difference at item 1: yours is 5, not 2"
    assert where_differ([1], [1, 2]) == "yours has 2 items, 1 more than 1; the first 1 are the same"
    assert where_differ({"tokens": [1], "cached": 4}, {"tokens": [1], "cached": 4.0}) == (
        "at 'cached': yours is 4.0 (float), not 4 (int)")
    assert where_differ({"a": 1}, {"b": 1}) == "yours lacks ['a']; yours has ['b'] too"
    assert where_differ(float("nan"), float("nan")) == "", "NaN prints as nan on both sides: no difference to name"


def test_equal_infinite_logprobs_are_no_difference():
    """replay.parting compared logprobs by abs(a - b) <= tol, which is False for -inf and -inf (their
    difference is NaN): 'expected -inf, got -inf'."""
    want = Expected(tokens=[3], logprobs=[float("-inf")], finish_reason="length", rounds=[], oracle="the test's")
    got = {"tokens": [3], "logprobs": [float("-inf")], "finish_reason": "length", "stats": {}}
    assert parting("here", want, got) is None
    got["logprobs"] = [-1e300]
    assert "expected -inf, got -1e+300" in parting("here", want, got)
