"""`ol check`: run a chapter's tests on one implementation and return the verdict as a Report.

pytest runs the chapter's tests file in this process with the ol plugin and a collector; each
test's outcome is classified once (harness.check.pytest_plugin.classify) into an Outcome, with a message
worded for a student and, for a test that did not pass, the chapter's known pitfalls for it.
"""

import contextlib
import contextvars
from dataclasses import dataclass, replace
import io
import json
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Sequence

import pytest

from ..kernel import stage
from ..kernel.errors import BuildFailed, OlError, SubmissionFailure, UsageError, raise_if_interrupted
from ..languages import in_process
from ..kernel.outcomes import Outcome
from ..registry import Chapter
from ..kernel.report import Report, TestResult
from ..sandbox.confine import Mode
from ..subjects.open import open_impl
from ..transport.impl import Impl
from .golden import verify as verify_golden
from .hints import pitfall_matches
from .pytest_plugin import classify, first_leaf, judge_fault

MESSAGE_CAP = 4000  # characters of one test's message kept in reports


# Importing the submission's modules (the worker has numpy already). A slow correct import of 25 s fits (its
# modules add well under a second); a hang costs this plus the judge's own start, within the 30 s it may take.
LOAD_DEADLINE_S = 27.0


@dataclass(frozen=True)
class CheckOptions:
    """How one check runs: `ol check`'s options as data."""

    ref_deps: bool = False  # earlier chapters' files from the reference, the chapter's file the submission's
    transport: str = "auto"  # auto: trusted code (the reference, a mutant) in this process; worker: through a worker too
    golden: str | None = None  # the golden file graded on; None: the chapter's
    only: Sequence[str] = ()  # exact test names: these tests alone; empty: every test
    fresh_seed: int | None = None  # the seed `golden`'s fresh cases came from (the report records it)
    sandbox: Mode | None = None  # a worker's mode; None: harness.sandbox.confine.choose()
    language: str | None = None  # the reference's or a mutant's language, or the only one a submission is looked for in


class _Loader:
    """The submission opened (built), its worker started and its code loaded in a thread of its own, overlapping the
    judge's own start; it stays until `release` (bwrap's --die-with-parent follows the thread that started the
    worker). `wait` gives the load's failure, or None, and re-raises the judge's own error."""

    def __init__(self, open_impl: Callable[[], Impl], on_stage: Callable[[str], None] | None) -> None:
        self.impl: Impl | None = None
        self.failure: SubmissionFailure | None = None
        self.error: BaseException | None = None
        self._open, self._on_stage = open_impl, on_stage
        self.loaded, self._released = threading.Event(), threading.Event()
        context = contextvars.copy_context()  # the build's progress reaches this run's listener (harness.kernel.stage)
        self.thread = threading.Thread(target=context.run, args=(self._run,), name="ol-load", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.impl = self._open()
            self.impl.arm_check_limit()  # the whole check's limit runs from here (harness.transport.impl)
            self.impl.transport.spawn()
            if self._on_stage is not None:
                self._on_stage("loading the submission, running the tests")
            self.failure = load_failure(self.impl)
        except BaseException as e:  # noqa: BLE001 -- the judge's own error, or a bad submission: re-raised by wait()
            self.error = e
        finally:
            self.loaded.set()
        self._released.wait()

    def wait(self) -> SubmissionFailure | None:
        self.loaded.wait()
        if self.error is not None:
            raise self.error
        return self.failure

    def release(self, wait: bool) -> None:
        """Close the worker and end the thread, once; `wait`: first wait for the build and the load to end (bounded
        by their deadlines: the worker is not closed under their feet), else leave one still running as it is."""
        if self._released.is_set():
            return
        if wait:
            self.loaded.wait()
        if self.loaded.is_set() and self.impl is not None:
            self.impl.close()
        self._released.set()
        if self.loaded.is_set():
            self.thread.join()


class _Collector:
    """The plugin run_check hands pytest: the chapter, the golden document and the loaded implementation for every
    test module's fixtures; `only` selects the tests; each outcome comes back (to `on_result` as it finishes)."""

    def __init__(self, loader: _Loader, only: Sequence[str] = (),
                 on_result: Callable[[str, Outcome, float, str], None] | None = None, chapter: Chapter | None = None,
                 golden: dict | None = None) -> None:
        self._loader, self._only, self._on_result = loader, only, on_result
        self.ol_chapter, self.ol_golden = chapter, golden
        self.results: dict[str, tuple[Outcome, float, str]] = {}
        self.setup_error: BaseException | None = None  # the judge's own setup failed: no grade can stand
        self.interrupted = False  # Ctrl-C: pytest stopped; no grade can stand (run_check raises KeyboardInterrupt)
        self.fault: str | None = None  # the first fault of the judge's own code in a test: the run is ungraded

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.interrupted = self.interrupted or isinstance(excinfo.value, KeyboardInterrupt)

    def pytest_collection_modifyitems(self, config, items) -> None:
        """`only`: exactly the named tests run (a name never selects another it is part of, as -k's substrings would)."""
        if not self._only:
            return
        keep = [i for i in items if i.originalname.removeprefix("test_") in self._only]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    @property
    def ol_impl(self):
        """The loaded implementation the plugin's `impl` fixture hands to every test, once its load is done;
        a submission that did not load ends the session before any test runs (run_check reports it)."""
        try:
            failure = self._loader.wait()
        except KeyboardInterrupt:  # Ctrl-C while the submission builds or loads: an interrupt, not a load failure
            raise
        except BaseException:  # noqa: BLE001 -- run_check re-raises it
            failure = True
        if failure is not None:
            pytest.exit("the submission did not load", returncode=pytest.ExitCode.INTERRUPTED)
        return self._loader.impl

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        name = item.originalname.removeprefix("test_")
        if rep.failed and rep.when == "setup" and not isinstance(call.excinfo.value, SubmissionFailure):
            self.setup_error = self.setup_error or call.excinfo.value
            return
        fault = judge_fault(call.excinfo.value) if rep.failed else None
        if fault is not None:  # the judge's own code raised: no verdict on the code under test can stand
            said = _fault(name, rep.when, fault)
            self.fault = self.fault or said
            self.results[name] = (Outcome.ERROR, rep.duration, f"{UNGRADED_TEST}: {said}\n{rep.longreprtext[-MESSAGE_CAP:]}")
        elif rep.when == "call" or (rep.failed and rep.when == "setup"):
            kind = classify(call.excinfo)
            message = "" if kind is Outcome.PASS else _plain(call.excinfo.value)
            self.results[name] = (kind, rep.duration, message)
        elif rep.when == "teardown" and rep.failed and name in self.results and self.results[name][0] is Outcome.PASS:
            self.results[name] = (classify(call.excinfo), rep.duration, f"teardown failed: {_plain(call.excinfo.value)}")
        if rep.when == "teardown" and name in self.results and self._on_result is not None:
            self._on_result(name, *self.results[name])  # the test's final outcome, as it finishes


UNGRADED_TEST = "not a verdict on your code: the grader failed in this test"


def _fault(name: str, when: str, e: BaseException) -> str:
    """One line naming a fault of the judge: the test, the exception, and the innermost line that raised it."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(e).split())[:300]
    return f"{name} ({when}): {type(e).__name__}: {text}{where}"


def _plain(e: BaseException) -> str:
    e = first_leaf(e)
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


def pytest_args(chapter: Chapter, submission: str, options: CheckOptions) -> list[str]:
    """pytest's command line for the chapter's tests; which of them run is the collector's (`only`)."""
    args = [*map(str, chapter.tests_files), "-p", "harness.check.pytest_plugin", "--noconftest", "-p", "no:cacheprovider", "-q",
            "--no-header", "-p", "no:hypothesispytest", *UNUSED_PLUGINS, "--import-mode=importlib", "--chapter", chapter.chapter,
            "--impl", submission, "--transport", options.transport,
            # no assertion rewriting: every assert of a pack's test says its own sentence (see _message), and pytest's
            # import hook iterates a set that its own start-up grows, while the loader's thread imports through it
            # (RuntimeError: Set changed size during iteration: an `ol mutants --set extra` failed so, once)
            "--assert=plain",
            "--capture=sys",  # not the descriptors: the build's progress, from the loader's thread, reaches the terminal
            f"--rootdir={chapter.pack_dir}"]
    if options.ref_deps:
        args.append("--ref-deps")
    if options.language:
        args += ["--lang", options.language]
    if options.golden:
        args += ["--golden", str(options.golden)]
    return args


def _example(names: list[str]) -> str:
    """A -k expression over the chapter's own test names: the first's first two words and not the last's."""
    first, last = ("_".join(n.split("_")[:2]) for n in (names[0], names[-1]))
    return first if first == last else f"{first} and not {last}"


def select(chapter: Chapter, expression: str) -> list[str]:
    """The chapter's tests that pytest's `-k EXPRESSION` selects (a case-insensitive substring of a test's name;
    `and`, `or`, `not`, parentheses), in the chapter's order; a malformed expression or one that selects no test
    is a UsageError naming the tests."""
    from _pytest.mark import expression as grammar  # pytest's own -k grammar

    names = [t.name for t in chapter.tests]
    malformed = (getattr(grammar, "ParseError", SyntaxError), SyntaxError)  # pytest 8 raises ParseError, 9 SyntaxError
    try:
        compiled = grammar.Expression.compile(expression)
    except malformed as e:
        why = getattr(e, "message", None) or getattr(e, "msg", None) or str(e)
        raise UsageError(f"-k {expression!r} is not a test expression ({why}): write words of test names joined by "
                         f"and, or, not, e.g. -k '{_example(names)}'") from None

    def matches(name: str):
        def part(sub: str, /, **kwargs) -> bool:
            if kwargs:
                raise UsageError(f"-k {expression!r}: a test name takes no arguments ({sub}(...))")
            return sub.lower() in name.lower()
        return part

    chosen = [n for n in names if compiled.evaluate(matches(n))]
    if not chosen:
        raise UsageError(f"no test of {chapter.chapter} matches -k {expression!r}; its tests: {', '.join(names)}")
    return chosen


def load_failure(impl) -> SubmissionFailure | None:
    """Import the submission once, before any test: the failure, or None when it loads."""
    try:
        impl.call("load", {}, deadline_s=LOAD_DEADLINE_S)
    except SubmissionFailure as e:
        return e
    return None


def _unloadable(chapter: Chapter, submission: str, options: CheckOptions, golden: str, failure: SubmissionFailure,
                duration_s: float) -> Report:
    """Every test fails at once with the one reason: the submission could not be loaded."""
    why = f"not run: your submission could not be loaded ({failure.outcome.value}; the reason is above)"
    if isinstance(failure, BuildFailed):  # a compiled language's build failed: its first error on every test
        why = f"not run: {failure.summary}"
    tests = [TestResult(t.name, t.kind, failure.outcome, 0.0, why, 0.0, t.points) for t in chapter.tests
             if not options.only or t.name in options.only]
    return Report(chapter.chapter, submission, options.ref_deps, tests, duration_s, golden, options.fresh_seed,
                  load_error=_plain(failure).removeprefix("load: "))


def run_check(chapter: Chapter, submission: str, options: CheckOptions = CheckOptions(),
              on_result: Callable[[str, Outcome, float, str], None] | None = None,
              on_stage: Callable[[str], None] | None = None) -> Report:
    """Run the chapter's tests (`options.only`'s when given) on `submission`: one TestResult each, and how the code
    ran. `on_result(name, outcome, seconds, message)` hears each test as it finishes, from this thread; `on_stage`
    what runs before the tests (a build's progress). A damaged golden file stops it before any test runs."""
    golden = str(verify_golden(chapter, options.golden))
    options = replace(options, golden=golden)  # the verified file, which the tests' pytest arguments name
    doc = json.loads(Path(golden).read_text())  # the golden document, parsed once: the tests' and the hints'
    start = time.perf_counter()
    trusted = submission == "reference" or submission.startswith("mutant:")
    language, only = options.language, options.only
    label = f"{submission} ({language})" if trusted and language not in (None, in_process().name) else submission  # its name

    def opened() -> Impl:
        with stage.reporting(on_stage):
            return open_impl(chapter, submission, options.ref_deps, options.transport, sandbox=options.sandbox,
                             language_name=options.language)

    loader = _Loader(opened, on_stage)
    try:
        collector = _Collector(loader, only, on_result, chapter, doc)
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = pytest.main(pytest_args(chapter, submission, options), plugins=[collector])
        if collector.interrupted:  # the tests that did not run are no failures of the submission: no report at all
            raise KeyboardInterrupt
        raise_if_interrupted()  # a Ctrl-C that something swallowed (kernel.errors): no report either
        failure = loader.wait()  # the opener's error (a bad submission, no toolchain) is raised here
        impl = loader.impl
        assert impl is not None  # opened: wait() raised the opener's error otherwise
        # how the code ran and its language: its worker's sandbox mode and language, or trusted code in this process
        mode = impl.transport.mode.name if impl.transport.mode is not None else "in-process"
        lang = impl.transport.language or in_process().name
        if failure is not None:
            rep = _unloadable(chapter, label, options, golden, failure, time.perf_counter() - start)
            return rep.but(sandbox=mode, language=lang)
    except KeyboardInterrupt:  # Ctrl-C: no wait for a build or a load still running (it ends with this process)
        loader.release(wait=False)
        raise
    finally:
        loader.release(wait=True)
    answers = impl.answers
    if collector.setup_error is not None:  # e.g. the pack's ops do not import: the judge's fault, not a grade
        e = collector.setup_error
        if isinstance(e, OlError):
            raise e
        raise OlError(f"the judge could not set up the chapter's tests: {type(e).__name__}: {e}")
    if code not in (0, 1) and not collector.results:
        raise OlError(f"pytest could not run the tests of {chapter.chapter} (exit {code}):\n{sink.getvalue()[-3000:]}")
    results = {name: collector.results.get(name, (Outcome.ERROR, 0.0, "this test did not run (not collected: harness bug)"))
               for name in (t.name for t in chapter.tests) if not only or name in only}
    failing = any(not kind.passed for kind, _, _ in results.values())
    matches = pitfall_matches(chapter, doc, answers) if failing and chapter.mutants else []
    matched = {m["id"] for m in matches}  # a test names a pitfall only when the recorded answers match it (the hint's rule)
    tests = []
    for spec in chapter.tests:
        if spec.name not in results:
            continue
        kind, duration, message = results[spec.name]
        pitfalls = [f"{m.id}: {m.pitfall} ({m.symptom})" for m in chapter.mutants
                    if m.must_fail == spec.name and m.id in matched] if not kind.passed else []
        tests.append(TestResult(spec.name, spec.kind, kind, round(duration, 4), message,
                                spec.points if kind.passed else 0.0, spec.points, pitfalls))
    rep = Report(chapter.chapter, label, options.ref_deps, tests, time.perf_counter() - start, golden, options.fresh_seed, sandbox=mode,
                 language=lang, pitfall_matches=matches)
    if collector.fault is not None:  # a fault of the judge's own code: ungraded, the fault named (ol check exits 3)
        return rep.but(ungraded=f"the grader failed, not your code: {collector.fault}")
    return rep
