"""`ol check`: run a chapter's tests on one implementation and return the verdict as a Report.

pytest runs the chapter's tests file in this process with the ol plugin and a collector; each
test's outcome is classified once (harness.pytest_plugin.classify) into an Outcome, with a message
worded for a student and, for a test that did not pass, the chapter's known pitfalls for it.
"""

import contextlib
import io
import json
import threading
import time
from pathlib import Path

import pytest

from .confine import Mode
from .errors import OlError, SubmissionFailure
from .golden import verify as verify_golden
from .hints import pitfall_matches
from .outcomes import Outcome
from .pytest_plugin import classify
from .registry import Chapter
from .report import Report, TestResult
from .subjects import open_impl

MESSAGE_CAP = 4000  # characters of one test's message kept in reports


# Importing the submission's modules (the worker has numpy already). A slow correct import of 25 s fits (its
# modules add well under a second); a hang costs this plus the judge's own start, within the 30 s it may take.
LOAD_DEADLINE_S = 27.0


class _Loader:
    """`load` in a thread of its own, so that the worker's start and the submission's import overlap the
    judge's own start (pytest, the chapter's tests and helpers); `wait` gives its failure, or None."""

    def __init__(self, impl) -> None:
        self.impl, self.failure, self.error = impl, None, None
        self.thread = threading.Thread(target=self._run, name="ol-load", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.failure = _load(self.impl)
        except BaseException as e:  # noqa: BLE001 -- the judge's own error (a sandbox that cannot start): re-raised
            self.error = e

    def wait(self) -> SubmissionFailure | None:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.failure


class _Collector:
    def __init__(self, impl=None, loader: _Loader | None = None) -> None:
        self._impl, self._loader = impl, loader
        self.results: dict[str, tuple[Outcome, float, str]] = {}
        self.setup_error: BaseException | None = None  # the judge's own setup failed: no grade can stand

    @property
    def ol_impl(self):
        """The loaded implementation the plugin's `impl` fixture hands to every test, once its load is done;
        a submission that did not load ends the session before any test runs (run_check reports it)."""
        if self._loader is not None and self._loader.wait() is not None:
            pytest.exit("the submission did not load", returncode=pytest.ExitCode.INTERRUPTED)
        return self._impl

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        name = item.originalname.removeprefix("test_")
        if rep.failed and rep.when == "setup" and not isinstance(call.excinfo.value, SubmissionFailure):
            self.setup_error = self.setup_error or call.excinfo.value
            return
        if rep.when == "call" or (rep.failed and rep.when == "setup"):
            kind = classify(call.excinfo)
            if kind is Outcome.PASS:
                message = ""
            elif isinstance(call.excinfo.value, (SubmissionFailure, AssertionError, pytest.fail.Exception)):
                message = _plain(call.excinfo.value)
            else:
                message = f"error in the test itself ({rep.when}):\n{rep.longreprtext[-MESSAGE_CAP:]}"
            self.results[name] = (kind, rep.duration, message)
        elif rep.when == "teardown" and rep.failed and name in self.results and self.results[name][0] is Outcome.PASS:
            self.results[name] = (Outcome.ERROR, rep.duration, f"teardown failed:\n{rep.longreprtext[-MESSAGE_CAP:]}")


def _plain(e: BaseException) -> str:
    text = str(e)
    if isinstance(e, AssertionError) and "\nassert " in text:  # keep our sentence, drop pytest's rewritten expression
        text = text.split("\nassert ", 1)[0]
    if text.startswith("Failed: "):
        text = text[len("Failed: "):]
    return text[:MESSAGE_CAP]


# pytest plugins a check has no use for (the submission's code runs in its worker, or is trusted): the unraisable-
# exception hook collects all garbage again and again at the session's end (about 0.1 s); the others are the
# installed plugins of ol's own test suite, loaded for nothing
UNUSED_PLUGINS = [arg for name in ("unraisableexception", "threadexception", "xdist", "xdist.looponfail", "platformdirs")
                  for arg in ("-p", f"no:{name}")]


def pytest_args(chapter: Chapter, submission: str, ref_deps: bool, transport: str, golden: str | None,
                only: list[str] | None, language: str | None = None) -> list[str]:
    args = [*map(str, chapter.tests_files), "-p", "harness.pytest_plugin", "--noconftest", "-p", "no:cacheprovider", "-q",
            "--no-header", "-p", "no:hypothesispytest", *UNUSED_PLUGINS, "--import-mode=importlib", "--chapter", chapter.chapter,
            "--impl", submission, "--transport", transport, "-W", "ignore::pytest.PytestAssertRewriteWarning",
            f"--rootdir={chapter.pack_dir}"]
    if ref_deps:
        args.append("--ref-deps")
    if language:
        args += ["--lang", language]
    if golden:
        args += ["--golden", str(golden)]
    if only:
        args += ["-k", " or ".join(only)]
    return args


def _load(impl) -> SubmissionFailure | None:
    """Import the submission once, before any test: the failure, or None when it loads."""
    try:
        impl.call("load", {}, deadline_s=LOAD_DEADLINE_S)
    except SubmissionFailure as e:
        return e
    return None


def _unloadable(chapter: Chapter, submission: str, ref_deps: bool, golden: str, fresh_seed, only, failure: SubmissionFailure,
                duration_s: float) -> Report:
    """Every test fails at once with the one reason: the submission could not be loaded."""
    why = f"not run: your submission could not be loaded ({failure.outcome.value}; the reason is above)"
    if getattr(failure, "first_error", ""):  # a compiled language's build failed: its first error on every test
        why = f"not run: your crate did not compile: {failure.first_error}"
    tests = [TestResult(t.name, t.kind, failure.outcome, 0.0, why, 0.0, t.points) for t in chapter.tests
             if not only or t.name in only]
    return Report(chapter.chapter, submission, ref_deps, tests, duration_s, golden, fresh_seed,
                  load_error=_plain(failure).removeprefix("load: "))


def language_of(impl) -> str:
    """The language the Impl's code is in: its worker's, or Python (trusted code in this process)."""
    return getattr(impl.transport, "language", None) or "python"


def sandbox_of(impl) -> str:
    """How the Impl's code runs: its worker's sandbox mode, or in-process (trusted code)."""
    mode = getattr(impl.transport, "mode", None)
    return mode.name if mode is not None else "in-process"


def run_check(chapter: Chapter, submission: str, ref_deps: bool = False, transport: str = "auto",
              golden: str | None = None, only: list[str] | None = None, fresh_seed: int | None = None,
              sandbox: Mode | None = None, language: str | None = None) -> Report:
    """Run the chapter's tests on `submission`; the Report holds one TestResult per registry test, and says
    how the code ran (`sandbox`: a worker's mode, default harness.confine.choose(); or in-process).
    A damaged golden file stops it before any test runs (harness.golden.verify)."""
    golden = str(verify_golden(chapter, golden))
    start = time.perf_counter()
    trusted = submission == "reference" or submission.startswith("mutant:")
    label = f"{submission} ({language})" if trusted and language not in (None, "python") else submission  # the report's name for it
    impl = open_impl(chapter, submission, ref_deps, transport, sandbox=sandbox, language_name=language)
    mode, lang = sandbox_of(impl), language_of(impl)
    loader = None
    try:
        impl.transport.spawn()  # from this thread, which outlives the worker; its hello and load overlap pytest's start
        loader = _Loader(impl)
        collector = _Collector(impl, loader)
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = pytest.main(pytest_args(chapter, submission, ref_deps, transport, golden, only, language), plugins=[collector])
        failure = loader.wait()
        if failure is not None:
            rep = _unloadable(chapter, label, ref_deps, golden, fresh_seed, only, failure, time.perf_counter() - start)
            rep.sandbox, rep.language = mode, lang
            return rep
    finally:
        if loader is not None:
            loader.thread.join()  # bounded by the load's deadline; the worker is not closed under its feet
        impl.close()
    answers = impl.answers
    if collector.setup_error is not None:  # e.g. the pack's ops do not import: the judge's fault, not a grade
        e = collector.setup_error
        if isinstance(e, OlError):
            raise e
        raise OlError(f"the judge could not set up the chapter's tests: {type(e).__name__}: {e}")
    if code not in (0, 1) and not collector.results:
        raise OlError(f"pytest could not run the tests of {chapter.chapter} (exit {code}):\n{sink.getvalue()[-3000:]}")
    tests = []
    for spec in chapter.tests:
        if only and spec.name not in only:
            continue
        kind, duration, message = collector.results.get(
            spec.name, (Outcome.ERROR, 0.0, "this test did not run (not collected: harness bug)"))
        pitfalls = [f"{m.id}: {m.pitfall} ({m.symptom})" for m in chapter.pitfalls_for(spec.name)] if not kind.passed else []
        tests.append(TestResult(spec.name, spec.kind, kind, round(duration, 4), message,
                                spec.points if kind.passed else 0.0, spec.points, pitfalls))
    rep = Report(chapter.chapter, label, ref_deps, tests, time.perf_counter() - start, golden, fresh_seed, sandbox=mode,
                 language=lang)
    if not rep.ok and chapter.mutants:
        rep.pitfall_matches = pitfall_matches(chapter, json.loads(Path(golden).read_text()), answers)
    return rep
