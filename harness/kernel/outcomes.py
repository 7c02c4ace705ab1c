"""Results as data: the one Outcome of a test and the one verdict of a mutant, each with its meaning.

Every writer (console, JSON, JUnit, CSV, Gradescope) takes these values from here; nothing else
spells an outcome.
"""

from enum import Enum


class Outcome(str, Enum):
    """How one test ended for the implementation under test."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"

    @property
    def description(self) -> str:
        return _OUTCOME_TEXT[self]

    @property
    def passed(self) -> bool:
        return self is Outcome.PASS


_OUTCOME_TEXT = {
    Outcome.PASS: "the implementation gave every answer the test expects",
    Outcome.FAIL: "the implementation answered, and an answer is wrong",
    Outcome.ERROR: "the implementation raised an exception the test did not ask for (or the test itself broke)",
    Outcome.TIMEOUT: "a call passed its deadline or the test's budget; the worker was stopped",
    Outcome.CRASHED: "the worker process died or broke the protocol before answering",
}


class MutantVerdict(str, Enum):
    """What the tests did to one mutant, in the words mutation testing tools use."""

    CAUGHT = "caught"  # its named test fails (a further set's mutant: a test it is expected_by)
    MISSED = "missed"  # its named test passes: the tests do not catch this pitfall
    UNVIABLE = "unviable"  # the mutant could not be made or loaded (its patch does not apply)
    TIMEOUT = "timeout"  # its named test ran out of time: caught, but only by the clock
    CAUGHT_ELSEWHERE = "caught elsewhere"  # a further set's mutant: some test fails, but none it is expected_by

    @property
    def description(self) -> str:
        return _VERDICT_TEXT[self]


_VERDICT_TEXT = {
    MutantVerdict.CAUGHT: "its named test fails, as it must",
    MutantVerdict.MISSED: "its named test passes: the suite does not catch this pitfall",
    MutantVerdict.UNVIABLE: "the mutant could not be built or loaded",
    MutantVerdict.TIMEOUT: "its named test timed out instead of failing",
    MutantVerdict.CAUGHT_ELSEWHERE: "tests fail, but none of those meant to catch its rule: a finding",
}
