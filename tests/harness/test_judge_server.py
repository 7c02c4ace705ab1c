"""The judge server (harness.served, harness.cli.server): `./ol check` served by a fork of a process that has imported
everything gives the same output, exit code and report as the check run in its own process; which one ran is read
from the mechanism (OL_SERVER_REPORT: the pid that answered), never from the time it took."""

import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import served

REPO = Path(__file__).resolve().parents[2]
DURATION = re.compile(rb"\d+\.\d+ ?s\b")  # a test's seconds and the check's: the only text that may differ
QUICK = ["check", "L10.8", "--submission", "reference", "-k", "hand_example_prompt_lookup"]


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if k != "OL_SERVER"}
    e.update(PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(tmp_path / "cache"), OL_SERVER_REPORT=str(tmp_path / "who"),
             OL_SERVER_POLL_S="0.2", OL_SERVER_IDLE_S="120")
    yield e
    for lock in (tmp_path / "cache" / "ol" / "judge").glob("*.lock"):  # every server the test started ends with it
        _wait(lambda: _pid_of(lock) is not None or not _starting(lock), "a starting server's pid")
        _end(_pid_of(lock))


def _pid_of(lock: Path) -> int | None:
    text = lock.read_text().strip()
    return int(text) if text.isdigit() else None


def _starting(lock: Path) -> bool:
    """A server of this lock's key still starts (it writes its pid when it holds the lock, or exits)."""
    key = lock.stem
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if key.encode() in status.read_bytes():
                return True
        except OSError:
            continue
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def _end(pid: int | None) -> None:
    if pid is None or not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    _wait(lambda: not _alive(pid), f"server {pid} to end")


def _wait(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def ol(env, *args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          timeout=600)


def who(env) -> list[str]:
    path = Path(env["OL_SERVER_REPORT"])
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return lines


def server_up(env) -> int:
    """A server for this environment: one check in its own process starts it; its pid once it listens."""
    r = ol(env, *QUICK)
    assert r.returncode == 0, r.stderr.decode()
    assert who(env) == ["in-process"]
    environ = {k: v for k, v in env.items()}
    sock, lock, log = served.paths(served_key(environ), Path(env["XDG_CACHE_HOME"]) / "ol" / "judge")
    _wait(lambda: sock.exists() or (log.exists() and "not serving" in log.read_text()), "the server's socket")
    assert sock.exists(), log.read_text()
    return _pid_of(lock)


def served_key(environ) -> str:
    """The key the client computes in `environ` (in a process like the client's: the key reads sys.path too)."""
    code = "import json, sys; from harness import served; print(served.key(json.loads(sys.stdin.read())))"
    return subprocess.run([sys.executable, "-c", code], input=json.dumps(environ), capture_output=True, text=True,
                          env=environ, check=True, cwd=REPO).stdout.strip()


def same_output(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert a.returncode == b.returncode
    assert DURATION.sub(b"S", a.stdout) == DURATION.sub(b"S", b.stdout)
    assert DURATION.sub(b"S", a.stderr) == DURATION.sub(b"S", b.stderr)


def report_of(path: Path) -> dict:
    rep = json.loads(path.read_text())
    rep.pop("duration_s", None)
    rep.get("summary", {}).pop("duration_s", None)
    for t in rep.get("tests", []):
        t.pop("duration_s", None)
    return rep


@pytest.mark.slow(s=12)
@pytest.mark.parametrize("args, code", [
    (["--submission", "reference", "-k", "hand_example"], 0),
    (["--submission", "mutant:s08", "-k", "hand_example_greedy_verify or prompt_lookup"], 1),  # a failure's message and hints
    (["--submission", "no/such/folder"], 2),
    (["-k", "no_such_test", "--submission", "reference"], 2),
])
def test_a_served_check_writes_what_the_check_in_its_own_process_writes(env, tmp_path, args, code):
    pid = server_up(env)
    here = ol({**env, "OL_SERVER": "0"}, "check", "L10.8", *args, "--json", tmp_path / "here.json")
    assert who(env) == []  # OL_SERVER=0: not even the client's report
    there = ol(env, "check", "L10.8", *args, "--json", tmp_path / "there.json")
    assert [w.split()[:3] for w in who(env)] == [["served", served_key(env), "pid"]]
    assert here.returncode == code, here.stderr.decode()
    same_output(here, there)
    if code != 2:
        assert report_of(tmp_path / "here.json") == report_of(tmp_path / "there.json")
    assert _alive(pid)


@pytest.mark.slow(s=8)
def test_each_check_is_a_new_fork_of_the_same_server(env):
    pid = server_up(env)
    forks = []
    for _ in range(2):
        assert ol(env, *QUICK).returncode == 0
        (line,) = who(env)
        forks.append(int(line.split()[-1]))
    assert forks[0] != forks[1] and pid not in forks
    assert all(not _alive(f) for f in forks)
    assert _pid_of(next((Path(env["XDG_CACHE_HOME"]) / "ol" / "judge").glob("*.lock"))) == pid


@pytest.mark.slow(s=8)
def test_no_server_and_a_changed_environment_check_in_their_own_process(env):
    server_up(env)
    assert ol(env, *QUICK, "--no-server").returncode == 0
    assert who(env) == []
    other = {**env, "OL_SOME_SETTING": "1"}  # another environment: another key, whose server is not up yet
    assert ol(other, *QUICK).returncode == 0
    assert who(env) == ["in-process"]


@pytest.mark.slow(s=8)
def test_a_stale_socket_is_a_check_in_its_own_process_with_the_same_output(env, tmp_path):
    sock, _, _ = served.paths(served_key(env), Path(env["XDG_CACHE_HOME"]) / "ol" / "judge")
    sock.parent.mkdir(parents=True)
    dead = socket.socket(socket.AF_UNIX)
    address, fd = served.short(sock)
    dead.bind(address)  # a socket file nobody listens on: a server that died
    dead.close()
    if fd is not None:
        os.close(fd)
    stale = ol(env, *QUICK)
    assert who(env) == ["in-process"]
    same_output(ol({**env, "OL_SERVER": "0"}, *QUICK), stale)


def test_the_key_changes_with_a_pack_file_and_the_environment(tmp_path):
    pack = tmp_path / "packs"
    pack.mkdir()
    (pack / "chapter.toml").write_text("x = 1\n")
    environ = {"OL_CHAPTERS_PATH": str(pack), "PWD": "/a", "OL_SERVER_REPORT": "/x"}
    before = served.key(environ)
    assert served.key({**environ, "PWD": "/b", "OL_SERVER_REPORT": "/y"}) == before  # a shell's, and the client's own
    assert served.key({**environ, "LANG": "C"}) != before
    os.utime(pack / "chapter.toml", ns=(1, 1))
    assert served.key(environ) != before


def test_only_check_is_served_and_no_server_turns_it_off():
    assert served.enabled(["check", "L10.8"], {}) and served.enabled(["--debug", "check", "L10.8"], {})
    assert not served.enabled(["tests", "L10.8"], {})
    assert not served.enabled(["check", "L10.8", "--no-server"], {})
    assert not served.enabled(["check", "L10.8"], {"OL_SERVER": "0"})


@pytest.mark.slow(s=6)
def test_the_server_ends_when_its_socket_is_removed_and_when_idle(env):
    pid = server_up(env)
    sock = next((Path(env["XDG_CACHE_HOME"]) / "ol" / "judge").glob("*.sock"))
    sock.unlink()
    _wait(lambda: not _alive(pid), "the server to see its socket gone")
    # idle after 0.5 s: its socket may come and go between two looks of a busy test, so the server is followed by the
    # pid its lock names (a new one: the same key's lock named the server just ended)
    idle = {**env, "OL_SERVER_IDLE_S": "0.5"}
    sock, lock, log = served.paths(served_key(dict(idle)), Path(env["XDG_CACHE_HOME"]) / "ol" / "judge")
    assert ol(idle, *QUICK).returncode == 0 and who(idle) == ["in-process"]
    _wait(lambda: _pid_of(lock) not in (None, pid), "the idle server's start")
    _wait(lambda: not _alive(_pid_of(lock)), "the server's idle end")
    assert not sock.exists() and "not serving" not in (log.read_text() if log.exists() else ""), "it served, then idled"


def _raw_at_a_terminal(argv, env) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, close_fds=True, env=env)
    os.close(slave)
    chunks = []
    while select.select([master], [], [], 120)[0]:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=60), b"".join(chunks)


@pytest.mark.slow(s=6)
def test_a_served_check_at_a_terminal_writes_to_the_terminal_as_its_own_process_would(env):
    env.update(TERM="xterm-256color", COLUMNS="120")  # the server's environment too (they are in its key)
    server_up(env)
    argv = [sys.executable, "-m", "harness", "check", "L10.8", "--submission", "no/such/folder"]
    here = _raw_at_a_terminal(argv, {**env, "OL_SERVER": "0"})
    there = _raw_at_a_terminal(argv, env)
    assert [w.split()[0] for w in who(env)] == ["served"]
    assert here[0] == 2 and b"\x1b[" in here[1]  # styled: rich saw a terminal
    assert here == there


@pytest.mark.slow(s=51)
@pytest.mark.skipif(shutil.which("cargo") is None, reason="no cargo on this machine")
def test_a_served_rust_check_gives_the_same_verdict_and_report(env, tmp_path):
    """A student's workspace (ol start), its spec.rs the stub: every test fails the same way served or not."""
    home = tmp_path / "student"
    home.mkdir()
    assert ol({**env, "OL_SERVER": "0"}, "start", "L10.8", cwd=home).returncode == 0
    server_up(env)
    ol({**env, "OL_SERVER": "0"}, "check", "L10.8", cwd=home)  # its first build: both checks below find it built
    here = ol({**env, "OL_SERVER": "0"}, "check", "L10.8", "--json", tmp_path / "here.json", cwd=home)
    there = ol(env, "check", "L10.8", "--json", tmp_path / "there.json", cwd=home)
    assert [w.split()[0] for w in who(env)] == ["served"]
    assert here.returncode == 1, here.stderr.decode()
    same_output(here, there)
    assert report_of(tmp_path / "here.json") == report_of(tmp_path / "there.json")


@pytest.mark.slow(s=8)
def test_a_server_folder_others_may_enter_is_not_trusted(env):
    """The client hands its descriptors and environment only to a server in a folder that is this user's alone."""
    server_up(env)
    folder = Path(env["XDG_CACHE_HOME"]) / "ol" / "judge"
    folder.chmod(0o755)
    assert ol(env, *QUICK).returncode == 0
    assert who(env) == ["in-process"]
    folder.chmod(0o700)
    assert ol(env, *QUICK).returncode == 0
    assert [w.split()[0] for w in who(env)] == ["served"]
