"""Differential property checks: a contract function called on inputs drawn from its domain (judge.domains),
each answer compared with the judge's own reference's, and the smallest input that tells them apart shown.

Hypothesis draws the inputs, derandomised from the grading seed (the golden file's master_seed, which
`--fresh` changes): a run is reproducible, and fresh cases draw new inputs. On a disagreement Hypothesis
shrinks the input, and the test fails with

    smallest input where yours differs: prompt_lookup([4, 4], k=5, max_ngram=9, min_ngram=1): expected [4], got []

A refusal (SpecError) is an answer like any other: "expected SpecError, got [3]" is a difference, and so is
a panic or another exception where the reference answers. A timeout, a crash or a stub that is not
implemented ends the check at once with its own outcome (nothing to shrink).

How many inputs, and why that is enough. Each run gives each of the ten contract functions (prompt_lookup,
ngram_draft, SpecConfig.parse, propose, residual, sample_dense, speculative_step, dense_distribution,
verify_draft, blocks_for) EXAMPLES = 50 inputs drawn from its domain, plus Hypothesis's simplest input, plus
the function's fixed edge inputs (1 to 6; properties.py): 51 to 57 calls a function, about 540 a check. The
domains are built so that every class of input the contract names (a refused argument, an edge of u32/u64,
an empty or one-token context, NaN and the infinities, ties, a p equal to q, an acceptance boundary) is drawn
with probability at least about 1 in 20 per input, most at 1 in 10 or more; a slip confined to a class of
probability f is missed by a run with probability (1 - f)^50: 0.5 % at f = 1/10, 7.7 % at f = 1/20, and
every slip a mutant set holds on a rarer class has a fixed edge input, tried every run. A slip that differs
on a fraction f of the whole domain is caught the same way, and `--fresh` (and each class's own grading seed)
draws anew. The 50 are drawn as one list in one Hypothesis test case: Hypothesis's cost is per choice drawn
and per test case, and the answers are compared outside it. Only on a difference does Hypothesis search again,
input by input from the same seed (up to SEARCH_EXAMPLES test cases), and shrink what it finds; the verdict is
the drawn inputs' whatever that search finds (when it finds nothing smaller, the message shows the drawn input).
"""

from contextlib import contextmanager
from functools import lru_cache
import hashlib
import math

import numpy as np

from hypothesis import HealthCheck, Phase, given, settings, seed as seeded, strategies as st
from hypothesis.errors import HypothesisException

from harness.pack import InProcess, Raised, SubmissionFailure, load_chapter, pristine, remembered, version_of

from .. import ops
from ..client import Client
from .rust_text import rust_shown

EXAMPLES = 50  # drawn inputs per property and run, beside the simplest input and its fixed edge inputs: drawn as one list
# in one Hypothesis test case (rules.toml [[domain]] and the module's docstring say why enough)
SEARCH_EXAMPLES = 300  # on a difference: inputs Hypothesis may try, one test case each, before it has one to shrink


@lru_cache(maxsize=1)
def judge_reference() -> Client:
    """The judge's pristine reference behind the chapter's client, in this process: the expected answers."""
    return Client(InProcess(pristine("L10.8").alias, ops), "the judge's reference")


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


class Answers:
    """Each distinct input's two answers, the reference's and the implementation's, asked once per check: shrinking
    replays an input many times (the contract's functions are pure, so the first answer is the answer)."""

    def __init__(self, ref, impl, call) -> None:
        self.ref, self.impl, self.call = ref, impl, call
        self.want: dict[str, object] = {}
        self.got: dict[str, object] = {}

    def __call__(self, args: tuple) -> tuple:
        key = repr(args)  # tells 0.0 from -0.0, 4 from 4.0 and True from 1
        if key not in self.want:
            with np.errstate(all="ignore"):  # the reference's own 0/0 on a free input is no news
                self.want[key] = answer(lambda: self.call(self.ref, *args))
        if key not in self.got:
            self.got[key] = answer(lambda: self.call(self.impl, *args))  # a SubmissionFailure propagates
        return self.want[key], self.got[key]


@contextmanager
def _no_local_constants():
    """Hypothesis mixes into its draws constants it reads from every local module this process has loaded (the
    harness, the reference, an in-process mutant), caching them in ./.hypothesis: the inputs would depend on
    what the judge imported, and a check would write into the student's folder (and parse every module's
    source on a first run). The judge's draws take their edges from the strategies alone."""
    try:
        from hypothesis.internal.conjecture import providers
        original, empty = providers._get_local_constants, providers.Constants()
    except (ImportError, AttributeError):  # another Hypothesis: its draws as it makes them
        yield
        return
    cache = providers.CONSTANTS_CACHE.cache  # (global, local) constants per kind of draw: drop any holding local ones
    if any(local for _, local in cache.values()):
        cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original


def property_seed(grading_seed: int, name: str) -> int:
    """Each property's own Hypothesis seed, from the grading seed and its name."""
    return int.from_bytes(hashlib.sha256(f"{grading_seed}:{name}".encode()).digest()[:8], "big")


def _settings(**kw):
    return settings(database=None, deadline=None, derandomize=False, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), print_blob=False, **kw)


@lru_cache(maxsize=1)
def _harness_version() -> str:
    """What decides the drawn inputs beside the seed, the name and the count: the strategies' code and Hypothesis's
    version, within the harness version's digest (every file of ol and the pack, the interpreter, the libraries)."""
    return version_of(load_chapter("L10.8"))["digest"]


def drawn_inputs(grading_seed: int, name: str, strategy, examples: int = EXAMPLES) -> list[tuple]:
    """The inputs a run compares: Hypothesis's simplest input, then `examples` inputs drawn as one list in one test
    case (the drawing is paid per input, Hypothesis's machinery per test case), derandomised from the seed.
    Drawn once per seed and harness version (harness.memo): a second check with the same seed reads them back, the
    same inputs, without drawing: 0.6 s of a 1.9 s check through the worker (bench/check_speed.py)."""
    key = f"L10.8 property inputs: seed {property_seed(grading_seed, name)} {name} x{examples}, harness {_harness_version()}"
    return remembered("draws", key, lambda: _draw(grading_seed, name, strategy, examples))


def _draw(grading_seed: int, name: str, strategy, examples: int) -> list[tuple]:
    batches: list[list] = []

    def keep(batch: list) -> None:
        batches.append(batch)

    run = seeded(property_seed(grading_seed, name))(_settings(max_examples=2, phases=(Phase.generate,))(
        given(st.lists(strategy, min_size=examples, max_size=examples))(keep)))
    with _no_local_constants():
        run()
    inputs = {repr(args): args for batch in batches for args in batch}  # the simplest list is one input, repeated
    if len(batches) != 2 or len(inputs) <= 1 and examples > 1:  # never seen: Hypothesis overran or stopped early
        raise RuntimeError(f"the property check of {name} drew {len(batches)} lists, not 2: a judge bug")
    return list(inputs.values())


def _shrunk(asked: Answers, grading_seed: int, name: str, strategy, differs) -> str | None:
    """The smallest input Hypothesis finds where the two answers differ, searching input by input from the same
    seed and shrinking what it finds; None when it finds none (or the implementation fails outright on the way)."""

    def one(args) -> None:
        try:
            problem = differs(args)
        except SubmissionFailure:  # a hang or crash on the way is no verdict here: the difference already is one
            raise _Fatal() from None
        if problem is not None:
            raise _Differs(problem)

    run = seeded(property_seed(grading_seed, name))(_settings(max_examples=SEARCH_EXAMPLES, phases=(
        Phase.generate, Phase.shrink))(given(strategy)(one)))
    try:
        with _no_local_constants():
            run()
    except _Differs as e:
        return str(e)
    except (_Fatal, HypothesisException):
        pass
    return None


def check(impl, grading_seed: int, name: str, strategy, call, show, same=exact, free=None, examples: int = EXAMPLES,
          explicit=()) -> str | None:
    """None when `call(impl, *args)` answers as `call(reference, *args)` on every drawn input (and on each of
    `explicit`); else the failure message naming the smallest input found. `show(args)` words the call;
    `free(args)` (optional) is true of an input whose answer the contract leaves free (not compared).

    The verdict is the drawn inputs' (drawn_inputs, then `explicit`); on a difference among the drawn ones,
    Hypothesis searches again input by input from the same seed and shrinks what it finds (_shrunk): the
    message shows the smallest input found, or the drawn input itself when the search finds none. A timeout,
    crash or stub among the drawn or explicit inputs raises its SubmissionFailure, naming the input."""
    asked = Answers(judge_reference(), impl, call)
    if impl.language == "rust":  # the values as a Rust student writes them (the call gets the originals)
        show, value = (lambda *a, _show=show: _show(*map(rust_shown, a))), rust_shown
    else:
        value = lambda v: v  # noqa: E731

    def differs(args, smallest: str = "smallest ") -> str | None:
        if free is not None and free(*args):
            return None
        want, got = asked(args)
        if same(want, got):
            return None
        return f"{smallest}input where yours differs: {show(*args)}: expected {value(want)!r}, got {value(got)!r}"

    for drawn, inputs in ((True, drawn_inputs(grading_seed, name, strategy, examples)), (False, explicit)):
        for args in inputs:
            try:
                problem = differs(args, "")
            except SubmissionFailure as e:
                e.args = (f"{show(*args)}: {e.args[0]}",)
                raise
            if problem is not None:
                return (drawn and _shrunk(asked, grading_seed, name, strategy, differs)) or problem
    return None
