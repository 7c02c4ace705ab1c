"""`ol check` through a judge server: the client's side, importing nothing but the standard library.

A check started as a new interpreter spends most of a second before it judges anything: importing click, rich,
pytest, numpy, the harness and the chapter's test modules, and pytest's collection of them (about 6x the warm
`cargo build` of a one-line edit, issue 29). The judge server (harness.cli.server) has done all of that once;
each check it serves is a fork of it that runs `ol` with the check's argv, environment, folder and the client's
own stdin, stdout and stderr (passed over the socket), so its output is written where, and exactly as, the check
run in this process would write it. The client waits for the fork's exit status and exits with it.

    served(argv) -> int | None   the exit code of the check the server ran, or None: run it in this process

The server is found by a key of everything its imports depend on: this checkout's path, the interpreter and its
flags, the environment (but the variables a shell changes from command to command: PWD, OLDPWD, SHLVL, _ and the
server's own OL_SERVER*), and the path, size and mtime of every file of the harness, the references, the packs
and the installed packages' folders (sys.path, but its first entry: the folder `-m` ran in). Any change is another key, so another server: a stale one is
never asked (it exits after IDLE_S). Its socket is `<cache>/ol/judge/<key>.sock` in a folder only this user
enters ($XDG_CACHE_HOME, else ~/.cache); a server also exits when its socket is removed (the cache cleaned).

No server (none yet, a dead or stale socket, a server that ends before its fork starts): the check runs in this
process, and then a server is started in the background for the next one. OL_SERVER=0 (or `ol check
--no-server`) turns it off. `-m harness.cli` never uses it: `./ol` runs `-m harness` (harness/__main__.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the checkout's folders a check's imports and data come from: every top-level folder but these (ol's own tests,
# benches, docs and samples, which no check reads), and pyproject.toml
NOT_READ = {"tests", "bench", "docs", "examples"}
SKIPPED = {"__pycache__", "target", ".git", ".pytest_cache", ".ruff_cache", "node_modules"}
VOLATILE_ENV = {"PWD", "OLDPWD", "SHLVL", "_"}  # a shell's, changed per command, read by no import
SERVED_COMMANDS = {"check"}
REQUEST_CAP = 1 << 20
# the server's start: its environment as the key saw it, taken before the CLI's import sets anything in it
SERVER = "import os, sys; environ = dict(os.environ); from harness.cli.server import main; sys.exit(main(environ))"


def enabled(argv: list[str], environ=os.environ) -> bool:
    """Whether this command line is one the server runs: `check` (after ol's own --debug), not turned off."""
    if environ.get("OL_SERVER", "1") == "0" or "--no-server" in argv:
        return False
    words = [a for a in argv if a != "--debug"]
    return bool(words) and words[0] in SERVED_COMMANDS


def home(environ=os.environ) -> Path:
    """The servers' folder: this user's alone (mode 0700)."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ol" / "judge"


def _tree_signature(root: Path, h) -> None:
    if root.is_file():
        s = root.stat()
        h.update(f"{root}\0{s.st_size}\0{s.st_mtime_ns}\n".encode())
        return
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, f)
            try:
                s = os.stat(path)
            except OSError:
                continue
            h.update(f"{path}\0{s.st_size}\0{s.st_mtime_ns}\n".encode())


def key(environ=os.environ) -> str:
    """The server's key: what its imports depend on (see the module's docstring)."""
    h = hashlib.sha256()
    h.update(f"{REPO}\0{os.path.realpath(sys.executable)}\0{sys.version}\0{sys.flags}\0{sorted(sys._xoptions.items())}\n".encode())
    env = sorted((k, v) for k, v in environ.items() if k not in VOLATILE_ENV and not k.startswith("OL_SERVER"))
    h.update(json.dumps(env).encode())
    roots = [p for p in sorted(REPO.iterdir()) if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_READ
             and p.name not in SKIPPED] + [REPO / "pyproject.toml"]
    roots += [Path(p) for p in environ.get("OL_CHAPTERS_PATH", "").split(os.pathsep) if p]
    for root in roots:
        if root.exists():
            _tree_signature(root, h)
    # an installed, removed or upgraded package changes its folder's entries, so its mtime; sys.path[0] is the folder
    # `-m` started in (the client's, or the server's /), where nothing of ol's is
    for entry in sys.path[1:]:
        if entry and Path(entry).resolve() == REPO:
            continue  # ol's own folders, walked above (its root's mtime moves with every tool's scratch file)
        try:
            s = os.stat(entry or ".")
        except OSError:
            continue
        h.update(f"{entry}\0{s.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


def paths(k: str, folder: Path | None = None) -> tuple[Path, Path, Path]:
    """(socket, lock, log) of the server of key k (in `folder`, default home())."""
    d = folder or home()
    return d / f"{k}.sock", d / f"{k}.lock", d / f"{k}.log"


def short(path: Path) -> tuple[str, int | None]:
    """A path to `path` an AF_UNIX address can hold (108 bytes): itself, or through a descriptor of its folder
    (/proc/self/fd/N/NAME); (the path, the descriptor to close after its use, or None)."""
    if len(os.fsencode(str(path))) < 100:
        return str(path), None
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{path.name}", fd


def _private(folder: Path) -> bool:
    """The servers' folder is this user's and no one else's (mode 0700): a socket there is one of our servers'."""
    try:
        st = folder.stat()
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o077


def report(text: str) -> None:
    """OL_SERVER_REPORT=F: who ran the check, for ol's own tests (a line appended to F)."""
    where = os.environ.get("OL_SERVER_REPORT")
    if where:
        with open(where, "a") as f:
            f.write(text + "\n")


def served(argv: list[str], k: str) -> int | None:
    """Run `ol ARGV` through the server of key k: its exit code (-N: killed by signal N); None when there is no
    server to run it (nothing was written: the caller runs the check itself)."""
    sock_path, _, _ = paths(k)
    if not _private(sock_path.parent):
        return None
    conn, fd = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), None
    try:
        address, fd = short(sock_path)
        conn.settimeout(5)
        conn.connect(address)
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.geteuid():  # only a server of this user's gets our descriptors and environment
            conn.close()
            return None
    except OSError:
        conn.close()
        return None
    finally:
        if fd is not None:
            os.close(fd)
    with conn:
        fds, opened = [], []
        for fd in (0, 1, 2):  # a closed descriptor of ours is /dev/null to the check, as it would read it here
            try:
                os.fstat(fd)
                fds.append(fd)
            except OSError:
                opened.append(os.open(os.devnull, os.O_RDWR))
                fds.append(opened[-1])
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
        try:
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
        except OSError:
            return None
        finally:
            for fd in opened:
                os.close(fd)
        conn.settimeout(None)
        return _await(conn, k)


def _await(conn: socket.socket, k: str) -> int | None:
    """The status lines of the served check: `pid N` as it starts, `exit C` or `signal S` as it ends. A signal
    this process gets (Ctrl-C at the terminal) goes on to the check, as the terminal would have sent it."""
    def forward(signum, _frame):
        try:
            conn.sendall(f"signal {signum}\n".encode())
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    buf, pid = b"", None
    try:
        while True:
            try:
                chunk = conn.recv(4096)
            except InterruptedError:
                continue
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                word, _, value = line.decode().partition(" ")
                if word == "pid":
                    pid = int(value)
                    report(f"served {k} pid {pid}")
                elif word in ("exit", "signal"):
                    return int(value) if word == "exit" else -int(value)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if pid is None:
        return None  # the server ended before the check started: nothing of it ran
    sys.stderr.write("ol: the judge server ended before the check's verdict (killed?); rerun the command, or add "
                     "--no-server to check in this process\n")
    return 3


def start(argv: list[str], k: str, environ: dict) -> None:
    """A server of key k in the background, in the environment the key was made from (none when one is already
    starting or serving: its lock), for the check's chapter (preloaded)."""
    sock_path, lock_path, log_path = paths(k)
    d = sock_path.parent
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        d.chmod(0o700)
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released at once: the server takes it for its life
    except OSError:
        return
    words = [a for a in argv if not a.startswith("-")]
    chapter = words[1] if len(words) > 1 else ""
    with open(log_path, "ab") as log:
        subprocess.Popen([sys.executable, "-c", SERVER, str(d), k, chapter], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, cwd="/", start_new_session=True, close_fds=True, env=environ)
