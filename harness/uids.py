"""Mode uid: the worker uids of a grading run, each one never handed out while any process of it lives.

Without namespaces, a process the worker leaves behind (a `setsid` daemon chain longer than `reap`'s
rounds, or one the judge had no time to reap because it was killed) keeps its uid, and a process of a uid
may signal every other process of that uid: handed to the next judge, the uid would let the daemon kill
(or ptrace) an honest student's worker. So a uid is cleared, every process it owns killed, before a
worker gets it and after its judge ends (`UidPool`); one that cannot be cleared is never handed out again
in this run, and a fresh one takes its place.

Clearing is root's SIGKILL to each process of the uid /proc lists (through a pidfd, so a recycled pid is
never hit), repeated until /proc shows none alive: a killed process forks no more, so the rounds converge
even on a fork bomb (at most RLIMIT_NPROC processes). Not `kill(-1)` run as that uid: a daemon looping on
`kill(-1)` would kill the killer before it ran. Zombies are left to their parents: they run nothing.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

CLEAR_ROUNDS = 50  # kill passes before a uid counts as impossible to clear (a process stuck in the kernel)


def live_processes(uid: int) -> list[int]:
    """The pids of the processes whose real uid is `uid` and that are not zombies, from one pass over /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue
        uids = status.get("Uid", "").split()
        if uids and int(uids[0]) == uid and not status.get("State", "").strip().startswith(("Z", "X")):
            out.append(int(entry))
    return out


def clear(uid: int, rounds: int = CLEAR_ROUNDS) -> bool:
    """Kill every process `uid` owns; True once /proc shows none alive. Needs root (or that uid)."""
    for i in range(rounds):
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
        with open(f"/proc/{pid}/status") as f:
            owner = next((int(line.split()[1]) for line in f if line.startswith("Uid:")), None)
        if owner == uid:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)


class UidPool:
    """The worker uids of one run's concurrent judges: `take` one (cleared), `give` it back (cleared again);
    a uid that will not clear is dropped for the run and replaced by a fresh one (harness.confine.slot_uids)."""

    def __init__(self, n: int) -> None:
        from .confine import slot_uids

        self._free: queue.Queue = queue.Queue()
        self._seen: set[int] = set()  # every uid this pool handed out or dropped: a fresh one is none of these
        self._lock = threading.Lock()
        for uid in slot_uids(max(1, n)):
            self._seen.add(uid)
            self._free.put(uid)

    def _fresh(self) -> int:
        from .confine import slot_uids

        with self._lock:
            uid = slot_uids(1, exclude=self._seen)[0]
            self._seen.add(uid)
            return uid

    def take(self) -> int:
        uid = self._free.get()
        while not clear(uid):  # still owned by a process that will not die: never this run's again
            uid = self._fresh()
        return uid

    def give(self, uid: int) -> None:
        self._free.put(uid if clear(uid) else self._fresh())
