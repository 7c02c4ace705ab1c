"""The course's reference implementation, loaded by path (never installed), in its two parts.

    pristine(chapter)  the judge's answer key: the reference package in ol's own language, loaded under the private
                       name `ol_judge_<package>`, which no implementation under test can be; loaded once, then the
                       same object for the judge helpers, the oracles and the benchmarks (never through sys.path).
    use_reference()    makes `import <package>` in this process the reference, for the in-process implementation
                       under test `reference` and the reference's own unit tests.

With OL_REFERENCE_FROM_PATH set, the package is whatever sys.path gives (mutmut's mutated copy), while
`pristine(chapter)` stays pristine: a mutant cannot move the expected answers with it.
"""

import importlib
import os
import sys
import threading
from pathlib import Path

from ..languages import in_process
from ..kernel.paths import REFERENCE_DIR
from ..protocol.session import load_module
from ..registry import Chapter, load_chapter

FROM_PATH_ENV = "OL_REFERENCE_FROM_PATH"  # set: `import <package>` is sys.path's (mutmut's mutated copy), see above


def copy_reference(chapter, into: Path, lang: str) -> Path:
    """The chapter's reference package in `lang` copied to `into/<package>`; returns `into`."""
    return chapter.language(lang).copy_reference(into)


_load_lock = threading.RLock()  # one load_package at a time in this process: see there


def load_package(package_dir: Path, alias: str):
    """Import the package at `package_dir` as `alias` (its imports are relative), under _load_lock: another thread
    would find a half-made package in sys.modules while it executes."""
    with _load_lock:
        if alias in sys.modules:
            return sys.modules[alias]
        return load_module(package_dir / "__init__.py", alias, package=True)


class Reference:
    """One loaded copy of the reference package: `module("infer.spec")` is its spec module."""

    def __init__(self, package_dir: Path, alias: str) -> None:
        self.package_dir, self.alias = Path(package_dir), alias
        self.package = load_package(self.package_dir, alias)

    def module(self, name: str):
        return importlib.import_module(f"{self.alias}.{name}")


_pristine: dict[str, Reference] = {}  # chapter name -> its pristine reference, once per process
_pristine_lock = threading.Lock()


def pristine(chapter: "Chapter | str") -> Reference:
    """The chapter's pristine reference in ol's own language (loaded on first use, then shared; a name loads the
    chapter, on the first call only); its `alias` is the module name the judge imports it under."""
    name = chapter if isinstance(chapter, str) else chapter.chapter
    with _pristine_lock:
        ref = _pristine.get(name)
        if ref is None:
            spec = (load_chapter(chapter) if isinstance(chapter, str) else chapter).language(in_process().name)
            ref = _pristine[name] = Reference(spec.reference / spec.package, f"ol_judge_{spec.package}")
    return ref


def use_reference(reference_dir: Path = REFERENCE_DIR) -> None:
    """Make `import <package>` in this process the reference in `reference_dir`, unless FROM_PATH_ENV says sys.path
    holds the one to use. Student code never runs in the judge's process: this shadows no submission."""
    if os.environ.get(FROM_PATH_ENV) and Path(reference_dir) == REFERENCE_DIR:
        return
    if str(reference_dir) not in sys.path:
        sys.path.insert(0, str(reference_dir))
