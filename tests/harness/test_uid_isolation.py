"""Mode uid isolates students from each other (issue 25, item 4), with real processes of real uids.

Each test runs a small driver as root inside the uid kit's private mount namespace (tests/harness/uid_kit.py:
the interpreter, its venv and the checkout reachable by an unprivileged uid, as in a Gradescope image), with
OL_SANDBOX=uid: a worker cannot read a sibling's copy even knowing its path; a daemon a worker's uid left is
killed before that uid is handed out again, so the next worker with it is unharmed; the class folder and the
ledger are out of a worker uid's reach; the Gradescope seed is on no command line and in no environment a
worker uid can read.
"""

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.harness import uid_kit

REPO = Path(__file__).resolve().parents[2]
S07 = REPO / "examples" / "submissions" / "s07-draws-u-resample-only-on-rejection"


def _drive(code: str, tmp_path: Path, timeout: float = 120, **env) -> dict:
    """Run `code` (Python, as root) in the uid kit's namespace; it prints one JSON object last, returned."""
    prefix = uid_kit.namespace()
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([*prefix, sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), "OL_SANDBOX": "uid", **env})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_worker_cannot_read_a_sibling_workers_copy_even_knowing_its_path(tmp_path, worker_uids):
    """Two workers of two uids: the second opens the first's spec.py by the path on the first's command line."""
    uid_kit.namespace()  # skips where mode uid cannot run, before any uid is leased
    uids = ", ".join(map(str, worker_uids(2)))  # leased for this test (conftest.worker_uids)
    out = _drive(f'''
        import json, os, subprocess, sys, time
        from harness.registry import load_chapter
        from harness.subjects.open import open_impl

        a, b = {uids}
        os.environ["OL_SANDBOX_UID"] = str(a)
        impl = open_impl(load_chapter("L10.8"), {str(S07)!r})
        impl.transport.spawn()  # worker a, running as uid a, its copy in its own folder
        try:
            spec = impl.transport.workdir / "sub" / "tinyllm" / "infer" / "spec.py"
            # its command line names that folder: read until it does (setpriv, then the limiter, exec the worker, and a
            # process in the middle of an exec shows an empty command line)
            cmdline, deadline = "", time.monotonic() + 30
            while str(impl.transport.workdir / "sub") not in cmdline and time.monotonic() < deadline:
                cmdline = open(f"/proc/{{impl.transport.proc.pid}}/cmdline").read()
                time.sleep(0.01)
            assert str(impl.transport.workdir / "sub") in cmdline, cmdline
            probe = "import sys\\ntry:\\n open(sys.argv[1]).read(); print('read')\\nexcept PermissionError: print('refused')"
            def as_(uid):
                return subprocess.run([sys.executable, "-S", "-c", probe, str(spec)], user=uid, group=uid, extra_groups=[],
                                      capture_output=True, text=True, cwd="/").stdout.strip()
            print(json.dumps({{"sibling": as_(b), "own": as_(a)}}))
        finally:
            impl.close()
    ''', tmp_path)
    assert out == {"sibling": "refused", "own": "read"}, out


DAEMON = r'''
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon of the worker's uid, out of its judge's session and reach
        time.sleep(0.5)  # its worker's judge has ended by now
        end = time.monotonic() + 60  # this test's safety net: it stops by itself
        while time.monotonic() < end:
            try:
                os.kill(-1, 9)  # every other process of this uid: the next worker that gets it
            except OSError:
                pass
            time.sleep(0.005)
    os._exit(0)
'''


def test_a_daemon_a_worker_uid_left_is_killed_before_the_uid_is_handed_out_again(tmp_path):
    """A setsid daemon that kills everything of its uid outlives its worker; the pool clears the uid before the
    next judge's worker gets it: that worker runs to its end, and no process of the uid is left."""
    pidfile = tmp_path / "daemon.pid"
    try:
        out = _drive(f'''
            import json, subprocess, sys, time
            from harness.sandbox.uids import UidPool, live_processes

            pool = UidPool(1)
            uid = pool.take()
            quiet = dict(user=uid, group=uid, extra_groups=[], cwd="/", stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-S", "-c", {DAEMON!r}], check=True, **quiet)
            t1 = time.monotonic()
            deadline = t1 + 10
            while not live_processes(uid) and time.monotonic() < deadline:
                time.sleep(0.01)
            left = len(live_processes(uid))
            seen = {{"uid": uid, "run_s": round(t1 - t0, 2), "waited_s": round(time.monotonic() - t1, 2)}}
            open({str(pidfile)!r}, "w").write(" ".join(map(str, live_processes(uid))))
            time.sleep(0.6)  # the daemon is killing by now
            pool.give(uid)  # its worker's judge ended
            again = pool.take()  # the next judge's worker
            honest = subprocess.run([sys.executable, "-S", "-c", "import time; time.sleep(1.5)"], timeout=30,
                                    **(quiet | dict(user=again, group=again)))
            pool.give(again)
            print(json.dumps({{"left": left, "same": again == uid, "honest": honest.returncode,
                              "after": len(live_processes(uid)), "seen": seen}}))
        ''', tmp_path)
    finally:
        if pidfile.is_file():  # without the fix the daemon lives: this test's own process, killed by its pid
            for pid in pidfile.read_text().split():
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
    assert out["left"] >= 1, f"the daemon must be running when its worker's judge ends: {out}"
    assert out["same"] and out["honest"] == 0 and out["after"] == 0, out


def _world_readable_dir() -> Path:
    """A folder under /tmp that any uid reaches (this test's tmp_path is under a 0700 folder: proving nothing)."""
    d = Path(tempfile.mkdtemp(prefix="ol-test-uid-class-", dir="/tmp"))
    d.chmod(0o755)
    return d


def test_ol_grade_in_uid_mode_names_a_class_folder_a_worker_could_read_with_the_remedy(tmp_path, worker_uids):
    """A world-readable class folder (its path is on ol grade's command line): refused before anyone is graded."""
    prefix = uid_kit.namespace()

    top = _world_readable_dir()
    try:
        subs = top / "class"
        shutil.copytree(S07, subs / "s07")
        subs.chmod(0o755)
        r = subprocess.run([*prefix, sys.executable, "-m", "harness.cli", "grade", "L10.8", str(subs), "--ref-deps",
                            "--out", str(tmp_path / "g.csv")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(REPO), "OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(worker_uids()[0])})
        assert r.returncode == 2 and f"'{subs}'" in r.stderr and "chmod -R go-rwx" in r.stderr, r.stderr[-2000:]
        assert not (tmp_path / "g.csv").exists(), "nobody graded"
    finally:
        shutil.rmtree(top)


def test_the_ledger_and_grades_ol_grade_writes_are_unreadable_by_a_worker_uid(tmp_path, worker_uids):
    """The results folder is 0700 and every file the ledger writes 0600, even beside a world-readable folder."""
    if os.geteuid() != 0:
        pytest.skip("needs root to probe as another uid")
    from harness.grading.grade import check_outputs
    from harness.grading.ledger import Ledger
    from harness.registry import load_chapter
    from harness.subjects.version import version_of

    ch = load_chapter("L10.8")
    top = _world_readable_dir()
    try:
        out, results = top / "grades.csv", top / "grades-results"
        check_outputs(out, results)
        Ledger(ch, ["s07"], out, results, 3, True, version_of(ch), "uid").write()
        uid = worker_uids()[0]
        for path in (out, results, results / "summary.json"):
            assert path.exists(), path
            r = subprocess.run(["cat" if path.is_file() else "ls", str(path)], user=uid, group=uid, extra_groups=[],
                               capture_output=True, text=True, cwd="/")
            assert r.returncode != 0 and "Permission denied" in r.stderr, (path, r.stdout[:200])
    finally:
        shutil.rmtree(top)


def test_a_rust_build_folder_is_root_and_the_workers_gid_0710_before_the_crate_lands(tmp_path, worker_uids):
    """Mode uid: a student's crate is copied into its build folder, which is root's, its group the worker's gid,
    0710, from before the first file lands (as a Python worker's copies): a sibling uid cannot read its spec.rs
    even knowing the path, while the build runs or after. (The cargo step is replaced by a recorder, confined as
    cargo is, that fails the build: the folder's modes are what is tested, not the compiler.)"""
    crate = tmp_path / "sub" / "tl-engine"
    shutil.copytree(REPO / "reference" / "rust" / "crates" / "tl-engine", crate, ignore=shutil.ignore_patterns("target"))
    uid_kit.namespace()  # skips where mode uid cannot run, before any uid is leased
    uids = ", ".join(map(str, worker_uids(2)))  # leased for this test (conftest.worker_uids)
    out = _drive(f'''
        import json, os, stat, subprocess, sys
        from pathlib import Path
        from harness.languages import rust
        from harness.registry import load_chapter
        from harness.subjects.open import open_impl

        a, b = {uids}
        os.environ["OL_SANDBOX_UID"] = str(a)
        seen = {{}}
        probe = "import sys\\ntry:\\n open(sys.argv[1]).read(); print('read')\\nexcept PermissionError: print('refused')"

        def as_(uid, path):
            return subprocess.run([sys.executable, "-S", "-c", probe, str(path)], user=uid, group=uid, extra_groups=[],
                                  capture_output=True, text=True, cwd="/").stdout.strip()

        def look(when, folder, spec):
            st = os.stat(folder)
            seen[when] = {{"mode": oct(stat.S_IMODE(st.st_mode)), "owner": [st.st_uid, st.st_gid],
                           "sibling": as_(b, spec), "own": as_(a, spec)}}

        real_assemble = rust.assemble

        def assemble(lang, package_dir, ws):
            st = os.stat(ws.parent)  # the build folder, as the student's files are about to land in it
            seen["empty"] = {{"mode": oct(stat.S_IMODE(st.st_mode)), "owner": [st.st_uid, st.st_gid]}}
            made = real_assemble(lang, package_dir, ws)
            look("copied", ws.parent, ws / "crates" / "tl-engine" / "src" / "spec.rs")
            return made

        def cargo(tc, mode, ws, target, home):  # confined as the real step is, then recorded; the build fails
            rust.confine(mode, ["true"], [], {{}}, home, rust.BUILD_LIMITS, writable=[ws, target])
            look("building", ws.parent, ws / "crates" / "tl-engine" / "src" / "spec.rs")
            raise rust.BuildFailed("recorded", "recorded")

        rust.assemble, rust._cargo, rust.toolchain = assemble, cargo, lambda: None  # no compiler is run
        impl = open_impl(load_chapter("L10.8"), {str(crate.parent)!r})
        impl.close()
        print(json.dumps(seen | {{"gid": a}}))
    ''', tmp_path)
    a = out["gid"]
    assert out["empty"] == {"mode": "0o710", "owner": [0, a]}, out
    for when in ("copied", "building"):
        assert out[when] == {"mode": "0o710", "owner": [0, a], "sibling": "refused", "own": "read"}, (when, out)


POOL = """
import json, sys
from harness.sandbox.uids import UidPool
pool = UidPool(2)
print(json.dumps([pool.take(), pool.take()]), flush=True)
sys.stdin.read()  # holds its pool until told (or killed)
"""


def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("worker uids are root's to hand out")


def test_two_pools_in_two_processes_never_hand_out_one_uid_and_a_dead_holders_leases_are_free_again(tmp_path):
    """Two `ol grade` runs on one machine: each pool's uids are leased (a flock per uid in a root-only folder),
    so the second process's pool takes none of the first's, though no process runs as them; once the first is
    SIGKILLed (no cleanup of its own), its uids can be leased again, and the second's still cannot."""
    _root()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OL_UID_LEASES": str(tmp_path / "leases")}
    runs = [subprocess.Popen([sys.executable, "-c", POOL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env) for _ in range(2)]
    try:
        first, second = (json.loads(p.stdout.readline()) for p in runs)  # each holds its pool from here
        assert len(set(first)) == len(set(second)) == 2 and not set(first) & set(second), (first, second)
        runs[0].kill()
        runs[0].wait()
        code = ("import json, sys\n"
                "from harness.sandbox.uids import lease, leases_dir\n"
                "folder = leases_dir()\n"
                "print(json.dumps({u: lease(u, folder) is not None for u in map(int, sys.argv[1:])}))")
        probe = subprocess.run([sys.executable, "-c", code, *map(str, first + second)], capture_output=True, text=True,
                               env=env, timeout=60)
        free = {int(k): v for k, v in json.loads(probe.stdout).items()}
        assert free == {**dict.fromkeys(first, True), **dict.fromkeys(second, False)}, (free, probe.stderr[-2000:])
        assert stat.S_IMODE(os.stat(tmp_path / "leases").st_mode) == 0o700
    finally:
        for p in runs:
            p.kill()
            p.wait()


def test_a_leases_folder_others_could_reach_is_refused_naming_it(tmp_path, monkeypatch):
    _root()
    from harness.sandbox.confine import SandboxError
    from harness.sandbox.uids import UidPool

    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("OL_UID_LEASES", str(folder))
    with pytest.raises(SandboxError, match=f"{folder} must be a folder of this user's, mode 0700"):
        UidPool(1)


LEFT_BEHIND = r'''
import os as _os, time as _time
_MARK = "@MARK@"
if not _os.path.exists(_MARK + "/daemon"):  # the first worker that loads it leaves one daemon behind
    _worker = _os.getpid()
    _mid = _os.fork()
    if _mid == 0:
        _os.setsid()
        if _os.fork() == 0:
            with open(_MARK + "/daemon", "w") as _f:
                _f.write(str(_os.getpid()))
            _end = _time.monotonic() + 60  # this test's safety net: it stops by itself
            while _time.monotonic() < _end:
                try:
                    _os.kill(_worker, 0)
                except OSError:  # its own worker is gone: every process of this uid from now on is the next student's
                    try:
                        _os.kill(-1, 9)
                    except OSError:
                        pass
                _time.sleep(0.005)
        _os._exit(0)
    _os.waitpid(_mid, 0)
'''


@pytest.mark.slow(s=61)
def test_ol_grade_in_uid_mode_grades_the_next_submission_on_a_daemons_uid_as_if_alone(tmp_path):
    """`ol grade --jobs 1` in mode uid (one worker uid, so both judges' workers run as it, one after the other):
    the first submission's worker leaves a setsid daemon that, once that worker is gone, kills every process of
    its uid; the second, the reference's spec.py, scores its honest 16 of 16, and no process the daemon was is
    left after the run. (The judge's reap and the pool's clearing of the uid between judges both stand here.)"""
    prefix = uid_kit.namespace_with_answers_hidden([REPO / "chapters" / "L10_8", REPO / "reference", REPO / "examples"])
    mark = Path(tempfile.mkdtemp(prefix="ol-test-daemon-", dir="/tmp"))
    mark.chmod(0o777)  # the daemon, of the worker's uid, writes its pid here
    spec = (REPO / "reference" / "tinyllm" / "infer" / "spec.py").read_text()
    klass = tmp_path / "class"
    for name, text in (("a-daemon", LEFT_BEHIND.replace("@MARK@", str(mark)) + spec), ("b-honest", spec)):
        (klass / name).mkdir(parents=True)
        (klass / name / "spec.py").write_text(text)
    try:
        r = subprocess.run([*prefix, sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), "--ref-deps",
                            "--jobs", "1", "--seed", "5", "--out", str(tmp_path / "out" / "grades.csv")],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(REPO), "OL_SANDBOX": "uid"})
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
            rows = {row["submission"]: row for row in csv.DictReader(f)}
        assert rows["b-honest"]["status"] == "graded" and rows["b-honest"]["passed"] == "16", rows["b-honest"]
        assert rows["b-honest"]["sandbox"] == "uid" and rows["a-daemon"]["sandbox"] == "uid", rows
        assert (mark / "daemon").is_file(), rows["a-daemon"]
        daemon = int((mark / "daemon").read_text())  # the payload ran: its daemon was started
        assert not Path(f"/proc/{daemon}").exists() or "\nState:\tZ" in Path(f"/proc/{daemon}/status").read_text()
    finally:
        if (mark / "daemon").is_file():
            try:
                os.kill(int((mark / "daemon").read_text()), 9)
            except (ProcessLookupError, ValueError):
                pass
        shutil.rmtree(mark, ignore_errors=True)
