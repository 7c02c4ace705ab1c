"""The Report: built once and never changed; what to_json writes is the schema's; from_json validates what it reads."""

import dataclasses
import json

import jsonschema
import pytest

from harness.kernel.errors import OlError
from harness.kernel.outcomes import Outcome
from harness.kernel.paths import REPO
from harness.registry import load_chapter
from harness.kernel.report import Report, TestResult as Result  # as: pytest would collect a Test* name

SCHEMA = json.loads((REPO / "harness" / "schemas" / "check_report.schema.json").read_text())
CH = load_chapter("L10.8")


def reports() -> list[Report]:
    tests = [Result(t.name, t.kind, Outcome.PASS, 0.5, "", t.points, t.points) for t in CH.tests]
    failing = [dataclasses.replace(tests[0], outcome=Outcome.FAIL, points=0.0, message="expected [4], got []",
                                   pitfalls=["s01: first occurrence (wrong draft)"]), *tests[1:]]
    return [Report(CH.chapter, "alice", False, tests, 1.5, "golden.json", sandbox="bwrap", language="python"),
            Report(CH.chapter, "bob", True, failing, 2.0, "golden.json", 7, [{"id": "s01", "pitfall": "first occurrence", "matched": 9, "shows": 10}]),
            Report.for_ungraded(CH, "carol", False, "the judge died"),
            Report.for_rejected(CH, "dave", False, "a symbolic link: spec.py")]


@pytest.mark.parametrize("rep", reports(), ids=lambda r: r.submission)
def test_what_to_json_writes_is_the_schemas_and_reads_back_equal(rep):
    data = rep.to_json()
    jsonschema.validate(data, SCHEMA)
    assert Report.from_json(json.loads(json.dumps(data))) == rep


def test_a_report_never_changes_a_later_fact_makes_a_new_one():
    rep = reports()[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.sandbox = "uid"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.tests[0].points = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError):  # the tests are a tuple: no test is added or dropped after the check
        rep.tests.append(rep.tests[0])  # type: ignore[attr-defined]
    moved = rep.but(sandbox="uid", submission="bob (uid)")
    assert (moved.sandbox, moved.submission, rep.sandbox, rep.submission) == ("uid", "bob (uid)", None, "bob")
    assert moved.tests is rep.tests


def test_from_json_refuses_a_report_that_breaks_the_schema():
    data = reports()[0].to_json()
    data["tests"][0]["outcome"] = "passed-ish"
    with pytest.raises(OlError, match="breaks its schema at tests/0/outcome"):
        Report.from_json(data)
