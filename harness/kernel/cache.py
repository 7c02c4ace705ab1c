"""Where ol keeps what it can make again, and the one rule every folder there obeys (issue 36, item 3).

    folder("draws", private=True)   $XDG_CACHE_HOME/ol/draws (else ~/.cache/ol/draws), each level checked
    entry(folder("builds"), key)    a folder of ol's own in it, made now (0700, marked) when absent
    prune(parent, kept, grace_s)    the least recently used entries past `kept` removed: only those ol marked

From `ol/` down, each level is made 0700 when absent and used only when it is a real folder (never a link), this
user's, and writable by no one else (`private`: nor readable, for answers). Anything else is refused with its
path named (CacheRefused, exit 2, with the remedy): a link planted at any level is never written through, and
nothing of its target is removed. Pruning removes only folders holding MARK, the file ol writes into each entry
it makes; anything else there is left where it is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from pathlib import Path

from .errors import UsageError

MARK = ".ol-made"  # written by ol into each entry it makes: pruning removes no entry without it


class CacheRefused(UsageError):
    """A folder of ol's cache that is a link, another user's, or open to others: never written nor pruned (exit 2)."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"ol's cache folder {path} {why}: ol keeps its caches only in folders of yours alone and follows "
                         f"no link there. Remove {path} (ol makes it again), or set XDG_CACHE_HOME to a folder of yours, "
                         "then run the command again.")


def root() -> Path:
    """ol's cache: $XDG_CACHE_HOME/ol (an absolute one, as the XDG spec says), else ~/.cache/ol; RuntimeError when
    this user has no home (not checked: `folder` checks every level it uses). Not platformdirs: with no home it
    answers `~/.cache`, a folder relative to wherever ol runs."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "ol"


def folder(*parts: str, private: bool = False) -> Path:
    """root()/parts, each level from root() down made (0700) when absent and checked (`refusal`); the last one
    `private` when asked. Raises CacheRefused naming the first level that fails."""
    path = root()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # XDG_CACHE_HOME itself is the user's to choose
    _made(path, private and not parts)
    for i, part in enumerate(parts):
        path = path / part
        _made(path, private and i == len(parts) - 1)
    return path


def ready(depth: int = 2) -> Path | None:
    """Check ol's cache before a command uses it, up front (never mid-test): its root and every link or folder
    `depth` levels below; CacheRefused names the first that is a link, another user's or writable by others.
    Returns the root (None: no home, so no cache)."""
    try:
        top = folder()
    except (RuntimeError, OSError):  # no home, a read-only one: no cache is used (harness.kernel.memo makes each value)
        return None
    for level in range(1, depth + 1):  # a level's links are refused before the next one is listed through them
        for path in top.glob("/".join(["*"] * level)):  # a folder not ours to read: folder() refuses it when used
            try:
                st = os.lstat(path)
            except OSError:  # removed since the listing (another check pruning)
                continue
            if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
                _refuse(path, st, private=False)
    return top


def entry(parent: Path, name: str) -> Path:
    """parent/name, a folder of ol's own: made (0700) and marked when absent; one that exists must pass the checks
    (and is marked ol's: a folder at the name ol keys it by is ol's making)."""
    path = parent / name
    _made(path, private=False)
    mark(path)
    return path


def mark(path: Path) -> None:
    """Mark a folder ol just made elsewhere (a template built aside, then renamed into place) as its own."""
    os.close(os.open(Path(path) / MARK, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))


def ours(path: Path) -> bool:
    """Whether `path` is an entry ol made: a real folder of this user's holding MARK (a real file)."""
    try:
        st, marked = os.lstat(path), os.lstat(Path(path) / MARK)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_ISREG(marked.st_mode)


def prune(parent: Path, kept: int, grace_s: float = 0.0, made=ours) -> list[Path]:
    """Remove the entries of `parent` ol made (`made`: `ours`, or a file test of the caller's) beyond the `kept` most
    recently used, unless used within `grace_s` (or named with a leading `.`: one being made). Returns what it
    removed."""
    try:
        found = [(os.lstat(p).st_mtime, p) for p in Path(parent).iterdir() if not p.name.startswith(".") and made(p)]
    except OSError:  # an entry removed while listing (another check pruning): next time
        return []
    now, gone = time.time(), []
    for mtime, old in sorted(found, reverse=True)[kept:]:
        if now - mtime > grace_s:
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)  # removes links inside, never what they point to
            else:
                with contextlib.suppress(OSError):
                    old.unlink()
            gone.append(old)
    return gone


def refusal(st: os.stat_result, private: bool) -> str | None:
    """Why a folder with this lstat is not one ol uses, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}, not to you (uid {os.geteuid()})"
    if st.st_mode & (0o077 if private else 0o022):
        return f"is open to others (mode {stat.S_IMODE(st.st_mode):o}; ol makes it 700)"
    return None


def _made(path: Path, private: bool) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)  # an OSError but this one (a read-only home) is the caller's: a cache it goes without
    _refuse(path, os.lstat(path), private)


def _refuse(path: Path, st: os.stat_result, private: bool) -> None:
    """CacheRefused when `refusal` finds this folder's lstat `st` wanting (a link's target named)."""
    if (why := refusal(st, private)) is not None:
        raise CacheRefused(path, why + (f" (to {os.readlink(path)})" if stat.S_ISLNK(st.st_mode) else ""))
