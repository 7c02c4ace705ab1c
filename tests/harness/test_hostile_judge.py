"""Hostile submissions against the judge itself (the second half of test_hostile.py): writing results
files, monkeypatching the judge, exhausting memory, killing the parent, daemonizing. The worker runs
in bubblewrap (harness.sandbox.confine): each test states what the sandbox now guarantees and observes it from
outside (the report, the judge's captured output of the worker, the host's /proc). Helpers are
hostile_kit's."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import chapters.L10_8.judge.judging as judging
import harness.check.pytest_plugin
from harness.check.runner import CheckOptions, run_check
from harness.sandbox.confine import choose
from harness.kernel.errors import Raised, SubmissionFailure
from harness.transport.impl import DEFAULT_DEADLINE_S
from harness.kernel.paths import REPO
from harness.subjects.open import open_impl
from harness.transport.worker_client import MEMORY_LIMIT, WORKER_LIMITS

from tests.harness.hostile_kit import (CH, HAND_PL, SETTLE_S, attempt, kill_marked, marked, marker, ol_check, outcomes,
                                       probe, submission, wait_for, worker_pids)

MODE = choose()
pytestmark = pytest.mark.skipif(MODE.name != "bwrap", reason=f"these tests state the bubblewrap sandbox's guarantees; "
                                                             f"workers here run in mode {MODE.name} ({MODE.why})")


def _printed(sub: Path) -> tuple[dict, Path]:
    """Load `sub` in a worker of its own and close it: the probe report its import printed, and the host
    folder the worker ran from."""
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "load", {}, deadline_s=30)
        assert got is None, got
        workdir = impl.transport.workdir
    finally:
        impl.close()
    return probe(impl.transport.last_output), workdir


# ---- (f) writing results files ------------------------------------------------------------------

FORGER = """
    import pathlib as _pathlib
    _forged = _json.dumps({"summary": {"passed": 16, "failed": 0, "total": 16, "score": 16.0}, "tests": [], "by": MARK})
    _here = _pathlib.Path(__file__).resolve()
    _wrote = {}
    try:  # its parent's cwd: with bwrap the worker is its sandbox's init and has no parent in view
        _parent_cwd = [_pathlib.Path(_os.readlink(f"/proc/{_os.getppid()}/cwd"))]
    except OSError:
        _parent_cwd = []
    for _d in [_pathlib.Path.cwd(), _here.parents[3], *_parent_cwd, *map(_pathlib.Path, HOST_DIRS), _pathlib.Path("/")]:
        for _name, _text in [("results.json", _forged), ("grades.csv", f"submission,score\\n{MARK},16\\n")]:
            try:
                (_d / _name).write_text(_text)
                _wrote[str(_d / _name)] = "written"
            except OSError as _e:
                _wrote[str(_d / _name)] = type(_e).__name__
    print(_ol_report({"wrote": _wrote, "cwd": _os.getcwd(), "here": str(_here)}), flush=True)
    _ol_spawn(MARK, seconds=120)   # a process that would rewrite the report once the judge is done

    def prompt_lookup(ctx, k, max_ngram, min_ngram):   # and the chapter's work is wrong
        return []
"""


def test_writing_results_files_does_not_change_the_grade(tmp_path, monkeypatch):
    """T7: a submission writes forged results.json/grades.csv wherever it can (its cwd, beside itself, the
    judge's cwd, host folders it knows the names of). Guarantee: nothing reaches the host (the worker's
    only writable place is its private tmpfs, gone with it), the grade is the judge's, and run_check
    returns only once the submission's processes are dead."""
    judge_cwd = tmp_path / "judge"
    judge_cwd.mkdir()
    monkeypatch.chdir(judge_cwd)
    host_dirs = [judge_cwd, tmp_path, tmp_path / "sub", REPO]
    mark = marker()
    sub = submission(tmp_path, FORGER, HOST_DIRS=list(map(str, host_dirs)), MARK=mark)
    try:
        rep = run_check(CH, str(sub), CheckOptions(only=["hand_example_prompt_lookup", "rollback_hand_example"]))
        assert not marked(mark), "run_check returns (and `ol check` writes its report) only once the submission's processes are dead"
    finally:
        kill_marked(mark)
    assert outcomes(rep) == {"hand_example_prompt_lookup": "fail", "rollback_hand_example": "pass"}
    assert rep.score == 1 and not rep.ok and rep.sandbox == "bwrap"
    assert not _forgeries(host_dirs + [Path("/tmp"), Path("/")], mark), "the forger wrote on the host"

    saw, workdir = _printed(sub)  # the same forger once more, to read what it saw and did
    wrote = saw["wrote"]
    assert saw["cwd"] == "/tmp" and saw["here"].startswith(str(workdir)), saw
    for d in host_dirs + [Path("/")]:  # invisible (FileNotFoundError) or read-only; or, for a folder under /tmp
        # (a checkout there), one bwrap made for a bind inside the sandbox's own tmpfs: the host check below decides
        assert wrote[str(d / "results.json")] != "written" or d.is_relative_to("/tmp"), (d, wrote)
    assert wrote["/tmp/results.json"] == "written", "its cwd is a private writable tmpfs"
    assert not workdir.exists(), "the worker's host folder goes when the worker does"
    assert not _forgeries(host_dirs + [Path("/tmp"), Path("/")], mark), "its /tmp is a tmpfs of its own, not the host's"
    kill_marked(mark)


def _forgeries(dirs: list[Path], mark: str) -> list[Path]:
    """The forger's files (those holding its marker) among results.json and grades.csv in `dirs`."""
    out = []
    for d in dirs:
        for name in ("results.json", "grades.csv"):
            try:
                if mark in (d / name).read_text(errors="replace"):
                    out.append(d / name)
            except OSError:
                pass
    return out


# ---- (g) monkeypatching the judge ---------------------------------------------------------------

PATCHER = """
    _patched = {}
    def _patch(module, attr, value):
        try:
            m = __import__(module, fromlist=["_"])
            setattr(m, attr, value)
            _patched[module] = m.__file__
        except ImportError as e:
            _patched[module] = type(e).__name__
    _patch("chapters.L10_8.judge.judging", "must_refuse", lambda fn, what: None)
    _patch("chapters.L10_8.judge.judging", "case", lambda label: __import__("contextlib").nullcontext())
    _patch("harness.check.pytest_plugin", "classify", lambda excinfo: "pass")
    _patch("harness.check.runner", "classify", lambda excinfo: "pass")
    _patch("harness.kernel.errors", "Raised", Exception)
    _patch("chapters.L10_8.judge.stats", "ALPHA", 0.0)
    _patch("pytest", "fail", lambda *a, **k: None)
    import builtins as _b
    _b.AssertionError = type("AssertionError", (Exception,), {})
    print(_ol_report({"patched": _patched}), flush=True)

    def prompt_lookup(ctx, k, max_ngram, min_ngram):    # wrong
        return [0]

    def _check_rows(rows, draft, draft_probs):          # no shape checks at all
        return [np.asarray(r, dtype=np.float64) for r in rows], list(draft), draft_probs
"""


def test_monkeypatching_the_judge_from_the_worker_changes_nothing(tmp_path):
    """T8: a submission patches the judge's modules, pytest and builtins. Guarantee: the judge's modules
    are not even in the worker's view (only the worker kit's copy of harness is); what it can patch
    (its own pytest, builtins) is its own process's; the grade is unchanged."""
    sub = submission(tmp_path, PATCHER)
    must_refuse, classify = judging.must_refuse, harness.check.pytest_plugin.classify
    rep = run_check(CH, str(sub), CheckOptions(only=["hand_example_prompt_lookup", "verify_rejects_bad_shapes", "rollback_hand_example"]))
    assert outcomes(rep) == {"hand_example_prompt_lookup": "fail", "verify_rejects_bad_shapes": "fail", "rollback_hand_example": "pass"}, \
        [(t.name, t.outcome, t.message[:200]) for t in rep.tests]
    (bad,) = [t for t in rep.tests if t.name == "verify_rejects_bad_shapes"]
    assert "instead of SpecError" in bad.message, bad.message
    assert judging.must_refuse is must_refuse and harness.check.pytest_plugin.classify is classify, "the judge's modules are its own"

    saw, workdir = _printed(sub)
    patched = saw["patched"]
    for judge_module in ("chapters.L10_8.judge.judging", "chapters.L10_8.judge.stats", "harness.check.pytest_plugin",
                         "harness.check.runner", "harness.kernel.errors"):
        assert patched[judge_module] == "ModuleNotFoundError", (judge_module, patched)
    assert patched["pytest"].startswith(sys.prefix), patched  # the venv's pytest is visible: patching it is harmless


# ---- (h) exhausting memory ------------------------------------------------------------------------

def test_memory_exhaustion_hits_the_address_space_limit(tmp_path):
    """T5: untouched 1 GiB allocations in a loop (they reach RLIMIT_AS at once without making the machine
    page; a loop of touched bytearrays reaches it too, but at this VM's page-fault speed only after the
    call deadline: then a timeout, equally harmless). Guarantee: the worker process, seen from the host,
    has the hard 4 GiB limit; the allocation is a MemoryError; the run goes on."""
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
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2
        (pid,) = worker_pids(impl)
        limits = {l[:26].strip(): l[26:].split()[:2] for l in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]}
        assert limits["Max address space"] == [str(MEMORY_LIMIT)] * 2, limits  # soft = hard: it cannot be raised
        assert limits["Max processes"] == [str(WORKER_LIMITS.processes)] * 2, limits
        assert limits["Max file size"] == [str(WORKER_LIMITS.file_size)] * 2, limits
        got = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=DEFAULT_DEADLINE_S)
        assert isinstance(got, SubmissionFailure) and got.outcome in ("error", "timeout", "crashed"), f"no limit stopped it: {got}"
        assert isinstance(got, Raised) and got.type == "MemoryError", got
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2 and impl.transport.restarts == 0, "the run goes on, on the same worker"
    finally:
        impl.close()


# ---- (i) killing its parent ----------------------------------------------------------------------

KILLER = """
    import signal as _signal
    if _os.readlink("/proc/self/ns/pid") == HOST_PID_NS:  # safety: never signal the host's processes
        raise RuntimeError("refusing to run: this worker is not in a PID namespace of its own")
    _res = {"ppid": _os.getppid()}
    try:
        with open(JUDGE_JSON, "w") as _f:  # forge the judge's report (the submission guessed its path)
            _json.dump({"forged": True, "tests": [], "summary": {"passed": 16, "failed": 0, "total": 16, "score": 16.0,
                                                                 "max_score": 16.0}}, _f)
        _res["forge"] = "written"
    except OSError as _e:
        _res["forge"] = type(_e).__name__
    _os.kill(_os.getppid(), _signal.SIGKILL)          # kill the parent...
    _child = _ol_spawn(MARK)
    _os.kill(-1, _signal.SIGKILL)                     # ...and everything it may signal
    _res["child_signal"] = _os.WTERMSIG(_os.waitpid(_child, 0)[1])
    _res["alive"] = True

    def prompt_lookup(ctx, k, max_ngram, min_ngram):   # what it saw, as an error the report shows
        raise RuntimeError(_ol_report(_res))
"""


@pytest.mark.slow
def test_killing_the_parent_kills_only_that_judge(tmp_path):
    """T9, T7: at import a submission forges a report where the judge's may be, SIGKILLs its parent and
    calls kill(-1, SIGKILL). Guarantee: it cannot reach the host's files; it is the sandbox's init (no parent
    in view: kill(getppid()) is kill(0), its own group, and init ignores SIGKILL from inside); kill(-1) reaches only the sandbox's own processes; so the judge (a subprocess
    `ol check`, never this pytest) lives and grades it on its merits."""
    mark = marker()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = scratch / "report.json"  # where the forger guesses the report goes
    sub = submission(tmp_path, KILLER, HOST_PID_NS=os.readlink("/proc/self/ns/pid"), JUDGE_JSON=str(out), MARK=mark)
    try:
        r, report = ol_check(sub, scratch)
        assert r.returncode == 1, f"the judge should have lived and graded a wrong submission: exit {r.returncode}\n{r.stderr[-2000:]}"
        assert report is not None and report["load_error"] is None, "the import (and its kills) ended within the load's deadline"
        assert not [t["name"] for t in report["tests"] if t["outcome"] in ("timeout", "crashed")], \
            "no test waited out a deadline, or lost its worker: the judge lived and served every test"
        assert report is not None and "forged" not in report and report["sandbox"] == "bwrap", report
        assert not out.exists(), "the forger wrote into the judge's folder"
        got = {t["name"]: t for t in report["tests"]}
        assert got["rollback_hand_example"]["outcome"] == "pass", "it is graded on its merits"
        assert got["hand_example_prompt_lookup"]["outcome"] == "error"
        saw = probe(got["hand_example_prompt_lookup"]["message"])
        assert saw["ppid"] == 0 and saw["alive"] and saw["forge"] != "written", saw  # the sandbox's init: no parent in view
        assert saw["child_signal"] == signal.SIGKILL, "kill(-1) did reach the sandbox's own processes"
        assert wait_for(lambda: not marked(mark), SETTLE_S), "a process of the submission outlived its judge"
    finally:
        kill_marked(mark)
    # Had a submission killed its judge anyway (mode none), `ol grade` would trust no report from it: only
    # a judge that exited 0 or 1 is read, whatever it printed before dying.
    import harness.grading.judge
    forged = json.dumps({"forged": True, **report, "summary": {**report["summary"], "passed": 16, "score": 16.0}})
    killed = subprocess.CompletedProcess(r.args, -signal.SIGKILL, stdout=forged, stderr="")

    class KilledJudge:  # the run's zygote, whose fork was killed after printing the forged report
        def run(self, argv, env, cwd, timeout):
            return killed

    options = harness.grading.judge.JudgeOptions(CH, CH.golden, False, "bwrap", KilledJudge())
    graded, _ = harness.grading.judge.judge(sub, scratch, None, options)
    assert graded.passed == 0 and graded.score == 0 and graded.ungraded, graded.to_json()["summary"]
    assert "forged" not in graded.to_json() and all(t.outcome == "error" for t in graded.tests)
    assert "killed" in graded.tests[0].message, graded.tests[0].message


# ---- (j) a daemon ----------------------------------------------------------------------------------

def test_a_daemonized_grandchild_does_not_outlive_the_worker(tmp_path):
    """T9: a call double-forks a setsid() daemon (it leaves the worker's process group and session).
    Guarantee: the judge kills a worker's child processes once the call that made them has answered
    (they live in the worker's PID namespace, below it), and the worker serves on. (That the namespace
    dies whole with the worker is tests/harness/test_sandbox.py's.)"""
    mark = marker()
    sub = submission(tmp_path, f"""
        def blocks_for(tokens, block_tokens):
            if _os.fork() == 0:
                _os.setsid()
                _ol_spawn({mark!r}, seconds=60)   # the daemon: a grandchild in a session of its own
                _os._exit(0)
            _os.wait()
            if not _ol_await({mark!r}):           # the daemon has exec'd: it is running when the call ends
                return -1
            return -(-tokens // block_tokens)
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4))
        assert got == 2
        assert wait_for(lambda: not marked(mark), SETTLE_S), f"the call has answered but its daemon {marked(mark)} runs on"
        got = attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4))
        assert got == 3 and impl.transport.restarts == 0, "the worker itself serves on"
    finally:
        impl.close()
        kill_marked(mark)  # the daemon this test started, if it survived
