"""Where the generic engine's own things live. A chapter's paths come from its pack (harness.registry)."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO / "reference"  # the course's reference: holds the package directory `tinyllm/`
CHAPTERS_DIR = REPO / "chapters"  # the chapter packs shipped with ol; OL_CHAPTERS_PATH adds more

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
