"""The languages ol grades, as the engine sees them: how a submission's worker is started.

A language is a worker command (argv given the pipe pair) and, for compiled languages, a build step
that turns a submission into something that command runs. What a student writes in a language for a
chapter (the files, the package, the uploads) is the chapter's data (`[language.<name>]` in its
chapter.toml); adding a language adds an entry here and a table in each pack that grades it.
"""

from dataclasses import dataclass
from pathlib import Path
import sys
from typing import Callable

from .errors import UsageError


@dataclass(frozen=True)
class Language:
    name: str
    worker: Callable[["object", Path], Callable[[int, int], list[str]]]  # (chapter, package dir) -> argv of fds
    # (chapter, submission's folder, an empty scratch folder) -> the folder the worker command is given
    # (what the build made there); None: the source runs as it is, as Python's does
    build: Callable[["object", Path, Path], Path] | None = None

    def prepare(self, chapter, package_dir: Path, scratch: Path) -> Path:
        return Path(package_dir) if self.build is None else self.build(chapter, Path(package_dir), scratch)


def _python_worker(chapter, package_dir: Path) -> Callable[[int, int], list[str]]:
    lang = chapter.language("python")

    def argv(fd_in: int, fd_out: int) -> list[str]:
        own = [a for f in lang.student_files for a in ("--own", f)]
        return [sys.executable, "-m", "harness.worker", "--ops", str(chapter.ops_file), "--package", lang.package,
                "--package-dir", str(Path(package_dir).resolve()), *own, "--in", str(fd_in), "--out", str(fd_out)]
    return argv


LANGUAGES = {"python": Language("python", _python_worker)}  # Python runs from source: no build step


def language(name: str) -> Language:
    if name not in LANGUAGES:
        raise UsageError(f"ol does not grade {name!r}; it grades {', '.join(LANGUAGES)}")
    return LANGUAGES[name]
