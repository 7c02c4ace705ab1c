"""What an upload may hold, checked before anything reads it: the one walk over a submission's tree.

Every command that looks into an upload (the layout check, harness.subjects.layout; the parcel `ol grade` ships,
harness.grading.parcel) walks it with `walk`, which follows no link and refuses, with a reason naming the entry:

* a symbolic link anywhere in it (it could name the answers or /etc/shadow, resolved by a judge that may be
  root): upload the file itself;
* anything that is neither a regular file nor a folder (a FIFO would block the reader, a device...);
* more than ENTRY_CAP entries, or a folder more than DEPTH_CAP levels down (source code is a few dozen files).

Folders no step reads are not walked: `__pycache__/`, `.git/`, `node_modules/`, a folder holding a
`CACHEDIR.TAG` (a build's `target/`, pytest's, mypy's and ruff's caches) or a `pyvenv.cfg` (a virtual
environment): a workspace is graded as it is. A name need not be UTF-8 (os.fsdecode's surrogate escapes, shown
escaped by harness.render.literal). The walk is iterative (no recursion limit). The root may be a link the user
named; nothing below it may be.

The work before the judge has a deadline (`deadline`, PREP_S): every step that walks, reads or extracts an
upload calls `tick` per entry (and per chunk read), which raises TooSlow once it has passed. Whose fault it is
follows from what was done by then: more than a source upload holds (SOURCE_ENTRIES, SOURCE_BYTES) is the
upload's (rejected); less is the machine's (ungraded). Outside a deadline (`ol check`) `tick` does nothing.

Reading an upload's bytes is where its fault ends (`reading`): any failure there, whatever its type (a corrupt
LZMA stream raises lzma.LZMAError: no list of types is kept), is its rejection (BadSubmission naming the entry and
the error), but for the machine's own lack (MemoryError; OSError EMFILE, ENFILE, ENOMEM: MachineFailure,
ungraded). Writing into ol's scratch is ol's (`writing`): a full or failing disk is a MachineFailure, but for the
failures only an upload's names and shapes cause (SHAPED_ERRNOS): the upload's rejection.
"""

import errno
import os
import stat
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from ..kernel.errors import BadSubmission, OlError
from ..registry import Chapter
from ..render.literal import visible

ENTRY_CAP = 4000  # files and folders an upload may hold (harness.sandbox.confine.COPY_CAP_FILES: as many as a worker's copy)
DEPTH_CAP = 32  # folders below the upload's root: a package is a handful deep
SKIPPED_DIRS = {"__pycache__", ".git", "node_modules"}
SKIPPED_MARKERS = ("CACHEDIR.TAG", "pyvenv.cfg")  # a folder holding one is a cache or a virtual environment
PREP_S = 60.0  # one entry's reading and packing (and, where it is graded, its unpacking and layout): well under 1 s for source
SOURCE_ENTRIES, SOURCE_BYTES = 500, 4 << 20  # past either by the deadline, an upload is more than source: its own fault
clock = time.monotonic  # what deadlines are measured by (the tests' seam: a clock they control)


@dataclass
class Deadline:
    name: str  # the entry's name in the class folder
    step: str  # what is being done: "reading and packing", "unpacking", "laying out"
    seconds: float
    ends: float
    entries: int = 0  # entries walked or extracted under it so far
    nbytes: int = 0  # bytes read or extracted under it so far


class MachineFailure(OlError):
    """The machine failed while ol read or laid out an upload (a full disk under ol's scratch, no descriptor or
    memory left): ol's failure, the entry ungraded (exit 3), never the upload's rejection."""


# a read failing so is the machine's lack, whatever was read
MACHINE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
# a write into ol's scratch failing so was caused by the upload's names and shapes (a name past the filesystem's
# length, a file where one of its folders must go, the same path twice as file and folder); any other is ol's
SHAPED_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EILSEQ})


class TooSlow(Exception):
    """The work on one upload passed its deadline: `upload_fault` says whose fault (rejected, or ungraded)."""

    def __init__(self, d: Deadline) -> None:
        self.upload_fault = d.entries > SOURCE_ENTRIES or d.nbytes > SOURCE_BYTES
        done = f"{d.entries} entries and {d.nbytes / 2**20:.1f} MiB by then"
        if self.upload_fault:
            reason = (f"{visible(d.name)} took longer than {d.seconds:.0f} s to read ({d.step}; {done}): an upload of "
                      "source code takes well under a second; upload only your source files")
        else:
            reason = (f"{d.step.capitalize()} {visible(d.name)} took longer than {d.seconds:.0f} s though it is "
                      f"source-sized ({done}): this machine is too slow or stuck; grade it again")
        super().__init__(reason)


_current: ContextVar[Deadline | None] = ContextVar("ol_upload_deadline", default=None)


@contextmanager
def deadline(name: str, step: str, seconds: float | None = None):
    """The work in this block, on the upload `name`, must end within `seconds` (default PREP_S): `tick` raises
    TooSlow past it. One per thread (a context variable): concurrent entries each have their own."""
    s = PREP_S if seconds is None else seconds
    d = Deadline(name, step, s, 0.0)
    token = _current.set(d)
    d.ends = clock() + s  # read under the deadline itself: a clock may be per entry
    try:
        yield d
    finally:
        _current.reset(token)


def current() -> Deadline | None:
    """The deadline this thread works under, if any."""
    return _current.get()


def tick(entries: int = 0, nbytes: int = 0) -> None:
    """Count work done on the upload; raise TooSlow when the deadline has passed (nothing without one)."""
    d = _current.get()
    if d is None:
        return
    d.entries += entries
    d.nbytes += nbytes
    if clock() > d.ends:
        raise TooSlow(d)


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


@contextmanager
def reading(what: str, remedy: str = "upload it again, or the files themselves", how: str = "cannot be read"):
    """The block reads the upload's bytes: any exception it raises, whatever its type, is the upload's rejection
    (BadSubmission: "`what` `how` (Type: message): `remedy`"); a refusal already made (BadSubmission), the
    deadline (TooSlow) and ol's own failures (MachineFailure; MemoryError and an OSError of MACHINE_ERRNOS, made
    MachineFailure) pass as they are."""
    try:
        yield
    except (BadSubmission, TooSlow, MachineFailure):
        raise
    except MemoryError as e:
        raise MachineFailure(f"ol ran out of memory while reading {visible(what)}: grade it again") from e
    except Exception as e:  # noqa: BLE001 -- whatever reading the upload's bytes raises is the upload's
        if isinstance(e, OSError) and e.errno in MACHINE_ERRNOS:
            raise MachineFailure(f"the machine failed while ol read {visible(what)} ({_why(e)}): grade it again") from e
        raise BadSubmission(f"{visible(what)} {how} ({visible(_why(e))}): {remedy}") from None


@contextmanager
def writing(what: str):
    """The block writes what was read of the upload `what` into ol's own scratch folder: an OSError the upload's names
    or shapes cause (SHAPED_ERRNOS) is its rejection; any other OSError is ol's (MachineFailure: ungraded)."""
    try:
        yield
    except OSError as e:
        if e.errno in SHAPED_ERRNOS:
            raise BadSubmission(f"{visible(what)} cannot be laid out ({visible(e.strerror or _why(e))}): rename or "
                                "restructure it (one name per file or folder, each part under 255 bytes)") from None
        raise MachineFailure(f"ol could not write its copy of {visible(what)} ({_why(e)}): free space or fix ol's "
                             "temporary folder, then grade it again") from e


def link_reason(path: Path, rel: str) -> str:
    try:
        to = os.readlink(path)
    except OSError:
        to = "?"
    return (f"{visible(rel)} is a symbolic link (to {visible(to)}): no link in an upload is followed; "
            "upload the file or folder itself")


def skipped(path: Path, name: str) -> bool:
    """A folder the walk (and so every copy) leaves out: build output, caches and virtual environments."""
    return name in SKIPPED_DIRS or any(os.path.lexists(path / m) for m in SKIPPED_MARKERS)


def walk(root: Path, top_name: str | None = None):
    """Yield (relative posix path, Path, is_folder, executable) for the root (rel "" or `top_name`) and every
    entry below it, folders before their content, each folder's entries sorted by name; raise BadSubmission
    (naming the entry, relative to the root) on a link, a special file, or a cap passed."""
    root = Path(root)
    base = top_name or ""
    st = os.stat(root)  # the root: the user's own path, resolved
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise BadSubmission(f"{visible(base or root.name)} is neither a folder nor a regular file: "
                            "upload your source files")
    yield base, root, stat.S_ISDIR(st.st_mode), bool(st.st_mode & 0o111)
    if not stat.S_ISDIR(st.st_mode):
        return
    count = 0
    stack = [(root, base, 0)]
    while stack:
        folder, rel, depth = stack.pop()
        try:
            names = sorted(os.listdir(folder))
        except OSError as e:
            raise BadSubmission(f"{visible(rel or root.name)} cannot be listed ({e.strerror or e}): "
                                "make it readable, or leave it out of the upload") from None
        below = []
        for name in names:
            path = folder / name
            child = f"{rel}/{name}" if rel else name
            count += 1
            tick(entries=1)
            if count > ENTRY_CAP:
                raise BadSubmission(f"{visible(base or root.name)} holds more than {ENTRY_CAP} files and folders: "
                                    "source code is a few dozen files; upload only your source")
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                raise BadSubmission(link_reason(path, child))
            if stat.S_ISDIR(st.st_mode):
                if skipped(path, name):
                    continue
                if depth + 1 > DEPTH_CAP:
                    raise BadSubmission(f"{visible(child[:200])}... is more than {DEPTH_CAP} folders deep: "
                                        "upload your package, not a chain of folders")
                yield child, path, True, False
                below.append((path, child, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                yield child, path, False, bool(st.st_mode & 0o111)
            else:
                raise BadSubmission(f"{visible(child)} is neither a file nor a folder (a FIFO, socket or device): "
                                    "upload only your source files")
        stack.extend(reversed(below))  # depth first, in name order


def check(root: Path) -> None:
    """Refuse (BadSubmission) an upload `walk` refuses; return when it may be read."""
    for _ in walk(root):
        pass


def submissions_in(chapter: Chapter, submissions_dir: Path) -> list[Path]:
    """The folder's submissions: every subfolder and zip, and every bare chapter file (not a README, a roster). The
    folder is resolved (the user's path), its entries are not: a link is rejected when packed."""
    if not submissions_dir.is_dir():
        raise BadSubmission(f"{submissions_dir} is not a folder of submissions (one entry each: a folder, a file or a zip)")
    uploads = {name for lang in chapter.languages.values() for name in lang.uploads}
    base = submissions_dir.resolve()
    subs = [base / p.name for p in sorted(submissions_dir.iterdir()) if not p.name.startswith(".")
            and (p.is_dir() or p.suffix == ".zip" or p.name in uploads)]
    if not subs:
        raise BadSubmission(f"{submissions_dir} holds no submissions")
    return subs
