"""How untrusted code is confined: the one function every worker (and every build of student code) is started
through, in the best mode this machine allows (`Mode.name`, recorded in every report's `sandbox` field):

  bwrap  harness.sandbox.bwrap: new namespaces, a read-only view of only the interpreter and the paths given, a
         private capped tmpfs, uid 65534, hard limits.
  uid    no namespaces (Docker's default seccomp profile refuses them), but the judge is root: the command runs
         as the unprivileged uid 65534 in a session of its own, with the same hard limits (RLIMIT_NPROC counts:
         the uid is not root), from copies in a folder of the judge's (root's, group the worker's gid, 0710: no
         other worker uid reaches it); the answers, reports and harness stay root's files, which that uid cannot
         write and, where private, cannot read. The judge is a child subreaper, so a daemon the command
         double-forks is re-parented to it and killed with the worker (`reap`). The network is NOT cut.
  none   neither (a laptop without user namespaces): the command runs as the user, with the limits that do not
         count the user's other processes; `ol check` says so once, `ol grade` refuses it without --no-sandbox.

`OL_SANDBOX` (bwrap | uid | none | auto, default auto) asks for a mode; one this machine cannot give is an
error, never a silent downgrade.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass
from collections.abc import Callable, Sequence, Set
from pathlib import Path

from ..kernel.errors import BadSubmission, SandboxError  # noqa: F401  (SandboxError: tests import it from here)
from ..kernel.paths import REPO
from .bwrap import LIMITER, SANDBOX_UID, Limits, available, reachable_by_other, sandboxed
from .uids import CLEAR_ROUNDS, SLOT_UIDS, clear, proc_files, uid_of

MODES = ("bwrap", "uid", "none")  # best first
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def worker_uid() -> int:
    return int(os.environ.get("OL_SANDBOX_UID") or SANDBOX_UID)


@dataclass(frozen=True)
class Mode:
    name: str       # bwrap | uid | none
    why: str = ""   # for uid and none: why the better modes are unavailable

    @property
    def confined(self) -> bool:
        return self.name != "none"


@functools.lru_cache(maxsize=None)
def _uid_mode_unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"needs Linux, this is {sys.platform}"
    if os.geteuid() != 0:
        return "the fallback runs workers as another uid, which needs the judge to run as root"
    if shutil.which("setpriv") is None:
        return "the fallback needs `setpriv` (util-linux) to drop to an unprivileged uid"
    try:
        r = subprocess.run(uid_argv([sys.executable, "-P", "-s", "-c", "import numpy"], Limits(processes=64)),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the fallback could not start: {e}"
    if r.returncode != 0:  # the probe's last line: its error, without its traceback
        lines = [line for line in r.stderr.decode(errors="replace").splitlines() if line.strip()]
        return (f"uid {worker_uid()} cannot run this interpreter and numpy (is it or its environment "
                f"private to root?): {lines[-1].strip()[:300] if lines else '(no output)'}")
    return None


def choose(requested: str | None = None) -> Mode:
    """The mode to confine workers in: `requested` (or OL_SANDBOX), else the best this machine allows."""
    want = (requested or os.environ.get("OL_SANDBOX") or "auto").strip().lower()
    if want not in (*MODES, "auto"):
        raise SandboxError(f"OL_SANDBOX={want!r} is not a sandbox mode; use one of {', '.join(MODES)} or auto")
    no_bwrap = available()
    if want == "bwrap" and no_bwrap:
        raise SandboxError(f"the bubblewrap sandbox cannot run here: {no_bwrap}")
    if want in ("bwrap", "auto") and not no_bwrap:
        return Mode("bwrap")
    no_uid = _uid_mode_unavailable()
    if want == "uid" and no_uid:
        raise SandboxError(f"the unprivileged-uid fallback cannot run here: {no_uid}")
    if want in ("uid", "auto") and not no_uid:
        return Mode("uid", f"no bubblewrap sandbox ({no_bwrap})" if no_bwrap else "OL_SANDBOX=uid asked for it")
    why = "OL_SANDBOX=none asked for it" if want == "none" else f"no bubblewrap sandbox ({no_bwrap}); no uid fallback ({no_uid})"
    return Mode("none", why)


def uid_argv(argv: list[str], limits: Limits) -> list[str]:
    """Mode uid: drop to worker_uid() (no groups, no new privileges), set the hard limits, exec argv."""
    uid = worker_uid()
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--",
            os.path.realpath(sys.executable), "-S", "-I", "-c", LIMITER, limits.spec(), *map(str, argv)]


def confine(mode: Mode, argv: list[str], visible: list[Path], env: dict[str, str], home: Path,
            limits: Limits = Limits(), tmp_mb: int = 64, writable: Sequence[Path] = (),
            writable_at: dict[Path, str] | None = None) -> tuple[list[str], dict]:
    """The argv and Popen keywords that run `argv` confined in `mode`, seeing `visible` (read-only, at the same
    paths) and `writable` (the caller's output folders: a build's). `home`: its working directory outside bwrap.
    `writable_at`: bwrap only, a writable folder's path inside when not its own (a build at fixed paths, whose
    output another build reuses). Start it with Popen(argv, start_new_session=True, **kw); `reap` afterwards."""
    env = dict(env)
    if mode.name != "none" and os.geteuid() == 0:
        owner = SANDBOX_UID if mode.name == "bwrap" else worker_uid()
        for folder in writable:  # the confined uid writes there: its own, nobody else's (links changed, not followed)
            os.chown(folder, owner, owner, follow_symlinks=False)
            for base, dirs, files in os.walk(folder):
                for n in dirs + files:
                    os.chown(os.path.join(base, n), owner, owner, follow_symlinks=False)
    if mode.name == "bwrap":
        env["HOME"] = env["TMPDIR"] = "/tmp"
        return sandboxed(argv, visible=[(str(p), str(p)) for p in visible], writable_tmp_mb=tmp_mb,
                         limits=limits, env=env,
                         writable=[(str(w), str((writable_at or {}).get(w, w))) for w in writable]), {"cwd": "/"}
    env["HOME"] = env["TMPDIR"] = str(home)
    if mode.name == "uid":
        uid = worker_uid()
        # the judge's folder for this command: root's, group the worker's gid, 0710 (no other worker uid reaches it)
        os.chown(home.parent, 0, uid)
        os.chmod(home.parent, 0o710)
        os.chown(home, uid, uid)
        unreachable = [str(v) for v in [*visible, *writable, home / "."] if not _reachable_as(Path(v), uid)]  # home: its own
        if unreachable:
            raise SandboxError(f"sandbox mode uid: the worker (uid {worker_uid()}) cannot reach {unreachable[:3]}: a folder "
                               "on the way is private. Make the folders above them traversable (chmod o+x), or grade "
                               "where bubblewrap runs.")
        become_subreaper()
        return uid_argv(argv, limits), {"cwd": str(home), "env": env}
    inner = [os.path.realpath(sys.executable), "-S", "-I", "-c", LIMITER, limits.spec(processes=False), *map(str, argv)]
    return inner, {"cwd": str(home), "env": env}


def own_folder(folder: Path, mode: Mode) -> Path:
    """Make `folder` (new, empty) the confined command's own before anything lands in it: mode uid (as root), root's
    with the worker's gid, 0710 (no other worker uid lists it, even for a moment); else 0755."""
    if mode.name == "uid" and os.geteuid() == 0:
        os.chown(folder, 0, worker_uid())
        os.chmod(folder, 0o710)
    else:
        os.chmod(folder, 0o755)
    return folder


@functools.lru_cache(maxsize=None)
def become_subreaper() -> None:
    """Orphans of this process's descendants are re-parented here (not to init), so `reap` finds them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def process_parents() -> dict[int, int]:
    """pid -> parent pid, of every process this one can see (one pass over /proc)."""
    return {pid: int(text.rsplit(")", 1)[1].split()[1]) for pid, text in proc_files("stat")}


def children(pid: int) -> list[int] | None:
    """The child processes of `pid`, from its threads' /proc/PID/task/TID/children (a pass over /proc instead: a
    worker's sweep took 12 of a loaded check's 32 s of judge CPU); None where the kernel keeps no such file
    (CONFIG_PROC_CHILDREN), [] for a process gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, its children file is not: this kernel has none
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def descendants(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    """Every process below `pid`: from the children files, or (`parents` given, or a kernel without them) /proc."""
    kids_of: Callable[[int], list[int] | None] = children
    if parents is not None or children(pid) is None:
        below: dict[int, list[int]] = {}
        for p, parent in (parents or process_parents()).items():
            below.setdefault(parent, []).append(p)
        kids_of = below.get
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = kids_of(todo.pop()) or []
        out += kids
        todo += kids
    return out


def kill_group(pid: int, sig: int = signal.SIGKILL) -> bool:
    """ol's one process-group kill: `sig` to the group `pid` leads; False when it is gone or not this user's."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_all(pids) -> int:
    n = 0
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
            n += 1
    return n


def reap(mode: Mode, known: Set[int] = frozenset()) -> int:
    """Mode uid: kill every process of worker_uid() that is this process's child (the daemons a worker left) until
    none is left, but `known` (the caller's own); returns how many. With no `known` and one of `ol grade`'s own
    uids (SLOT_UIDS), every process of that uid too (harness.sandbox.uids.clear). A no-op in other modes."""
    if mode.name != "uid":
        return 0
    killed = 0
    if not known and worker_uid() in SLOT_UIDS:
        clear(worker_uid())
    for _ in range(CLEAR_ROUNDS):
        strays = [p for p, parent in process_parents().items()
                  if parent == os.getpid() and p not in known and uid_of(p) == worker_uid()]
        if not strays:
            break
        killed += kill_all(strays)
        for p in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(p, 0)
    return killed


COPY_CAP_BYTES = 64 << 20  # a submission's package is kilobytes; more is an upload mistake or an attack
COPY_CAP_FILES = 4000


def readable_copy(src: Path, dst: Path, cap_bytes: int = COPY_CAP_BYTES, cap_files: int = COPY_CAP_FILES) -> Path:
    """Copy the tree `src` to `dst` for a confined command to read (folders 0755, files 0644): regular files and
    folders only (a symlink could name the answers: neither followed nor copied). Too large a tree is refused."""
    total = files = 0
    dst.mkdir(mode=0o755)
    os.chmod(dst, 0o755)
    for root, dirs, names in os.walk(src, followlinks=False):
        rel = Path(root).relative_to(src)
        dirs[:] = [d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(root, d))]
        for d in dirs:
            (dst / rel / d).mkdir(mode=0o755)
            os.chmod(dst / rel / d, 0o755)
        for n in names:
            path = os.path.join(root, n)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            total += os.path.getsize(path)
            files += 1
            if total > cap_bytes or files > cap_files:
                raise BadSubmission(f"{src} holds more than {cap_bytes >> 20} MiB or {cap_files} files; "
                                    "submit the package's source only (no data, environments or build output)")
            readable_file(Path(path), dst / rel / n)
    return dst


def readable_file(src: Path, dst: Path) -> Path:
    """Copy one file to `dst` (its missing folders made), world-readable, for a confined command to read."""
    for folder in reversed([p for p in dst.parents if not p.exists()]):
        folder.mkdir(mode=0o755)
        os.chmod(folder, 0o755)  # whatever the umask
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    return dst


def _reachable_as(path: Path, uid: int) -> bool:
    """Could a process of `uid` (its gid the same number, no other group: uid_argv) read `path` (a folder: read
    and traverse it), every folder above it letting it through?"""
    def bits(p: str) -> int:
        st = os.stat(p)
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == uid else 0
        return (st.st_mode >> shift) & 0o7

    try:
        real = Path(os.path.realpath(path))
        if not all(bits(str(a)) & 1 for a in real.parents):
            return False
        return bits(str(real)) & (0o5 if real.is_dir() else 0o4) == (0o5 if real.is_dir() else 0o4)
    except OSError:
        return False


def exposed(path: Path) -> bool:
    """Mode uid: could the worker's uid (any other uid) read or traverse `path` (an answer tree)?"""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IROTH | stat.S_IXOTH)) and reachable_by_other(str(path))


def answers_exposed(chapter, mode: Mode) -> list[Path]:
    """The chapter's answer trees (its pack, each language's reference) a uid-mode worker could read; else none."""
    if mode.name != "uid":
        return []
    trees = [chapter.pack_dir, *(lang.reference for lang in chapter.languages.values()), REPO / "examples"]  # samples
    return [t for t in dict.fromkeys(trees) if exposed(t)]


def grading_refusal(chapter, mode: Mode, unconfined_ok: bool, who: str, class_dir: Path | None = None) -> str | None:
    """Why `who` (ol grade, a machine grading its tasks) will not grade untrusted code in `mode`, with the remedy;
    None when it will. It will not unconfined (unless --no-sandbox), nor where a uid-mode worker could read the
    answers or the class's submissions in `class_dir`."""
    if not mode.confined and not unconfined_ok:
        return (f"{who} runs untrusted code and will not run it unconfined: {mode.why}. Grade on a machine with "
                "unprivileged user namespaces (bubblewrap), or as root (workers then run as an unprivileged uid; "
                "docs/grading.md); or, for trusted submissions only, pass --no-sandbox.")
    readable = answers_exposed(chapter, mode)
    if class_dir is not None and mode.name == "uid" and exposed(Path(class_dir)):
        readable.append(Path(class_dir).resolve())
    if readable:
        return f"{who}, in sandbox mode uid ({mode.why}): {exposure_advice(readable)}"
    return None


def exposure_advice(trees: list[Path]) -> str:
    listed = " ".join(f"'{t}'" for t in trees)
    return (f"a worker running as uid {worker_uid()} could read {listed} (the reference's code, golden answers, tests, "
            "or the class's submissions) "
            f"and answer from them; make them private first: chmod -R go-rwx {listed}")
