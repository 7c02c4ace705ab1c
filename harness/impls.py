"""Open the implementation under test: `reference`, `mutant:sNN`, or a submission directory.

The reference and mutants are trusted and run in-process (a mutant is the reference copied and
patched, loaded under a name of its own). A submission always runs in the worker subprocess.
"""

import importlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from .adapter import Impl, InProcess
from .errors import BadSubmission, RegistryError
from .paths import REFERENCE_DIR, load_package, use_reference
from .registry import Chapter


def materialize_mutant(chapter: Chapter, mid: str, into: Path) -> Path:
    """Copy the reference to `into/tinyllm` and apply the mutant's patch; returns `into`."""
    m = chapter.mutant(mid)
    if not m.patch.is_file():
        raise RegistryError(f"mutant {mid}: its patch {m.patch} is missing")
    shutil.copytree(REFERENCE_DIR / "tinyllm", into / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-s", "-d", str(into), "-i", str(m.patch)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RegistryError(f"mutant {mid}: {m.patch.name} does not apply to the reference:\n{r.stdout}{r.stderr}")
    return into


def hybrid_with_reference_deps(chapter: Chapter, submission: Path, into: Path) -> Path:
    """The reference package with the submission's chapter file in place of the reference's (--ref-deps)."""
    own = submission / chapter.student_file
    if not own.is_file():
        raise BadSubmission(f"--ref-deps keeps your {chapter.student_file}, but {own} does not exist")
    shutil.copytree(REFERENCE_DIR / "tinyllm", into / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(own, into / chapter.student_file)
    return into


def check_submission_dir(chapter: Chapter, path: Path) -> None:
    if not path.exists():
        raise BadSubmission(f"no submission at {path}: pass --submission DIR (a folder holding tinyllm/), "
                            f"or run `ol start {chapter.chapter}` to create ./{chapter.default_submission}")
    if not (path / "tinyllm").is_dir():
        raise BadSubmission(f"{path} holds no tinyllm/ package: a submission is a folder with tinyllm/{chapter.student_file.split('/', 1)[1]} inside")


def open_impl(chapter: Chapter, submission: str, ref_deps: bool = False, transport: str = "auto") -> Impl:
    """An Impl for `submission`. transport "auto" runs trusted code in-process and submissions in the worker;
    "worker" sends the reference or a mutant through the worker too (as a submission would go)."""
    from .transport import WorkerTransport

    scratch = Path(tempfile.mkdtemp(prefix="ol-impl-"))
    if submission == "reference":
        if transport == "worker":
            shutil.copytree(REFERENCE_DIR / "tinyllm", scratch / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
            return Impl(WorkerTransport(scratch), "reference (worker)")
        use_reference()
        importlib.import_module("tinyllm")
        return Impl(InProcess("tinyllm"), "reference")
    if submission.startswith("mutant:"):
        mid = submission.split(":", 1)[1]
        materialize_mutant(chapter, mid, scratch)
        if transport == "worker":
            return Impl(WorkerTransport(scratch), f"mutant {mid} (worker)")
        alias = f"ol_mutant_{mid}"
        load_package(scratch / "tinyllm", alias)
        return Impl(InProcess(alias), f"mutant {mid}")
    path = Path(submission).expanduser().resolve()
    check_submission_dir(chapter, path)
    if ref_deps:
        return Impl(WorkerTransport(hybrid_with_reference_deps(chapter, path, scratch)), f"{path} (--ref-deps)")
    return Impl(WorkerTransport(path), str(path))
