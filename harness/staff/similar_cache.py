"""A class's similarity (harness.staff.similar), kept in the results directory and reused while nothing it depends on
changed: a resumed `ol grade` whose submissions are all graded would otherwise compare the same code again.

What it saves (issue 40: a record stays only with a measured saving of a second or more, in the user's layout): the
comparison itself, at every resumed `ol grade`. `ol similar CHAPTER DIR` over a class of 100 (copies of
examples/submissions/correct, each with a comment of its own: every pair flagged, the worst case) took 274 s
(2026-12-07, this project's 2-core machine, shared and loaded). `bench/grade_rate.py --resume-only` (a class of 100
whose ledger holds each graded): the run that compares and writes the pages 81.5 s, the resumed run 1.5 s.

The result is `.similarity.json` (as `ol similar --results-dir` writes it); its key, in `.similarity.key`, is a
sha256 over everything the result depends on:
  - each compared entry's name and content digest (harness.grading.parcel.digest), made from the files as they
    are when asked, never taken from the ledger;
  - the code every student got (harness.staff.similar.boilerplate);
  - the detector's settings and versions (copydetect's, pygments'), and the harness version's digest;
with the sha256 of the result's bytes. A result is reused only when both match; a key that does not parse, or a
result edited, cut short or gone, is computed again, with a note. When an entry's digest cannot be made there is
no key, and none is kept when the class's key changed during the comparison. A wrong similarity is a wrong
conclusion of the staff's: when in doubt, compare. Library code: returns data and notes, prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
import hashlib
import json
from pathlib import Path

from ..grading.class_report import SIMILARITY
from ..kernel.paths import write_atomic
from ..subjects.upload import submissions_in
from ..grading.parcel import digest
from ..subjects.version import package_version, version_of
from . import similar as sim

KEY = ".similarity.key"  # beside SIMILARITY: the key it was computed under, and its bytes' sha256
FORMAT = 2  # of the key file and of what the key covers (2: every source file a submission adds): a change here recomputes every kept result


@dataclass(frozen=True)
class Lookup:
    found: dict | None  # the kept result, when it is this class's; None: compare
    key: str | None  # the class's key now (None: it has none, the result is not kept)
    note: str | None  # why a kept result was not trusted (a corrupt or edited file), for the staff to read


def class_key(chapter, submissions_dir: Path, threshold: float, only: set[str] | None = None) -> str | None:
    """The sha256 of what the similarity of the entries of `submissions_dir` (`only`: these alone) depends on; None
    when an entry's content digest cannot be made."""
    entries = []
    for path in submissions_in(chapter, submissions_dir):
        if only is not None and path.name not in only:
            continue
        try:
            entries.append([path.name, digest(path)])
        except Exception:  # noqa: BLE001 -- an entry unreadable however (a ParcelError, anything): no key, compare
            return None
    given = {lang: hashlib.sha256(json.dumps(sim.boilerplate(chapter, lang)).encode()).hexdigest()
             for lang in sorted(chapter.languages)}
    material = {"format": FORMAT, "harness": version_of(chapter)["digest"], "detector": sim.detector_name(),
                "pygments": package_version("pygments"), "threshold": threshold, "noise": sim.NOISE, "file_cap": sim.FILE_CAP,
                "max_pairs": sim.MAX_PAIRS, "given": given, "entries": entries}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def lookup(chapter, submissions_dir: Path, results_dir: Path, threshold: float = sim.THRESHOLD,
           only: set[str] | None = None) -> Lookup:
    """The kept result when it was computed under the class's key now, else None (and why, when a file was corrupt)."""
    key = class_key(chapter, submissions_dir, threshold, only)
    kept, note = _read(results_dir)
    if kept is None or key is None or kept[0] != key:
        return Lookup(None, key, note)
    return Lookup(kept[1], key, None)


def _read(results_dir: Path) -> tuple[tuple[str, dict] | None, str | None]:
    """((key, result), None) when the key file parses and the result is the bytes recorded with it; else (None, why),
    why None when there is no key file."""
    try:
        raw_key = (results_dir / KEY).read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{KEY} cannot be read ({e.strerror or e})"
    try:
        meta = json.loads(raw_key)
        key, want = meta["key"], meta["result_sha256"]
        if meta.get("format") != FORMAT or not isinstance(key, str) or not isinstance(want, str):
            raise ValueError("not this version's key file")
    except (ValueError, TypeError, KeyError) as e:
        return None, f"{KEY} is corrupt ({type(e).__name__}: {e})"
    try:
        raw = (results_dir / SIMILARITY).read_bytes()
    except OSError as e:
        return None, f"{SIMILARITY} is gone or unreadable ({e.strerror or e}) though {KEY} records one"
    if hashlib.sha256(raw).hexdigest() != want:
        return None, f"{SIMILARITY} is not the file ol wrote (edited or cut short since)"
    try:
        found = json.loads(raw)
    except ValueError as e:
        return None, f"{SIMILARITY} is corrupt ({e})"
    if not isinstance(found, dict) or not isinstance(found.get("pairs"), list):
        return None, f"{SIMILARITY} holds no similarity result"
    return (key, found), None


def drop(results_dir: Path) -> None:
    """No result and no key (a previous run's would describe other code); the key first, so no key outlives its result."""
    (results_dir / KEY).unlink(missing_ok=True)
    (results_dir / SIMILARITY).unlink(missing_ok=True)


def compute(chapter, submissions_dir: Path, results_dir: Path, threshold: float = sim.THRESHOLD,
            only: set[str] | None = None, key: str | None = None) -> dict:
    """The similarity compared afresh and written into `results_dir`, with its key when the class had one before
    the comparison (`key`, else made here) and has the same after; returns the result."""
    drop(results_dir)  # a comparison that fails leaves none: the report then has no such section
    key = key or class_key(chapter, submissions_dir, threshold, only)
    found = sim.similar(chapter, submissions_dir, threshold, only)
    text = json.dumps(found, indent=1) + "\n"
    results_dir.mkdir(parents=True, exist_ok=True)  # `ol similar --results-dir D`: D made when it is new
    write_atomic(results_dir / SIMILARITY, text)
    if key is not None and class_key(chapter, submissions_dir, threshold, only) == key:
        meta = {"format": FORMAT, "key": key, "result_sha256": hashlib.sha256(text.encode()).hexdigest()}
        write_atomic(results_dir / KEY, json.dumps(meta, indent=1) + "\n")
    return found
