"""Hostile submissions against the judge itself (the second half of test_hostile.py): writing results
files, monkeypatching the judge, exhausting memory, killing the parent, daemonizing. Helpers are
test_hostile.py's."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import chapters.L10_8.judge.judging as judging
import harness.pytest_plugin
from harness.check import run_check
from harness.errors import Raised, SubmissionFailure
from harness.impl import DEFAULT_DEADLINE_S
from harness.paths import REPO
from harness.subjects import open_impl
from harness.transport.worker_client import MEMORY_LIMIT

from tests.harness.hostile_kit import CH, HAND_PL, alive, attempt, outcomes, submission


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
    r = subprocess.run(cmd, cwd=scratch, env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
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
    assert "killed" in report.tests[0].message and report.ungraded, report.tests[0].message


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
