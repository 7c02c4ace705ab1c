"""Differential property checks: a contract function called on the inputs of its domain table (harness.pack.frames),
each answer compared with the judge's reference's, and the smallest input found where they differ shown.

A pack gives, per function, a `Property`: its `Domain` (parameters, categories, draws), how to call it on an
implementation, how to word a call, how two answers compare (`exact`, or `close(tol)` for floats), what the
contract leaves free, and explicit inputs, each naming the category it stands for. Then, in a test:

    problem = check(PROP, impl, reference, seed)                 # None, or the failure message
    problem = check(PROP, impl, reference, seed, judge=REFUSALS)  # only: is each input the reference refuses refused?
    problem = check(PROP, impl, reference, seed, spell=SPELLING)  # the message in the submission's language

`judge` says which rules a test judges, so that a slip costs only the test whose rule-table row it breaks:
ALL compares every input; ANSWERS only the inputs the reference answers (a refusal there is a difference);
REFUSALS only the inputs the reference refuses (anything but the same refusal is a difference).

Drawing. The frames come from the grading seed and the function's name through `random.Random` (frames.drawn):
every pair of categories of two parameters in some frame, then random frames; no library's version and no module
the process imported changes them, and they cost milliseconds, so they are not kept between checks (the case
sets a seed decides, which take seconds, are: harness.kernel.memo). Which categories the compared inputs reached is
recorded (`reach`), for a staff test that every category is reached on every run.

Verdict and message. The verdict is the drawn and explicit inputs': the first difference fails the check. Its
message shows the smallest input Hypothesis finds (`find`, public API, no example database) by drawing the
failing frame's categories again through `st.randoms()` and shrinking; when the search finds no difference the
message shows the drawn input itself:

    smallest input where yours differs: lookup([4, 4], k=5, n=9): expected [4], got []

A refusal (the contract's error) is an answer like any other ("expected ContractError, got [3]"), and so is a panic
or another exception where the reference answers. A timeout, a crash or a stub not implemented ends the check at
once with its own outcome (its SubmissionFailure, naming the input; nothing to shrink).
"""

import atexit
from contextlib import nullcontext
from dataclasses import dataclass
import math
import os
import random
import shutil
import tempfile
from typing import Any, Callable, Mapping, Protocol

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings, strategies as st
from hypothesis.errors import NoSuchExample

from ..kernel.errors import Raised, SubmissionFailure
from ..kernel.cache import CacheRefused
from ..kernel.memo import folder
from .frames import Domain, drawn, reached

ALL, ANSWERS, REFUSALS = "all", "answers", "refusals"
SEARCH_EXAMPLES = 200  # on a difference: inputs of the failing frame's categories the search may try before shrinking

# Hypothesis's search reads constants from the local modules the process loaded and keeps what it parsed in its
# storage folder, by default ./.hypothesis in the folder the judge runs in (a student's). Its documented variable
# points it at the judge's own cache instead. The constants change only which smaller input a message shows.
def _storage() -> None:
    """Point Hypothesis's storage at the judge's cache, or, when ol's cache cannot hold it (no home, a refused
    folder: a graded judge), at a folder in this judge's own TMPDIR, removed as the process that made it exits (a
    check left 520 KB in /tmp each time: 736 folders in a day of this project's runs). Called before a search,
    never at import: a process that never shrinks makes no folder."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    try:
        where = str(folder("hypothesis"))
    except (RuntimeError, OSError, CacheRefused):
        where = tempfile.mkdtemp(prefix="ol-hypothesis-", dir=os.environ.get("TMPDIR") or None)
        atexit.register(_remove_if_made_here, where, os.getpid())
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = where


def _remove_if_made_here(where: str, maker: int) -> None:
    if os.getpid() == maker:  # a child forked from the maker inherits the hook, never the folder
        shutil.rmtree(where, ignore_errors=True)


class Refused:
    """The answer of a call that raised the contract's error (spec_error)."""

    def __init__(self, name: str = "a refusal") -> None:
        self.name = name

    def __eq__(self, other) -> bool:
        return isinstance(other, Refused)

    def __repr__(self) -> str:
        return self.name


class Failed:
    """The answer of a call that raised something else (a panic, an IndexError, ...)."""

    def __init__(self, e: Raised) -> None:
        self.type, self.message = e.type, e.message

    def __eq__(self, other) -> bool:
        return isinstance(other, Failed) and other.type == self.type

    def __repr__(self) -> str:
        return f"a panic ({self.message})" if self.type == "panic" else f"{self.type} ({self.message})"


def answer(fn: Callable[[], Any], refusal: str = "a refusal"):
    """What a call answered, as data: its value, Refused() or Failed(e). A failure with an outcome of its own
    (timeout, crash, not implemented, not importable) propagates."""
    try:
        return fn()
    except Raised as e:
        if e.spec_error:
            return Refused(refusal)
        if e.not_implemented or e.import_failed:
            raise
        return Failed(e)


def exact(want, got) -> bool:
    return type(want) is type(got) and want == got or (isinstance(want, (Refused, Failed)) and want == got)


def close(tol: float) -> Callable[[Any, Any], bool]:
    """Lists of floats equal within an absolute `tol` (NaN where NaN), anything else exactly."""
    def same(want, got) -> bool:
        if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
            return all(a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol for a, b in zip(want, got))
        return exact(want, got)
    return same


@dataclass(frozen=True)
class Explicit:
    """An input tried on every run beside the drawn ones, and the `param:category` of the domain it stands for."""
    category: str
    args: tuple


class Spelling(Protocol):
    """How messages write a call and a value in the language of the code under test (a pack's, per language)."""

    def name(self, op: str, args: Mapping[str, Any]) -> str: ...

    def call(self, name: str, args: Mapping[str, Any]) -> str: ...

    def value(self, v: Any) -> Any: ...  # an object whose repr is the value as the language writes it


@dataclass(frozen=True)
class Property:
    """A contract function's differential check. `call(impl, *args)` asks an implementation; `op` and `names`, the
    op it calls and the names of its arguments in order, let a Spelling word the call (`show(*args)` words it
    where no spelling is given); `same(want, got)` compares answers; `free(*args)` is true of an input whose answer
    the contract leaves free (never compared); `refusal` names the contract's error in messages."""
    domain: Domain
    call: Callable[..., Any]
    show: Callable[..., str] | None = None
    same: Callable[[Any, Any], bool] = exact
    free: Callable[..., bool] | None = None
    explicit: tuple[Explicit, ...] = ()
    refusal: str = "a refusal"
    op: str = ""
    names: tuple[str, ...] = ()

    def words(self, spell: Spelling | None) -> Callable[..., str]:
        """args -> the call, as `spell` writes it (`show`, or the values' repr, without one)."""
        if spell is not None and self.op:
            return lambda *args: spell.call(spell.name(self.op, dict(zip(self.names, args))), dict(zip(self.names, args)))
        if self.show is not None:
            return self.show
        return lambda *args: f"{self.domain.name}({', '.join(map(repr, args))})"

    def unnamed(self) -> list[Explicit]:
        """The explicit inputs that name no category of the domain (a staff test wants none)."""
        return [e for e in self.explicit if e.category not in self.domain.names]


_reach: dict[tuple[str, str], set[str]] = {}


def reach(name: str, judge: str | None = None) -> set[str]:
    """The categories the inputs compared by the latest check of domain `name` reached (under `judge`, or any)."""
    return set().union(*(got for (n, j), got in _reach.items() if n == name and judge in (None, j)))


_kept: dict[str, tuple[object, int, dict[str, object]]] = {}


def _reference_answers(name: str, ref, seed: int) -> dict[str, object]:
    """The reference's answers of domain `name`'s inputs under `seed`, kept for the next check of the same domain,
    reference and seed: a function's answers and refusals are judged by two tests drawing the same inputs, and each
    asks the reference about every input (to know which it judges). One domain's latest seed is kept. Measured: the
    20 property checks of the first chapter over the reference in this process, 1.4-1.9 s of CPU against 2.0-2.2 s asking twice
    (a machine at load 12, two runs each); about a tenth of a check through the worker."""
    kept = _kept.get(name)
    if kept is None or kept[0] is not ref or kept[1] != seed:
        kept = _kept[name] = (ref, seed, {})
    return kept[2]


class Answers:
    """Each distinct input's two answers, asked once per check (the reference's, once per seed: `_reference_answers`):
    the search replays inputs (the functions are pure)."""

    def __init__(self, prop: Property, ref, impl, seed: int) -> None:
        self.prop, self.ref, self.impl = prop, ref, impl
        self.want = _reference_answers(prop.domain.name, ref, seed)
        self.got: dict[str, object] = {}

    def expected(self, args: tuple):
        key = repr(args)  # tells 0.0 from -0.0, 4 from 4.0 and True from 1
        if key not in self.want:
            with np.errstate(all="ignore"):  # the reference's own 0/0 on a free input is no news
                self.want[key] = answer(lambda: self.prop.call(self.ref, *args), self.prop.refusal)
        return self.want[key]

    def __call__(self, args: tuple) -> tuple:
        key = repr(args)
        if key not in self.got:
            with np.errstate(all="ignore"):  # failures propagate
                self.got[key] = answer(lambda: self.prop.call(self.impl, *args), self.prop.refusal)
        return self.expected(args), self.got[key]

    def batched(self, inputs: list[tuple]):
        """Within: the implementation asked about each of `inputs` not yet asked, in one round trip where its
        transport can (harness.transport.impl.Impl.batched; the answers are taken in the order of `inputs`)."""
        todo = {repr(args): args for args in inputs if repr(args) not in self.got}
        batched = getattr(self.impl, "batched", None)
        if batched is None:
            return nullcontext()
        return batched(lambda args=args: self.prop.call(self.impl, *args) for args in todo.values())


def _judged(prop: Property, asked: Answers, args: tuple, judge: str) -> bool:
    if prop.free is not None and prop.free(*args):
        return False
    if judge == ALL:
        return True
    return isinstance(asked.expected(args), Refused) == (judge == REFUSALS)


def check(prop: Property, impl, reference, seed: int, judge: str = ALL, spell: Spelling | None = None) -> str | None:
    """None when `impl` answers as `reference` on every judged input of the run of `seed` (drawn, then explicit);
    else the failure message naming the smallest input found. A SubmissionFailure on an input is re-raised with
    the input named. `spell`: how the submission's language writes the call and the answers, for the message only
    (the calls get the originals); default, the values' own repr."""
    asked = Answers(prop, reference, impl, seed)
    name = prop.domain.name
    reach_now = _reach[(name, judge)] = set()
    value = spell.value if spell is not None else (lambda v: v)
    show = prop.words(spell)

    def differs(args, smallest: str = "smallest ") -> str | None:
        want, got = asked(args)
        if prop.same(want, got):
            return None
        return f"{smallest}input where yours differs: {show(*args)}: expected {value(want)!r}, got {value(got)!r}"

    inputs: list[tuple[dict[str, str] | None, tuple]] = [(frame, args) for frame, args in drawn(prop.domain, seed)]
    inputs += [(None, e.args) for e in prop.explicit]
    inputs = [(frame, args) for frame, args in inputs if _judged(prop, asked, args, judge)]
    with asked.batched([args for _, args in inputs]):
        for frame, args in inputs:
            try:
                problem = differs(args, "")
            except SubmissionFailure as e:
                e.args = (f"{show(*args)}: {e.args[0]}",)
                raise
            if frame is not None:
                reach_now |= reached(frame)
            if problem is not None:
                return (frame and _shrunk(prop, asked, seed, frame, judge, differs)) or problem
    return None


def _shrunk(prop: Property, asked: Answers, seed: int, frame: dict, judge: str, differs) -> str | None:
    """The smallest input Hypothesis finds among the failing frame's categories where the answers differ; None when
    it finds none, or when the implementation fails outright on the way (the difference already is a verdict)."""
    dead: list[bool] = []

    def fails(args) -> bool:
        if dead or not _judged(prop, asked, args, judge):
            return False
        try:
            return differs(args) is not None
        except SubmissionFailure:
            dead.append(True)
            return False

    _storage()
    strategy = st.randoms(use_true_random=False).map(lambda r: prop.domain.args(frame, r))
    try:
        found = find(strategy, fails, random=random.Random(f"{seed}:{prop.domain.name}:search"),
                     settings=settings(database=None, deadline=None, max_examples=SEARCH_EXAMPLES,
                                       phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        return None
    return None if dead else differs(found)
