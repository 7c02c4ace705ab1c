"""Arguments left as given (issue 37, item 4): after each call the Python worker and the in-process transport check
that the implementation's function did not change what it was given (a list, a dict, a row of a list of rows, the
SamplingParams an op built), and a change is a failure that names the call and the argument, with what it held
before and after.
"""

from types import SimpleNamespace

from harness.check.runner import CheckOptions, run_check
from harness.kernel.errors import Raised
from harness.kernel.outcomes import Outcome
from harness.protocol.session import Session
from harness.subjects.open import open_impl
from harness.transport.impl import Impl
from harness.transport.inprocess import InProcess

from tests.harness.hostile_kit import CH, attempt, submission

MUTATES = """
_ol_prompt_lookup, _ol_verify_draft, _ol_generate_stream = prompt_lookup, verify_draft, generate_stream

def prompt_lookup(ctx, k, max_ngram, min_ngram):
    out = _ol_prompt_lookup(list(ctx), k, max_ngram, min_ngram)
    ctx.pop()  # the caller's context, one token shorter
    return out

def verify_draft(rows, draft, draft_probs, params, prompt, output, rng):
    out = _ol_verify_draft(rows, draft, draft_probs, params, prompt, output, rng)
    rows[0][0] = -1.0  # a row of the caller's rows, written in place
    return out

def generate_stream(target, cfg, prompt, params, seed, max_new, eos, on_token):
    prompt.append(0)  # the caller's prompt, before a refusal
    return _ol_generate_stream(target, cfg, [], params, seed, max_new, eos, on_token)
"""


def test_a_submission_that_changes_its_arguments_fails_naming_the_argument_and_the_call(tmp_path):
    impl = open_impl(CH, str(submission(tmp_path, MUTATES)))
    try:
        got = attempt(impl, "prompt_lookup", dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1))
        assert isinstance(got, Raised) and got.outcome is Outcome.FAIL, repr(got)
        assert str(got).startswith("prompt_lookup([5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1) changed its argument "
                                   "ctx: before the call it was [5, 6, 7, 8, 5, 6], after it [5, 6, 7, 8, 5]"), str(got)
        got = attempt(impl, "verify_draft", dict(rows=[[0, 1, 3, 0.5], [0, 1, 0.5, 2]], draft=[2], draft_probs=None,
                                                 params={"temperature": 0.0}, prompt=[], output=[], seed=1))
        assert isinstance(got, Raised) and got.outcome is Outcome.FAIL, repr(got)
        assert "verify_draft(" in str(got) and "changed its argument rows" in str(got), str(got)
        assert "after it [[-1.0, 1.0, 3.0, 0.5]" in str(got), str(got)
        got = attempt(impl, "generate", dict(target="judge", cfg={"draft": "none", "k": 4}, prompt=[1, 2], params={},
                                             seed=7, max_new=0, eos=[], stream=False))
        assert isinstance(got, Raised) and "changed its argument prompt" in str(got) and "after it [1, 2, 0]" in str(got), str(got)
    finally:
        impl.close()


def test_a_changed_argument_fails_the_test_that_made_the_call(tmp_path):
    rep = run_check(CH, str(submission(tmp_path, MUTATES)), CheckOptions(only=["hand_example_prompt_lookup", "rollback_hand_example"]))
    got = {t.name: t for t in rep.tests}
    assert got["hand_example_prompt_lookup"].outcome == "fail", got["hand_example_prompt_lookup"]
    assert "changed its argument ctx" in got["hand_example_prompt_lookup"].message
    assert got["rollback_hand_example"].outcome == "pass", got["rollback_hand_example"].message[:500]


class Knobs:
    def __init__(self, temperature: float) -> None:
        self.temperature = temperature


def _session_impl(fn) -> Impl:
    """An Impl over the in-process transport whose one op, `call`, runs `fn` on the op's arguments."""
    ops = SimpleNamespace(OPS={"call": lambda s, a: fn(s, a)}, CONTRACT_ERROR=("decoder", "JSONDecodeError"), LOAD=())
    return Impl(InProcess("json", ops), "in-process")


def test_the_in_process_transport_checks_the_arguments_too():
    def grows(s, a):
        a["rows"][1].append(9.0)  # a row of a nested list
        return 1

    def lent(s, a):
        params = s.lend("params", {"temperature": a["t"]})  # what an op built from an argument
        params["temperature"] = 2.0
        return 1

    try:
        Impl.call(_session_impl(grows), "call", {"rows": [[1.0], [2.0]], "k": 3})
        raise AssertionError("a changed row was not seen")
    except Raised as e:
        assert e.outcome is Outcome.FAIL and "changed its argument rows" in str(e) and "[[1.0], [2.0, 9.0]]" in str(e), str(e)
    try:
        Impl.call(_session_impl(lent), "call", {"t": 0.5})
        raise AssertionError("a changed lent object was not seen")
    except Raised as e:
        assert "changed its argument params" in str(e), str(e)
    assert Impl.call(_session_impl(lambda s, a: a["xs"][::-1]), "call", {"xs": [3, -0.0, 1]}) == [1, -0.0, 3]
    plain = lambda s, a: s.lend("params", Knobs(a["t"])) and 1  # an object whose repr is its address
    assert Impl.call(_session_impl(plain), "call", {"t": 0.5}) == 1, "a lent object left alone is no change"


def test_an_unchanged_nan_or_negative_zero_is_no_change():
    s = Session("json", None, SimpleNamespace(OPS={"call": lambda s, a: a["x"][::-1]}, CONTRACT_ERROR=("decoder", "X")))
    assert s.dispatch("call", {"x": [float("nan"), -0.0]})[1] != s.dispatch("call", {"x": [1.0]})


def _changed(change, value) -> bool:
    """Whether Session.dispatch sees `change(value)` as a change of the argument `value`."""
    def op(s, a):
        change(a["x"])
        return 1
    s = Session("json", None, SimpleNamespace(OPS={"call": op}, CONTRACT_ERROR=("decoder", "X")))
    try:
        s.dispatch("call", {"x": value})
        return False
    except Exception as e:  # noqa: BLE001 -- ArgumentChanged, or a failure of the check itself
        assert "changed its argument x" in str(e), repr(e)
        return True


def test_every_kind_of_change_is_seen_and_an_equal_value_is_none():
    import numpy as np

    def put(i, v):
        return lambda x: x.__setitem__(i, v)

    def reshape(a):
        a.shape = (2, 1)

    def retype(a):
        a.dtype = np.int32  # the same bytes read as other numbers

    seen = {"-0.0 for 0.0": _changed(put(0, -0.0), [0.0, 1.0]), "4.0 for 4": _changed(put(1, 4.0), [3, 4]),
            "True for 1": _changed(put(0, True), [1, 2]), "a list for a tuple": _changed(put(0, (1,)), [[1], 2]),
            "a nested float": _changed(lambda x: x[1].__setitem__(0, 2.5), [[1.0], [2.0]]),
            "a dict's value": _changed(lambda x: x.update(t=0.5), {"t": 1.0}),
            "a list in a dict": _changed(lambda x: x["ids"].append(3), {"ids": [1, 2], "t": 1.0}),
            "an array in a list": _changed(lambda x: x[1].__setitem__(0, 2.0), [[1.0], np.ones(1), 3]),
            "an array's shape": _changed(lambda x: reshape(x[0]), [np.zeros(2, dtype=np.float32)]),
            "an array's dtype": _changed(lambda x: retype(x[0]), [np.ones(2, dtype=np.float32)]),
            "an array's entry": _changed(lambda x: x[0].__setitem__(1, 7.0), [np.ones(2, dtype=np.float32)])}
    assert all(seen.values()), [kind for kind, ok in seen.items() if not ok]
    same = {"another NaN": _changed(put(0, float("nan")), [float("nan"), 1.0]),
            "an equal string not interned": _changed(put(0, "".join(["te", "mp"])), ["temp", "x"]),
            "an equal copy of a row": _changed(put(0, [1.0, -0.0]), [[1.0, -0.0], [1.0, -0.0]]),
            "an equal array": _changed(put(0, np.ones(2, dtype=np.float32)), [np.ones(2, dtype=np.float32)])}
    assert not any(same.values()), [kind for kind, changed in same.items() if changed]
