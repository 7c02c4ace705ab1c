"""Where the generic engine's own things live. A chapter's paths come from its pack (harness.registry)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / "reference"  # the course's reference: holds the package directory `tinyllm/`
CHAPTERS_DIR = REPO / "chapters"  # the chapter packs shipped with ol; OL_CHAPTERS_PATH adds more
# ol's own folders, for a copy of ol that is no git checkout (an unpacked bundle): what `ol start` never writes into
SHIPPED = ("harness", "chapters", "course", "reference", "spec", "config", "otel", "fixtures", "oracle", "tests",
           "examples", "bench", "docs", "scripts")


def own_files_under(folder: Path) -> list[str]:
    """The files of ol's own copy that writing into `folder` could replace, relative to ol's folder: the files git
    tracks there (every shipped folder when this copy is no git checkout); ["."] when `folder` holds ol's folder."""
    folder = folder.resolve()
    if REPO.is_relative_to(folder):
        return ["."]
    if not folder.is_relative_to(REPO):
        return []
    rel = folder.relative_to(REPO)
    try:
        git = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", str(rel)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        git = None
    if git is not None and git.returncode == 0:
        return [n for n in git.stdout.decode(errors="replace").split("\0") if n]
    return [str(rel)] if rel.parts[0] in SHIPPED else []

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
