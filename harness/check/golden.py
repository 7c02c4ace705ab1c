"""A chapter's golden file: regenerate it, check it byte for byte, make fresh case sets, and refuse a
damaged one before any test runs.

Every pack's oracle has `build(ref, master_seed=MASTER_SEED) -> dict`, `dumps(doc) -> bytes` and
`check(path, ref) -> str | None` (None when the file is what a fresh build writes, else where it first differs);
`ref` is the judge's pristine reference. Whoever writes a golden file writes its sha256 beside it; `verify`
compares it (a millisecond), and validates a file without one (--golden) against the chapter's schema instead.
A truncated or edited file is a harness error, never a failing grade for the code under test.
"""

import hashlib
import json
from pathlib import Path

from ..kernel.errors import OlError
from ..kernel.memo import remembered
from ..kernel.report import validator
from ..registry import Chapter
from ..subjects.reference import pristine
from ..subjects.version import version_of


class GoldenError(OlError):
    """The golden file is damaged or not what its oracle wrote (exit 3: not the submission's fault)."""


def oracle_of(chapter: Chapter):
    return chapter.module("oracle")  # a RegistryError when the pack names none


def digest_path(golden: Path) -> Path:
    return golden.with_name(golden.name + ".sha256")


def _write(golden: Path, data: bytes) -> None:
    golden.write_bytes(data)
    digest_path(golden).write_text(f"{hashlib.sha256(data).hexdigest()}  {golden.name}\n")


def write_fixtures(chapter: Chapter) -> tuple[Path, int]:
    oracle = oracle_of(chapter)
    data = oracle.dumps(oracle.build(pristine(chapter)))
    _write(chapter.golden, data)
    return chapter.golden, len(data)


def check_fixtures(chapter: Chapter) -> str | None:
    """None when the file equals a fresh regeneration byte for byte and its digest is recorded; else what differs."""
    if not chapter.golden.is_file():
        return f"{chapter.golden} does not exist"
    problem = oracle_of(chapter).check(chapter.golden, pristine(chapter))
    if problem is None and _recorded_digest(chapter.golden) != hashlib.sha256(chapter.golden.read_bytes()).hexdigest():
        problem = f"{digest_path(chapter.golden)} does not hold the file's sha256"
    return problem


def fresh_golden(chapter: Chapter, seed: int, into: Path) -> Path:
    """A golden file of new cases from `seed`, with the shipped file's case design (and its digest), built once per
    seed and harness version (harness.kernel.memo, FRESH_KEPT of them): a second check on the seed reads it back."""
    oracle = oracle_of(chapter)
    path = into / f"{chapter.golden.stem}.fresh-{seed}.json"
    ref = pristine(chapter)
    data = remembered("fresh", f"{chapter.chapter} fresh cases, seed {seed}, harness {version_of(chapter)['digest']}",
                      lambda: oracle.dumps(oracle.build(ref, seed)), kept=FRESH_KEPT)
    _write(path, data)
    for f in (path, digest_path(path)):  # the answers: the judge's alone (a uid-mode worker is another uid)
        if f.exists():
            f.chmod(0o600)
    return path


FRESH_KEPT = 24  # fresh case sets kept between checks (a file is about as large as the golden file, under 1 MB)


def _recorded_digest(golden: Path) -> str | None:
    try:
        return digest_path(golden).read_text().split()[0]
    except (OSError, IndexError):
        return None


def verify(chapter: Chapter, path: Path | str | None = None) -> Path:
    """The golden file to grade on, refused (GoldenError) when damaged; returns its path."""
    golden = Path(path) if path else chapter.golden
    remedy = (f"restore it with git (`git checkout -- {golden}`) or regenerate it with `ol fixtures {chapter.chapter}`"
              if golden == chapter.golden else "regenerate it, or grade on the chapter's own golden file")
    try:
        data = golden.read_bytes()
    except OSError as e:
        raise GoldenError(f"the golden file {golden} cannot be read ({e.strerror or e}): {remedy}") from None
    recorded = _recorded_digest(golden)
    if recorded is not None:
        if hashlib.sha256(data).hexdigest() != recorded:
            raise GoldenError(f"the golden file {golden} is not the one its oracle wrote (its sha256 differs from "
                              f"{digest_path(golden).name}): {remedy}")
        return golden
    if golden == chapter.golden and chapter.modules.get("oracle"):  # its oracle writes the digest with the file
        raise GoldenError(f"the golden file's digest {digest_path(golden)} is missing: {remedy}")
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise GoldenError(f"the golden file {golden} is not valid JSON ({e}): {remedy}") from None
    if chapter.golden_schema is not None:
        error = next(iter(validator(chapter.golden_schema).iter_errors(doc)), None)  # only without a digest
        if error is not None:
            where = "/".join(map(str, error.path)) or "(top)"
            raise GoldenError(f"the golden file {golden} breaks its schema at {where}: {error.message[:200]}: {remedy}")
    return golden
