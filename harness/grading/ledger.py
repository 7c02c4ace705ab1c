"""The results directory is the ledger of a class's grades: `ol grade` resumes from it.

Each submission's report is `<results>/<name>.json` (`entry_file`: a name too long, not UTF-8 or beginning with
`~` is `~<its digest>.json`), written atomically as it is graded, with its key: the digest of the files graded,
the seed, --ref-deps and the harness version's digest. A later run skips every entry with the run's key and a
grade (an ungraded one is graded again: its cause may be gone), unless told to regrade. `summary.json` records
the run's seed from its start, so the same command resumes on the same cases.

grades.csv and summary.json are rewritten atomically after every grade, from the ledger's entries (rows by name).
An entry is checked against the report's schema when read, once for its bytes: `.validated.json` keeps the
digests of those that passed (Entries). Nothing here prints.

What `.validated.json` saves (issue 40: a record stays only with a measured saving of a second or more, in the
user's layout): every later read of the ledger validates only entries it has not seen. `bench/report_build.py --records`
(`ol report CHAPTER grades-results` over a ledger of 600 entries as `ol grade` writes it, run again): 3.9 s
with it, 8.9 s without it, fastest of 3 (2026-12-07, this project's 2-core machine, shared and loaded): 5 s, about
8 ms an entry, which a resumed `ol grade` also saves as it reads each entry to skip it.
"""

from __future__ import annotations

from functools import lru_cache
from dataclasses import asdict, dataclass
import hashlib
import json
import os
from pathlib import Path

from ..kernel.errors import OlError, UsageError, interrupts_deferred
from ..kernel.paths import read_json, write_atomic
from ..render.csv import grades_csv
from ..kernel.report import Report, schema_digest

SUMMARY = "summary.json"


@dataclass(frozen=True)
class ClassSummary:
    """The class's counts: `graded` (a verdict on the code), `rejected` (no submission: 0), `ungraded` (no verdict);
    `all_passed` of the graded; each test's passes; each pitfall's count of best matches, the most matched first."""
    submissions: int
    graded: int
    rejected: int
    ungraded: int
    all_passed: int
    passed_by_test: dict[str, int]
    pitfalls_most_matched: dict[str, int]


def summarize(chapter, reports: list[Report]) -> ClassSummary:
    """The class's counts (ClassSummary) over its reports."""
    graded = [r for r in reports if r.ungraded is None and r.rejected is None]
    passed_by_test = {t.name: 0 for t in chapter.tests}
    pitfalls: dict[str, int] = {}
    for r in graded:
        for t in r.tests:
            passed_by_test[t.name] += t.outcome.passed
        for m in r.pitfall_matches[:1]:
            pitfalls[f"{m['id']}: {m['pitfall']}"] = pitfalls.get(f"{m['id']}: {m['pitfall']}", 0) + 1
    rejected = sum(r.rejected is not None and r.ungraded is None for r in reports)
    return ClassSummary(len(reports), len(graded), rejected, len(reports) - len(graded) - rejected,
                        sum(r.ok for r in graded), passed_by_test, dict(sorted(pitfalls.items(), key=lambda kv: -kv[1])))


def default_results_dir(out_csv: Path) -> Path:
    """Where the ledger goes when no --results-dir is named: beside the CSV (grades.csv -> grades-results/)."""
    return out_csv.with_name(f"{out_csv.stem}-results")


NAME_BYTES = 200  # an entry's name up to this long is its file's name (a file name holds 255 bytes)


def entry_file(results_dir: Path, name: str) -> Path:
    """Where `name`'s entry is: `<name>.json`, or `~<digest of the name>.json` for a name over NAME_BYTES, one that
    is not UTF-8, or one beginning with `~` (so no two names share a file); the entry holds the name itself."""
    raw = os.fsencode(name)
    plain = len(raw) <= NAME_BYTES and not name.startswith("~") and raw.decode("utf-8", "replace") == name
    return results_dir / (f"{name}.json" if plain else f"~{hashlib.sha256(raw).hexdigest()[:32]}.json")


def recorded_seed(results_dir: Path) -> int | None:
    """The fresh-case seed of the ledger's last run, None when it has none (or graded on the shipped cases)."""
    data = read_json(results_dir / SUMMARY)
    seed = data.get("seed") if isinstance(data, dict) and data.get("fresh") else None
    return seed if isinstance(seed, int) else None


def read_entry(results_dir: Path, name: str) -> tuple[Report, float, dict] | None:
    """(report, wall_s, key) of `name`'s entry, None when there is none or it is unreadable (it is graded again);
    validated against the report's schema (Entries.read trusts the bytes VALIDATED records)."""
    return Entries(results_dir, trust=False).read(name)


VALIDATED = ".validated.json"  # the sha256 of each entry's bytes that passed the report's schema, under the schema's own
VALIDATED_FORMAT = 1


class Entries:
    """The ledger's entries as read, each entry's bytes validated against the report's schema once: VALIDATED keeps
    the sha256 of the bytes that passed (`save`). It is trusted only when it parses, names this schema's digest and
    its check (a sha256 over the rest) matches; else every entry is validated, and `note` says why."""

    def __init__(self, results_dir: Path, trust: bool = True) -> None:
        self.results_dir = results_dir
        self.trusted, self.note, self._raw = _read_validated(results_dir) if trust else (frozenset(), None, None)
        self.valid: set[str] = set()  # the sha256 of every entry read that passed (now or before)

    def read(self, name: str) -> tuple[Report, float, dict] | None:
        try:
            raw = entry_file(self.results_dir, name).read_bytes()
        except OSError:
            return None
        sha = hashlib.sha256(raw).hexdigest()
        entry = _parse_entry(raw, sha in self.trusted)
        if entry is None or entry[0].submission != name:  # another name's entry: not this one's
            return None
        self.valid.add(sha)
        report, wall, key = entry
        return report, wall, dict(key) if isinstance(key, dict) else key  # the caller's to keep: the entry is shared

    def save(self) -> None:
        """VALIDATED, from the entries read here that passed; written only when it changed."""
        entries = sorted(self.valid)
        text = json.dumps({"format": VALIDATED_FORMAT, "schema": schema_digest(), "entries": entries,
                           "check": _check(schema_digest(), entries)}) + "\n"
        if text != self._raw:
            write_atomic(self.results_dir / VALIDATED, text)
            self._raw = text


def _check(schema: str, entries: list[str]) -> str:
    return hashlib.sha256(json.dumps([VALIDATED_FORMAT, schema, entries]).encode()).hexdigest()


def _read_validated(results_dir: Path) -> tuple[frozenset, str | None, str | None]:
    """(the digests VALIDATED vouches for, why it was not trusted when it was corrupt or edited, its text)."""
    try:
        raw = (results_dir / VALIDATED).read_text(encoding="utf-8")
    except FileNotFoundError:
        return frozenset(), None, None
    except (OSError, ValueError) as e:
        return frozenset(), f"{VALIDATED} cannot be read ({type(e).__name__}): every entry validated again", None
    try:
        data = json.loads(raw)
        schema, entries = data["schema"], data["entries"]
        if data.get("format") != VALIDATED_FORMAT or not isinstance(entries, list) or data.get("check") != _check(schema, entries):
            raise ValueError("its check does not match what it lists")
    except (ValueError, TypeError, KeyError) as e:
        return frozenset(), f"{VALIDATED} is corrupt or was edited ({e}): every entry validated again", raw
    if schema != schema_digest():  # another schema: its digests vouch for nothing now (no fault: said nowhere)
        return frozenset(), None, raw
    return frozenset(e for e in entries if isinstance(e, str)), None, raw


@lru_cache(maxsize=4096)
def _parse_entry(raw: bytes, validated: bool) -> tuple[Report, float, dict] | None:
    """An entry's bytes parsed (and validated against the report's schema unless `validated`) once a process: a resumed
    `ol grade` reads each entry to skip it, then again for the class report (the Report is frozen: one serves both)."""
    try:
        data = json.loads(raw)
        key = data.pop("key")
        wall = float(data.pop("wall_s"))
        for extra in ("seed", "graded_on"):
            data.pop(extra, None)
        return Report.from_json(data, validated=validated), wall, key
    except (ValueError, KeyError, TypeError, AttributeError, OlError):
        return None


class Ledger:
    """The class's grades: the entries read back from the results directory and those graded by this run.
    Not shared across threads: only the caller's thread (harness.grading.grade's done(), in finishing order) uses it."""

    def __init__(self, chapter, names: list[str], out_csv: Path, results_dir: Path, seed: int | None, ref_deps: bool,
                 version: dict, sandbox: str | None, roster: dict | None = None) -> None:
        if SUMMARY.removesuffix(".json") in names:
            raise UsageError(f"a submission named {SUMMARY.removesuffix('.json')!r} would overwrite the ledger's {SUMMARY}: "
                             "rename it")
        self.chapter, self.names, self.out_csv, self.results_dir = chapter, names, out_csv, results_dir
        self.version, self.seed, self.ref_deps = version, seed, ref_deps
        self.roster = roster  # harness.grading.roster.match's result, or None: no --roster
        self.entries: dict[str, tuple[Report, float, dict]] = {}  # name -> (report, wall, key): what is on disk
        self.reader = Entries(results_dir)  # reads each entry, validating only bytes not validated before
        self.skipped: list[str] = []  # graded before, with this run's key: not graded again
        self.settings = {"chapter": chapter.chapter, "seed": seed, "fresh": seed is not None, "ref_deps": ref_deps,
                         "sandbox": sandbox, "harness": version}
        self._write_summary()  # the seed is recorded before anyone is graded: an interrupted run resumes on it

    def key(self, digest: str) -> dict:
        return {"content": digest, "seed": self.seed, "ref_deps": self.ref_deps, "harness": self.version["digest"]}

    def graded(self, name: str, digest: str, unconfined_ok: bool) -> bool:
        """True (and the entry kept for the CSV) when `name` was graded before with this run's key."""
        entry = self.reader.read(name)
        if entry is None:
            return False
        report, _, key = entry
        confined = report.sandbox in ("bwrap", "uid")
        if key != self.key(digest) or report.ungraded is not None or not (confined or unconfined_ok):
            return False
        self.entries[name] = entry
        self.skipped.append(name)
        return True

    def _keep(self, report: Report, wall: float, key: dict, where: str) -> None:
        """`report`'s entry, written atomically. The Report was validated where it crossed from its judge: the bytes
        written from it need no second validation when this run's class report reads them back."""
        data = {**report.to_json(), "seed": self.seed, "wall_s": wall, "key": key, "graded_on": where}
        text = json.dumps(data, indent=2) + "\n"
        with interrupts_deferred():
            write_atomic(entry_file(self.results_dir, report.submission), text)
            self.reader.valid.add(hashlib.sha256(text.encode()).hexdigest())
            self.entries[report.submission] = (report, wall, key)

    def record(self, report: Report, wall: float, digest: str, where: str) -> None:
        """One submission graded: its entry written atomically, then the CSV and the summary."""
        self._keep(report, round(wall, 2), self.key(digest), where)
        self.write()

    def fill(self, reason: str) -> None:
        """Every entry of the class with no row yet gets an ungraded one with `reason` (the run stopped before it was
        graded: its row says so, and a rerun grades it), then the CSV and the summary: the class counts whole."""
        for name in self.names:
            if name not in self.entries:
                self._keep(Report.for_ungraded(self.chapter, name, self.ref_deps, reason), 0.0, self.key(""), "client")
        self.write()

    @property
    def result(self) -> dict:
        """The class's grades as data (what the CSV, summary.json and the console show)."""
        names = [n for n in sorted(self.names) if n in self.entries]
        reports = [self.entries[n][0] for n in names]
        modes = sorted({r.sandbox for r in reports if r.sandbox})
        return {**self.settings, "sandbox": ", ".join(modes) or self.settings["sandbox"],
                "tests": [t.name for t in self.chapter.tests], "reports": reports,
                "wall_s": [self.entries[n][1] for n in names], "summary": summarize(self.chapter, reports),
                "skipped": list(self.skipped), "missing": [n for n in sorted(self.names) if n not in self.entries],
                "roster": self.roster, "notes": [self.reader.note] if self.reader.note else []}

    def write(self) -> None:
        """grades.csv and summary.json from the ledger's entries for the class."""
        result = self.result
        write_atomic(self.out_csv, grades_csv(result))
        self.reader.save()
        self._write_summary(result)

    def _write_summary(self, result: dict | None = None) -> None:
        data = dict(self.settings)
        if result is not None:
            data |= {"sandbox": result["sandbox"], "summary": asdict(result["summary"]), "missing": result["missing"]}
        if self.roster is not None:
            data["roster"] = self.roster
        write_atomic(self.results_dir / SUMMARY, json.dumps(data, indent=2) + "\n")
