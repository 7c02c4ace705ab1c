"""Open the implementation under test: `reference`, `mutant:sNN`, or a submission directory.

The reference and mutants are trusted and run in-process (a mutant is the reference copied and
patched, loaded under a name of its own, once per process). A submission always runs in the worker
subprocess. Every scratch copy is removed: a worker's when its Impl closes, an in-process mutant's
as soon as all its modules are imported.
"""

import importlib
import pkgutil
import sys
import shutil
import subprocess
import tempfile
from pathlib import Path

from .adapter import Impl, InProcess
from .errors import BadSubmission, RegistryError
from .paths import REFERENCE_DIR, load_package, use_reference
from .registry import Chapter


def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="ol-impl-"))


def copy_reference(into: Path) -> Path:
    """The reference package copied to `into/tinyllm`; returns `into`."""
    shutil.copytree(REFERENCE_DIR / "tinyllm", into / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def materialize_mutant(chapter: Chapter, mid: str, into: Path) -> Path:
    """Copy the reference to `into/tinyllm` and apply the mutant's patch; returns `into`."""
    m = chapter.mutant(mid)
    if not m.patch.is_file():
        raise RegistryError(f"mutant {mid}: its patch {m.patch} is missing")
    copy_reference(into)
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
    copy_reference(into)
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

    if submission == "reference":
        if transport == "worker":
            return Impl(WorkerTransport(copy_reference(_scratch())), "reference (worker)", scratch=True)
        use_reference()
        importlib.import_module("tinyllm")
        return Impl(InProcess("tinyllm"), "reference")
    if submission.startswith("mutant:"):
        mid = submission.split(":", 1)[1]
        if transport == "worker":
            return Impl(WorkerTransport(materialize_mutant(chapter, mid, _scratch())), f"mutant {mid} (worker)", scratch=True)
        alias = f"ol_mutant_{mid}"
        if alias not in sys.modules:  # one patched copy per mutant per process, all imported, then removed
            into = materialize_mutant(chapter, mid, _scratch())
            try:
                package = load_package(into / "tinyllm", alias)
                for m in pkgutil.walk_packages(package.__path__, f"{alias}."):
                    importlib.import_module(m.name)
            finally:
                shutil.rmtree(into, ignore_errors=True)
        return Impl(InProcess(alias), f"mutant {mid}")
    path = Path(submission).expanduser().resolve()
    check_submission_dir(chapter, path)
    if ref_deps:
        return Impl(WorkerTransport(hybrid_with_reference_deps(chapter, path, _scratch())), f"{path} (--ref-deps)", scratch=True)
    return Impl(WorkerTransport(path), str(path))
