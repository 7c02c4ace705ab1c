"""Hostile and broken submissions: the judge survives them, grades them on their merits, on time.

Each submission is the reference's tinyllm copied into tmp_path with code appended to
infer/spec.py that rebinds a function (or runs at import). Most cases go straight through
open_impl + Impl.call with a short deadline (fast); a few go through run_check(..., only=[...])
to see the per-test outcome and message a student gets, and one runs `ol check` in a subprocess:
a submission that kills its parent must never run inside this test process. One strict xfail test
pins down a weakness the harness does not defend yet (see SECURITY.md): it fails once that changes.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import chapters.L10_8.judge.judging as judging
import harness.pytest_plugin
from harness.impl import DEFAULT_DEADLINE_S
from harness.check import run_check
from harness.errors import Crashed, Raised, SubmissionFailure, Timeout
from harness.subjects import open_impl
from harness.paths import REFERENCE_DIR, REPO
from harness.registry import load_chapter
from harness.transport.worker_client import MEMORY_LIMIT, OUTPUT_CAP

CH = load_chapter("L10.8")
HAND_PL = dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1)  # the reference answers [7, 8, 5]
SLACK_S = 3.0  # killing and reaping a worker, on a loaded machine


def submission(root: Path, code: str, name: str = "sub") -> Path:
    """The reference package in root/name/tinyllm, with `code` appended to infer/spec.py."""
    d = root / name
    shutil.copytree(REFERENCE_DIR / "tinyllm", d / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    with open(d / "tinyllm" / "infer" / "spec.py", "a") as f:
        f.write("\n\n# ---- appended by tests/harness/test_hostile.py ----\n" + textwrap.dedent(code))
    return d


def attempt(impl, op: str, args: dict, deadline_s: float = 2.0):
    """(value or the SubmissionFailure, seconds)."""
    start = time.monotonic()
    try:
        return impl.call(op, args, deadline_s=deadline_s), time.monotonic() - start
    except SubmissionFailure as e:
        return e, time.monotonic() - start


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


# ---- (a) a function that loops forever ----------------------------------------------------------

def test_infinite_loop_is_a_timeout_and_the_next_call_gets_a_fresh_worker(tmp_path):
    sub = submission(tmp_path, f"""
        import os as _os
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            if _os.fork() == 0:  # a child in the same process group spins too
                open({str(tmp_path / 'child.pid')!r}, "w").write(str(_os.getpid()))
                while True:
                    pass
            while True:
                pass
    """)
    impl = open_impl(CH, str(sub))
    try:
        got, took = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2
        first = impl.transport.proc.pid
        got, took = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=1.0)
        assert isinstance(got, Timeout) and got.outcome == "timeout", got
        assert "no answer within the deadline" in str(got) and "prompt_lookup" in str(got)
        assert took < 1.0 + SLACK_S, f"a 1 s deadline took {took:.1f}s"
        assert impl.transport.proc is None and impl.transport.restarts == 1
        assert not alive(first), "the hung worker must be killed"
        child = int((tmp_path / "child.pid").read_text())
        deadline = time.monotonic() + SLACK_S
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the worker's child in its process group must be killed too"
        got, _ = attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4))
        assert got == 3, got
        assert impl.transport.proc.pid != first, "the next call must run on a fresh worker"
    finally:
        impl.close()


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
    "config_parses_runtime_values": ("error", ["IndexError", "spec_config_parse"]),
    "hand_example_prompt_lookup": ("error", ["prompt_lookup", "TypeError"]),
    "hand_example_greedy_verify": ("error", ["verify_draft", "AttributeError"]),
    "hand_example_sampled_step": ("pass", []),  # untouched: still runs, still passes
    "rollback_hand_example": ("pass", []),  # (e) prints through every rollback and blocks_for: passes on its merits
    "rollback_drops_one_reference_only": ("pass", []),
}


def test_crash_exception_wrong_type_and_prints_each_get_their_own_outcome(tmp_path):
    sub = submission(tmp_path, GAUNTLET)
    start = time.monotonic()
    rep = run_check(CH, str(sub), only=list(GAUNTLET_TESTS))
    wall = time.monotonic() - start
    assert outcomes(rep) == {n: o for n, (o, _) in GAUNTLET_TESTS.items()}, [(t.name, t.outcome, t.message[:200]) for t in rep.tests]
    for t in rep.tests:
        for word in GAUNTLET_TESTS[t.name][1]:
            assert word in t.message, f"{t.name}: {word!r} missing from {t.message[:500]!r}"
        assert "error in the test itself" not in t.message and "Traceback" not in t.message, f"{t.name}: {t.message[:500]}"
    assert wall < 60, f"{len(rep.tests)} quick tests took {wall:.0f}s"


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
        got, took = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Crashed) and got.outcome == "crashed", got
        msg = str(got)
        assert "exited with code 3" in msg, msg[:300]
        assert "--- your code's stdout ---" in msg and "more bytes not shown" in msg, msg[-300:]
        assert "it is all going wrong" in msg
        assert len(msg) < 2 * OUTPUT_CAP + 1000, f"the crash message holds {len(msg)} characters"
        got, _ = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
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
        got, _ = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised) and not got.spec_error and got.type == "IndexError", got
        assert "your code raised IndexError" in str(got)
        assert "prompt_lookup" in got.traceback, "the student's own traceback travels with the error"
        got, _ = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
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
        got, _ = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised) and got.outcome == "error", f"prompt_lookup returned {ret} and the judge saw {got}"
        assert "TypeError" in str(got) and str(got).startswith("prompt_lookup:"), str(got)
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
        got, took = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=DEFAULT_DEADLINE_S)
        assert got == [7, 8, 5], f"the answer comes from the protocol pipe, not stdout: {got}"
        tr = impl.transport
        deadline = time.monotonic() + SLACK_S  # the drain threads may still be reading
        while (tr._out.dropped + len(tr._out.kept) < 5_000_000 or tr._err.dropped + len(tr._err.kept) < 3 << 20) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tr._out.kept) == OUTPUT_CAP and len(tr._err.kept) == OUTPUT_CAP
        assert tr._out.dropped >= 5_000_000 - OUTPUT_CAP and tr._err.dropped == (3 << 20) - OUTPUT_CAP
        assert len(tr._output()) < 2 * OUTPUT_CAP + 500
    finally:
        impl.close()


# ---- (f) writing results files ------------------------------------------------------------------

FORGER = """
    import json as _json, os as _os, pathlib as _pathlib
    _here = _pathlib.Path(__file__).resolve()
    _forged = _json.dumps({"summary": {"passed": 16, "failed": 0, "total": 16, "score": 16.0}, "tests": []})
    _judge_cwd = _pathlib.Path(_os.readlink(f"/proc/{_os.getppid()}/cwd"))
    for _d in {_pathlib.Path.cwd(), _here.parents[3], _judge_cwd}:
        (_d / "results.json").write_text(_forged)
        (_d / "grades.csv").write_text("submission,score\\nsub,16\\n")
    (_here.parents[3] / "worker_cwd.txt").write_text(_os.getcwd())

    def prompt_lookup(ctx, k, max_ngram, min_ngram):   # and the chapter's work is wrong
        return []
"""


def test_writing_results_files_does_not_change_the_grade(tmp_path, monkeypatch):
    judge_cwd = tmp_path / "judge"
    judge_cwd.mkdir()
    monkeypatch.chdir(judge_cwd)
    sub = submission(tmp_path, FORGER)
    rep = run_check(CH, str(sub), only=["hand_example_prompt_lookup", "rollback_hand_example"])
    assert outcomes(rep) == {"hand_example_prompt_lookup": "fail", "rollback_hand_example": "pass"}
    assert rep.score == 1 and not rep.ok
    worker_cwd = Path((tmp_path / "worker_cwd.txt").read_text())
    assert worker_cwd != judge_cwd and worker_cwd.name.startswith("ol-worker-"), "the worker runs in a temp dir of its own"
    assert not worker_cwd.exists(), "the worker's temp dir goes when the worker does"
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(sub))], \
        "run_check returns (and `ol check` writes its report) only once the submission's workers are dead"
    # NOT defended (same uid): the forger could write beside the submission and into the judge's cwd.
    # Those files are inert: the judge's verdict lives in its memory and goes only where it is told.
    assert (judge_cwd / "results.json").exists() and (tmp_path / "grades.csv").exists()


# ---- (g) monkeypatching the judge ---------------------------------------------------------------

def test_monkeypatching_the_judge_from_the_worker_changes_nothing(tmp_path):
    sub = submission(tmp_path, """
        import harness.pytest_plugin, harness.check, harness.errors
        import chapters.L10_8.judge.judging as judging, chapters.L10_8.judge.stats as stats
        import pytest as _pytest
        judging.must_refuse = lambda fn, what: None
        judging.case = lambda label: __import__("contextlib").nullcontext()
        harness.pytest_plugin.classify = lambda excinfo: "pass"
        harness.errors.Raised.describe = lambda self: "all good"
        stats.ALPHA = 0.0
        _pytest.fail = lambda *a, **k: None
        import builtins as _b
        _b.AssertionError = type("AssertionError", (Exception,), {})

        def prompt_lookup(ctx, k, max_ngram, min_ngram):    # wrong
            return [0]

        def _check_rows(rows, draft, draft_probs):          # no shape checks at all
            return [np.asarray(r, dtype=np.float64) for r in rows], list(draft), draft_probs
    """)
    must_refuse, classify = judging.must_refuse, harness.pytest_plugin.classify
    rep = run_check(CH, str(sub), only=["hand_example_prompt_lookup", "verify_rejects_bad_shapes", "rollback_hand_example"])
    assert outcomes(rep) == {"hand_example_prompt_lookup": "fail", "verify_rejects_bad_shapes": "fail", "rollback_hand_example": "pass"}, \
        [(t.name, t.outcome, t.message[:200]) for t in rep.tests]
    (bad,) = [t for t in rep.tests if t.name == "verify_rejects_bad_shapes"]
    assert "instead of SpecError" in bad.message, bad.message
    assert judging.must_refuse is must_refuse and harness.pytest_plugin.classify is classify, "the judge's modules are its own"


# ---- (h) exhausting memory ------------------------------------------------------------------------

def test_memory_exhaustion_hits_the_address_space_limit(tmp_path):
    # Untouched allocations: they reach RLIMIT_AS at once without making the machine page. (A loop of
    # touched bytearrays reaches it too, but at this VM's page-fault speed only after the call deadline:
    # then the outcome is a timeout, equally harmless.)
    sub = submission(tmp_path, """
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            hog = []
            while True:
                hog.append(np.empty(1 << 30, dtype=np.uint8))   # 1 GiB of address space each
                if len(hog) > 64:
                    return [len(hog)]                       # no limit: 64 GiB reserved (never touched)
    """)
    impl = open_impl(CH, str(sub))
    try:
        got, _ = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        pid = impl.transport.proc.pid
        limits = Path(f"/proc/{pid}/limits").read_text()
        line = next(l for l in limits.splitlines() if l.startswith("Max address space"))
        assert str(MEMORY_LIMIT) in line, line
        got, took = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=DEFAULT_DEADLINE_S)
        assert isinstance(got, SubmissionFailure) and got.outcome in ("error", "timeout", "crashed"), f"no limit stopped it: {got}"
        assert isinstance(got, Raised) and got.type == "MemoryError", got
        got, _ = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2, "the run goes on"
    finally:
        impl.close()


# ---- (i) killing its parent ----------------------------------------------------------------------

KILLER = """
    import json as _json, os as _os, signal as _signal
    _argv = open(f"/proc/{_os.getppid()}/cmdline", "rb").read().split(b"\\0")
    if b"check" not in _argv or b"--json" not in _argv:  # safety: never kill a pytest that imported us
        raise RuntimeError("refusing to kill a parent that is not an `ol check --json` subprocess")
    with open(_argv[_argv.index(b"--json") + 1], "w") as _f:  # forge the judge's report, then kill the judge
        _json.dump({"forged": True, "tests": [], "summary": {"passed": 16, "failed": 0, "total": 16, "score": 16.0,
                                                             "max_score": 16.0}}, _f)
    _os.kill(_os.getppid(), _signal.SIGKILL)
"""


def test_killing_the_parent_kills_only_that_judge(tmp_path, monkeypatch):
    """Run in a subprocess judge (`ol check`): in-process, the parent would be this pytest."""
    sub = submission(tmp_path, KILLER)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = scratch / f"{sub.name}.json"  # where `ol grade` has each judge write its report
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "check", "L10.8", "--submission", str(sub), "--json", str(out)]
    start = time.monotonic()
    r = subprocess.run(cmd, cwd=scratch, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == -signal.SIGKILL, f"the judge should have been killed: exit {r.returncode}\n{r.stderr[-2000:]}"
    assert time.monotonic() - start < 60
    # This process, which started that judge, is untouched (we are here to assert it). The orphaned
    # worker sees its protocol pipe close and exits: nothing of the submission lingers.
    deadline, lingering = time.monotonic() + 5, []
    while time.monotonic() < deadline:
        lingering = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(sub))]
        if not lingering:
            break
        time.sleep(0.1)
    assert not lingering, f"processes of the submission outlived their judge: {[p.name for p in lingering]}"
    # The judge died before writing: what is at `out` is the submission's forgery. `ol grade` trusts a
    # report only from a judge that exited 0 or 1, so the forgery scores 0 with a message.
    assert json.loads(out.read_text()).get("forged") is True
    import harness.grade
    monkeypatch.setattr(harness.grade.subprocess, "run", lambda *a, **k: r)
    report, _ = harness.grade._judge(CH, sub, CH.golden, False, scratch)
    assert report.passed == 0 and report.score == 0, report.to_json()["summary"]
    assert "forged" not in report.to_json() and all(t.outcome == "error" for t in report.tests)
    assert "killed" in report.tests[0].message, report.tests[0].message


def _cmdline_has(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="NOT defended: a worker's double-forked setsid() daemon leaves the worker's process "
                                        "group, so killpg misses it; it can outlive the judge and rewrite its report "
                                        "(fix: a PID namespace per worker, or PR_SET_CHILD_SUBREAPER in the judge)")
def test_a_daemonized_grandchild_does_not_outlive_the_worker(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    sub = submission(tmp_path, f"""
        import os as _os, time as _time
        def blocks_for(tokens, block_tokens):
            if _os.fork() == 0:
                _os.setsid()
                if _os.fork() == 0:
                    open({str(pidfile)!r}, "w").write(str(_os.getpid()))
                    _time.sleep(30)
                    _os._exit(0)
                _os._exit(0)
            _os.wait()
            return -(-tokens // block_tokens)
    """)
    impl = open_impl(CH, str(sub))
    daemon = None
    try:
        got, _ = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2
        impl.close()
        daemon = int(pidfile.read_text())
        time.sleep(0.2)
        assert not alive(daemon), f"the worker is gone but its daemon {daemon} runs on"
    finally:
        impl.close()
        if daemon is not None and alive(daemon):
            os.kill(daemon, signal.SIGKILL)  # the daemon this test started
