"""The judge server: `ol check`s forked from a process that has already imported and collected them.

    -c harness.served.SERVER FOLDER KEY CHAPTER     (started by harness.served; not a command for people)

It takes FOLDER/KEY.lock for its life (one server a key), imports what a check imports (the CLI, pytest, the
harness, the chapter's judge modules) and has pytest collect the chapter's tests once (their modules, assert-
rewritten, stay imported: a served check's collection finds them), checks that its key still holds (a file that
changed meanwhile: it exits), then listens on FOLDER/KEY.sock (harness.served tells the client's side).

Each request is one JSON object {argv, env, cwd} and three descriptors, the client's stdin, stdout and stderr. The
server forks a monitor for it, which forks the check: in a session of its own, on those descriptors (new sys
streams over them, the CLI's consoles made again: a terminal is seen as a terminal), in the client's folder and
environment, `ol` run with the argv, as a new interpreter would run it. The monitor writes on the connection
`pid N` as the check starts and `exit C` or `signal S` as it ends; a line `signal S` from the client (Ctrl-C) is
sent to the check's process group; the client gone (the connection's end), the check is killed.

The server exits after IDLE_S without a request (OL_SERVER_IDLE_S), when its socket is removed or replaced, or
when its folder is gone; it is single-threaded when it forks.
"""

from __future__ import annotations

import atexit
import fcntl
import importlib
import io
import json
import os
import random
import selectors
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

from .. import served
from ..check.runner import UNUSED_PLUGINS
from ..registry import load_chapter, make_importable, parsed_tests
from . import one_blas_thread
from .common import reset_consoles

IDLE_S = 600.0
POLL_S = 5.0  # how often an idle server looks at its socket (OL_SERVER_POLL_S)
MAIN = "harness.cli:main"


def preload(chapter: str) -> None:
    """Import what a check imports, and have pytest collect the chapter's tests (their modules stay imported)."""
    cli = importlib.import_module("harness.cli")
    importlib.import_module("harness.check.pytest_plugin")
    if not chapter:
        return
    try:
        ch = load_chapter(chapter)
    except Exception:  # noqa: BLE001 -- an unknown chapter: its check says so, served or not
        return
    make_importable()
    for f in ch.tests_files:
        for name in parsed_tests(f).imports:
            importlib.import_module(name)
    args = [*map(str, ch.tests_files), "-p", "harness.check.pytest_plugin", "--noconftest", "-p", "no:cacheprovider",
            "-q", "--collect-only", "-p", "no:hypothesispytest", *UNUSED_PLUGINS, "--import-mode=importlib",
            "--chapter", ch.chapter, f"--rootdir={ch.pack_dir}", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    sink = io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = sink
    try:
        pytest.main(args)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    del cli


def _streams() -> None:
    """sys's streams made again over descriptors 0, 1, 2, as the interpreter makes them at its start."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))  # (ol is never run with -u)
    made = []
    for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
        old = (sys.stdin, sys.stdout, sys.stderr)[fd]
        tty = os.isatty(fd)
        errors = "backslashreplace" if fd == 2 else old.errors
        made.append(io.TextIOWrapper(io.open(fd, mode + "b", buffering=0 if unbuffered and fd else -1, closefd=False),
                                     encoding=old.encoding, errors=errors, line_buffering=(fd == 2 or tty) and not unbuffered,
                                     write_through=unbuffered and fd != 0))
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]  # typeshed marks them Final; the fork's are its client's, as a new interpreter's would be


def _check(request: dict, fds: list[int], conn: socket.socket) -> None:
    """In the forked check: never returns (a failure of its own set-up is told on the client's stderr, exit 3)."""
    try:
        _run_check(request, fds, conn)
    except BaseException:  # noqa: BLE001 -- never back into the server's loop
        try:
            os.write(2, ("ol: internal error: the judge server could not start the check (rerun with --no-server):\n"
                         + traceback.format_exc()).encode())
        finally:
            os._exit(3)


def _run_check(request: dict, fds: list[int], conn: socket.socket) -> None:
    """Its session, descriptors, folder and environment, then `ol` with its argv."""
    os.setsid()
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    conn.close()
    for fd, to in zip(fds, (0, 1, 2)):
        os.dup2(fd, to)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    one_blas_thread()
    tempfile.tempdir = None
    random.seed()  # a new interpreter's own draws, not the server's
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    _streams()
    reset_consoles()
    sys.argv = ["ol", *request["argv"]]
    code = 3
    try:
        module, _, function = MAIN.partition(":")
        getattr(importlib.import_module(module), function)(args=request["argv"], prog_name="ol")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:  # as a new interpreter ends on one: killed by SIGINT
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 -- as a new interpreter ends on an uncaught exception
        traceback.print_exc()
        code = 1
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


def _monitor(request: dict, fds: list[int], conn: socket.socket) -> None:
    """In the forked monitor: fork the check, say its pid, pass on the client's signals, say how it ended."""
    end = None
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        pid = os.fork()
        if pid == 0:
            _check(request, fds, conn)
        for fd in fds:
            os.close(fd)
        conn.sendall(f"pid {pid}\n".encode())
        pidfd = os.pidfd_open(pid)
        sel = selectors.DefaultSelector()
        sel.register(pidfd, selectors.EVENT_READ)
        sel.register(conn, selectors.EVENT_READ)
        buf = b""
        while end is None:
            for k, _ in sel.select():
                if k.fileobj == pidfd:
                    _, how = os.waitpid(pid, 0)
                    end = f"signal {os.WTERMSIG(how)}" if os.WIFSIGNALED(how) else f"exit {os.WEXITSTATUS(how)}"
                    break
                chunk = conn.recv(256)
                if not chunk:  # the client is gone: so is its check
                    _kill(pid, signal.SIGKILL)
                    sel.unregister(conn)
                    continue
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    word, _, value = line.decode(errors="replace").partition(" ")
                    if word == "signal" and value.isdigit():
                        _kill(pid, int(value))
        conn.sendall(f"{end}\n".encode())
    finally:  # whatever happened, never back into the server's loop
        os._exit(0)


def _kill(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _same_socket(path: Path, ino: int) -> bool:
    try:
        return path.stat().st_ino == ino
    except OSError:
        return False


def serve(folder: Path, key: str, chapter: str, environ: dict) -> int:
    """Serve checks from `folder` as the server of `key` (made from `environ`, its environment at its start)."""
    sock_path, lock_path, _ = served.paths(key, folder)
    lock = open(lock_path, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server of this key is starting or serving
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")  # who serves this key (ol's tests end it by this pid)
    lock.flush()
    if served.key(environ) != key:
        print(f"ol judge server {os.getpid()}: not serving, its key is not its own", file=sys.stderr)
        return 0
    preload(chapter)
    if served.key(environ) != key:
        print(f"ol judge server {os.getpid()}: not serving, a file changed while it started", file=sys.stderr)
        return 0  # a file changed while it imported: its imports may be newer than the key
    idle_s = float(os.environ.get("OL_SERVER_IDLE_S") or IDLE_S)
    poll_s = min(idle_s, float(os.environ.get("OL_SERVER_POLL_S") or POLL_S))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = sock_path.with_name(f".{key}.{os.getpid()}.sock")
    staging.unlink(missing_ok=True)
    address, fd = served.short(staging)
    try:
        listener.bind(address)
    finally:
        if fd is not None:
            os.close(fd)
    listener.listen(64)
    os.replace(staging, sock_path)  # the socket appears ready: a client never connects to a half-started server
    ino = sock_path.stat().st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    last = time.monotonic()
    while True:
        if not sel.select(poll_s):
            if time.monotonic() - last > idle_s or not _same_socket(sock_path, ino):
                break
            continue
        last = time.monotonic()
        conn, _ = listener.accept()
        try:
            conn.settimeout(10)
            data, fds, _, _ = socket.recv_fds(conn, served.REQUEST_CAP, 3)
            request = json.loads(data)
            conn.settimeout(None)
        except (OSError, ValueError):
            conn.close()
            continue
        if len(fds) == 3 and os.fork() == 0:
            listener.close()
            _monitor(request, fds, conn)
        for fd in fds:
            os.close(fd)
        conn.close()
    if _same_socket(sock_path, ino):
        sock_path.unlink(missing_ok=True)
    return 0


def main(environ: dict) -> int:
    """harness.served.SERVER's entry: argv FOLDER KEY CHAPTER."""
    return serve(Path(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "", environ)
