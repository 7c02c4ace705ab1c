"""The verdict of one check as data: one TestResult per registry test, and the Report that holds them.

A Report is never changed: a fact learned later makes a new one (`Report.but`). `Report.to_json` is the only
writer of the report schema (harness/schemas/check_report.schema.json); `Report.from_json` reads one back and
validates it, where it crosses from another process (a judge's stdout, a Dask worker, the ledger). Renderers
(harness.render) spell no field the Report does not give.
"""

from dataclasses import dataclass, replace
from functools import lru_cache
import hashlib
import json
from pathlib import Path
from typing import Sequence

from .errors import OlError
from .outcomes import Outcome

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "check_report.schema.json"


@dataclass(frozen=True)
class TestResult:
    name: str
    kind: str
    outcome: Outcome
    duration_s: float
    message: str = ""
    points: float = 0.0
    max_points: float = 1.0
    pitfalls: Sequence[str] = ()  # the chapter's known pitfalls for this test (kept as a tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pitfalls", tuple(self.pitfalls))

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "outcome": self.outcome.value, "duration_s": self.duration_s,
                "message": self.message, "points": self.points, "max_points": self.max_points, "pitfalls": list(self.pitfalls)}

    @classmethod
    def from_json(cls, d: dict) -> "TestResult":
        return cls(d["name"], d["kind"], Outcome(d["outcome"]), d["duration_s"], d["message"], d.get("points", 0.0),
                   d.get("max_points", 1.0), tuple(d.get("pitfalls", ())))


@dataclass(frozen=True)
class Report:
    chapter: str
    submission: str
    ref_deps: bool
    tests: Sequence[TestResult]  # kept as a tuple
    duration_s: float = 0.0
    golden: str = ""
    fresh_seed: int | None = None  # the seed of fresh cases, when the check graded on them
    pitfall_matches: Sequence[dict] = ()  # mutants whose answers the submission's match (kept as a tuple)
    ungraded: str | None = None  # why no grade could be given (the judge failed, not the submission's answers)
    load_error: str | None = None  # why the submission could not be loaded: every test failed at once for it
    sandbox: str | None = None  # how its code ran: bwrap | uid | none (harness.sandbox.confine), in-process (trusted), None: unknown
    language: str | None = None  # python | rust (harness.languages); None: unknown (an ungraded submission)
    rejected: str | None = None  # why the upload is no submission (the layout function's reason): 0 points, every test failed

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", tuple(self.tests))
        object.__setattr__(self, "pitfall_matches", tuple(self.pitfall_matches))

    def but(self, **changes) -> "Report":
        """This report with `changes` (field=value): a new Report, this one unchanged."""
        return replace(self, **changes)

    @classmethod
    def for_ungraded(cls, chapter, name: str, ref_deps: bool, reason: str) -> "Report":
        """The report of a submission its judge could not grade: every test of `chapter` an error, with the reason."""
        tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, reason, 0.0, t.points) for t in chapter.tests]
        return cls(chapter.chapter, name, ref_deps, tests, ungraded=reason)

    @classmethod
    def for_rejected(cls, chapter, name: str, ref_deps: bool, reason: str) -> "Report":
        """The report of an entry that is no submission (the layout function's `reason`): every test failed, 0 points."""
        tests = [TestResult(t.name, t.kind, Outcome.ERROR, 0.0, f"not run: {reason}", 0.0, t.points) for t in chapter.tests]
        return cls(chapter.chapter, name, ref_deps, tests, rejected=reason)

    @property
    def passed(self) -> int:
        return sum(t.outcome.passed for t in self.tests)

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    @property
    def ok(self) -> bool:
        return self.ungraded is None and self.passed == len(self.tests)

    def to_json(self) -> dict:
        return {"chapter": self.chapter, "submission": self.submission, "ref_deps": self.ref_deps, "golden": self.golden,
                "fresh_seed": self.fresh_seed, "tests": [t.to_json() for t in self.tests],
                "summary": {"passed": self.passed, "failed": len(self.tests) - self.passed, "total": len(self.tests),
                            "score": self.score, "max_score": self.max_score, "duration_s": round(self.duration_s, 3)},
                "pitfall_matches": list(self.pitfall_matches), "ungraded": self.ungraded,
                "load_error": self.load_error, "sandbox": self.sandbox, "language": self.language, "rejected": self.rejected}

    @classmethod
    def from_json(cls, data: dict, validated: bool = False) -> "Report":
        """The report `data` holds, checked against the schema unless `validated`: these very bytes passed it before
        (harness.grading.ledger keeps the digests of the entries that did, under the schema's digest)."""
        if not validated:
            validate(data)
        return cls(data["chapter"], data["submission"], data["ref_deps"], [TestResult.from_json(t) for t in data["tests"]],
                   data["summary"].get("duration_s", 0.0), data.get("golden", ""), data.get("fresh_seed"),
                   list(data.get("pitfall_matches", [])), data.get("ungraded"), data.get("load_error"), data.get("sandbox"),
                   data.get("language"), data.get("rejected"))


@lru_cache(maxsize=None)
def validator(schema: Path):
    """The JSON Schema validator of the schema file `schema` (the report's, a golden file's), made once."""
    import jsonschema  # on first use: a check printed to the console writes no JSON (importing it costs 0.1 s)

    return jsonschema.Draft202012Validator(json.loads(schema.read_text()))


@lru_cache(maxsize=1)
def schema_digest() -> str:
    """sha256 of the report schema: what a digest of bytes once validated is valid under."""
    return hashlib.sha256(SCHEMA.read_bytes()).hexdigest()


def validate(data: dict) -> None:
    """Raise an OlError (a harness bug, exit 3) when `data` is not a valid report."""
    errors = sorted(validator(SCHEMA).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise OlError(f"the check report breaks its schema at {'/'.join(map(str, e.path)) or '(top)'}: {e.message}")
