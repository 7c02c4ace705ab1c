"""A chapter's golden file: regenerate it, check it byte for byte, and make fresh case sets.

Every pack's oracle module has the same interface: `build(ref, master_seed=MASTER_SEED) -> dict`,
`dumps(doc) -> bytes`, `check(path, ref) -> str | None` (None when the file is what a fresh build
writes, else where it first differs). `ref` is the judge's pristine reference (harness.reference).
"""

import tempfile
from pathlib import Path

from .errors import RegistryError
from .reference import pristine
from .registry import Chapter


def oracle_of(chapter: Chapter):
    if not chapter.modules.get("oracle"):
        raise RegistryError(f"chapter {chapter.chapter} names no oracle in its chapter.toml")
    return chapter.module("oracle")


def write_fixtures(chapter: Chapter) -> tuple[Path, int]:
    oracle = oracle_of(chapter)
    data = oracle.dumps(oracle.build(pristine()))
    chapter.golden.write_bytes(data)
    return chapter.golden, len(data)


def check_fixtures(chapter: Chapter) -> str | None:
    """None when the file equals a fresh regeneration byte for byte; else the first difference."""
    if not chapter.golden.is_file():
        return f"{chapter.golden} does not exist"
    return oracle_of(chapter).check(chapter.golden, pristine())


def fresh_golden(chapter: Chapter, seed: int, into: Path | None = None) -> Path:
    """A golden file of new cases from `seed`, with the shipped file's case design."""
    oracle = oracle_of(chapter)
    path = (into or Path(tempfile.mkdtemp(prefix="ol-fresh-"))) / f"{chapter.golden.stem}.fresh-{seed}.json"
    path.write_bytes(oracle.dumps(oracle.build(pristine(), seed)))
    return path
