"""The chapter's oracle, loaded by path: regenerate, check, and make fresh case sets."""

import importlib.util
import sys
import tempfile
from pathlib import Path

from .errors import RegistryError
from .paths import use_reference
from .registry import Chapter


def load_oracle(chapter: Chapter):
    if not chapter.oracle.is_file():
        raise RegistryError(f"chapter {chapter.chapter}: its oracle {chapter.oracle} is missing")
    use_reference()
    name = f"ol_oracle_{chapter.chapter.replace('.', '_')}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, chapter.oracle)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def write_fixtures(chapter: Chapter) -> tuple[Path, int]:
    oracle = load_oracle(chapter)
    data = oracle.dumps(oracle.build())
    chapter.golden.write_bytes(data)
    return chapter.golden, len(data)


def check_fixtures(chapter: Chapter) -> str | None:
    """None when the file equals a fresh regeneration byte for byte; else the first difference."""
    if not chapter.golden.is_file():
        return f"{chapter.golden} does not exist"
    return load_oracle(chapter).check(chapter.golden)


def fresh_golden(chapter: Chapter, seed: int, into: Path | None = None) -> Path:
    """A golden file of new cases from `seed`, with the shipped file's case design."""
    oracle = load_oracle(chapter)
    path = (into or Path(tempfile.mkdtemp(prefix="ol-fresh-"))) / f"spec_golden.fresh-{seed}.json"
    path.write_bytes(oracle.dumps(oracle.build(seed)))
    return path
