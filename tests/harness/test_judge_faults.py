"""A fault of the grader is `ungraded`, never the student's `error`: a fault injected into the judge at each layer
(a chapter test's own helper, the golden case reader, the client's adapter, the pytest plugin, the golden file's
check, the report writer, the grading run's judge) gives the run ungraded with the fault named (exit 3), and a
class's row ungraded with it while the others are graded; an exception the submission raises stays `error`.

The implementation's failures reach a test only as a SubmissionFailure (harness.transport), so anything else a test
ends with was raised by the judge's own code (harness.check.pytest_plugin.judge_fault)."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.check.runner import UNGRADED_TEST, CheckOptions, run_check
from harness.grading import grade as grading, judge
from harness.kernel.outcomes import Outcome
from harness.registry import load_chapter
from harness.staff import gradescope
from harness.transport.impl import Impl

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "submissions"
SPEC = Path("tinyllm", "infer", "spec.py")  # a sample's chapter file
CH = load_chapter("L10.8")
TWO = ["hand_example_prompt_lookup", "prompt_lookup_matches_python_l8_6"]  # the second asks the golden cases


def injected(*_args, **_kwargs):
    raise RuntimeError("injected fault: a judge bug")


def assert_ungraded(rep, test: str) -> None:
    assert rep.ungraded is not None and "RuntimeError: injected fault: a judge bug" in rep.ungraded, rep.ungraded
    assert rep.ungraded.startswith("the grader failed, not your code: " + test), rep.ungraded
    row = next(t for t in rep.tests if t.name == test)
    assert row.outcome is Outcome.ERROR and row.message.startswith(UNGRADED_TEST), row.message
    assert not rep.ok


@pytest.mark.parametrize("layer, target, test", [
    ("a chapter test's own helper", "chapters.L10_8.judge.properties.prompt_lookup", "hand_example_prompt_lookup"),  # its refusals are that test's row
    ("the golden case reader", "chapters.L10_8.cases.ask.recorded", "prompt_lookup_matches_python_l8_6"),
    ("the client's adapter (Impl)", "harness.transport.impl.Impl.conform", "hand_example_prompt_lookup"),
])
def test_a_fault_in_the_judge_during_a_test_makes_the_run_ungraded_naming_it(monkeypatch, layer, target, test):
    real = Impl.conform

    def conform_failing_after_the_load(self, op, args, value):  # the load is the judge's start, before any test
        return real(self, op, args, value) if op == "load" else injected()

    monkeypatch.setattr(target, conform_failing_after_the_load if target.endswith("Impl.conform") else injected)
    rep = run_check(CH, "reference", CheckOptions(only=TWO))
    assert_ungraded(rep, test)


def test_a_library_failing_inside_a_test_is_the_graders_fault(monkeypatch):
    """An exception of a library the judge calls (here numpy's, raised by the judge's helper) is the grader's."""
    import numpy

    def broken(*_a, **_k):
        raise numpy.linalg.LinAlgError("injected fault: the library failed")

    monkeypatch.setattr("chapters.L10_8.judge.properties.prompt_lookup", broken)
    rep = run_check(CH, "reference", CheckOptions(only=TWO))
    assert rep.ungraded is not None and "LinAlgError: injected fault: the library failed" in rep.ungraded, rep.ungraded


def test_a_fault_in_the_plugins_fixtures_stops_the_check_as_the_graders_error(monkeypatch):
    """The plugin's fixtures set a test up (the chapter, the reference): their fault is no test's outcome but the
    check's, an OlError naming it (ol check exits 3; a judge's row says it)."""
    monkeypatch.setattr("harness.check.pytest_plugin.pristine", injected)
    from harness.kernel.errors import OlError

    with pytest.raises(OlError, match="could not set up the chapter's tests: RuntimeError: injected fault: a judge bug"):
        run_check(CH, "reference", CheckOptions(only=TWO))


def ol(patch: str, *argv: str) -> subprocess.CompletedProcess:
    """`ol ARGV` in a process of its own whose harness has `patch` (Python) applied first."""
    code = f"{patch}\nfrom harness.cli import main\nmain(args={list(argv)!r}, prog_name='ol')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "OL_SERVER": "0"})


INJECT = "def injected(*a, **k):\n    raise RuntimeError('injected fault: a judge bug')\n"


@pytest.mark.slow(s=4)
def test_ol_check_exits_3_with_an_ungraded_report_naming_the_fault(tmp_path):
    r = ol(INJECT + "import chapters.L10_8.judge.properties as p\np.prompt_lookup = injected",
           "check", "L10.8", "--submission", "reference", "-k", "prompt_lookup", "--json", str(tmp_path / "r.json"),
           "--gradescope", str(tmp_path / "gs.json"))
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "ungraded" in r.stdout and "injected fault: a judge bug" in r.stdout, r.stdout[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert "RuntimeError: injected fault: a judge bug" in report["ungraded"], report["ungraded"]
    gs = json.loads((tmp_path / "gs.json").read_text())
    assert gs["extra_data"]["ol"] == "ungraded" and "injected fault" in gs["extra_data"]["fault"], gs["extra_data"]
    # the Gradescope bundle's last step: no results.json at all (no score, never a 0), the fault named for staff
    source = tmp_path / "source"
    source.mkdir()
    (source / gradescope.META_FILE).write_text(json.dumps(
        {"chapter": "L10.8", "upload": "spec.py", "tests": [{"name": t.name, "max_score": t.points} for t in CH.tests]}))
    for code in (3, 1):  # exit 3 as the check gives; a report saying ungraded is never uploaded, whatever the exit
        data, what = gradescope.results_for(source, code, tmp_path / "gs.json", tmp_path)
        assert data is None and what.startswith("ungraded"), (code, what)
    assert "RuntimeError: injected fault: a judge bug" in gradescope.results_for(source, 3, tmp_path / "gs.json", tmp_path)[1]


@pytest.mark.slow(s=4)
@pytest.mark.parametrize("layer, patch", [
    ("the golden file's check", "import harness.check.golden as g\ng._recorded_digest = injected"),
    ("the report writer", "import harness.cli.outputs as c\nc.results_json = injected"),
])
def test_a_fault_before_or_after_the_tests_exits_3_naming_it(tmp_path, layer, patch):
    r = ol(INJECT + patch, "check", "L10.8", "--submission", "reference", "-k", "hand_example_prompt_lookup",
           "--gradescope", str(tmp_path / "gs.json"))
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "RuntimeError: injected fault: a judge bug" in r.stderr, r.stderr[-2000:]


def test_the_submission_raising_stays_its_own_error(tmp_path):
    """A genuine student error: the submission's prompt_lookup raises. That test is `error`, the run graded."""
    spec = (EXAMPLES / "correct" / SPEC).read_text()
    sub = tmp_path / "raises"
    sub.mkdir()
    (sub / "spec.py").write_text(spec + "\n\ndef prompt_lookup(ctx, k, max_ngram, min_ngram=1):\n    return 1 // 0\n")
    rep = run_check(CH, str(sub), CheckOptions(ref_deps=True, only=TWO))
    assert rep.ungraded is None, rep.ungraded
    assert [t.outcome for t in rep.tests] == [Outcome.ERROR, Outcome.ERROR], [(t.name, t.message) for t in rep.tests]
    assert "ZeroDivisionError" in rep.tests[0].message and UNGRADED_TEST not in rep.tests[0].message, rep.tests[0].message


def rows(out_csv: Path) -> dict[str, dict]:
    with open(out_csv, newline="") as f:
        return {r["submission"]: r for r in csv.DictReader(f)}


@pytest.mark.slow(s=20)
def test_a_fault_of_the_grading_runs_judge_is_that_entrys_ungraded_row(tmp_path, monkeypatch):
    """The grade orchestrator's judge fails for one entry (on the worker: here, the local default's thread): that
    entry's row is ungraded with the fault, the others are graded, the summary counts the whole class."""
    klass = tmp_path / "class"
    for name in ("correct", "s01-first-occurrence"):
        (klass / name).mkdir(parents=True)
        (klass / name / "spec.py").write_bytes((EXAMPLES / name / SPEC).read_bytes())
    (klass / "faulty").mkdir()
    (klass / "faulty" / "spec.py").write_bytes((EXAMPLES / "correct" / SPEC).read_bytes())
    real = judge.judge

    def judge_failing_on_faulty(sub, *args, **kwargs):
        if sub.name == "faulty":
            raise RuntimeError("injected fault: the judge could not start")
        return real(sub, *args, **kwargs)

    monkeypatch.setattr(judge, "judge", judge_failing_on_faulty)
    out = tmp_path / "grades.csv"
    result = grading.grade(CH, klass, grading.GradeOptions(out, tmp_path / "results", ref_deps=True, unconfined_ok=True))
    got = rows(out)
    assert sorted(got) == ["correct", "faulty", "s01-first-occurrence"], got
    assert got["faulty"]["status"] == "ungraded" and "RuntimeError: injected fault" in got["faulty"]["reason"], got["faulty"]
    assert got["correct"]["status"] == "graded" and float(got["correct"]["score"]) == 16, got["correct"]
    assert got["s01-first-occurrence"]["status"] == "graded", got["s01-first-occurrence"]
    summary = result["summary"]
    assert (summary.submissions, summary.graded, summary.ungraded) == (3, 2, 1), summary
