"""The judge's side of the worker protocol against workers that break it on purpose (spec/protocol.md,
sections 3 and 6): a hello of another version or shape, an id of the wrong type, an extra answer. Each
worker is a few lines of Python speaking raw JSON lines, started the way every worker is
(harness.confine, in this machine's best mode). Garbage, unknown ids, a bare list and a closed output
from a real submission's worker are tests/harness/test_threats.py's.
"""

import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.confine import choose
from harness.errors import Crashed
from harness.languages import WorkerLaunch
from harness.transport.worker_client import WorkerTransport

NOTHING = lambda method, args: None  # noqa: E731 -- no callbacks in these exchanges


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
        start = time.monotonic()
        info = tr.run(op, {}, NOTHING, 5.0)
        return info, time.monotonic() - start, tr
    finally:
        tr.close()


def test_a_hello_of_another_protocol_version_is_a_crash_naming_both():
    info, took, _ = one_call('say({"hello": {"protocol": 2, "pid": 1}})\nIN.readline()')
    assert isinstance(info.error, Crashed) and "speaks protocol 2" in str(info.error) and "speaks 1" in str(info.error), info
    assert took < 5


@pytest.mark.parametrize("hello", ['{"hello": 1}', '{"hello": {"pid": 1}}', '["hello"]'])
def test_a_hello_that_is_not_the_protocols_object_is_a_crash(hello):
    info, _, _ = one_call(f"say({hello!r})\nIN.readline()")
    assert isinstance(info.error, Crashed), info


def test_an_answer_whose_id_is_a_string_is_a_crash():
    info, _, _ = one_call('say({"hello": {"protocol": 1, "pid": 1}})\nIN.readline()\nsay({"id": "1", "ok": 2})\nIN.readline()')
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
