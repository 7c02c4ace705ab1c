"""What the hostile-submission tests share: a submission made from the reference with code appended,
one call with a short deadline as data, and process checks."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from harness.kernel.errors import SubmissionFailure
from harness.kernel.paths import REFERENCE_DIR, REPO
from harness.registry import load_chapter

CH = load_chapter("L10.8")
HAND_PL = dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1)  # the reference answers [7, 8, 5]
SETTLE_S = 30.0  # how long a test waits for an event (a process gone, output drained): a wait, never a bound
HANG_GUARD_S = 600.0  # a subprocess judge that has not ended by then hangs: a guard, far past any deadline of a check


# a call whose every process forks forever (test_threats T10, bench/hostile.py)
FORK_BOMB = """
def prompt_lookup(ctx, k, max_ngram, min_ngram):
    while True:
        try:
            _os.fork()
        except OSError:
            pass
"""


def submission(root: Path, code: str, name: str = "sub", **consts) -> Path:
    """The reference package in root/name/tinyllm, with `code` appended to infer/spec.py, after PROBE_KIT's
    helpers (_ol_report, _ol_out, _ol_request_id, _ol_spawn) and one `NAME = repr(value)` line per const."""
    d = root / name
    shutil.copytree(REFERENCE_DIR / "tinyllm", d / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    header = "".join(f"{k} = {v!r}\n" for k, v in consts.items())
    with open(d / "tinyllm" / "infer" / "spec.py", "a") as f:
        f.write("\n\n# ---- appended by a hostile test ----\n" + textwrap.dedent(PROBE_KIT) + header + textwrap.dedent(code))
    return d


def attempt(impl, op: str, args: dict, deadline_s: float = 2.0):
    """The call's value, or the SubmissionFailure it ended in. A Timeout's message names the deadline in force
    ("... with a deadline of N s: no answer within the deadline"): what a test checks, never the seconds taken."""
    try:
        return impl.call(op, args, deadline_s=deadline_s)
    except SubmissionFailure as e:
        return e


def timed_out_at(got, op: str, deadline_s: float) -> bool:
    """Whether `got` is a Timeout produced by the call's own deadline of `deadline_s` (not a test's budget)."""
    from harness.kernel.errors import Timeout

    msg = str(got)
    return (isinstance(got, Timeout) and msg.startswith(f"{op}(") and "no answer within the deadline; the worker was stopped"
            in msg and f"with a deadline of {deadline_s:.3g} s:" in msg)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def outcomes(rep) -> dict:
    return {t.name: t.outcome for t in rep.tests}


# ---- observing a confined worker from outside ------------------------------------------------------
# The worker sees nothing of the host (not tmp_path, not the judge's /proc), so hostile code reports what
# it saw through the judge: in an exception's message (which reaches the report), or on its stdout
# (which the judge captures: `impl.transport.last_output` once the worker is closed). Processes it starts
# are found on the host by a unique marker in their command line.

PROBE_KIT = """
    import json as _json, os as _os, sys as _sys

    def _ol_report(res):
        '''What the hostile code saw, as one line a test can parse (see hostile_kit.probe).'''
        return "OL-PROBE " + _json.dumps(res, sort_keys=True, default=repr) + " OL-END"

    def _ol_out():
        return int(_sys.argv[_sys.argv.index("--out") + 1])   # the protocol's output descriptor

    def _ol_request_id():
        '''The id of the request being served, from the worker loop's frame (what a forger would do).'''
        f = _sys._getframe()
        while f is not None:
            m = f.f_locals.get("msg")
            if isinstance(m, dict) and "op" in m:
                return m["id"]
            f = f.f_back
        raise RuntimeError("no request on the stack")

    def _ol_spawn(marker, seconds=60):
        '''A child process (fork + exec) that sleeps with `marker` on its command line; returns its pid.'''
        pid = _os.fork()
        if pid == 0:
            try:
                _os.execv(_sys.executable, [_sys.executable, "-S", "-c", f"import time; time.sleep({seconds})", marker])
            finally:
                _os._exit(127)
        return pid

    def _ol_await(marker, seconds=30):
        '''Wait (up to `seconds`, a hang guard) until a process with `marker` on its command line runs here.'''
        import time as _t
        end = _t.monotonic() + seconds
        while _t.monotonic() < end:
            for _p in _os.listdir("/proc"):
                try:
                    with open(f"/proc/{_p}/cmdline", "rb") as _f:
                        if marker.encode() in _f.read():
                            return True
                except (OSError, ValueError):
                    continue
            _t.sleep(0.02)
        return False
"""


def probe(text: str) -> dict:
    """The report a hostile submission made with `_ol_report` (from a message or captured output)."""
    m = re.search(r"OL-PROBE (\{.*?\}) OL-END", text, re.S)
    assert m, f"no probe report in: {text[:2000]!r}"
    return json.loads(m.group(1))


def marker() -> str:
    return f"ol-hostile-{uuid.uuid4().hex}"


def marked(text: str) -> list[int]:
    """Pids of the host's processes whose command line holds `text`."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if text.encode() in Path(f"/proc/{d}/cmdline").read_bytes() and alive(int(d)):
                    found.append(int(d))
            except OSError:
                pass
    return found


def wait_for(pred, timeout: float, step: float = 0.02) -> bool:
    """Poll `pred` until it holds or `timeout` seconds pass; its last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


def kill_marked(text: str) -> None:
    """Clean up after a failed test: SIGKILL what this test started (found by its marker)."""
    for pid in marked(text):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def worker_pids(impl) -> list[int]:
    """The host pids of the Python worker process(es) of this Impl (the sandbox's own, not bwrap's)."""
    workdir = str(impl.transport.workdir)
    out = []
    for pid in marked(workdir):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:5] == [b"-P", b"-s", b"-m", b"harness.protocol.worker"]:  # isolated: harness.kernel.paths.isolated_argv
            out.append(pid)
    return out


def ol_check(sub: Path, cwd: Path, *extra: str, env: dict | None = None, timeout: float = HANG_GUARD_S):
    """`ol check L10.8 --submission SUB --json - EXTRA...` in a subprocess judge started in `cwd`, its report
    taken over its stdout as `ol grade` takes it (no report path on its command line for a forger to find):
    (CompletedProcess, the report's JSON or None)."""
    cmd = [sys.executable, "-m", "harness.cli", "check", CH.chapter, "--submission", str(sub), "--json", "-", *extra]
    r = subprocess.run(cmd, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = None
    return r, report


def tree_digest(*roots: Path, skip_pycache: bool = True) -> dict[str, str]:
    """sha256 of every file under `roots`, by path; a symlink or special file is recorded as such, so a new
    one shows (bytecode caches aside unless `skip_pycache` is off: the judge itself may write them)."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if skip_pycache and "__pycache__" in p.parts:
                continue
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                out[str(p)] = "not a regular file"
            elif p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
