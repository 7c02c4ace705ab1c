"""The pytest side of `ol`: options naming the implementation, its fixtures, and per-test budgets.

`pytest` on the repository grades the reference; `--impl mutant:s06` or `--impl DIR` points the
same tests elsewhere. `ol check` runs pytest with this plugin and reads the outcomes back.
"""

import json

import pytest

from .errors import SubmissionFailure
from .registry import load_chapter

CHAPTER_OF_DIR = {"L10_8": "L10.8"}


def pytest_addoption(parser) -> None:
    g = parser.getgroup("ol", "the implementation under test")
    g.addoption("--impl", default="reference", help="reference | mutant:sNN | a directory holding tinyllm/")
    g.addoption("--ref-deps", action="store_true", help="keep the submission's chapter file, take the rest from the reference")
    g.addoption("--transport", default="auto", choices=["auto", "worker"], help="force the worker even for trusted code")
    g.addoption("--golden", default=None, help="a golden file to use instead of the chapter's (fresh cases)")


def _chapter_of(node) -> str | None:
    for part in reversed(node.path.parts):
        if part in CHAPTER_OF_DIR:
            return CHAPTER_OF_DIR[part]
    return None


@pytest.fixture(scope="session")
def chapter(request):
    return load_chapter(_chapter_of(request.node) or "L10.8")


@pytest.fixture(scope="session")
def impl(request, chapter):
    from .impls import open_impl

    o = request.config.option
    it = open_impl(chapter, o.impl, ref_deps=o.ref_deps, transport=o.transport)
    yield it
    it.close()


@pytest.fixture(scope="session")
def golden(request, chapter):
    path = request.config.option.golden or chapter.golden
    with open(path) as f:
        return json.load(f)


@pytest.fixture(autouse=True)
def _budget(request):
    """Start the test's time budget (the registry's timeout_s) when it uses the implementation."""
    if "impl" in request.fixturenames:
        ch = request.getfixturevalue("chapter")
        try:
            seconds = ch.test(request.node.originalname.removeprefix("test_")).timeout_s
        except KeyError:
            seconds = 60.0
        request.getfixturevalue("impl").start_budget(seconds)
    yield


def classify(excinfo) -> str:
    """pass / fail / error / timeout for a failed test's exception."""
    if excinfo is None:
        return "pass"
    e = excinfo.value
    if isinstance(e, SubmissionFailure):
        return e.outcome
    if isinstance(e, (AssertionError, pytest.fail.Exception)):
        return "fail"
    return "error"
