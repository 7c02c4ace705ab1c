"""SECURITY.md's threats, one test per class, through the real judge path (open_impl + Impl.call,
run_check, or `ol check` in a subprocess) with the worker in its bubblewrap sandbox.

Each test asserts the outcome the hostile submission must get (a timeout: produced by the deadline in
force, which its message names), and what it could not do, observed from outside: the report, the judge's captured output of the worker, the host's
files and processes. A hostile submission reports what it saw in an exception (`_ol_report`, parsed by
hostile_kit.probe); where a route would let it cheat, it cheats, so a broken defence changes the grade.
What test_hostile*.py and test_sandbox.py already cover is not repeated here. How long each verdict takes
(the product's time bounds: a hang at import judged within 30 s, any hostile check within 60 s) is measured
by bench/hostile.py, not asserted here.
"""

import errno
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.check.runner import LOAD_DEADLINE_S, CheckOptions, run_check
from harness.sandbox.confine import choose
from harness.kernel.errors import Crashed, Raised, SubmissionFailure, Timeout
from harness.transport.impl import DEFAULT_DEADLINE_S
from harness.kernel.paths import REPO
from harness.subjects.open import open_impl
from harness.transport.worker_client import MESSAGE_CAP, WORKER_LIMITS

from tests.harness.hostile_kit import (FORK_BOMB, CH, HAND_PL, SETTLE_S, attempt, kill_marked, marked, marker, ol_check, outcomes,
                                       probe, submission, timed_out_at, tree_digest, wait_for, worker_pids)

MODE = choose()
pytestmark = pytest.mark.skipif(MODE.name != "bwrap", reason=f"these tests state the bubblewrap sandbox's guarantees; "
                                                             f"workers here run in mode {MODE.name} ({MODE.why})")

NOT_PROMPT_LOOKUP = ["hand_example_greedy_verify", "rollback_hand_example"]  # tests that never call prompt_lookup
GOLDEN_SIGNATURE = b'"master_seed"'  # in every golden file's first lines


def _two_tests(sub, expect_error: bool = False):
    """run_check on two tests: one that calls the attacked prompt_lookup, one that never does: the report.
    `expect_error`: the first must be an error (the attack's report) and the second pass."""
    rep = run_check(CH, str(sub), CheckOptions(only=["hand_example_prompt_lookup", "rollback_hand_example"]))
    if expect_error:
        assert outcomes(rep) == {"hand_example_prompt_lookup": "error", "rollback_hand_example": "pass"}, \
            [(t.name, t.outcome, t.message[:300]) for t in rep.tests]
    return rep


def _report_of(rep, name: str) -> dict:
    (t,) = [t for t in rep.tests if t.name == name]
    return probe(t.message)


# ---- T6: the expected answers ---------------------------------------------------------------------

GOLDEN_THIEF = """
    import pathlib as _pathlib
    def _steal():
        '''Every route to a golden file; the bytes of any that works.'''
        res, loot = {}, {}
        def _read(route, path):
            try:
                with open(path, "rb") as f:
                    data = f.read(1 << 16)
                res[route] = "read"
                if SIGNATURE in data:
                    loot[route] = str(path)
            except OSError as e:
                res[route] = type(e).__name__
        _read("shipped path", SHIPPED)
        _read("fresh path", FRESH)
        for pid in [d for d in _os.listdir("/proc") if d.isdigit()]:  # --golden on any command line, the judge's first
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
            except OSError as e:
                res[f"/proc/{pid}/cmdline"] = type(e).__name__
                continue
            res.setdefault("cmdlines read", []).append(pid)
            if b"--golden" in argv:
                _read(f"--golden of {pid}", argv[argv.index(b"--golden") + 1].decode())
            for fd in _os.listdir(f"/proc/{pid}/fd") if _os.access(f"/proc/{pid}/fd", _os.R_OK) else []:
                _read(f"/proc/{pid}/fd/{fd}", f"/proc/{pid}/fd/{fd}")
            for link in ("cwd", "root"):
                _read(f"/proc/{pid}/{link}/golden", f"/proc/{pid}/{link}/{SHIPPED.lstrip('/')}")
        try:
            import harness.kernel.paths as _hp
            _read("harness.kernel.paths", _hp.REPO / "chapters/L10_8/fixtures/spec_golden.json")
        except ImportError as e:
            res["harness.kernel.paths"] = type(e).__name__
        import harness as _h  # the worker kit's copy: walk up from it
        for up in _pathlib.Path(_h.__file__).resolve().parents:
            _read(f"above harness: {up}", up / "chapters/L10_8/fixtures/spec_golden.json")
        skip = {"/proc", "/sys", "/dev", "/usr", _sys.prefix, _sys.base_prefix}  # the interpreter's trees: no answers
        for root, dirs, files in _os.walk("/"):  # a search by name of everything else it sees
            dirs[:] = [d for d in dirs if _os.path.join(root, d) not in skip]
            res["searched"] = res.get("searched", 0) + len(files)
            for f in files:
                if "golden" in f:
                    _read(f"found {root}/{f}", _os.path.join(root, f))
        return res, loot

    _seen, _loot = _steal()
    _prompt_lookup = prompt_lookup
    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        if _loot:  # a route worked: answer right (as a copy of the golden answers would)
            return _prompt_lookup(ctx, k, max_ngram, min_ngram)
        raise RuntimeError(_ol_report({"seen": _seen, "loot": _loot}))
"""


@pytest.mark.slow
def test_golden_answers_cannot_be_read_by_any_route(tmp_path):
    """T6: a submission hunts the shipped golden file and a fresh one given to `ol check --golden` (on the
    judge's command line), by direct path, /proc/*/cmdline, fd, cwd and root, the harness's own paths and a
    search by name, and answers right if it finds one. Guarantee: none is visible; it is graded wrong."""
    fresh_dir = tmp_path / f"ol-fresh-{uuid.uuid4().hex[:8]}"
    fresh_dir.mkdir()
    fresh = fresh_dir / "spec_golden.fresh.json"
    shutil.copyfile(CH.golden, fresh)
    shutil.copyfile(CH.golden.with_name(CH.golden.name + ".sha256"), fresh.with_name(fresh.name + ".sha256"))
    sub = submission(tmp_path, GOLDEN_THIEF, SHIPPED=str(CH.golden), FRESH=str(fresh), SIGNATURE=GOLDEN_SIGNATURE)
    r, report = ol_check(sub, tmp_path, "--golden", str(fresh))
    assert report is not None and r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert report["load_error"] is None, "its search ended within the load's deadline"
    got = {t["name"]: t for t in report["tests"]}
    for name in ("hand_example_prompt_lookup", "prompt_lookup_matches_python_l8_6"):
        assert got[name]["outcome"] == "error", (name, got[name]["outcome"], got[name]["message"][:300])
    for name in NOT_PROMPT_LOOKUP:
        assert got[name]["outcome"] == "pass", (name, got[name]["message"][:300])
    saw = probe(got["hand_example_prompt_lookup"]["message"])
    assert saw["loot"] == {}, saw
    seen = saw["seen"]
    assert seen["shipped path"] == seen["fresh path"] == "FileNotFoundError", seen
    assert seen["harness.kernel.paths"] == "ModuleNotFoundError", seen
    assert seen["cmdlines read"], "it could read the command lines it sees (its sandbox's own)"
    assert seen["searched"] > 10, "the search by name saw its own files at least (the kit, its package)"
    assert not [k for k in seen if k.startswith("--golden of")], f"a judge's command line was visible: {seen}"


REFERENCE_THIEF = """
    import importlib.util as _ilu
    def _reference():
        '''The pristine reference, by any route: its module, or None and why not.'''
        why = {}
        try:
            spec = _ilu.spec_from_file_location("ol_stolen", REFERENCE + "/tinyllm/infer/spec.py")
            m = _ilu.module_from_spec(spec)
            spec.loader.exec_module(m)
            return m, why
        except (OSError, ImportError) as e:
            why["by path"] = type(e).__name__
        _sys.path.insert(0, REFERENCE)
        for name in ("harness.subjects.reference", "reference", "chapters.L10_8.judge.tiny_llama"):
            try:
                __import__(name)
                why[name] = "imported"
            except ImportError as e:
                why[name] = type(e).__name__
        _sys.path.remove(REFERENCE)
        return None, why

    def prompt_lookup(ctx, k, max_ngram, min_ngram):   # no implementation of its own: delegation or nothing
        ref, why = _reference()
        if ref is not None:
            return ref.prompt_lookup(ctx, k, max_ngram, min_ngram)
        raise RuntimeError(_ol_report(why))
"""


def test_the_reference_cannot_be_imported_by_path(tmp_path):
    """T6: a submission with no prompt_lookup of its own imports the pristine reference by path (or the
    judge's loader of it) and delegates. Guarantee: neither is visible; the test is an error."""
    sub = submission(tmp_path, REFERENCE_THIEF, REFERENCE=str(CH.language("python").reference))
    rep = _two_tests(sub, expect_error=True)
    why = _report_of(rep, "hand_example_prompt_lookup")
    assert why["by path"] == "FileNotFoundError", why
    assert "imported" not in why.values(), why


# ---- T7: writing the judge's files ----------------------------------------------------------------

VANDAL = """
    import pathlib as _pathlib
    def _vandalize():
        res = {}   # action -> "done" or the errno's name
        kit_worker = _os.path.join(_os.path.dirname(__import__("harness").__file__), "worker.py")
        for target in TARGETS + [kit_worker, __file__]:   # and the copies it runs from
            p = _pathlib.Path(target)
            for how, act in [("append", lambda: open(p, "a").write("# vandalized\\n")),
                             ("truncate", lambda: open(p, "w").close()),
                             ("chmod", lambda: _os.chmod(p, 0o777)),
                             ("utime", lambda: _os.utime(p, (0, 0))),
                             ("rename", lambda: _os.rename(p, str(p) + ".moved")),
                             ("unlink", lambda: _os.unlink(p)),
                             ("new file beside", lambda: open(p.parent / "vandal.txt", "w").write("x"))]:
                try:
                    act()
                    res[f"{how} {target}"] = "done"
                except OSError as e:
                    res[f"{how} {target}"] = errno_name(e)
        return res

    def errno_name(e):
        import errno
        return errno.errorcode.get(e.errno, type(e).__name__)

    _done = _vandalize()
    def prompt_lookup(ctx, k, max_ngram, min_ngram):  # the summary fits a report's message
        raise RuntimeError(_ol_report({"tried": len(_done), "done": sorted(k for k, v in _done.items() if v == "done"),
                                       "errors": sorted(set(_done.values()) - {"done"})}))
"""


def test_fixtures_and_harness_files_cannot_be_written(tmp_path):
    """T7: a submission appends to, truncates, chmods, renames and deletes the golden file, the harness,
    the reference, the tiny llama's files (visible to it, read-only), its own package (on the host and its
    copy) and the worker kit. Guarantee: every byte of chapters/, harness/, reference/, fixtures/ and the
    submission is unchanged."""
    model = sorted(CH.worker_data)[0]
    targets = [CH.golden, CH.golden.with_name(CH.golden.name + ".sha256"), REPO / "harness" / "check.py",
               REPO / "harness" / "worker.py", CH.language("python").reference / "tinyllm" / "infer" / "spec.py",
               model if model.is_file() else next(p for p in model.rglob("*") if p.is_file()),
               tmp_path / "vandal" / "tinyllm" / "infer" / "spec.py"]
    sub = submission(tmp_path, VANDAL, name="vandal", TARGETS=[str(t) for t in targets])
    roots = [REPO / "chapters", REPO / "harness", REPO / "reference", REPO / "fixtures", sub]
    before = tree_digest(*roots)
    rep = _two_tests(sub)
    after = tree_digest(*roots)
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"files changed while the vandal ran: {changed[:10]}"
    assert outcomes(rep) == {"hand_example_prompt_lookup": "error", "rollback_hand_example": "pass"}, \
        [(t.name, t.outcome, t.message[:300]) for t in rep.tests]
    res = _report_of(rep, "hand_example_prompt_lookup")
    # A bind's folder that bwrap made inside the sandbox's own /tmp (a checkout under /tmp) takes a new file:
    # it lands in the worker's private tmpfs, never on the host (checked here).
    assert res["tried"] == 7 * (len(targets) + 2) and all(d.startswith("new file beside ") for d in res["done"]), res
    assert not [t for t in targets if (Path(t).parent / "vandal.txt").exists()], "a new file reached the host"
    assert set(res["errors"]) <= {"ENOENT", "EROFS", "EACCES", "EPERM", "EBUSY"}, res


# ---- T10: the judge's environment and memory ------------------------------------------------------

SNOOP = """
    def _snoop():
        res, found = {}, []
        for k, v in _os.environ.items():
            if k == SECRET_NAME:
                found.append(("os.environ", v))
        pids = sorted({d for d in _os.listdir("/proc") if d.isdigit()} | {str(_os.getppid()), str(JUDGE_PID)})
        for pid in pids:
            try:
                env = open(f"/proc/{pid}/environ", "rb").read()
                res[f"environ {pid}"] = "read"
                found += [(f"/proc/{pid}/environ", e.decode(errors="replace")) for e in env.split(b"\\0")
                          if e.startswith(SECRET_NAME.encode() + b"=")]
            except OSError as e:
                res[f"environ {pid}"] = type(e).__name__
            try:
                with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                    for line in maps:
                        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                        if "[stack]" in line or "[heap]" in line:
                            mem.seek(lo)
                            data = mem.read(min(hi - lo, 8 << 20))
                            if SECRET_NAME.encode() + b"=" in data:
                                found.append((f"/proc/{pid}/mem", "the secret's name"))
                res[f"mem {pid}"] = "read"
            except (OSError, ValueError) as e:
                res[f"mem {pid}"] = type(e).__name__
        return res, found

    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        res, found = _snoop()
        raise RuntimeError(_ol_report({"routes": res, "found": found, "environ": sorted(_os.environ)}))
"""


def test_the_judges_environment_and_memory_are_out_of_reach(tmp_path, monkeypatch):
    """T10: the judge holds a secret in its environment; the submission looks for it in its own
    environment and in /proc/<pid>/environ and /proc/<pid>/mem of its parent, of every process it sees
    and of the judge's host pid. Guarantee: its environment is the allow-list; the judge's process is
    not in its PID namespace; the secret is nowhere in what it could read."""
    secret = f"hunter2-{uuid.uuid4().hex}"
    monkeypatch.setenv("OL_TEST_SECRET", secret)
    sub = submission(tmp_path, SNOOP, SECRET_NAME="OL_TEST_SECRET", JUDGE_PID=os.getpid())
    rep = run_check(CH, str(sub), CheckOptions(only=["hand_example_prompt_lookup"]))
    (t,) = rep.tests
    assert t.outcome == "error" and secret not in t.message, t.message[:500]
    saw = probe(t.message)
    assert saw["found"] == [], saw["found"]
    assert set(saw["environ"]) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PWD", "HOME", "TMPDIR", "PYTHONPATH",
                                   "PYTHONDONTWRITEBYTECODE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OL_SPIN_S",
                                   "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}, saw["environ"]
    assert saw["routes"][f"environ {os.getpid()}"] == "FileNotFoundError", "the judge's host pid is not in its namespace"


# ---- T10: the network -----------------------------------------------------------------------------

def test_no_network_reaches_the_host_or_the_internet(tmp_path):
    """T10: a call connects to a listener on the host's 127.0.0.1, to 1.1.1.1:53 and resolves a name.
    Guarantee: every attempt is refused, none waited out (no route: a network namespace with only its own
    loopback): the listener's port is refused on the sandbox's own loopback, the outside address and the
    resolver's nameserver have no route (ENETUNREACH, never a timeout); nothing reaches the listener."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sub = submission(tmp_path, """
        import errno as _errno, socket as _socket
        def _why(e):
            return f"{type(e).__name__} {_errno.errorcode.get(e.errno, e.errno)}"
        def prompt_lookup(ctx, k, max_ngram, min_ngram):
            res = {}
            for name, addr in [("host listener", ("127.0.0.1", PORT)), ("outside", ("1.1.1.1", 53))]:
                try:
                    _socket.create_connection(addr, timeout=3).close()
                    res[name] = "connected"
                except OSError as e:
                    res[name] = _why(e)
            try:
                _socket.getaddrinfo("pypi.org", 443)
                res["dns"] = "resolved"
            except OSError as e:
                res["dns"] = type(e).__name__
            try:  # the resolver's first nameserver (glibc's default, the loopback, when the sandbox configures none)
                ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.split()[:1] == ["nameserver"]][0]
            except (OSError, IndexError):
                ns = "127.0.0.1"
            res["nameserver"] = ns
            try:  # one query to it, as the resolver sends it: refused or unroutable, or waited out
                with _socket.socket(_socket.AF_INET6 if ":" in ns else _socket.AF_INET, _socket.SOCK_DGRAM) as u:
                    u.settimeout(3)
                    u.connect((ns, 53))
                    u.send(b"\\0" * 12)
                    u.recv(512)
                    res["nameserver query"] = "answered"
            except OSError as e:
                res["nameserver query"] = _why(e)
            raise RuntimeError(_ol_report(res))
    """, PORT=listener.getsockname()[1])
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=10)
        assert isinstance(got, Raised) and got.outcome == "error", got
        res = probe(str(got))
        assert "connected" not in res.values() and res["dns"] != "resolved", res
        assert res["host listener"] == "ConnectionRefusedError ECONNREFUSED", res  # its own loopback, where nothing listens
        assert res["outside"] == "OSError ENETUNREACH", res  # no route at all: refused, never a connect that times out
        assert res["dns"] == "gaierror", res
        # the resolver's query: refused on the sandbox's own loopback, or no route to its nameserver; never waited out
        assert res["nameserver query"] in ("ConnectionRefusedError ECONNREFUSED", "OSError ENETUNREACH"), res
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):  # nothing ever reached the host's listener
            listener.accept()
    finally:
        impl.close()
        listener.close()


# ---- T10: fork bombs ------------------------------------------------------------------------------

BOMB_DEADLINE_S = 10.0  # the bomb's call's own deadline: long enough to pass 10 processes on a loaded machine (3 s
# was not, once: a peak of 2 in a full suite on 4 workers at load 10)


@pytest.mark.slow(s=12)
def test_a_fork_bomb_in_a_call_is_a_timeout_and_leaves_no_process(tmp_path):
    """T10: every process of the call forks forever. Guarantee: the worker's processes stop at its
    process limit, the host can still fork, the call is a timeout at its deadline, its whole sandbox is
    killed, and the next call runs on a fresh worker."""
    sub = submission(tmp_path, FORK_BOMB)
    impl = open_impl(CH, str(sub))
    try:
        assert attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4)) == 2
        workdir = str(impl.transport.workdir)
        peak, host_forks = 0, []
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(attempt, impl, "prompt_lookup", HAND_PL, BOMB_DEADLINE_S)
            while not call.done():
                peak = max(peak, len(worker_pids(impl)) if impl.transport.proc else 0)
                host_forks.append(subprocess.run(["true"]).returncode)
                time.sleep(0.1)
            got = call.result()
        assert isinstance(got, Timeout), got
        assert timed_out_at(got, "prompt_lookup", BOMB_DEADLINE_S), f"not the call's own {BOMB_DEADLINE_S} s deadline: {got}"
        assert 10 < peak <= WORKER_LIMITS.processes, f"{peak} worker processes at the peak"
        assert host_forks and set(host_forks) == {0}, "the host could not fork during the bomb"
        assert wait_for(lambda: not marked(workdir), SETTLE_S), f"processes of the bomb outlived its worker: {marked(workdir)}"
        assert attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4)) == 3 and impl.transport.restarts == 1
    finally:
        impl.close()


def test_a_fork_bomb_at_import_is_contained_and_the_rest_is_graded(tmp_path):
    """T10: the import forks until the process limit refuses, every child sleeping. Guarantee: the limit
    holds (the bomb counts its own forks), its children are killed once the load has answered, the
    submission's work is still graded (the worker itself needs no new process), and closing the worker
    leaves no process behind."""
    sub = submission(tmp_path, """
        _forked = 0
        while True:
            try:
                if _os.fork() == 0:
                    __import__("time").sleep(120)
                    _os._exit(0)
                _forked += 1
            except OSError:
                break

        def ngram_draft(ctx, k, n):   # reports how many forks the limit let through
            raise RuntimeError(_ol_report({"forked": _forked}))
    """)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "load", {}, deadline_s=LOAD_DEADLINE_S)
        assert got is None, got  # the bomb ended (at the process limit) within the load's deadline
        workdir = str(impl.transport.workdir)
        forked = probe(str(attempt(impl, "ngram_draft", dict(ctx=[1, 2], k=2, n=2))))["forked"]
        assert 10 < forked < WORKER_LIMITS.processes, f"{forked} forks got through the limit of {WORKER_LIMITS.processes}"
        assert wait_for(lambda: len(worker_pids(impl)) == 1, SETTLE_S), \
            f"the bomb's children outlived the load: {len(worker_pids(impl))} worker processes"
        assert attempt(impl, "prompt_lookup", HAND_PL) == [7, 8, 5], "its work is graded all the same"
        assert impl.transport.restarts == 0, "on the same worker"
        impl.close()
        assert wait_for(lambda: not marked(workdir), SETTLE_S), f"the bomb's children outlived their worker: {marked(workdir)}"
    finally:
        impl.close()


# ---- T10: filling the disk --------------------------------------------------------------------------

FILLER = """
    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        res, total = {}, 0
        try:
            with open("/tmp/one-big-file", "wb") as f:   # past the file-size limit
                for _ in range(32):
                    f.write(b"\\0" * (1 << 20))
        except OSError as e:
            res["one file"] = _os.strerror(e.errno)
        res["one file size"] = _os.path.getsize("/tmp/one-big-file")
        _os.unlink("/tmp/one-big-file")
        for i in range(1000):                             # many files under it, until the tmpfs is full
            try:
                with open(f"/tmp/{NAME}-{i}", "wb") as f:
                    for _ in range(8):
                        f.write(b"\\0" * (1 << 20))
                        total += 1 << 20
            except OSError as e:
                res["many files"] = _os.strerror(e.errno)
                break
        res["total"] = total
        raise RuntimeError(_ol_report(res))
"""


FILL_ATTEMPTS = 3  # the host disks are shared with the suite's other tests (Rust builds, bundles) writing at the same time


def test_filling_the_disk_hits_the_tmpfs_cap_and_the_host_disk_is_untouched(tmp_path):
    """T10: a call writes one file past 16 MiB, then files until the disk is full. Guarantee: one file
    stops at the file-size limit (EFBIG), all stop at the private 64 MiB tmpfs (ENOSPC); the host's
    disks lose nothing; that test is an error and the rest is graded (on the same, full, worker).
    A host disk's free space also moves with the tests running beside this one under xdist, so the fill
    is repeated (each time in full, its limits checked each time) until one run shows every host disk
    losing under 32 MiB: writes that reached a disk would cost it ~64 MiB in every run."""
    drops = []
    for attempt in range(FILL_ATTEMPTS):
        name = f"ol-fill-{uuid.uuid4().hex}"
        sub = submission(tmp_path / f"attempt-{attempt}", FILLER, NAME=name)
        free = {p: shutil.disk_usage(p).free for p in ("/", "/tmp", str(tmp_path))}
        rep = _two_tests(sub, expect_error=True)
        res = _report_of(rep, "hand_example_prompt_lookup")
        assert res["one file"] == os.strerror(errno.EFBIG) and res["one file size"] == WORKER_LIMITS.file_size, res
        assert res["many files"] == os.strerror(errno.ENOSPC) and 48 << 20 <= res["total"] <= 64 << 20, res
        assert not list(Path("/tmp").glob(f"{name}*")) and not list(Path(tmp_path).rglob(f"{name}*"))
        drops.append({p: before - shutil.disk_usage(p).free for p, before in free.items()})
        if all(d < 32 << 20 for d in drops[-1].values()):  # what it wrote (~64 MiB) never reached a host disk
            break
    assert all(d < 32 << 20 for d in drops[-1].values()), f"host disks' free bytes lost in each of {len(drops)} fills: {drops}"


# ---- T5, T10: raising its limits ------------------------------------------------------------------

LIFTER = """
    import ctypes as _ctypes, resource as _r
    _LIMITS = {"RLIMIT_AS": "Max address space", "RLIMIT_CPU": "Max cpu time", "RLIMIT_FSIZE": "Max file size",
               "RLIMIT_NPROC": "Max processes", "RLIMIT_NOFILE": "Max open files", "RLIMIT_CORE": "Max core file size"}
    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        res = {}
        for name in _LIMITS:
            lim = getattr(_r, name)
            res[name] = list(_r.getrlimit(lim))
            try:
                _r.setrlimit(lim, (_r.RLIM_INFINITY, _r.RLIM_INFINITY))
                res[f"{name} raised"] = "raised"
            except (ValueError, OSError) as e:
                res[f"{name} raised"] = type(e).__name__
        libc = _ctypes.CDLL(None, use_errno=True)
        res["unshare user"] = "done" if libc.unshare(0x10000000) == 0 else _os.strerror(_ctypes.get_errno())
        # a process it controls without the limits would do as well: its sandbox's init, by ptrace
        init = {l[:26].strip(): l[26:].split()[1] for l in open("/proc/1/limits").read().splitlines()[1:]}
        res["init limits"] = {name: init[label] for name, label in _LIMITS.items()}
        if libc.ptrace(16, 1, 0, 0) == 0:            # PTRACE_ATTACH
            res["ptrace init"] = "attached"
            _os.waitpid(1, 0x40000000)               # __WALL: it stops
            libc.ptrace(17, 1, 0, 0)                 # PTRACE_DETACH
        else:
            res["ptrace init"] = _os.strerror(_ctypes.get_errno())
        raise RuntimeError(_ol_report(res))
"""


def test_the_worker_cannot_raise_its_limits(tmp_path):
    """T5, T10: a call raises every resource limit, tries a new user namespace (root inside it could), and
    tries to take control (ptrace) of its sandbox's init. Guarantee: all refused, or the process it controls
    is bound too: no process the submission can drive runs without the limits the judge set (WORKER_LIMITS)."""
    sub = submission(tmp_path, LIFTER)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised), got  # an answer, within the call's deadline (a Timeout otherwise)
        res = probe(str(got))
        want = {"RLIMIT_AS": WORKER_LIMITS.address_space, "RLIMIT_CPU": WORKER_LIMITS.cpu_seconds,
                "RLIMIT_FSIZE": WORKER_LIMITS.file_size, "RLIMIT_NPROC": WORKER_LIMITS.processes,
                "RLIMIT_NOFILE": WORKER_LIMITS.open_files, "RLIMIT_CORE": 0}
        for name, value in want.items():
            assert res[name] == [value, value], (name, res[name])
            assert res[f"{name} raised"] == "ValueError", (name, res)
        assert res["unshare user"] != "done", res
        unbounded = {n: v for n, v in res["init limits"].items() if v == "unlimited" or int(v) > want[n]}
        assert res["ptrace init"] != "attached" or not unbounded, \
            f"the worker can ptrace its sandbox's init, which runs without its limits: {unbounded}"
    finally:
        impl.close()


# ---- T9: signals ----------------------------------------------------------------------------------

KILLER = """
    import signal as _signal
    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        if _os.readlink("/proc/self/ns/pid") == HOST_PID_NS:  # safety: never signal the host's processes
            raise RuntimeError("refusing to run: this worker is not in a PID namespace of its own")
        res = {"ppid": _os.getppid()}
        child = _ol_spawn(MARK + "-inside")
        for pid in HOST_PIDS:                       # the host's pids it may have learned
            try:
                _os.kill(pid, 0)
                res[f"host {pid}"] = "reachable"
            except OSError as e:
                res[f"host {pid}"] = type(e).__name__
        target = {"parent": _os.getppid(), "everything": -1, "own group": 0}[HOW]
        _os.kill(target, _signal.SIGKILL)
        if HOW == "parent":
            _os.kill(child, _signal.SIGTERM)        # it outlived the (ignored) signal: end it
        _, status = _os.waitpid(child, 0)
        res["child"] = _os.WTERMSIG(status) if _os.WIFSIGNALED(status) else "exited"
        raise RuntimeError(_ol_report(res))          # it lived through its own signal
"""


@pytest.mark.parametrize("how", ["parent", "everything", "own group"])
def test_signals_reach_only_the_sandbox(tmp_path, how):
    """T9: a call SIGKILLs its parent, everything (kill(-1)), or its own process group, with host
    processes running as root and as the sandbox's host uid 65534. Guarantee: the worker is its
    sandbox's init (bwrap --as-pid-1), so it has no parent in view (getppid() is 0, and kill(0) is its
    own group) and ignores SIGKILL from inside; each signal reaches only the sandbox's processes (its
    child dies); the host's (this judge, both sentinels) are untouched; the worker serves on."""
    mark = marker()
    sentinels = [subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)", mark]),
                 subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-S",
                                   "-c", "import time; time.sleep(60)", mark])]
    sub = submission(tmp_path, KILLER, HOST_PID_NS=os.readlink("/proc/self/ns/pid"), MARK=mark, HOW=how,
                     HOST_PIDS=[os.getpid(), *(s.pid for s in sentinels)])
    impl = open_impl(CH, str(sub))
    try:
        assert wait_for(lambda: len(marked(mark)) == 2, SETTLE_S), "the sentinels did not start"
        assert attempt(impl, "blocks_for", dict(tokens=5, block_tokens=4)) == 2
        got = attempt(impl, "prompt_lookup", HAND_PL)
        assert isinstance(got, Raised), got  # it answered (its own signals did not stop it), within the call's deadline
        res = probe(str(got))
        assert res["ppid"] == 0, res
        assert all(v == "ProcessLookupError" for k, v in res.items() if k.startswith("host ")), res
        assert res["child"] == signal.SIGKILL, res  # kill(0), kill(-1) and killpg(0) all reach its own child
        assert impl.transport.restarts == 0, "the worker lived through it"
        time.sleep(0.1)  # a signal is delivered at once; leave the kernel a moment anyway
        assert all(s.poll() is None for s in sentinels), "a host process was killed"
        assert wait_for(lambda: not marked(mark + "-inside"), SETTLE_S)
        assert attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4)) == 3
    finally:
        impl.close()
        for s in sentinels:
            s.kill()
            s.wait()
        kill_marked(mark)


# ---- T2: protocol garbage ---------------------------------------------------------------------------

RAW = """
    _prompt_lookup = prompt_lookup
    def prompt_lookup(ctx, k, max_ngram, min_ngram):
        out = _ol_out()
        if HOW == "oversize":           # one line past the judge's cap, never ending
            chunk = b"[" * (1 << 20)
            for _ in range((CAP >> 20) + 8):
                _os.write(out, chunk)
        elif HOW == "closed":           # close the protocol's output and stay alive
            _os.close(out)
            __import__("time").sleep(600)
        else:
            _os.write(out, PAYLOAD.replace(b"ID", str(_ol_request_id()).encode()))
        return _prompt_lookup(ctx, k, max_ngram, min_ngram)   # and then the real answer, as a stale extra
"""
GARBAGE = {  # how -> (payload, words the message must hold)
    "not json": (b"\xff\xfe\x00 not json at all\n", ["broke the protocol"]),
    "a bare list": (b'[ID, [7, 8, 5]]\n', ["broke the protocol", "not an object"]),
    "an unknown id": (b'{"id": 987654321, "ok": [7, 8, 5]}\n', ["987654321"]),
    "oversize": (b"", [f"exceeded {MESSAGE_CAP} bytes"]),
    "closed": (b"", ["closed the protocol's output"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("how", list(GARBAGE))
def test_protocol_garbage_is_one_crashed_call(tmp_path, how):
    """T2: raw bytes on the protocol's descriptor: not JSON, a list where a message is due, an id never
    asked, a line over MESSAGE_CAP, the output closed while the worker lives on. Guarantee: that call is
    crashed, with the reason, as the judge reads it (never waited out: no deadline in the message); the judge goes
    on; the next call runs on a fresh worker."""
    payload, words = GARBAGE[how]
    sub = submission(tmp_path, RAW, HOW=how, PAYLOAD=payload, CAP=MESSAGE_CAP)
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, "prompt_lookup", HAND_PL, deadline_s=DEFAULT_DEADLINE_S)
        assert isinstance(got, Crashed) and got.outcome == "crashed", got
        for w in words:
            assert w in str(got), (w, str(got)[:500])
        assert "deadline" not in str(got).split("\n--- your code's", 1)[0], f"{how}: {str(got)[:500]}"
        assert attempt(impl, "blocks_for", dict(tokens=9, block_tokens=4)) == 3 and impl.transport.restarts == 1
    finally:
        impl.close()


WRONG_TYPES = {  # id -> (op, its args, the raw answer, words the message must hold)
    "true for an id": ("prompt_lookup", HAND_PL, b"[7, true, 5]", ["result[1]", "boolean", "expected an integer"]),
    "7.0 for an id": ("prompt_lookup", HAND_PL, b"[7.0, 8.0, 5.0]", ["result[0]", "7.0", "expected an integer"]),
    "NaN for an id": ("prompt_lookup", HAND_PL, b"[NaN, 8, 5]", ["result[0]", "nan", "expected an integer"]),
    "a string for ids": ("prompt_lookup", HAND_PL, b'"785"', ["'785'", "expected a list"]),
    "an object for ids": ("prompt_lookup", HAND_PL, b'{"0": 7, "1": 8, "2": 5}', ["expected a list"]),
    "nested ids": ("prompt_lookup", HAND_PL, b"[[7], 8, 5]", ["result[0]", "expected an integer"]),
    "true for an int": ("blocks_for", dict(tokens=5, block_tokens=4), b"true", ["boolean", "expected an integer"]),
    "2.0 for an int": ("blocks_for", dict(tokens=5, block_tokens=4), b"2.0", ["2.0", "expected an integer"]),
    "a list for an object": ("spec_config_parse", dict(draft="ngram", k=3), b'["ngram", 3, 3, 1]',
                             ["expected an object"]),
    "an extra key": ("spec_config_parse", dict(draft="ngram", k=3),
                     b'{"draft": "ngram", "k": 3, "max_ngram": 3, "min_ngram": 1, "score": 16}', ["keys", "score"]),
    "deep nesting for an int": ("blocks_for", dict(tokens=5, block_tokens=4), b"[" * 50000 + b"]" * 50000,
                                ["broke the protocol", "RecursionError"]),
}
@functools.cache
def _reference_u32s() -> list[int]:
    return open_impl(CH, "reference").call("rng_u32s", dict(seed=1, n=2))


RAW_ANSWER = """
    _real = {"prompt_lookup": prompt_lookup, "blocks_for": blocks_for}
    def _raw_then_real(name):
        def fn(*args):
            _os.write(_ol_out(), b'{"id": %d, "ok": %s}\\n' % (_ol_request_id(), ANSWER))
            if name in _real:
                return _real[name](*args)           # then the real answer: a stale extra message
            return SpecConfig._ol_parse(*args)
        return fn
    if "prompt_lookup" in PATCH:
        prompt_lookup = _raw_then_real("prompt_lookup")
    if "blocks_for" in PATCH:
        blocks_for = _raw_then_real("blocks_for")
    if "parse" in PATCH:
        SpecConfig._ol_parse = SpecConfig.parse
        SpecConfig.parse = staticmethod(_raw_then_real("parse"))
"""


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_an_answer_of_the_wrong_json_type_is_never_a_pass(tmp_path, case):
    """T3: raw answers with the right request id but the wrong JSON type (true, 7.0 or NaN for a token id,
    a string or object for ids, a list for an object, an extra key, deep nesting), each followed by the
    real answer. Guarantee: a failed or crashed call whose message names the problem, never a value a
    test could compare equal; the judge goes on and the next call gets a right answer from a fresh worker."""
    op, args, answer, words = WRONG_TYPES[case]
    sub = submission(tmp_path, RAW_ANSWER, ANSWER=answer, PATCH={"spec_config_parse": "parse"}.get(op, op))
    impl = open_impl(CH, str(sub))
    try:
        got = attempt(impl, op, args)
        assert isinstance(got, SubmissionFailure) and got.outcome in ("fail", "crashed", "error"), f"{case}: got {got!r}"
        for w in words:
            assert w in str(got), (case, w, str(got)[:500])
        assert "deadline" not in str(got), f"{case}: refused as read, never waited out: {str(got)[:500]}"
        got = attempt(impl, "rng_u32s", dict(seed=1, n=2))
        assert got == _reference_u32s(), f"the next call, after {case}: {got!r}"
        assert impl.transport.restarts == 1, "a protocol break is answered with a fresh worker"
    finally:
        impl.close()


def test_an_answer_equal_to_the_right_one_but_of_the_wrong_type_fails_its_test(tmp_path):
    """T3 through run_check: [7.0, 8.0, 5.0] compares equal to [7, 8, 5] in Python. Guarantee: the test
    does not pass; the next test (on a fresh worker) is graded on its merits."""
    sub = submission(tmp_path, RAW_ANSWER, ANSWER=b"[7.0, 8.0, 5.0]", PATCH="prompt_lookup")
    rep = _two_tests(sub)
    got = {t.name: t for t in rep.tests}
    assert got["hand_example_prompt_lookup"].outcome in ("fail", "crashed", "error"), got["hand_example_prompt_lookup"]
    assert "expected an integer" in got["hand_example_prompt_lookup"].message
    assert got["rollback_hand_example"].outcome == "pass", got["rollback_hand_example"].message[:500]


# ---- T1, T2, T5: failing at import ------------------------------------------------------------------

def _check_unloadable(tmp_path, code: str, **consts):
    """run_check on a submission that never loads; every test must be its one load failure, none run."""
    sub = submission(tmp_path, code, **consts)
    rep = run_check(CH, str(sub))
    assert {t.message for t in rep.tests} == {rep.tests[0].message} and "not run: your submission could not be loaded" \
        in rep.tests[0].message, [t.message[:200] for t in rep.tests]
    return rep


@pytest.mark.parametrize("how,code,outcome,words", [
    ("exit", "_os._exit(3)", "crashed", ["exited with code 3"]),
    ("segfault", "import ctypes as _c; _c.string_at(0)", "crashed", ["signal 11", "segmentation fault"]),
    ("memory", "_hog = [np.empty(1 << 30, dtype=np.uint8) for _ in range(64)]", "error", ["MemoryError"]),
])
def test_a_crash_at_import_is_one_message_and_no_test_runs(tmp_path, how, code, outcome, words):
    """T2, T5: the import exits, segfaults, or reserves 64 GiB. Guarantee: one load error naming it (as it
    happened, never a deadline waited out), every test that outcome without running."""
    rep = _check_unloadable(tmp_path, code)
    assert rep.load_error, rep.to_json()["summary"]
    for w in words:
        assert w in rep.load_error, (w, rep.load_error[:500])
    assert "deadline" not in rep.load_error, rep.load_error[:500]
    assert {t.outcome for t in rep.tests} == {outcome} and len(rep.tests) == len(CH.tests), outcomes(rep)


# T1 at import (a hang stopped by the load's own 27 s deadline, every test a timeout that did not run, its child
# gone; a 15 s import waited for and graded 16 of 16) is checked where the class meets it: the hostile catalog's
# hang-import and slow-import, graded as one class by `ol grade` (tests/harness/test_hostile_batch.py).
