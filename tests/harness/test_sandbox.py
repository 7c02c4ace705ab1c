"""harness/sandbox/bwrap.py: what a bubblewrap sandbox keeps a hostile command from doing.

Each test runs a small Python snippet through `sandboxed([python, "-c", code], ...)` and checks
what it could see or do from the outside (or from the JSON it prints). Skipped, with the reason,
only where `available()` says the sandbox cannot run on this machine.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from harness.sandbox.bwrap import Limits, available, sandboxed
from harness.sandbox.confine import children, descendants, process_parents

REPO = Path(__file__).resolve().parents[2]
SETTLE_S = 30.0  # how long a test waits for an event (a process started, or gone): a wait that ends when it happens
_why_not = available()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=f"sandbox unavailable here: {_why_not}")


def _argv(code: str, *args: str, **kw) -> list[str]:
    return sandboxed([sys.executable, "-c", textwrap.dedent(code), *args], **kw)


def run(code: str, *args: str, timeout: float = 20, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(code, *args, **kw), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OL_TEST_SECRET": "hunter2"})


def run_json(code: str, *args: str, **kw):
    r = run(code, *args, **kw)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- 1. network ---------------------------------------------------------------------------------
def test_no_network():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        out = run_json("""
            import json, socket, sys
            res = {}
            for name, addr in [("host_listener", ("127.0.0.1", int(sys.argv[1]))), ("outside", ("1.1.1.1", 53)),
                               ("outside_v6", ("2606:4700:4700::1111", 53))]:
                try:
                    socket.create_connection(addr, timeout=2).close(); res[name] = "connected"
                except OSError as e:
                    res[name] = type(e).__name__
            try:
                socket.getaddrinfo("pypi.org", 443); res["dns"] = "resolved"
            except OSError as e:
                res["dns"] = type(e).__name__
            print(json.dumps(res))
            """, str(port))
        assert "connected" not in out.values() and out["dns"] != "resolved", out
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):  # nothing ever reached the host's listener
            listener.accept()
    finally:
        listener.close()


# ---- 2. the host's files ------------------------------------------------------------------------
def test_host_files_are_invisible():
    golden = REPO / "chapters/L10_8/fixtures/spec_golden.json"
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="ol-sandbox-secret-", delete=False) as f:
        f.write(b"secret")
    os.chmod(f.name, 0o644)
    try:
        host_root = set(os.listdir("/root")) if os.access("/root", os.R_OK) else set()
        probes = [str(golden), f.name, str(REPO / "pyproject.toml"), str(REPO / "harness" / "sandbox.py"),
                  "/etc/passwd", "/etc/hostname", "/root/.bashrc", "/home"]
        out = run_json("""
            import json, os, sys
            res = {}
            for p in sys.argv[1:]:
                try:
                    open(p, "rb").read(1); res[p] = "read"
                except OSError as e:
                    res[p] = type(e).__name__
            res["ls /root"] = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
            res["ls repo"] = sorted(os.listdir(%r)) if os.path.isdir(%r) else []
            res["ls /tmp"] = sorted(os.listdir("/tmp"))
            print(json.dumps(res))
            """ % (str(REPO), str(REPO)), *probes)
        for p in probes:
            assert out[p] in ("FileNotFoundError", "IsADirectoryError", "PermissionError"), (p, out[p])
            assert out[p] != "read"
        # only the mount points leading to the interpreter (a pyenv under /root, the venv in the repo) remain
        assert set(out["ls /root"]) <= {Path(p).relative_to("/root").parts[0] for p in (sys.base_prefix, sys.prefix)
                                        if p.startswith("/root/")}, out["ls /root"]
        assert not host_root or len(set(out["ls /root"])) < len(host_root)
        assert not {"pyproject.toml", "harness", "chapters", "tests", "SECURITY.md"} & set(out["ls repo"]), out["ls repo"]
        # the sandbox's /tmp is its own: nothing of the host's, only the folders leading to the interpreter's
        # binds when the venv itself lives under /tmp (a fresh clone in a temporary folder, as CI makes)
        leading = {Path(p).relative_to("/tmp").parts[0] for p in (sys.base_prefix, sys.prefix) if p.startswith("/tmp/")}
        assert set(out["ls /tmp"]) <= leading and Path(f.name).name not in out["ls /tmp"], out["ls /tmp"]
    finally:
        os.unlink(f.name)


# ---- 3. read-only binds, a capped writable tmpfs ------------------------------------------------
def test_visible_bind_is_read_only_and_tmpfs_is_capped():
    private = tempfile.mkdtemp(prefix="ol-sandbox-")  # 0700: the sandbox's host uid cannot traverse it
    try:
        data = Path(private) / "pack"
        data.mkdir(mode=0o755)
        (data / "ops.py").write_text("X = 1\n")
        os.chmod(data / "ops.py", 0o644)
        out = run_json("""
            import json, os, sys
            res = {"read": open("/data/ops.py").read()}
            open("/dev/null", "w").write("x")  # device nodes still work on the read-only /dev
            for p in ["/data/ops.py", "/data/new.txt", "/usr/evil", "/evil", "/dev/evil", "/dev/shm/evil",
                      sys.argv[1] + "/evil"]:
                try:
                    open(p, "a").write("x"); res[p] = "written"
                except OSError as e:
                    res[p] = type(e).__name__
            open("small.txt", "w").write("ok")
            res["cwd"] = os.getcwd(); res["small"] = open("small.txt").read()
            try:
                with open("big.bin", "wb") as f:
                    for _ in range(8):
                        f.write(b"\\0" * (1 << 20)); f.flush()
                res["big"] = "written"
            except OSError as e:
                res["big"] = os.strerror(e.errno)
            print(json.dumps(res))
            """, sys.prefix, visible=[(str(data), "/data")], writable_tmp_mb=4)
        assert out["read"] == "X = 1\n"
        for p in ["/data/ops.py", "/data/new.txt", "/usr/evil", "/evil", "/dev/evil", "/dev/shm/evil", sys.prefix + "/evil"]:
            assert out[p] != "written", (p, out)
        assert out["/data/ops.py"] in ("OSError", "PermissionError")  # EROFS
        assert (data / "ops.py").read_text() == "X = 1\n" and not (data / "new.txt").exists()
        assert out["cwd"] == "/tmp" and out["small"] == "ok"
        assert out["big"] == os.strerror(28), out  # ENOSPC: 8 MiB do not fit a 4 MiB tmpfs
    finally:
        import shutil
        shutil.rmtree(private)


# ---- 4. other processes -------------------------------------------------------------------------
def test_processes_outside_are_out_of_reach():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = run_json("""
            import json, os, signal, time
            child = os.fork()
            if child == 0:
                time.sleep(30); os._exit(0)
            res = {"ppid": os.getppid(), "pid": os.getpid()}
            os.kill(-1, signal.SIGKILL)   # everything it may signal
            _, status = os.waitpid(child, 0)
            res["child_signal"] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            try:
                os.kill(int(os.environ["HOST_SLEEPER"]), 0); res["host_sleeper"] = "reachable"
            except OSError as e:
                res["host_sleeper"] = type(e).__name__
            print(json.dumps(res))
            """, env={"HOST_SLEEPER": str(sleeper.pid)})
        assert out["ppid"] == 0 and out["pid"] == 1, out  # it is the sandbox's init (--as-pid-1): no parent in view
        assert out["child_signal"] == signal.SIGKILL  # kill(-1) did hit the sandbox's own processes
        assert out["host_sleeper"] == "ProcessLookupError", out  # the host's pids do not exist in its PID namespace
        time.sleep(0.1)
        assert sleeper.poll() is None  # the host sleeper (and this test process) survived
    finally:
        sleeper.kill()
        sleeper.wait()


# ---- 5. daemons die with the sandbox ------------------------------------------------------------
def _marked(marker: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{d}/cmdline").read_bytes():
                    found.append(int(d))
            except OSError:
                pass
    return found


def _wait(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


DAEMON = """
    import os, sys
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(60)", sys.argv[1] + "-daemon"])
        os._exit(0)
    os.wait()
    sys.stdin.read()   # the main process lives until its stdin closes
    """


@pytest.mark.parametrize("how", ["main_exits", "bwrap_killed"])
def test_daemonized_grandchild_dies_with_the_sandbox(how):
    marker = f"ol-sandbox-daemon-{uuid.uuid4().hex}"
    proc = subprocess.Popen(_argv(DAEMON, marker), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        # the daemon itself, not the sandbox's own argv (bwrap and the limiter carry the marker from their start:
        # a sandbox killed before its command runs is bwrap's setup, not what this test is about)
        assert _wait(lambda: _marked(marker + "-daemon"), SETTLE_S), "the daemon never started"
        if how == "main_exits":
            proc.stdin.close()
            proc.wait(timeout=SETTLE_S)
        else:
            proc.kill()  # SIGKILL to bwrap itself, as the judge's deadline does (it kills the group)
            proc.wait(timeout=SETTLE_S)
        assert _wait(lambda: not _marked(marker), SETTLE_S), f"daemon survived: {_marked(marker)}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


# ---- 6. limits ----------------------------------------------------------------------------------
def test_address_space_limit_and_hard_limits_cannot_be_raised():
    out = run_json("""
        import json, resource as r
        res = {}
        try:
            b = bytearray(1 << 30); res["alloc"] = "allocated"
        except MemoryError:
            res["alloc"] = "MemoryError"
        for name in ["RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE"]:
            lim = getattr(r, name)
            res[name] = list(r.getrlimit(lim))
            try:
                r.setrlimit(lim, (r.RLIM_INFINITY, r.RLIM_INFINITY)); res[name + "_raise"] = "raised"
            except (ValueError, OSError) as e:
                res[name + "_raise"] = type(e).__name__
        print(json.dumps(res))
        """, limits=Limits(address_space=512 << 20, cpu_seconds=30, processes=32, file_size=8 << 20, open_files=64))
    assert out["alloc"] == "MemoryError"
    assert out["RLIMIT_AS"] == [512 << 20] * 2 and out["RLIMIT_CPU"] == [30, 30]
    assert out["RLIMIT_NPROC"] == [32, 32] and out["RLIMIT_FSIZE"] == [8 << 20] * 2
    assert out["RLIMIT_CORE"] == [0, 0] and out["RLIMIT_NOFILE"] == [64, 64]
    for name in ["RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NOFILE"]:
        assert out[name + "_raise"] == "ValueError", (name, out)


def test_the_sandbox_runs_below_the_judge_and_cannot_climb_back():
    """A submission that spins cannot slow its judge: it runs 10 nicer than the judge, and neither
    setpriority nor raising RLIMIT_NICE takes it back up."""
    out = run_json("""
        import json, os, resource as r
        res = {"nice": os.getpriority(os.PRIO_PROCESS, 0), "rlimit_nice": list(r.getrlimit(r.RLIMIT_NICE))}
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0); res["lower"] = "lowered"
        except OSError as e:
            res["lower"] = type(e).__name__
        try:
            r.setrlimit(r.RLIMIT_NICE, (40, 40)); res["raise"] = "raised"
        except (ValueError, OSError) as e:
            res["raise"] = type(e).__name__
        res["after"] = os.getpriority(os.PRIO_PROCESS, 0)
        print(json.dumps(res))
        """)
    judge = os.getpriority(os.PRIO_PROCESS, 0)
    assert out["nice"] == out["after"] == min(19, judge + Limits().nice), (judge, out)
    assert out["rlimit_nice"] == [0, 0] and out["lower"] == "PermissionError" and out["raise"] == "ValueError", out


def test_file_size_limit():
    out = run_json("""
        import json, os
        try:
            with open("f.bin", "wb") as f:
                f.write(b"\\0" * (2 << 20))
            res = "written"
        except OSError as e:
            res = os.strerror(e.errno)
        print(json.dumps(res))
        """, limits=Limits(file_size=1 << 20))
    assert out == os.strerror(27)  # EFBIG (CPython ignores SIGXFSZ)


def test_fork_bomb_hits_the_process_limit():
    """The forks stop at the process limit; the children (each asleep for 5 minutes, the marker on its command line)
    die with the sandbox's init at once: the run ends (its output's pipe closes) and none is left on the host."""
    marker = f"ol-sandbox-bomb-{uuid.uuid4().hex}"
    try:
        out = run_json("""
            import json, os, time
            forked, refused = 0, 0
            for _ in range(200):
                try:
                    pid = os.fork()
                except OSError:
                    refused += 1
                    continue
                if pid == 0:
                    time.sleep(300); os._exit(0)
                forked += 1
            print(json.dumps({"forked": forked, "refused": refused}), flush=True)
            os._exit(0)   # the sandbox's init dies with us and the kernel kills the rest
            """, marker, limits=Limits(processes=12), timeout=120)
        assert out["refused"] > 0 and 0 < out["forked"] < 12, out
        assert _wait(lambda: not _marked(marker), SETTLE_S), f"the bomb's children outlived the sandbox: {_marked(marker)}"
        assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_cpu_limit_kills_a_busy_loop():
    """The loop is ended by its CPU limit (SIGXCPU at the soft limit, SIGKILL at the hard one), after about the
    limit's CPU time: 1 CPU-second, however loaded the machine (the subprocess timeout only guards a hang)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run("while True: pass\nprint('finished')", limits=Limits(cpu_seconds=1), timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert "finished" not in r.stdout
    assert r.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL, -signal.SIGXCPU, 128 + signal.SIGXCPU), r
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)  # CPU time of the run, not wall time
    # about the limit: the kernel checks it at its tick, and rusage splits and rounds what it reports (0.797 s was seen
    # under load); far below it would be a kill by something else, far above a limit not enforced
    assert 0.5 <= cpu < 2.5, f"the loop used {cpu:.2f} CPU seconds against a limit of 1"


# ---- 7. environment -----------------------------------------------------------------------------
def test_environment_holds_only_what_was_given():
    out = run_json("import json, os; print(json.dumps(dict(os.environ)))", env={"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"})
    assert "OL_TEST_SECRET" not in out and "hunter2" not in json.dumps(out)
    assert out["PYTHONDONTWRITEBYTECODE"] == "1" and out["HOME"] == "/tmp"
    # bwrap adds PWD; CPython's PEP 538 locale coercion may add LC_CTYPE
    assert set(out) <= {"PYTHONDONTWRITEBYTECODE", "HOME", "PWD", "LC_CTYPE"}, out


# ---- 8. the worker protocol's pipe pair ---------------------------------------------------------
def test_pipe_pair_passes_through_both_ways():
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    code = """
        import os, sys
        fin, fout = os.fdopen(int(sys.argv[1]), "rb"), os.fdopen(int(sys.argv[2]), "wb")
        line = fin.readline()
        fout.write(b"echo:" + line.upper()); fout.flush()
        """
    proc = subprocess.Popen(_argv(code, str(to_r), str(from_w)), pass_fds=(to_r, from_w),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    os.close(to_r)
    os.close(from_w)
    try:
        with os.fdopen(to_w, "wb") as w, os.fdopen(from_r, "rb") as r:
            w.write(b'{"id": 1, "op": "hello"}\n')
            w.flush()
            assert r.readline() == b'echo:{"ID": 1, "OP": "HELLO"}\n'
        assert proc.wait(timeout=10) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- 9. identity --------------------------------------------------------------------------------
def test_uid_inside_is_not_root():
    out = run_json("""
        import json, os
        caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapPrm"))]
        print(json.dumps({"ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()], "caps": caps}))
        """)
    assert 0 not in out["ids"], out
    assert all(int(c, 16) == 0 for c in out["caps"]), out


def test_namespaces_are_new():
    inside = run_json('import json, os; print(json.dumps({n: os.readlink("/proc/self/ns/" + n) for n in os.listdir("/proc/self/ns")}))')
    for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup"):
        if os.path.exists(f"/proc/self/ns/{ns}"):
            assert inside[ns] != os.readlink(f"/proc/self/ns/{ns}"), ns


def test_a_process_descendants_from_its_children_files_are_those_of_a_pass_over_proc():
    """The worker's sweep finds the processes below it from /proc/PID/task/TID/children (a few reads), not from a
    pass over every process of the machine: the same processes, a child's children included."""
    if children(os.getpid()) is None:
        pytest.skip("this kernel keeps no /proc/PID/task/TID/children")
    proc = subprocess.Popen(["bash", "-c", "sleep 30 & bash -c 'sleep 31 & wait' & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(descendants(proc.pid, process_parents())) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = sorted(descendants(proc.pid, process_parents()))
        assert len(below) == 3, below  # sleep 30, the inner bash, its sleep 31
        assert sorted(descendants(proc.pid)) == below
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
