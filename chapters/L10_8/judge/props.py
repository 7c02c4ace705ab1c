"""Differential property checks: a contract function called on inputs drawn from its domain (judge.domains),
each answer compared with the judge's own reference's, and the smallest input that tells them apart shown.

Hypothesis draws the inputs, derandomised from the grading seed (the golden file's master_seed, which
`--fresh` changes): a run is reproducible, and fresh cases draw new inputs. On a disagreement Hypothesis
shrinks the input, and the test fails with

    smallest input where yours differs: prompt_lookup([4, 4], k=5, max_ngram=9, min_ngram=1): expected [4], got []

A refusal (SpecError) is an answer like any other: "expected SpecError, got [3]" is a difference, and so is
a panic or another exception where the reference answers. A timeout, a crash or a stub that is not
implemented ends the check at once with its own outcome (nothing to shrink).
"""

from functools import lru_cache
import hashlib
import math

import numpy as np

from hypothesis import HealthCheck, Phase, given, settings, seed as seeded
from hypothesis.errors import HypothesisException

from harness.pack import JUDGE_PACKAGE, InProcess, Raised, SubmissionFailure, pristine

from .. import ops
from ..client import Client

EXAMPLES = 50  # drawn inputs per property and run, before shrinking, beside its fixed edge inputs: each costs the
# judge about 1.4 ms of Hypothesis (so 10 properties add about 0.7 s to a check); rules.toml [[domain]] says why enough


@lru_cache(maxsize=1)
def judge_reference() -> Client:
    """The judge's pristine reference behind the chapter's client, in this process: the expected answers."""
    pristine()
    return Client(InProcess(JUDGE_PACKAGE, ops), "the judge's reference")


class Refused:
    """The answer of a call that raised SpecError."""

    def __eq__(self, other) -> bool:
        return isinstance(other, Refused)

    def __repr__(self) -> str:
        return "SpecError"


class Failed:
    """The answer of a call that raised something other than SpecError (a panic, an IndexError, ...)."""

    def __init__(self, e: Raised) -> None:
        self.type, self.message = e.type, e.message

    def __eq__(self, other) -> bool:
        return isinstance(other, Failed) and other.type == self.type

    def __repr__(self) -> str:
        return f"a panic ({self.message})" if self.type == "panic" else f"{self.type} ({self.message})"


def answer(fn):
    """What a call answered, as data: its value, Refused() or Failed(e). A failure with an outcome of its own
    (timeout, crash, not implemented, not importable) propagates."""
    try:
        return fn()
    except Raised as e:
        if e.spec_error:
            return Refused()
        if e.not_implemented or e.import_failed:
            raise
        return Failed(e)


def exact(want, got) -> bool:
    return type(want) is type(got) and want == got or (isinstance(want, (Refused, Failed)) and want == got)


def close(tol: float):
    """Lists of floats equal within an absolute `tol` (NaN where NaN), anything else exactly."""
    def same(want, got) -> bool:
        if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
            return all(a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol for a, b in zip(want, got))
        return exact(want, got)
    return same


class _Differs(AssertionError):
    pass


class _Fatal(Exception):
    pass


def property_seed(grading_seed: int, name: str) -> int:
    """Each property's own Hypothesis seed, from the grading seed and its name."""
    return int.from_bytes(hashlib.sha256(f"{grading_seed}:{name}".encode()).digest()[:8], "big")


def check(impl, grading_seed: int, name: str, strategy, call, show, same=exact, free=None, examples: int = EXAMPLES,
          explicit=()) -> str | None:
    """None when `call(impl, *args)` answers as `call(reference, *args)` on every drawn input (and on each of
    `explicit`); else the failure message naming the smallest input found. `show(args)` words the call;
    `free(args)` (optional) is true of an input whose answer the contract leaves free (not compared)."""
    ref = judge_reference()
    fatal: list[tuple[SubmissionFailure, tuple]] = []

    def compare(args, smallest: str) -> None:
        if free is not None and free(*args):
            return
        with np.errstate(all="ignore"):  # the reference's own 0/0 on a free input is no news
            want = answer(lambda: call(ref, *args))
        try:
            got = answer(lambda: call(impl, *args))
        except SubmissionFailure as e:
            fatal.append((e, args))
            return
        if not same(want, got):
            raise _Differs(f"{smallest}input where yours differs: {show(*args)}: expected {want!r}, got {got!r}")

    def one(args) -> None:
        if not fatal:
            compare(args, "smallest ")
        if fatal:
            raise _Fatal()  # from here every input fails at once, from this one line: the shrinker ends quickly

    run = seeded(property_seed(grading_seed, name))(settings(
        max_examples=examples, database=None, deadline=None, derandomize=False, report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck), phases=(Phase.generate, Phase.shrink), print_blob=False)(given(strategy)(one)))
    try:
        run()
        for args in explicit:  # the edges every run tries, after the drawn inputs (which shrink)
            if not fatal:
                compare(args, "")
    except _Differs as e:
        return str(e)
    except _Fatal:
        pass
    except HypothesisException as e:  # flaky: the same input answered differently twice
        return f"{name}: your answers change from one call to the next on the same input ({type(e).__name__})"
    if fatal:
        e, args = fatal[0]
        e.args = (f"{show(*args)}: {e.args[0]}",)
        raise e
    return None
