"""Results as data: the one Outcome of a test and the one verdict of a mutant, each with its meaning.

Every writer (console, JSON, JUnit, CSV, Gradescope) takes these values from here; nothing else
spells an outcome.
"""

from enum import Enum


class _Described(str, Enum):
    """A value with its meaning: each member is written (value, description)."""

    description: str

    def __new__(cls, value: str, description: str = ""):
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member


class Outcome(_Described):
    """How one test ended for the implementation under test."""

    PASS = "pass", "the implementation gave every answer the test expects"
    FAIL = "fail", "the implementation answered, and an answer is wrong"
    ERROR = "error", "the implementation raised an exception the test did not ask for (or the test itself broke)"
    TIMEOUT = "timeout", "a call passed its deadline or the test's budget; the worker was stopped"
    CRASHED = "crashed", "the worker process died or broke the protocol before answering"

    @property
    def passed(self) -> bool:
        return self is Outcome.PASS


class MutantVerdict(_Described):
    """What the tests did to one mutant, in the words mutation testing tools use."""

    CAUGHT = "caught", "its named test fails, as it must"  # a further set's mutant: a test it is expected_by fails
    MISSED = "missed", "its named test passes: the suite does not catch this pitfall"
    UNVIABLE = "unviable", "the mutant could not be built or loaded"  # its patch does not apply
    TIMEOUT = "timeout", "its named test timed out instead of failing"  # caught, but only by the clock
    # a further set's mutant: some test fails, but none it is expected_by
    CAUGHT_ELSEWHERE = "caught elsewhere", "tests fail, but none of those meant to catch its rule: a finding"
