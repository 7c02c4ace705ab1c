"""`ol grade --scheduler` on a real Dask cluster: a `dask scheduler` and `dask worker` processes on
loopback, started by the tests themselves (tests/harness/loopback_kit.py: every wait with a deadline, every process
killed with its session at the end).

- a small mixed class graded on workers of two threads each (two judges at once in one worker process)
  gives the local default's grades.csv byte for byte, the timing column aside (CPython 3.11's ast.parse in
  two threads at once failed every class);
- a worker killed mid-run: every submission is still graded, exactly once;
- an interrupted run (SIGINT), run again: what was graded is skipped, not graded again;
- a worker from another checkout refuses, naming what differs;
- a worker whose numpy is not the client's (the lock's) refuses, naming both versions.
- workers whose TMPDIR (and so their scratch) is 150 characters deep grade every sample as expected.json says.
"""

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.languages import rust

from tests.harness.loopback_kit import Loopback
from harness.kernel.paths import REPO

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "examples" / "submissions"
REFERENCE_SPEC = REPO / "reference" / "tinyllm" / "infer" / "spec.py"
HAS_CARGO = rust.missing() is None  # what the harness itself asks before a Rust build
RUN_S = 900  # one `ol grade` of these small classes, at most
# the interrupted class: after 2 are graded, 6 more (three rounds of --jobs 2) leave a loaded test time to interrupt
CLASS_N = 8
TIMING = {"wall_s"}  # the CSV's timing columns


def ol_grade(klass: Path, out: Path, *extra: str, timeout: float = RUN_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), "--ref-deps",
                           "--out", str(out / "grades.csv"), "--results-dir", str(out / "results"), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def start_ol_grade(klass: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), "--ref-deps",
                             "--out", str(out / "grades.csv"), "--results-dir", str(out / "results"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_interruptible)


def _interruptible() -> None:
    """In the child, before it runs ol: SIGINT as at a terminal. A suite started in the background by a shell
    (`./ol selftest &`) inherits SIGINT ignored, and so would `ol grade`: the test's Ctrl-C would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def without_timing(csv_text: str) -> bytes:
    """The CSV's bytes with its timing columns removed (rewritten by the same csv writer ol uses)."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    keep = [i for i, name in enumerate(rows[0]) if name not in TIMING]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
    return buf.getvalue().encode()


def rows(out: Path) -> list[dict]:
    with open(out / "grades.csv") as f:
        return list(csv.DictReader(f))


def bare_class(into: Path, n: int) -> Path:
    """n correct bare spec.py uploads, no two alike (each its own comment line)."""
    for i in range(n):
        (into / f"student-{i:02d}").mkdir(parents=True)
        (into / f"student-{i:02d}" / "spec.py").write_text(REFERENCE_SPEC.read_text() + f"\n# student {i}\n")
    return into


def ledger(out: Path) -> dict[str, bytes]:
    """The ledger's entries: every `<name>.json` but the summary and `.similarity.json` (ol similar's pairs)."""
    return {p.stem: p.read_bytes() for p in (out / "results").glob("*.json")
            if p.name != "summary.json" and not p.name.startswith(".")}


def wait_until(what, deadline_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"ol grade ended ({proc.returncode}) before the test could act:\n{out[-2000:]}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"waited {deadline_s} s in vain")
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    if proc.poll() is None:
        proc.kill()
    return proc.communicate(timeout=60)


@pytest.mark.slow(s=130)
def test_workers_of_two_threads_each_give_the_local_default_s_csv_byte_for_byte(tmp_path):
    """A small mixed class (Python and Rust, a pass, a failure, a load error, a rejected entry, and more
    submissions than the cluster's 4 threads, so a thread grades one after another too) graded on two
    workers of two threads each (two judges at once in one worker process) gives the local default's
    grades.csv byte for byte, the timing column aside; both workers grade; no thread trips on another."""
    from distributed import Client

    klass = tmp_path / "class"
    names = ["correct", "s01-first-occurrence", "no-import"] + (["rust-correct", "rust-s07-draws-u-resample-only-on-rejection"]
                                                              if HAS_CARGO else [])
    for name in names:
        shutil.copytree(EXAMPLES / name, klass / name)
    bare_class(klass, 2)
    (klass / "empty").mkdir()  # not a submission: rejected, with the reason, on both (a verdict: exit 0)
    local = ol_grade(klass, tmp_path / "local", "--seed", "4242", "--jobs", "2")
    assert local.returncode == 0 and "1 of" in local.stderr, local.stderr[-3000:]
    with Loopback(workers=2, nthreads=2) as cluster:
        with Client(cluster.address, timeout=30, set_as_default=False) as c:
            assert sorted(c.nthreads().values()) == [2, 2], "each worker runs two tasks at once"
        remote = ol_grade(klass, tmp_path / "cluster", "--seed", "4242", "--scheduler", cluster.address)
        logs = " ".join(cluster.log(f"w{i}.log") for i in range(2))
    assert remote.returncode == 0, remote.stdout[-2000:] + remote.stderr[-3000:] + logs[-3000:]
    assert "SystemError" not in logs and "Compute Failed" not in logs, logs[-3000:]
    a, b = ((tmp_path / run / "grades.csv").read_text() for run in ("local", "cluster"))
    assert without_timing(a) == without_timing(b), f"local:\n{a}\ntwo threads a worker:\n{b}"
    got = {r["submission"]: r for r in rows(tmp_path / "cluster")}
    assert set(got) == {*names, "student-00", "student-01", "empty"}
    assert got["empty"]["status"] == "rejected" and got["empty"]["score"] == "0.0"
    assert all(r["status"] == "graded" for n, r in got.items() if n != "empty")
    assert got["correct"]["passed"] == "16" and got["no-import"]["passed"] == "0"
    assert got["s01-first-occurrence"]["passed"] != "16", "the wrong one is graded wrong"
    assert "Dask worker tcp://127.0.0.1:" in remote.stderr, "each completion says where it was graded"
    workers = set(re.findall(r" on Dask worker (tcp://127\.0\.0\.1:\d+)", remote.stderr))
    assert len(workers) == 2, f"both workers graded: {remote.stderr[-2000:]}"


@pytest.mark.slow(s=47)
def test_a_worker_killed_mid_run_loses_no_submission_and_grades_none_twice(tmp_path):
    from distributed import Client

    klass = bare_class(tmp_path / "class", 6)
    out = tmp_path / "out"
    with Loopback(workers=2) as cluster:
        with Client(cluster.address, timeout=30, set_as_default=False) as watcher:
            victim = next(a for a, info in watcher.scheduler_info()["workers"].items() if info["name"] == "w0")
            proc = start_ol_grade(klass, out, "--seed", "7", "--scheduler", cluster.address)
            try:
                # w0 is grading one of them, and one is already in the ledger: now the machine is lost
                wait_until(lambda: ledger(out) and watcher.processing(workers=[victim]).get(victim), RUN_S, proc)
                in_flight = set(watcher.processing(workers=[victim])[victim])
                cluster.kill_worker(0)
                stdout, stderr = proc.communicate(timeout=RUN_S)
            finally:
                stop(proc)
    assert in_flight, "w0 was grading when it was killed"
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    got = rows(out)
    names = [r["submission"] for r in got]
    assert sorted(names) == sorted(p.name for p in klass.iterdir()), "one row per submission, no duplicate"
    assert all(r["status"] == "graded" and r["passed"] == "16" for r in got), got
    assert sorted(ledger(out)) == sorted(names)
    finished = [line.split()[1] for line in stderr.splitlines() if line.startswith("16/16 ")]
    assert sorted(finished) == sorted(names), f"each finished exactly once:\n{stderr[-3000:]}"


@pytest.mark.slow(s=53)
@pytest.mark.parametrize("engine", ["local", "cluster"])
def test_an_interrupted_run_resumes_and_grades_nothing_twice(tmp_path, engine):
    klass = bare_class(tmp_path / "class", CLASS_N)
    out = tmp_path / "out"
    with Loopback(workers=2) if engine == "cluster" else _nothing() as cluster:
        where = ["--scheduler", cluster.address] if engine == "cluster" else ["--jobs", "2"]
        proc = start_ol_grade(klass, out, *where)  # no --seed: a random one, recorded in the ledger
        try:
            wait_until(lambda: len(ledger(out)) >= 2, RUN_S, proc)
            assert proc.poll() is None, "the run ended before the test could interrupt it"
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            stop(proc)
        assert proc.returncode == 130 and "run the same command again to resume" in stderr, stderr[-3000:]
        kept = {n: data for n, data in ledger(out).items() if json.loads(data)["ungraded"] is None}
        assert 2 <= len(kept) < CLASS_N, f"{len(kept)} graded before the interrupt"
        stopped = rows(out)  # grades.csv is rebuilt from the ledger when a run stops: every entry a row
        assert sorted(r["submission"] for r in stopped) == sorted(p.name for p in klass.iterdir()), stopped
        assert all(r["status"] == "ungraded" and "interrupted" in r["reason"] for r in stopped if r["submission"] not in kept)
        mtimes = {p.name: p.stat().st_mtime_ns for p in (out / "results").glob("*.json")  # the graded entries
                  if p.stem in kept}
        again = ol_grade(klass, out, *where)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert f"{len(kept)} of {CLASS_N} submissions already graded" in again.stderr and "resuming on them" in again.stderr, again.stderr
    regraded = {line.split()[1] for line in again.stderr.splitlines() if line.startswith("16/16 ")}
    assert regraded == {p.name for p in klass.iterdir()} - set(kept), again.stderr[-3000:]
    after = ledger(out)
    assert all(after[name] == data for name, data in kept.items()), "a skipped entry is not rewritten"
    assert all((out / "results" / n).stat().st_mtime_ns == t for n, t in mtimes.items())
    assert len(rows(out)) == CLASS_N and all(r["passed"] == "16" for r in rows(out))


class _nothing:
    address = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def test_a_worker_of_another_checkout_refuses_naming_what_differs(tmp_path):
    other = tmp_path / "other-checkout"
    for part in ("harness", "chapters", "reference", "course", "fixtures", "config", "spec", "locks"):  # a whole checkout
        shutil.copytree(REPO / part, other / part, ignore=shutil.ignore_patterns("__pycache__", "target"))
    shutil.copy(REPO / "pyproject.toml", other / "pyproject.toml")
    with open(other / "chapters" / "L10_8" / "chapter.toml", "a") as f:
        f.write("\n# edited on this machine only\n")
    klass = bare_class(tmp_path / "class", 1)
    with Loopback(workers=1, worker_pythonpath=other) as cluster:
        r = ol_grade(klass, tmp_path / "out", "--seed", "1", "--scheduler", cluster.address, timeout=300)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "refuses to grade: its harness version is not the client's" in r.stderr, r.stderr[-2000:]
    assert "the harness, chapter pack, references or fixtures differ" in r.stderr and "Traceback" not in r.stderr
    got = rows(tmp_path / "out")  # no grade from a mixed-version cluster: the entry's row is ungraded, saying why
    assert [(r["submission"], r["status"]) for r in got] == [("student-00", "ungraded")], got
    assert "its harness version is not the client's" in got[0]["reason"], got[0]["reason"]


def test_a_worker_with_another_numpy_refuses_naming_both_versions(tmp_path):
    """The worker's environment says numpy 1.26.0 (a distribution's metadata ahead of the real one on its path: what
    importlib.metadata, and so pip freeze, reports), the client's the lock's: no submission is graded on it."""
    from importlib import metadata

    fake = tmp_path / "other-site"
    (fake / "numpy-1.26.0.dist-info").mkdir(parents=True)
    (fake / "numpy-1.26.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.0\n")
    klass = bare_class(tmp_path / "class", 1)
    with Loopback(workers=1, worker_pythonpath=f"{fake}{os.pathsep}{REPO}") as cluster:
        r = ol_grade(klass, tmp_path / "out", "--seed", "1", "--scheduler", cluster.address, timeout=300)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "refuses to grade: its harness version is not the client's" in r.stderr, r.stderr[-2000:]
    assert f"numpy 1.26.0 here, {metadata.version('numpy')} on the client" in r.stderr, r.stderr[-2000:]
    assert "the harness, chapter pack" not in r.stderr and "Traceback" not in r.stderr, "numpy alone differs"
    got = rows(tmp_path / "out")  # no grade from a worker of another numpy: the entry's row is ungraded, saying why
    assert [(r["submission"], r["status"]) for r in got] == [("student-00", "ungraded")], got
    assert "numpy 1.26.0 here" in got[0]["reason"], got[0]["reason"]


DEEP = 150  # characters of the workers' TMPDIR: a cluster's scratch deep in /scratch/users/NAME/dask-worker-space/...
EXPECTED = json.loads((EXAMPLES / "expected.json").read_text())["submissions"]
DEEP_CLASS = [n for n, e in EXPECTED.items() if e.get("language", "python") == "python"] + (
    ["rust-correct", "rust-s01-first-occurrence"] if HAS_CARGO else [])


def deep_folder(under: Path, length: int) -> Path:
    """A folder under `under` whose path is at least `length` characters long."""
    deep = under
    while len(str(deep)) < length:
        deep = deep / ("d" * min(40, max(1, length - len(str(deep)) - 1)))
    deep.mkdir(parents=True)
    return deep


@pytest.mark.slow(s=120)
def test_workers_with_a_deep_tmpdir_give_every_entry_its_row_and_the_samples_their_grades(tmp_path, monkeypatch):
    """The workers' TMPDIR is 150 characters deep, and so is everything of theirs (the loopback's folder, each
    worker's local directory, the run's scratch, the judges' zygote socket: past AF_UNIX's 108 bytes): every entry
    gets its row, and each sample the grade expected.json states (16/16 for the correct ones)."""
    from harness.registry import load_chapter

    points = {t.name: t.points for t in load_chapter("L10.8").tests}
    deep = deep_folder(tmp_path, DEEP)
    assert len(str(deep)) >= DEEP
    klass = tmp_path / "class"
    for name in DEEP_CLASS:
        shutil.copytree(EXAMPLES / name, klass / name)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # the loopback's own folder (its workers' spaces) goes there too
    with Loopback(workers=1, nthreads=2, env={"TMPDIR": str(deep)}) as cluster:
        assert str(cluster.dir).startswith(str(deep))
        r = ol_grade(klass, tmp_path / "out", "--seed", "4242", "--scheduler", cluster.address)
        logs = cluster.log("w0.log")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:] + logs[-3000:]
    got = {row["submission"]: row for row in rows(tmp_path / "out")}
    assert sorted(got) == sorted(DEEP_CLASS), "every entry has its row"
    for name in DEEP_CLASS:
        want, row = EXPECTED[name], got[name]
        failing = {t: o for t, o in row.items() if t in points and o != "pass"}
        assert row["status"] == "graded" and failing == want["must_fail"], (name, row["reason"], failing)
        assert float(row["score"]) == sum(points[t] for t in want["must_pass"]), (name, row["score"])
    assert all(float(got[n]["score"]) == 16 for n in DEEP_CLASS if not EXPECTED[n]["must_fail"])
    summary = json.loads((tmp_path / "out" / "results" / "summary.json").read_text())["summary"]
    assert (summary["submissions"], summary["graded"]) == (len(DEEP_CLASS), len(DEEP_CLASS)), summary


@pytest.mark.slow(s=40)
def test_a_worker_side_fault_on_one_entry_is_its_ungraded_row_and_the_others_are_graded(tmp_path):
    """A fault on the worker for one entry (its judge cannot start: injected through the worker's PYTHONPATH, a
    sitecustomize that breaks harness.grading.judge.judge for the entry named `faulty`): that entry's row is
    ungraded, the fault named; the others are graded; the summary counts the whole class."""
    klass = bare_class(tmp_path / "class", 2)
    (klass / "faulty").mkdir()
    (klass / "faulty" / "spec.py").write_text(REFERENCE_SPEC.read_text())
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    with Loopback(workers=1, nthreads=2, env={"OL_TEST_INJECT": "faulty"}, worker_pythonpath=Path(f"{REPO}{os.pathsep}{inject}")) as cluster:
        r = ol_grade(klass, tmp_path / "out", "--seed", "7", "--scheduler", cluster.address)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    got = {row["submission"]: row for row in rows(tmp_path / "out")}
    assert sorted(got) == ["faulty", "student-00", "student-01"], got
    assert got["faulty"]["status"] == "ungraded" and "RuntimeError: injected on the worker" in got["faulty"]["reason"], got["faulty"]
    assert all(got[n]["status"] == "graded" and got[n]["passed"] == "16" for n in ("student-00", "student-01")), got
    summary = json.loads((tmp_path / "out" / "results" / "summary.json").read_text())["summary"]
    assert (summary["submissions"], summary["graded"], summary["ungraded"]) == (3, 2, 1), summary


# imported by every Python process started with the worker's PYTHONPATH (the scheduler, the nanny, the worker; not
# the judges' zygote, whose PYTHONPATH is the checkout alone): harness.grading.judge, once imported, fails for one entry
SITECUSTOMIZE = """
import importlib.abc, importlib.util, os, sys


class _Inject(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "harness.grading.judge" or not os.environ.get("OL_TEST_INJECT"):
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            real = module.judge

            def judge(sub, *args, **kwargs):
                if sub.name == os.environ["OL_TEST_INJECT"]:
                    raise RuntimeError("injected on the worker: the judge could not start")
                return real(sub, *args, **kwargs)

            module.judge = judge

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Inject())
"""
