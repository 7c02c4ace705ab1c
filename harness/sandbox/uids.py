"""Mode uid: the worker uids of a grading run, each one never handed out while any process of it lives.

Without namespaces, a process a worker leaves behind keeps its uid, and a process may signal (or ptrace) every
other process of its uid: handed to the next judge, the uid would let the daemon kill an honest student's worker.
So a uid is cleared, every process it owns killed, before a worker gets it and after its judge ends (`UidPool`);
one that cannot be cleared is never handed out again in this run, and a fresh one takes its place.

Two `ol grade` runs on one machine never hold one uid at once: a pool leases each uid for the run's whole life
(`lease`): an exclusive flock(2) on a file of that uid in a root-only folder (LEASES_DIR, 0700; OL_UID_LEASES
moves it). The kernel drops the lock when its holder dies, however it dies; the file (naming its last holder's
pid) is never removed (a removal could race another pool's lock on it).

Clearing is root's SIGKILL to each process of the uid /proc lists (through a pidfd: a recycled pid is never hit),
repeated until none is alive: a killed process forks no more, so even a fork bomb converges (RLIMIT_NPROC). Not
`kill(-1)` as that uid: a daemon looping on it would kill the killer first. Zombies are left to their parents.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import queue
import signal
import stat
import threading
import time
from collections.abc import Iterator, Set
from pathlib import Path

from ..kernel.errors import SandboxError

CLEAR_ROUNDS = 50  # kill passes before a uid counts as impossible to clear (a process stuck in the kernel)
LEASES_DIR = "/run/ol-uid-leases"  # one lock file per leased uid; root's alone (OL_UID_LEASES: elsewhere)
# Mode uid: the uid a worker runs as. RLIMIT_NPROC counts every process of a uid on the machine (no user
# namespace separates them), bwrap sandboxes started by root included (they run as host uid 65534); so
# `ol grade` gives each of its concurrent judges a uid of its own from SLOT_UIDS (see slot_uid), lest a
# fork bomb starve its siblings. OL_SANDBOX_UID carries the choice to a judge.
SLOT_UIDS = range(64000, 65000)  # unused by Debian's and Ubuntu's conventions (system < 1000, users 1000-59999, nobody 65534)


def slot_uid(exclude: Set[int]) -> int:
    """A uid for a concurrent uid-mode judge: no account or group has it, no process runs as it, it is not in
    `exclude` (UidPool hands it out, cleared of its processes before and after use)."""
    busy = {uid_of(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    for uid in SLOT_UIDS:
        with contextlib.suppress(KeyError):
            pwd.getpwuid(uid)
            continue
        with contextlib.suppress(KeyError):
            grp.getgrgid(uid)  # the worker's gid is its uid: a group of that number would share its folders' group bits
            continue
        if uid not in busy and uid not in exclude:
            return uid
    raise SandboxError(f"no free uid in {SLOT_UIDS.start}-{SLOT_UIDS.stop - 1} for the workers; "
                       "grade with fewer --jobs")


def uid_of(pid: int) -> int | None:
    """The real uid /proc gives for `pid`; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def leases_dir() -> Path:
    """The folder of the uid leases, made 0700 if absent; refused (SandboxError) unless it is a folder of this
    user's that no one else may write or read (a lease another user could take or delete would be no lease)."""
    d = Path(os.environ.get("OL_UID_LEASES") or LEASES_DIR)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SandboxError(f"the uid leases' folder {d} must be a folder of this user's, mode 0700 (it is "
                           f"{oct(stat.S_IMODE(st.st_mode))}, owner {st.st_uid}): remove it, or set OL_UID_LEASES elsewhere")
    return d


def lease(uid: int, folder: Path) -> int | None:
    """Take the lease of `uid`: the open descriptor holding its lock (close it to give the lease back), or None
    when another holder (this process's or another's) has it."""
    fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def proc_files(name: str) -> Iterator[tuple[int, str]]:
    """(pid, the text of /proc/PID/NAME) of every process this one can see, from one pass over /proc (a process gone
    meanwhile is left out)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/{name}") as f:
                yield int(entry), f.read()


def live_processes(uid: int) -> list[int]:
    """The pids of the processes whose real uid is `uid` and that are not zombies, from one pass over /proc."""
    out = []
    for pid, text in proc_files("status"):
        status = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        uids = status.get("Uid", "").split()
        if uids and int(uids[0]) == uid and not status.get("State", "").strip().startswith(("Z", "X")):
            out.append(pid)
    return out


def clear(uid: int) -> bool:
    """Kill every process `uid` owns; True once /proc shows none alive. Needs root (or that uid)."""
    for i in range(CLEAR_ROUNDS):
        pids = live_processes(uid)
        if not pids:
            return True
        for pid in pids:
            _kill_if_owned(pid, uid)
        if i:  # a process already signalled but still exiting: give the kernel a moment
            time.sleep(0.002 * min(i, 10))
    return not live_processes(uid)


def _kill_if_owned(pid: int, uid: int) -> None:
    """SIGKILL `pid` if it is (still) a process of `uid`: the pidfd pins the process its number named when it
    was opened, so a number reused since the scan is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already
        return
    try:
        with contextlib.suppress(OSError, ValueError):
            if uid_of(pid) == uid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


class UidPool:
    """The worker uids of one run's concurrent judges: `take` one (cleared), `give` it back (cleared again); one that
    will not clear is replaced (slot_uid). Each is leased (`lease`) until `close` or the process's end."""

    def __init__(self, n: int) -> None:
        self._free: queue.Queue = queue.Queue()
        self._seen: set[int] = set()  # every uid this pool handed out, dropped or found leased: a fresh one is none of these
        self._leases: dict[int, int] = {}  # uid -> the descriptor holding its lease
        self._lock = threading.Lock()
        self._folder = leases_dir()
        for _ in range(max(1, n)):
            self._free.put(self._fresh())

    def _fresh(self) -> int:
        """A uid no account, group or process has, not this pool's yet, leased to it now."""
        with self._lock:
            while True:
                uid = slot_uid(self._seen)  # SandboxError when the range is exhausted
                self._seen.add(uid)
                fd = lease(uid, self._folder)
                if fd is not None:
                    self._leases[uid] = fd
                    return uid

    def close(self) -> None:
        """Give every lease back (the process's end does so too)."""
        with self._lock:
            leases, self._leases = self._leases, {}
        for fd in leases.values():
            os.close(fd)

    def take(self) -> int:
        uid = self._free.get()
        while not clear(uid):  # still owned by a process that will not die: never this run's again
            uid = self._fresh()
        return uid

    def give(self, uid: int) -> None:
        self._free.put(uid if clear(uid) else self._fresh())
