"""What a judge can recompute but need not: data kept by key in this process and on disk between checks.

The judge keeps here what costs more to make than to read and is decided by its key alone: the fresh cases of a
grading seed (harness.check.golden: the seed and the code of the oracle, the pack and the reference decide them).
The key names everything that decides the value, so nothing here can change a verdict.

    remembered("fresh", key, make)   # make() the first time; the same value, read back, from then on

Where: $XDG_CACHE_HOME/ol/<kind>/ (else ~/.cache/ol/<kind>/), this user's alone (0700), checked by
harness.kernel.cache; no submission's sandbox sees it; each file is 0600 (fresh cases hold answers).

Format: marshal (not JSON: a tuple is not a list, -0.0 not 0.0, an integer may pass 2**64; not pickle: unpickling
may run code). A file not this user's, writable by others, or not read back whole under its own key is a miss,
made again and rewritten; a value marshal cannot hold, or a cache that cannot be written, is made each time.

What it saves (issue 40: a cache stays only with a measured saving of a second or more, in the user's layout): a
second check of a fresh seed reads its cases back. `ol check CHAPTER --submission reference --fresh 4243` (the
benches' chapter) took 17.7 s and 22.1 s with an empty XDG_CACHE_HOME, then 9.3 s and 8.8 s run again with the
cases kept (2026-12-07, this project's 2-core machine, shared and loaded): 8 to 13 s a check; a resumed `ol grade
--fresh` likewise.

Size: each kind keeps its `kept` newest files (KEPT by default; a hit refreshes a file's time). Only files this
module wrote (a 40-hex-digit name, a regular file of this user's) are ever removed.
"""

import contextlib
import hashlib
import marshal
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from . import cache, paths

T = TypeVar("T")
KEPT = 2000  # files of one kind kept by default (a kind may keep fewer: fresh case sets, FRESH_KEPT)
TOUCH_AFTER_S = 3600.0  # a hit refreshes its file's time at most this often (the least recently used go first)
NAME = re.compile(r"[0-9a-f]{40}\.marshal")  # the files this module writes (pruning removes no other)
_MISSING = object()
_memory: dict[tuple[str, str], Any] = {}  # (kind, key) -> value: this process's, so a class graded in one process reads once


def folder(kind: str) -> Path:
    """The kind's folder, checked (harness.kernel.cache: a link, another user's folder or one open to others is refused)."""
    return cache.folder(kind, private=True)


def remembered(kind: str, key: str, make: Callable[[], T], kept: int | None = None) -> T:
    """The value `make()` gives for `key`, made once: from this process's memory, else from the disk, else made
    (and kept). Callers must not change the value they get: it is shared."""
    if (kind, key) in _memory:
        return _memory[(kind, key)]
    try:
        path = folder(kind) / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".marshal")
    except (RuntimeError, OSError, cache.CacheRefused):  # no home, a read-only one, a refused folder: made each time
        # (ol check and ol grade refuse a refused folder up front, harness.kernel.cache.ready: never mid-test)
        return _memory.setdefault((kind, key), make())
    value = _read(path, key)
    if value is _MISSING:
        value = make()
        _write(path, key, value, KEPT if kept is None else kept)
    _memory[(kind, key)] = value
    return value


def forget() -> None:
    """Drop this process's memory (the disk's files stay): the next `remembered` reads or makes again."""
    _memory.clear()


def _read(path: Path, key: str):
    """The value kept at `path` under `key`, or _MISSING (no file, another owner's, writable by others, damaged)."""
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)) as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return _MISSING
            kept = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return _MISSING
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == key):
        return _MISSING
    if time.time() - st.st_mtime > TOUCH_AFTER_S:
        with contextlib.suppress(OSError):
            os.utime(path)
    return kept[1]


def _write(path: Path, key: str, value, kept: int) -> None:
    """Keep `value` at `path` (whole or not at all: written aside, then renamed), then drop the oldest beyond `kept`."""
    try:
        data = marshal.dumps((key, value))
    except ValueError:  # a type marshal cannot hold: made each time
        return
    try:
        paths.write_atomic(path, data)
    except OSError:  # no room, a read-only home: the value is made again next time
        return
    cache.prune(path.parent, kept, made=_ours)


def _ours(path: Path) -> bool:
    """A file this module wrote: its name (a key's digest), a regular file of this user's (no link)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return NAME.fullmatch(path.name) is not None and stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
