"""Hostile and broken submissions: the judge survives them, grades them on their merits, on time.

Each submission is the reference's tinyllm copied into tmp_path with code appended to
infer/spec.py that rebinds a function (or runs at import). Most cases go straight through
open_impl + Impl.call with a short deadline (fast); a few go through run_check(..., only=[...])
to see the per-test outcome and message a student gets. The worker is confined (harness.sandbox.confine):
what it does is observed from outside, through the judge's answers and captured output, and by
processes found on the host by a marker in their command line. test_hostile_judge.py attacks the judge
itself, test_threats.py the machine (one test per threat class).
"""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.check.runner import CheckOptions, run_check
from harness.kernel.errors import Crashed, Raised, Timeout
from harness.transport.impl import DEFAULT_DEADLINE_S
from harness.subjects.open import open_impl
from harness.transport.worker_client import OUTPUT_CAP

from tests.harness.hostile_kit import (CH, HAND_PL, SETTLE_S, alive, attempt, kill_marked, marked, marker, outcomes,
                                      submission, timed_out_at, wait_for)


# ---- (a) a function that loops forever ----------------------------------------------------------

def test_infinite_loop_is_a_timeout_and_the_next_call_gets_a_fresh_worker(tmp_path):
    """T1: a call that spins (with a spinning child) is a timeout at its deadline; the worker's whole
    sandbox, the child included, is killed; the next call runs on a fresh worker."""
    mark = marker()
    sub = submission(tmp_path, f"""
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            if _os.fork() == 0:  # a child that spins too, found on the host by its marker
                _os.execv(_sys.executable, [_sys.executable, "-S", "-c", "while True: pass", {mark!r}])
            _ol_await({mark!r})  # it runs before the parent spins too
            while True:
                pass
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2
        first = impl.transport.proc.pid
        with ThreadPoolExecutor(1) as pool:  # the call runs in a thread; this one watches the host's processes
            # 3 s: time for the child's fork and exec on a loaded machine, inside the call's own deadline
            call = pool.submit(attempt, impl, "prompt_lookup", HAND_PL, 3.0)
            started = wait_for(lambda: marked(mark) or call.done(), SETTLE_S) and bool(marked(mark))
            got = call.result()
        assert started, "the spinning child never started (or was gone before the deadline)"
        assert isinstance(got, Timeout) and got.outcome == "timeout", got
        assert timed_out_at(got, "prompt_lookup", 3.0), f"not the call's own 3 s deadline: {got}"
        assert impl.transport.proc is None and impl.transport.restarts == 1
        assert not alive(first), "the hung worker must be killed"
        assert wait_for(lambda: not marked(mark), SETTLE_S), f"the worker's child outlived it: {marked(mark)}"
        got = attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4))
        assert got == 3, got
        assert impl.transport.proc.pid != first, "the next call must run on a fresh worker"
    finally:
        impl.close()
        kill_marked(mark)


# ---- (b) (c) (d) (e) through run_check: per-test outcomes and messages ---------------------------

GAUNTLET = """
    import os as _os, sys as _sys

    def ngram_draft(ctx, k, n):                      # (b) the worker dies
        _os._exit(3)

    def _parse(cls, draft, k, max_ngram=3, min_ngram=1):
        return cls(Draft(draft), k, [max_ngram][1], min_ngram)   # (c) an IndexError, not a SpecError
    SpecConfig.parse = classmethod(_parse)

    def prompt_lookup(ctx, k, max_ngram, min_ngram):  # (d) the wrong type
        return None

    def verify_draft(rows, draft, draft_probs, p, prompt, output, rng):
        return {"tokens": [2, 3], "n_accepted": 1}    # (d) a dict, not a Verified

    _blocks_for = blocks_for
    def blocks_for(tokens, block_tokens):            # (e) megabytes on stdout and stderr, then the right answer
        _sys.stdout.write('{"id": 0, "ok": 99}\\n' * 60000)   # looks like a protocol answer: must be ignored
        _sys.stdout.flush()
        _sys.stderr.write("E" * (1 << 20))
        return _blocks_for(tokens, block_tokens)
"""
GAUNTLET_TESTS = {  # test -> expected outcome, and words its message must hold
    "ngram_draft_hand_example": ("crashed", ["exited with code 3"]),
    "config_parses_runtime_values": ("error", ["IndexError", "SpecConfig.parse("]),
    "hand_example_prompt_lookup": ("error", ["prompt_lookup", "TypeError"]),
    "hand_example_greedy_verify": ("error", ["verify_draft", "AttributeError"]),
    "hand_example_sampled_step": ("pass", []),  # untouched: still runs, still passes
    "rollback_hand_example": ("pass", []),  # (e) prints through every rollback and blocks_for: passes on its merits
    "rollback_drops_one_reference_only": ("pass", []),
}


def test_crash_exception_wrong_type_and_prints_each_get_their_own_outcome(tmp_path):
    sub = submission(tmp_path, GAUNTLET)
    rep = run_check(CH, str(sub), CheckOptions(only=list(GAUNTLET_TESTS)))
    assert rep.ungraded is None, rep.ungraded  # the submission's doing, every bit of it: never the grader's fault
    assert outcomes(rep) == {n: o for n, (o, _) in GAUNTLET_TESTS.items()}, [(t.name, t.outcome, t.message[:200]) for t in rep.tests]
    for t in rep.tests:
        for word in GAUNTLET_TESTS[t.name][1]:
            assert word in t.message, f"{t.name}: {word!r} missing from {t.message[:500]!r}"
        assert "the grader failed" not in t.message and "Traceback" not in t.message, f"{t.name}: {t.message[:500]}"
        assert "deadline" not in t.message and "budget" not in t.message, f"{t.name}: no call waits for a clock: {t.message[:500]}"


# ---- (b) os._exit: the exit code, and the output the worker left ---------------------------------

def test_exit_reports_the_code_and_the_capped_output(tmp_path):
    sub = submission(tmp_path, """
        import os as _os, sys as _sys
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            _sys.stdout.write("x" * (2 << 20))
            _sys.stdout.flush()
            _sys.stderr.write("it is all going wrong\\n")
            _sys.stderr.flush()
            _os._exit(3)
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Crashed) and got.outcome == "crashed", got
        msg = str(got)
        assert "exited with code 3" in msg, msg[:300]
        assert "--- your code's stdout ---" in msg and "more bytes not shown" in msg, msg[-300:]
        assert "it is all going wrong" in msg
        assert len(msg) < 2 * OUTPUT_CAP + 1000, f"the crash message holds {len(msg)} characters"
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2 and impl.transport.restarts == 1
    finally:
        impl.close()


# ---- (c) a non-SpecError, directly -------------------------------------------------------------

def test_a_non_spec_error_is_named(tmp_path):
    sub = submission(tmp_path, """
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            return [ctx[len(ctx) + 1]]
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised) and not got.spec_error and got.type == "IndexError", got
        assert str(got).startswith("prompt_lookup([") and ") raised IndexError: " in str(got), str(got)
        assert "prompt_lookup" in got.traceback, "the student's own traceback travels with the error"
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2 and impl.transport.restarts == 0, "an exception is data: the worker lives on"
    finally:
        impl.close()


# ---- (d) the wrong type ------------------------------------------------------------------------

@pytest.mark.parametrize("ret", ["None", "7", "[[7], [8]]", "'785'", "[7.9, 8.2, 5.0]"])
def test_wrong_return_type_is_an_error_not_a_harness_traceback(tmp_path, ret):
    """None, an int, nested lists, a string of digits, floats: none is a list of token ids."""
    sub = submission(tmp_path, f"""
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            return {ret}
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised) and got.outcome == "error", f"prompt_lookup returned {ret} and the judge saw {got}"
        assert "TypeError" in str(got) and str(got).startswith("prompt_lookup(["), str(got)  # the call and its input
    finally:
        impl.close()


# ---- (e) megabytes of output: captured apart, capped, never mistaken for the protocol -------------

def test_megabytes_of_output_are_capped_and_ignored(tmp_path):
    sub = submission(tmp_path, """
        import sys as _sys
        _prompt_lookup = prompt_lookup
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            _sys.stdout.write('{"id": 0, "ok": [9, 9, 9]}\\n' * 200000)  # 5 MB of fake answers
            _sys.stdout.flush()
            _sys.stderr.write("E" * (3 << 20))
            _sys.stderr.flush()
            return _prompt_lookup(ctx, k, max_ngram, min_ngram)
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=DEFAULT_DEADLINE_S)
        assert got == [7, 8, 5], f"the answer comes from the protocol pipe, not stdout: {got}"
        tr = impl.transport
        deadline = time.monotonic() + SETTLE_S  # the drain threads may still be reading: a wait, not a bound
        while (tr._out.dropped + len(tr._out.kept) < 5_000_000 or tr._err.dropped + len(tr._err.kept) < 3 << 20) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tr._out.kept) == OUTPUT_CAP and len(tr._err.kept) == OUTPUT_CAP
        assert tr._out.dropped >= 5_000_000 - OUTPUT_CAP and tr._err.dropped == (3 << 20) - OUTPUT_CAP
        assert len(tr._output()) < 2 * OUTPUT_CAP + 500
    finally:
        impl.close()


# ---- protocol garbage: a deep array, a reply never read ---------------------------------------------

def test_a_deeply_nested_answer_is_crashed_not_a_judge_crash(tmp_path):
    sub = submission(tmp_path, """
        import os as _os
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            _os.write(int(__import__("sys").argv[__import__("sys").argv.index("--out") + 1]),
                      b'{"id": 0, "ok": ' + b"[" * 100000 + b"]" * 100000 + b"}\\n")
            _os._exit(0)
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=10)
        assert isinstance(got, Crashed) and "RecursionError" in str(got), got  # read and refused, not waited out
        assert "deadline" not in str(got), got
    finally:
        impl.close()


@pytest.mark.slow
def test_a_worker_that_never_reads_the_judges_reply_is_crashed_within_the_deadline(tmp_path):
    """It asks the judge's target for thousands of rows, then never reads the reply: the judge's write
    would block forever on the full pipe; it stops at the call's deadline instead."""
    from chapters.L10_8.judge.fake_target import FakeTarget
    from harness.subjects.reference import pristine

    sub = submission(tmp_path, """
        import json as _json, os as _os, sys as _sys, time as _time
        def generate(target, cfg, prompt, params, seed, max_new, eos):
            out = int(_sys.argv[_sys.argv.index("--out") + 1])
            _os.write(out, (_json.dumps({"id": "c1", "call": "target.extend", "args": {"ids": [1] * 4000}}) + "\\n").encode())
            _time.sleep(600)
    """)
    impl = open_impl(CH, str(sub))
    try:
        try:
            impl.generate(FakeTarget(pristine("L10.8"), 16), {"draft": "none", "k": 4}, [1, 2, 3], {"temperature": 0.0}, 1, 5, [],
                          deadline_s=3)
            raise AssertionError("the call returned")
        except Crashed as e:  # the judge's write stopped at the call's own deadline, which the message names
            assert "stopped reading" in str(e) and "until the call's deadline of 3 s" in str(e), e
        assert impl.transport.proc is None and impl.transport.restarts == 1, "the worker was stopped"
    finally:
        impl.close()
