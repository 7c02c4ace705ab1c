"""The judge's side of the worker protocol against workers that break it on purpose (spec/protocol.md,
sections 3 and 6): a hello of another version or shape, an id of the wrong type, an extra answer. Each
worker is a few lines of Python speaking raw JSON lines, started the way every worker is
(harness.sandbox.confine, in this machine's best mode). Garbage, unknown ids, a bare list and a closed output
from a real submission's worker are tests/harness/test_threats.py's.
"""

import re
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chapters.L10_8.client import Client
from harness.check.runner import LOAD_DEADLINE_S
from harness.sandbox.confine import choose
from harness.kernel.errors import Crashed, Timeout
from harness.transport.impl import DEFAULT_DEADLINE_S
from harness.languages import WorkerLaunch
from harness.kernel.paths import REPO
from harness.registry import DEFAULT_TIMEOUT_S, load_chapter
from harness.transport import worker_client
from harness.transport.worker_client import EXIT_WAIT_S, STARTUP_S, WorkerTransport

NOTHING = lambda method, args: None  # noqa: E731 -- no callbacks in these exchanges
HOUR = 3600.0  # a clock moved this far is past any deadline of the protocol


def transport(code: str) -> WorkerTransport:
    """A transport whose worker runs `code` with IN and OUT, the protocol's descriptors, open as files."""
    body = "import os, sys, json\nIN = os.fdopen(int(sys.argv[1]), 'rb')\nOUT = os.fdopen(int(sys.argv[2]), 'wb', buffering=0)\n"
    body += "def say(obj):\n    OUT.write((obj if isinstance(obj, str) else json.dumps(obj)).encode() + b'\\n')\n"
    body += textwrap.dedent(code)

    def launch(home: Path) -> WorkerLaunch:
        script = home / "fake_worker.py"
        script.write_text(body)
        script.chmod(0o644)
        return WorkerLaunch(lambda fd_in, fd_out: [sys.executable, "-S", str(script), str(fd_in), str(fd_out)], (script,))
    return WorkerTransport(launch, choose())


def one_call(code: str, op: str = "blocks_for"):
    tr = transport(code)
    try:
        return tr.run(op, {}, NOTHING, 5.0), tr
    finally:
        tr.close()


def test_a_hello_of_another_protocol_version_is_a_crash_naming_both():
    """Refused at the hello: a crash (not a timeout: the judge never waits for the 5 s deadline) and no request
    is written (the worker, reading one line, would have it)."""
    info, _ = one_call('say({"hello": {"protocol": 2, "pid": 1}})\nIN.readline()')
    assert isinstance(info.error, Crashed) and "speaks protocol 2" in str(info.error) and "speaks 1" in str(info.error), info
    assert not isinstance(info.error, Timeout) and "deadline" not in str(info.error), info


@pytest.mark.parametrize("hello", ['{"hello": 1}', '{"hello": {"pid": 1}}', '["hello"]'])
def test_a_hello_that_is_not_the_protocols_object_is_a_crash(hello):
    info, _ = one_call(f"say({hello!r})\nIN.readline()")
    assert isinstance(info.error, Crashed), info


def test_an_answer_whose_id_is_a_string_is_a_crash():
    info, _ = one_call('say({"hello": {"protocol": 1, "pid": 1}})\nIN.readline()\nsay({"id": "1", "ok": 2})\nIN.readline()')
    assert isinstance(info.error, Crashed) and "'1'" in str(info.error), info


def test_an_extra_answer_is_read_as_a_stale_one_at_the_next_request():
    code = '''
    say({"hello": {"protocol": 1, "pid": 1}})
    while True:
        req = json.loads(IN.readline())
        say({"id": req["id"], "ok": 2})
        say({"id": req["id"], "ok": 3})   # one answer too many
    '''
    tr = transport(code)
    try:
        first = tr.run("blocks_for", {}, NOTHING, 5.0)
        assert first.error is None and first.value == 2
        second = tr.run("blocks_for", {}, NOTHING, 5.0)
        assert isinstance(second.error, Crashed) and "request id 1" in str(second.error) and "asked 2" in str(second.error)
    finally:
        tr.close()


# ---- deadlines: where each counts from (spec/protocol.md section 5), on a clock the test moves ----------------

ANSWERS_ALL = '''
say({"hello": {"protocol": 1, "pid": 1}})
while True:
    req = json.loads(IN.readline())
    say({"id": req["id"], "ok": None})
'''


def skewed_clock(monkeypatch) -> SimpleNamespace:
    """The transport's clock (harness.kernel.clock) as real monotonic time plus `clock.skew` seconds (the test moves
    it forward)."""
    clock = SimpleNamespace(skew=0.0)
    monkeypatch.setattr(worker_client, "clock", SimpleNamespace(now=lambda: time.monotonic() + clock.skew))
    return clock


def test_a_load_to_a_worker_started_long_ago_is_an_ordinary_call():
    """Only the worker's first `load` counts from its start (its import is part of the start): one sent after other
    calls, to a worker up for an hour, gets its own deadline from now. (It once counted from the start whatever came
    before: request 299 of tests/rust/test_conformance.py, a `load` after 298 calls, found its deadline gone before it
    was written on a loaded machine and was reported as "the worker stopped reading".)"""
    tr = transport(ANSWERS_ALL)
    try:
        first = tr.run("blocks_for", {}, NOTHING, DEFAULT_DEADLINE_S)
        assert first.error is None, first
        tr._spawned_at -= HOUR  # the worker has served for an hour
        later = tr.run("load", {}, NOTHING, DEFAULT_DEADLINE_S)
        assert later.error is None and later.value is None, later
        assert tr.restarts == 0
    finally:
        tr.close()


def test_the_first_load_counts_from_the_workers_start():
    """A worker whose start (hello and import) has already used the load's deadline: the load is a timeout at once,
    naming the load and the deadline in force, whatever the worker would answer."""
    tr = transport(ANSWERS_ALL)
    try:
        tr.spawn()
        tr._spawned_at -= HOUR  # started an hour ago, and no hello read yet
        info = tr.run("load", {}, NOTHING, LOAD_DEADLINE_S)
        assert isinstance(info.error, Timeout), info
        assert f"load() with a deadline of {LOAD_DEADLINE_S:.3g} s: no answer within the deadline" in str(info.error), info
        assert tr.proc is None and tr.restarts == 1, "the worker was stopped"
    finally:
        tr.close()


def test_a_slow_hello_is_not_taken_from_the_first_calls_deadline(monkeypatch):
    """The hello has its own STARTUP_S; a call other than `load` gets its whole deadline after it: here the hello
    "takes" an hour on the transport's clock, and the first call is still answered."""
    clock = skewed_clock(monkeypatch)
    tr = transport(ANSWERS_ALL)
    greet = tr._greet

    def slow_greet(*a, **kw):
        greet(*a, **kw)
        clock.skew += HOUR  # the hello came an hour after the call began
    monkeypatch.setattr(tr, "_greet", slow_greet)
    try:
        info = tr.run("blocks_for", {}, NOTHING, DEFAULT_DEADLINE_S)
        assert info.error is None, info
        assert tr.restarts == 0
    finally:
        tr.close()


def test_a_deadline_spent_answering_a_callback_is_a_timeout_not_a_reader_that_stopped(monkeypatch):
    """The judge's own time answering a callback counts against the call's deadline; a reply the worker's pipe has
    room for is still written, and the call is a timeout naming it, never "the worker stopped reading" (that is
    for a pipe the worker leaves full: tests/harness/test_hostile.py)."""
    clock = skewed_clock(monkeypatch)
    code = '''
    say({"hello": {"protocol": 1, "pid": 1}})
    req = json.loads(IN.readline())
    say({"id": "c1", "call": "target.cached", "args": {}})
    IN.readline()
    IN.readline()
    '''
    tr = transport(code)

    def slow_judge(method, args):
        clock.skew += HOUR  # the judge took an hour to answer
        return 0
    try:
        info = tr.run("blocks_for", {"tokens": 5}, slow_judge, DEFAULT_DEADLINE_S)
        assert isinstance(info.error, Timeout), info
        assert f"blocks_for(tokens=5) with a deadline of {DEFAULT_DEADLINE_S:.3g} s: no answer within the deadline" \
            in str(info.error), info
        assert "stopped reading" not in str(info.error)
    finally:
        tr.close()


# ---- the deadlines in force are the ones the protocol documents ------------------------------------------------

def documented_deadlines() -> dict[str, float]:
    """Section 13's table of per-call deadlines: op (or "every other op") -> seconds."""
    text = (REPO / "spec" / "protocol.md").read_text()
    section = text.split("## 13.", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`(\w+)`[^|]*|every other op) \| ([\d.]+) s \|$", section, re.M)
    return {(name or label.strip()): float(seconds) for label, name, seconds in rows}


def test_the_deadlines_in_force_are_the_documented_ones():
    """What the tests' timeouts are checked against (a message naming "a deadline of N s"): the constants the judge
    uses, each equal to spec/protocol.md's value (sections 5, 6 and 13)."""
    doc = documented_deadlines()
    assert doc == {"load": LOAD_DEADLINE_S, **Client.DEADLINES_S, "every other op": DEFAULT_DEADLINE_S}, doc
    text = (REPO / "spec" / "protocol.md").read_text()
    assert f"The hello must arrive within {STARTUP_S:.0f} s of the start" in text
    assert f"does not exit within {EXIT_WAIT_S:.0f} s" in text
    section = " ".join(text.split("## 13.", 1)[1].split("\n## ", 1)[0].split())
    m = re.search(r"Test budgets [^:]*: ([\d.]+) s for ((?:`\w+`(?:, | and )?)+); ([\d.]+) s for every other test", section)
    assert m, section
    long_s, names, other_s = float(m.group(1)), re.findall(r"`(\w+)`", m.group(2)), float(m.group(3))
    budgets = {t.name: t.timeout_s for t in load_chapter("L10.8").tests}
    assert other_s == DEFAULT_TIMEOUT_S and {n: s for n, s in budgets.items() if s != other_s} == dict.fromkeys(names, long_s)


# ---- batches (spec/protocol.md sections 3, 5 and 6): one message, each call its own answer and deadline -------

def batch_worker(answers: str) -> WorkerTransport:
    """A worker that takes batches, reads one message (which must be a batch), and answers its calls by `answers`
    (code run with `calls`, the batch's requests), then reads on: a second message would go unanswered."""
    return transport(f'''
    say({{"hello": {{"protocol": 1, "pid": 1, "batch": True}}}})
    calls = json.loads(IN.readline())["batch"]
    {answers}
    IN.readline()
    ''')


CALLS = [("blocks_for", {"tokens": t}, 5.0) for t in (1, 2, 3)]


def test_a_batch_is_one_message_whose_calls_keep_their_own_answers_and_errors():
    tr = batch_worker('''for c in calls:
        t = c["args"]["tokens"]
        say({"id": c["id"], "error": {"type": "SpecError", "message": "no", "spec_error": True}} if t == 2 else {"id": c["id"], "ok": t})''')
    try:
        infos = tr.run_batch(CALLS, NOTHING, float("inf"))
        assert [(i.op, i.value) for i in infos] == [("blocks_for", 1), ("blocks_for", None), ("blocks_for", 3)], infos
        assert infos[0].error is None and infos[2].error is None and infos[1].error.spec_error, infos
        assert tr.restarts == 0
    finally:
        tr.close()


def test_each_call_of_a_batch_has_its_own_deadline_counted_from_the_answer_before(monkeypatch):
    """Each answer "takes" 90 % of its call's deadline on the transport's clock: every call is answered (three calls
    would be 270 % of one deadline counted from the batch's start)."""
    clock = skewed_clock(monkeypatch)
    tr = batch_worker('for c in calls:\n        say({"id": c["id"], "ok": c["args"]["tokens"]})')
    read = tr._read

    def slow_read(*a, **kw):
        msg = read(*a, **kw)
        if "id" in msg:
            clock.skew += 0.9 * DEFAULT_DEADLINE_S
        return msg
    monkeypatch.setattr(tr, "_read", slow_read)
    try:
        infos = tr.run_batch([(op, args, DEFAULT_DEADLINE_S) for op, args, _ in CALLS], NOTHING, float("inf"))
        assert [(i.value, i.error) for i in infos] == [(1, None), (2, None), (3, None)], infos
    finally:
        tr.close()


@pytest.mark.parametrize("fails", ["timeout", "crash"])
def test_a_call_of_a_batch_that_times_out_or_crashes_is_told_as_alone_and_leaves_the_rest_unanswered(fails):
    """The second call hangs (or the worker exits on it): the first keeps its answer, the second gets the outcome and
    message a call alone gets, the third is unanswered, the worker is stopped, and a call alone after it is answered
    by a fresh worker."""
    then = "IN.readline()" if fails == "timeout" else "sys.exit(3)"
    code = f'''
    say({{"hello": {{"protocol": 1, "pid": 1, "batch": True}}}})
    msg = json.loads(IN.readline())
    if "batch" not in msg:
        say({{"id": msg["id"], "ok": "alone"}})
    else:
        say({{"id": msg["batch"][0]["id"], "ok": 1}})
        {then}
    IN.readline()
    '''
    tr = transport(code)
    try:
        infos = tr.run_batch([(op, args, 0.5) for op, args, _ in CALLS], NOTHING, float("inf"))
        assert len(infos) == 2 and infos[0].value == 1 and infos[0].error is None, infos
        if fails == "timeout":
            assert isinstance(infos[1].error, Timeout), infos
            assert str(infos[1].error).startswith("blocks_for(tokens=2) with a deadline of 0.5 s: no answer within the deadline"), infos
        else:
            assert isinstance(infos[1].error, Crashed) and "exited with code 3" in str(infos[1].error), infos
        assert tr.proc is None and tr.restarts == 1, "the worker was stopped"
        alone = tr.run("blocks_for", {"tokens": 3}, NOTHING, 5.0)
        assert alone.error is None and alone.value == "alone", alone
    finally:
        tr.close()


def test_a_batch_stops_where_the_time_left_is_spent_and_a_worker_without_batches_gets_none(monkeypatch):
    clock = skewed_clock(monkeypatch)
    tr = batch_worker('for c in calls:\n        say({"id": c["id"], "ok": c["args"]["tokens"]})')
    read = tr._read

    def late_read(*a, **kw):
        msg = read(*a, **kw)
        clock.skew += HOUR if "id" in msg else 0  # the first answer came an hour late: the test's time is spent
        return msg
    monkeypatch.setattr(tr, "_read", late_read)
    try:
        infos = tr.run_batch(CALLS, NOTHING, time.monotonic() + 60)
        assert [(i.value, i.error) for i in infos] == [(1, None)], infos
        assert tr.proc is None and tr.restarts == 1, "the worker owed answers: stopped"
    finally:
        tr.close()
    tr = transport(ANSWERS_ALL)  # its hello says nothing of batches
    try:
        assert tr.run_batch(CALLS, NOTHING, float("inf")) == []
        assert tr.run("blocks_for", {}, NOTHING, 5.0).error is None and tr.request_id == 1, "no batch was sent"
    finally:
        tr.close()


# ---- a property check through batches: every verdict as alone --------------------------------------------------

ODD_INPUTS = """
_ol_blocks_for = blocks_for

def blocks_for(tokens, block_tokens):
    if (tokens, block_tokens) == HANGS:
        import os, time
        if HOW == "hang":
            time.sleep(60)
        os._exit(3)
    return -1 if (tokens, block_tokens) == WRONG else _ol_blocks_for(tokens, block_tokens)
"""


def property_verdict(tmp_path: Path, name: str, batches: bool, **odd) -> tuple[str, str, int]:
    """blocks_for's property check (its answers) over a submission odd on the inputs `odd` names, through the worker,
    with batches or each call alone: (what it ended in, its message, the calls sent alone)."""
    from chapters.L10_8.judge import properties
    from harness.subjects.open import open_impl
    from tests.harness.hostile_kit import CH, submission

    impl = open_impl(CH, str(submission(tmp_path, ODD_INPUTS, name, **odd)))
    impl.DEADLINES_S = {"blocks_for": 1.0}
    if not batches:
        impl.transport.run_batch = None  # as a transport without batches: every call alone
    alone = []
    run = impl.transport.run
    impl.transport.run = lambda op, *a: alone.append(op) or run(op, *a)
    try:
        problem = properties.blocks_for(impl, {"master_seed": 5}, properties.ANSWERS)
        return "difference" if problem else "pass", problem or "", len(alone)
    except Exception as e:  # noqa: BLE001 -- the check's own outcome (a Timeout, a Crashed)
        return type(e).__name__, str(e), len(alone)
    finally:
        impl.close()


@pytest.mark.slow(s=12)
@pytest.mark.parametrize("how", ["hang", "crash"])
def test_a_property_check_in_batches_ends_as_alone_on_an_input_that_hangs_or_crashes(tmp_path, how):
    """The sixth input compared hangs (or kills the worker): the check ends in a timeout (a crash) naming that input,
    with the same message as when each call is sent alone; and with a wrong answer on the third input, the difference
    is the verdict either way (the batch's timeout or crash after it changes nothing). Batched, the compared inputs
    go in one message: no call is sent alone until the difference's search."""
    from chapters.L10_8.judge.properties import BLOCKS_FOR, judge_reference
    from harness.pack import drawn
    from harness.pack.differential import Refused, answer

    answered = [args for _, args in drawn(BLOCKS_FOR.domain, 5)
                if not isinstance(answer(lambda a=args: judge_reference().blocks_for(*a)), Refused)]
    hangs, wrong = answered[5], answered[2]
    outcome = "Timeout" if how == "hang" else "Crashed"
    alone = property_verdict(tmp_path, "alone", False, HANGS=hangs, WRONG=None, HOW=how)
    batched = property_verdict(tmp_path, "batched", True, HANGS=hangs, WRONG=None, HOW=how)
    assert alone[:2] == batched[:2] and alone[0] == outcome, (alone, batched)
    assert f"blocks_for({hangs[0]}, block_tokens={hangs[1]})" in batched[1], batched
    assert alone[2] == 6 and batched[2] == 0, (alone, batched)
    alone = property_verdict(tmp_path, "alone2", False, HANGS=hangs, WRONG=wrong, HOW=how)
    batched = property_verdict(tmp_path, "batched2", True, HANGS=hangs, WRONG=wrong, HOW=how)
    assert alone[:2] == batched[:2] and alone[0] == "difference", (alone, batched)


ALLOC_HIGH = """
import heapq as _ol_heapq
from tinyllm import kv as _ol_kv


def _ol_alloc_high(self):  # the highest free block, not the lowest: every table's ids differ from the reference's
    if not self._free:
        raise _ol_kv.KvError("the pool is exhausted")
    block = max(self._free)
    self._free.remove(block)
    _ol_heapq.heapify(self._free)
    self._refs[block], self._fill[block] = 1, 0
    return block


_ol_kv.KvPool.alloc = _ol_alloc_high
"""


def pool_verdicts(subject: str, batches: bool) -> tuple[list[str], int]:
    """The two stateful pool tests' verdicts ("pass", or the failure's message) over `subject` in a worker, with the
    pool's calls sent ahead in batches or each alone; and how many calls went alone."""
    from chapters.L10_8.tests import test_rollback
    from harness.subjects.open import open_impl
    from tests.harness.hostile_kit import CH

    impl = open_impl(CH, subject, transport="worker")
    if not batches:
        impl.transport.run_batch = None  # as a transport without batches: every call alone
    alone = []
    run = impl.transport.run
    impl.transport.run = lambda op, *a: alone.append(op) or run(op, *a)
    out = []
    try:
        for test in (test_rollback.test_blocks_conserved_across_rollbacks, test_rollback.test_rollback_drops_one_reference_only):
            try:
                test(impl, {"master_seed": 5})
                out.append("pass")
            except Exception as e:  # noqa: BLE001 -- an assertion or a SubmissionFailure: the verdict's message
                out.append(f"{type(e).__name__}: {e}")
        return out, len(alone)
    finally:
        impl.close()


@pytest.mark.slow(s=40)
def test_the_pools_calls_sent_ahead_keep_every_verdict(tmp_path):
    """The pool tests send the implementation's calls ahead in batches, as the reference's calls predict them
    (pool_machine.ahead). The reference: both pass, with a handful of calls alone. A pool that allocates its highest
    free block (its calls part from the prediction at the first table it is given back: the batch is dropped and its
    side runs again alone), and the mutant s13: each test ends as it does with every call alone."""
    from tests.harness.hostile_kit import submission

    verdicts, alone = pool_verdicts("reference", True)
    assert verdicts == ["pass", "pass"] and alone < 100, (verdicts, alone)
    for subject in (str(submission(tmp_path, ALLOC_HIGH, "alloc_high")), "mutant:s13"):
        batched, alone = pool_verdicts(subject, True), pool_verdicts(subject, False)
        assert batched[0] == alone[0], (subject, batched[0], alone[0])
        assert batched[0] != ["pass", "pass"], (subject, batched[0])
        assert batched[1] < alone[1], (subject, batched[1], alone[1])
