"""What a judge can recompute but need not: data kept by key in this process and on disk between checks.

The judge keeps here what costs more to make than to read and is decided by its key alone: the fresh cases of a
grading seed (harness.check.golden: the seed and the code of the oracle, the
pack and the reference decide them). The key names everything that decides the value, so the value is the same
whether it is made or read: nothing here can change a verdict; it changes how long a second check waits.

    remembered("fresh", key, make)   # make() the first time; the same value, read back, from then on

Where: $XDG_CACHE_HOME/ol/<kind>/ (else ~/.cache/ol/<kind>/), a folder of this user's alone (0700). The judge's
home is never in a submission's sandbox, so no submission reaches it; each file is 0600 (fresh cases hold answers).

Format: marshal, not JSON and not pickle. The values are plain data whose types are the data (a tuple
is not a list, -0.0 is not 0.0, a NaN stays NaN, an integer may pass 2**64): JSON would lose that, and
unpickling may run code. marshal keeps exactly these types and runs nothing; a file that is not this user's,
is writable by others, or does not read back whole under its own key is a miss, made again and rewritten; a
kind's folder that is a link, another user's, or open to others is never written into.
A value marshal cannot hold, or a cache that cannot be written (a read-only home), is made each time instead.

Size: each kind keeps its `kept` newest files (KEPT unless the caller says; a write removes the oldest beyond
them; a hit refreshes its file's time), so `--fresh` runs and graded classes' seeds do not pile up.
"""

import hashlib
import marshal
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
KEPT = 2000  # files of one kind kept by default (a kind may keep fewer: fresh case sets, FRESH_KEPT)
TOUCH_AFTER_S = 3600.0  # a hit refreshes its file's time at most this often (the least recently used go first)
_MISSING = object()
_memory: dict[tuple[str, str], object] = {}  # (kind, key) -> value: this process's, so a class graded in one process reads once


def folder(kind: str) -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ol" / kind


def remembered(kind: str, key: str, make: Callable[[], T], kept: int | None = None) -> T:
    """The value `make()` gives for `key`, made once: from this process's memory, else from the disk, else made
    (and kept). Callers must not change the value they get: it is shared."""
    if (kind, key) in _memory:
        return _memory[(kind, key)]
    try:
        path = folder(kind) / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".marshal")
    except RuntimeError:  # no home to keep it in (no HOME, no passwd entry): made each time, as unwritable
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
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return _MISSING
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return _MISSING
        with os.fdopen(fd, "rb") as f:
            fd = -1
            kept = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return _MISSING
    finally:
        if fd >= 0:
            os.close(fd)
    if not (isinstance(kept, tuple) and len(kept) == 2 and kept[0] == key):
        return _MISSING
    if time.time() - st.st_mtime > TOUCH_AFTER_S:
        try:
            os.utime(path)
        except OSError:
            pass
    return kept[1]


def _write(path: Path, key: str, value, kept: int) -> None:
    """Keep `value` at `path` (whole or not at all: written aside, then renamed), then drop the oldest beyond `kept`."""
    try:
        data = marshal.dumps((key, value))
    except ValueError:  # a type marshal cannot hold: made each time
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path.parent)  # a link, or a folder others may enter, is no cache of this user's: not written
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # no room, a read-only home: the value is made again next time
        return
    _prune(path.parent, kept)


def _prune(where: Path, kept: int) -> None:
    try:
        files = sorted(where.glob("*.marshal"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:  # a file removed while listing (another judge pruning): next time
        return
    for old in files[kept:]:
        try:
            old.unlink()
        except OSError:
            pass
