"""Where the generic engine's own things live, and the one way ol writes a file whole (`write_atomic`). A chapter's
paths come from its pack (harness.registry)."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / "reference"  # the course's reference: holds the package directory `tinyllm/`
CHAPTERS_DIR = REPO / "chapters"  # the chapter packs shipped with ol; OL_CHAPTERS_PATH adds more
# ol's own folders, for a copy of ol that is no git checkout (an unpacked bundle): what `ol start` never writes into
SHIPPED = ("harness", "chapters", "course", "reference", "spec", "config", "otel", "fixtures", "oracle", "tests",
           "examples", "bench", "docs", "scripts")


def shown(path: Path) -> str:
    """A path as the user reads it: relative to ol's folder when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def own_files_under(folder: Path) -> list[str]:
    """The files of ol's own copy that writing into `folder` could replace, relative to ol's folder: the files git
    tracks there (every shipped folder when this copy is no git checkout); ["."] when `folder` holds ol's folder."""
    folder = folder.resolve()
    if REPO.is_relative_to(folder):
        return ["."]
    if not folder.is_relative_to(REPO):
        return []
    rel = folder.relative_to(REPO)
    listed = git_files("--", str(rel))
    if listed is not None:
        return listed
    return [str(rel)] if rel.parts[0] in SHIPPED else []


def git_files(*args: str) -> list[str] | None:
    """What `git ls-files ARGS` lists in ol's folder (paths relative to it; the tracked files, with no ARGS); None
    when git cannot say (no git, a copy of ol that is no checkout, a failure)."""
    try:
        git = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", *args], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [os.fsdecode(n) for n in git.stdout.split(b"\0") if n] if git.returncode == 0 else None

# How every Python process ol starts runs a module of ol (the zygote, the worker, the autograder's steps): -P puts
# no folder of the caller's on sys.path (`-m` would put the current folder first, ahead of the standard library), -s
# no user site-packages; the caller sets PYTHONPATH to ol's own folder alone (./ol does the same).
ISOLATED = ("-P", "-s")


def isolated_argv(module: str, *args: str) -> list[str]:
    """`<this interpreter> -P -s -m MODULE ARGS`: MODULE found from PYTHONPATH and the environment alone."""
    return [sys.executable, *ISOLATED, "-m", module, *args]


def own_import_path() -> None:
    """Drop from this process's sys.path what names the current folder ('' or a relative entry): a process ol did
    not start (a Dask worker a staff member launched) may hold it, and a folder it works in is not ol's."""
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]


def read_json(path: Path):
    """The JSON value in the file `path`; None when it cannot be read or parsed."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_atomic(path: Path, data: str | bytes) -> None:
    """`path` replaced whole by `data` (text as UTF-8): written aside in its folder (`.ol-writing-*`, a name of its
    own) and renamed, so a reader sees the old file or the new one. The file is 0600 (grades, reports and fresh
    cases are staff's or hold answers); a failed write removes the temporary file and raises."""
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".ol-writing-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
