"""The pytest side of `ol`: options naming the implementation, its fixtures, and per-test budgets.

`pytest` on the repository grades the reference; `--impl mutant:s06` or `--impl DIR` points the same tests
elsewhere; `ol check` runs pytest with this plugin. A test's chapter is `--chapter`, else its file's pack.
"""

from functools import lru_cache
import hashlib
import json
from pathlib import Path
import tomllib

import pytest

from ..kernel.errors import SubmissionFailure
from ..languages import in_process
from ..kernel.outcomes import Outcome
from ..registry import DEFAULT_TIMEOUT_S, load_chapter, make_importable
from ..subjects.open import open_impl
from ..subjects.reference import pristine


def pytest_addoption(parser) -> None:
    g = parser.getgroup("ol", "the implementation under test")
    g.addoption("--chapter", default=None, help="the chapter whose tests these are (default: the pack holding the test file)")
    g.addoption("--impl", default="reference", help="reference | mutant:ID | a submission (folder, file or zip)")
    g.addoption("--ref-deps", action="store_true", help="keep the submission's chapter file, take the rest from the reference")
    g.addoption("--lang", default=None, help=f"the language of the reference or mutant (default {in_process().name}); a submission's comes from its layout")
    g.addoption("--transport", default="auto", choices=["auto", "worker"], help="force the worker even for trusted code")
    g.addoption("--golden", default=None, help="a golden file to use instead of the chapter's (fresh cases)")


def pytest_configure(config) -> None:
    make_importable()  # a pack's tests import its own modules as chapters.<Name>.*, wherever the pack lives


def pack_chapter(path: Path) -> str | None:
    """The chapter of the pack holding `path`, if any."""
    for folder in path.resolve().parents:
        toml = folder / "chapter.toml"
        if toml.is_file():
            return tomllib.loads(toml.read_text()).get("chapter")
    return None


def given(config, fact: str):
    """What `ol check` derived once and handed on (harness.check.runner's plugin: ol_chapter, ol_golden, ol_impl),
    or None under a plain `pytest`, where each module's fixtures derive it themselves."""
    return next((getattr(p, fact) for p in config.pluginmanager.get_plugins() if getattr(p, fact, None) is not None), None)


# chapter, impl and golden are per module: a chapter's graded tests are one module, and one selftest
# session may run several packs' tests, each against its own chapter.
@pytest.fixture(scope="module")
def chapter(request):
    if (handed := given(request.config, "ol_chapter")) is not None:
        pristine(handed)  # the judge's reference, made from the Chapter ol check loaded: a pack's pristine(name) finds it
        return handed
    name = request.config.option.chapter or pack_chapter(request.node.path)
    if name is None:
        pytest.fail("this test is in no chapter pack; pass --chapter NAME")
    return load_chapter(name)


@pytest.fixture(scope="module")  # the chapter's: one Reference per chapter, made once (pristine is cached)
def ref(chapter):
    """The judge's pristine reference (harness.subjects.reference.pristine): `ref.module("infer.spec")`."""
    return pristine(chapter)


@pytest.fixture(scope="module")
def impl(request, chapter):
    """The implementation under test: the one `ol check` opened and loaded (it closes it), or one opened here."""
    if (handed := given(request.config, "ol_impl")) is not None:
        yield handed
        return
    o = request.config.option
    it = open_impl(chapter, o.impl, ref_deps=o.ref_deps, transport=o.transport, language_name=o.lang)
    yield it
    it.close()


@pytest.fixture(scope="module")
def golden(request, chapter):
    """The golden document: the one `ol check` parsed and handed on; under a plain `pytest`, the golden file (or
    --golden's) parsed once per process for every module reading the same bytes (tests only read it)."""
    if (handed := given(request.config, "ol_golden")) is not None:
        return handed
    data = Path(request.config.option.golden or chapter.golden).read_bytes()
    return _parsed(hashlib.sha256(data).digest(), data)  # the same bytes are parsed once (a file rewritten: anew)


@lru_cache(maxsize=4)
def _parsed(digest: bytes, data: bytes) -> dict:
    """The golden document of these bytes (`digest`: their sha256, what the cache finds them by)."""
    return json.loads(data)


@pytest.fixture(autouse=True)
def _budget(request):
    """Start the test's time budget (the registry's timeout_s) when it uses the implementation."""
    if "impl" in request.fixturenames:
        name = request.node.originalname.removeprefix("test_")  # a test with no row: the default budget
        seconds = next((t.timeout_s for t in request.getfixturevalue("chapter").tests if t.name == name), DEFAULT_TIMEOUT_S)
        request.getfixturevalue("impl").start_budget(seconds)
    yield


def classify(excinfo) -> Outcome:
    """The Outcome of a test from the exception it ended with (None: it passed). A judge's fault (`judge_fault`)
    is ERROR here: the check that sees one marks its whole run ungraded (harness.check.runner)."""
    if excinfo is None:
        return Outcome.PASS
    e = first_leaf(excinfo.value)
    if isinstance(e, SubmissionFailure):
        return e.outcome
    if isinstance(e, (AssertionError, pytest.fail.Exception)):
        return Outcome.FAIL
    return Outcome.ERROR


def judge_fault(e: BaseException) -> BaseException | None:
    """The exception of the judge's own making in `e`, or None. What the code under test did reaches a test only as
    a SubmissionFailure (Impl.call), a wrong answer as an assertion or pytest.fail; anything else was raised by the
    judge's code: a fault of the grader, never a verdict. A group (FlakyFailure, ExceptionGroup) is the judge's
    when any of its leaves is."""
    if isinstance(e, BaseExceptionGroup):
        return next((f for leaf in e.exceptions if (f := judge_fault(leaf)) is not None), None)
    if isinstance(e, (SubmissionFailure, AssertionError, pytest.fail.Exception)):
        return None
    return e


def first_leaf(e: BaseException) -> BaseException:
    """The first failure of an exception group (Hypothesis's FlakyFailure), else `e` itself."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e
