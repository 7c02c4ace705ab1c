"""`ol check`: run a chapter's tests on one implementation and return the verdict as data.

pytest runs the chapter's test file in this process with a collector plugin; each test's outcome
is classified as pass / fail / error / timeout (harness.pytest_plugin.classify), with a message
worded for a student and, for failures, the chapter's known pitfalls for that test.
"""

from dataclasses import asdict, dataclass, field
import io
import contextlib
import time

import pytest

from .errors import OlError, SubmissionFailure
from .pytest_plugin import classify
from .registry import Chapter

MESSAGE_CAP = 4000  # characters of one test's message kept in reports


@dataclass
class TestResult:
    name: str
    kind: str
    outcome: str  # pass | fail | error | timeout
    duration_s: float
    message: str = ""
    points: float = 0.0
    max_points: float = 1.0
    pitfalls: list[str] = field(default_factory=list)


@dataclass
class Report:
    chapter: str
    submission: str
    ref_deps: bool
    tests: list[TestResult]
    duration_s: float = 0.0
    golden: str = ""

    @property
    def passed(self) -> int:
        return sum(t.outcome == "pass" for t in self.tests)

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    @property
    def ok(self) -> bool:
        return self.passed == len(self.tests)

    def to_json(self) -> dict:
        return {"chapter": self.chapter, "submission": self.submission, "ref_deps": self.ref_deps, "golden": self.golden,
                "tests": [{k: v for k, v in asdict(t).items()} for t in self.tests],
                "summary": {"passed": self.passed, "failed": len(self.tests) - self.passed, "total": len(self.tests),
                            "score": self.score, "max_score": self.max_score, "duration_s": round(self.duration_s, 3)}}


class _Collector:
    def __init__(self) -> None:
        self.results: dict[str, tuple[str, float, str]] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        name = item.originalname.removeprefix("test_")
        if rep.when == "call" or (rep.failed and rep.when == "setup"):
            kind = classify(call.excinfo)
            if kind == "pass":
                message = ""
            elif isinstance(call.excinfo.value, (SubmissionFailure, AssertionError, pytest.fail.Exception)):
                message = _plain(call.excinfo.value)
            else:
                message = f"error in the test itself ({rep.when}):\n{rep.longreprtext[-MESSAGE_CAP:]}"
            self.results[name] = (kind, rep.duration, message)
        elif rep.when == "teardown" and rep.failed and name in self.results and self.results[name][0] == "pass":
            self.results[name] = ("error", rep.duration, f"teardown failed:\n{rep.longreprtext[-MESSAGE_CAP:]}")


def _plain(e: BaseException) -> str:
    text = str(e)
    if isinstance(e, AssertionError) and "\nassert " in text:  # keep our sentence, drop pytest's rewritten expression
        text = text.split("\nassert ", 1)[0]
    if text.startswith("Failed: "):
        text = text[len("Failed: "):]
    return text[:MESSAGE_CAP]


def run_check(chapter: Chapter, submission: str, ref_deps: bool = False, transport: str = "auto",
              golden: str | None = None, junit: str | None = None, only: list[str] | None = None) -> Report:
    """Run the chapter's tests on `submission`; the Report holds one TestResult per registry test."""
    args = [str(chapter.tests_file), "-p", "no:cacheprovider", "-q", "--no-header", "-p", "no:hypothesispytest",
            "--import-mode=importlib", "--impl", submission, "--transport", transport,
            "-W", "ignore::pytest.PytestAssertRewriteWarning", f"--rootdir={chapter.tests_file.parents[2]}"]
    if ref_deps:
        args.append("--ref-deps")
    if golden:
        args += ["--golden", golden]
    if junit:
        args.append(f"--junitxml={junit}")
    if only:
        args += ["-k", " or ".join(only)]
    collector = _Collector()
    start = time.perf_counter()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(args, plugins=[collector])
    if code not in (0, 1) and not collector.results:
        raise OlError(f"pytest could not run {chapter.tests_file} (exit {code}):\n{sink.getvalue()[-3000:]}")
    tests = []
    for spec in chapter.tests:
        if only and spec.name not in only:
            continue
        kind, duration, message = collector.results.get(spec.name, ("error", 0.0, "this test did not run (not collected: harness bug)"))
        pitfalls = [f"{m.id}: {m.pitfall} ({m.symptom})" for m in chapter.pitfalls_for(spec.name)] if kind != "pass" else []
        tests.append(TestResult(spec.name, spec.kind, kind, round(duration, 4), message,
                                spec.points if kind == "pass" else 0.0, spec.points, pitfalls))
    return Report(chapter.chapter, submission, ref_deps, tests, time.perf_counter() - start, golden or str(chapter.golden))
