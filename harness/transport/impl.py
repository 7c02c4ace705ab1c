"""The implementation under test as the chapter's tests see it: one Impl over one of the two
transports of harness.transport:

    inprocess.InProcess          the reference and mutants: trusted code, called in the judge process.
    worker_client.WorkerTransport  a submission: a worker process speaking spec/protocol.md.

Both run the chapter's ops, so a test sees the same plain data whichever transport serves it. Every
call becomes data first (a value or an error, and its duration, like pytest's CallInfo); then
`Impl.call` returns the value or raises the SubmissionFailure the test reports. A chapter's pack
subclasses Impl with its interface as methods (its `client` module); the engine knows none of them.
"""

from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from ..kernel import clock
from ..kernel.errors import Raised, SubmissionFailure, Timeout, WrongType
from ..protocol.wire import floats
from ..sandbox.confine import Mode
from .feedback import brief, call_text
from .shapes import ShapeError, conform

DEFAULT_DEADLINE_S = 5.0  # a pure call answers in milliseconds; the margin is for a loaded grading machine
# One check's whole limit, from the implementation's opening (after a build, itself at most 240 s): every call ends by
# then, and a call asked after it is a Timeout at once, so a submission slow on every call gets its verdict (its
# remaining tests time out) before `ol grade` stops the check (harness.grading.judge.WHOLE_CHECK_S, 900 s) and
# leaves it ungraded. The tests' own budgets (chapter.toml `timeout_s`) add up to more (1500 s for L10.8).
CHECK_LIMIT_S = 600.0
CHECK_LIMIT_ENV = "OL_CHECK_LIMIT_S"  # a lower limit for a check (staff, ol's tests); never a higher one


def check_limit_s() -> float:
    """The whole-check limit in force: CHECK_LIMIT_S, or OL_CHECK_LIMIT_S when that is lower."""
    try:
        asked = float(os.environ.get(CHECK_LIMIT_ENV, CHECK_LIMIT_S))
    except ValueError:
        return CHECK_LIMIT_S
    return asked if 0 < asked < CHECK_LIMIT_S else CHECK_LIMIT_S


@dataclass
class CallInfo:
    op: str
    value: object = None
    error: SubmissionFailure | None = None
    duration_s: float = 0.0
    deadline_s: float = 0.0  # a batch's call: the deadline it had (Impl.batched)


class _Recorded(BaseException):
    """Impl.batched's first pass: a thunk's call was recorded, the thunk goes no further."""


def describe_call(op: str, args: dict, deadline_s: float, cap: int = 60) -> str:
    """`op(arg=value, ...)` with each value cut to `cap` characters, and the deadline: what a timeout names."""
    shown = ", ".join(f"{k}={(r := repr(v))[:cap]}{'...' if len(r) > cap else ''}" for k, v in args.items())
    return f"{op}({shown}) with a deadline of {deadline_s:.3g} s"


def no_callbacks(method: str, args: dict):
    raise ValueError(f"this call has no judge objects to call back into (asked for {method!r})")


class Transport(Protocol):
    """What an Impl calls through: InProcess (trusted code, in this process) or a worker's (WorkerTransport; Unbuilt,
    a build that failed). `run` makes every outcome data (a CallInfo), under `deadline_s`; `callbacks(method, args)`
    answers the code's calls back into the judge. A transport with round trips to save may also have
    `run_batch(calls, callbacks, end)` (WorkerTransport's; Impl.batched)."""

    @property
    def language(self) -> str: ...  # the code's language ("": ol's own, in this process): errors are worded in it

    @property
    def mode(self) -> Mode | None: ...  # how its code is confined (harness.sandbox.confine); None: in this process

    def run(self, op: str, args: dict, callbacks: Callable[[str, dict], object], deadline_s: float) -> "CallInfo": ...

    def spawn(self) -> None: ...  # start what serves the calls (a worker), before the first

    def restart(self) -> None: ...  # a fresh server for the next call (a worker that owes an answer)

    def close(self) -> None: ...


class Impl:
    """Calls into one implementation, each under a deadline and the current test's budget."""

    DEADLINES_S: dict[str, float] = {}  # per-op deadlines a chapter's client may set
    ANSWERS: dict[str, object] = {}  # op -> the shape of its answer (harness.transport.shapes), from the chapter's ops

    def __init__(self, transport: Transport, label: str, scratch: Path | None = None) -> None:
        self.transport = transport
        self.scratch: list[Path] = [scratch] if scratch else []  # scratch copies it serves from: removed at close
        self.label = label
        self.budget_end: float | None = None  # monotonic time the current test's budget runs out
        self.budget_s = 0.0
        self.check_s = check_limit_s()
        self.check_end: float | None = None  # the whole check's end (arm_check_limit): no call lasts past it
        self.answers: dict[str, object] = {}  # golden case id -> the implementation's answer (harness.check.hints)
        self._recording: list[tuple[str, dict]] | None = None  # batched's first pass: the calls its thunks make
        self._ready: deque[tuple[tuple[str, str], CallInfo]] = deque()  # the batch's answers not yet taken, in order
        self.batch_missed = False  # the latest batch was dropped: a call came out of its order (batched)

    def record(self, case_id: str, answer) -> None:
        """Keep the implementation's answer to a golden case, for pitfall hints (judge-side data only)."""
        self.answers[case_id] = answer

    def arm_check_limit(self) -> None:
        """Start the whole check's limit now: a check (harness.check.runner) arms it when it opens the
        implementation; a long pytest session over one Impl (ol's own suite) has none, only each test's budget."""
        self.check_end = clock.now() + self.check_s

    def start_budget(self, seconds: float) -> None:
        """Every call of the current test must end within `seconds` of now, all calls together."""
        self.budget_s, self.budget_end = seconds, clock.now() + seconds

    def call(self, op: str, args: dict, callbacks=None, deadline_s: float | None = None):
        """Run `op`; a failure is raised in the student's vocabulary: the contract's function (in the submission's
        language), never the protocol's op name."""
        if self._recording is not None:
            if callbacks is None and deadline_s is None:
                self._recording.append((op, args))
            raise _Recorded
        info = self._batched(op, args) if callbacks is None and deadline_s is None else None
        if info is not None:
            deadline_s = info.deadline_s
        else:
            deadline_s = self._deadline(op, args, deadline_s or self.DEADLINES_S.get(op, DEFAULT_DEADLINE_S))
            info = self.transport.run(op, args, callbacks or no_callbacks, deadline_s)
        if info.error is not None:
            if isinstance(info.error, Raised):
                language = info.error.language
                info.error.name_call(self.called(op, args, language), self.call_words(op, args, language),
                                     self.value_words(language))
            else:
                self._rename(info.error, op, args, deadline_s)
            raise info.error
        return self.conform(op, args, info.value)

    def _deadline(self, op: str, args: dict, deadline_s: float) -> float:
        """`deadline_s` cut to the time left of the whole check and of the test's budget; a Timeout when none is left."""
        left = float("inf") if self.check_end is None else self.check_end - clock.now()
        if left <= 0:
            raise Timeout(f"{self._called(op, args)}: the whole check's limit of {self.check_s:.3g} s ran out (your code "
                          "is too slow on every call; the tests left time out)")
        deadline_s = min(deadline_s, left)
        if self.budget_end is not None:
            left = self.budget_end - clock.now()
            if left <= 0:
                raise Timeout(f"{self._called(op, args)}: the test's budget of {self.budget_s:.0f} s ran out "
                              "(your code is too slow or stuck)")
            deadline_s = min(deadline_s, left)
        return deadline_s

    @contextmanager
    def batched(self, thunks: Iterable[Callable[[], object]]) -> Iterator[None]:
        """Within: the calls the thunks make (one call of this Impl each, without callbacks), asked in one round trip
        when the transport takes batches (spec/protocol.md section 3), each under its own deadline, and answered from
        it while they come in that order, each as it would have been alone (its value, or its error, timeout or crash);
        a call out of that order, or one the batch left unanswered (after a timeout or a crash, or past the time
        left), is made alone. The thunks run once first, each stopped at its call, to learn the calls."""
        calls: list[tuple[str, dict]] = []
        self.batch_missed = False
        run_batch = getattr(self.transport, "run_batch", None)  # in this process: no round trip to save
        self._recording = calls if run_batch is not None else None
        try:
            for thunk in thunks if run_batch is not None else ():
                try:
                    thunk()
                except (_Recorded, Exception):  # one that fails before its call fails again when it runs for real
                    pass
        finally:
            self._recording = None
        if calls and run_batch is not None:
            end = min(t for t in (self.check_end, self.budget_end, float("inf")) if t is not None)
            infos = run_batch([(op, args, self.DEADLINES_S.get(op, DEFAULT_DEADLINE_S)) for op, args in calls], no_callbacks, end)
            self._ready = deque(((op, repr(args)), info) for (op, args), info in zip(calls, infos))
        try:
            yield
        finally:
            self._ready.clear()

    def _batched(self, op: str, args: dict) -> CallInfo | None:
        """The batch's answer to this call when it is the next the batch holds; else None, and the batch is dropped."""
        if self._ready:
            key, info = self._ready.popleft()
            if key == (op, repr(args)):
                return info
            self._ready.clear()
            self.batch_missed = True
        return None

    def _rename(self, error: SubmissionFailure, op: str, args: dict, deadline_s: float) -> None:
        """A timeout or a crash the transport told with the op (`op: ...`, `op(args) with a deadline ...`), told
        with the contract's call instead."""
        text, called = str(error), self._called(op, args)
        timed = describe_call(op, args, deadline_s)
        if text.startswith(timed):
            text = f"{self.call_words(op, args, self.language)} with a deadline of {deadline_s:.3g} s{text[len(timed):]}"
        elif text.startswith(f"{op}:"):
            text = called + text[len(op):]
        else:
            return
        error.args = (text, *error.args[1:])

    @property
    def language(self) -> str:
        """The language of the code under test ("": ol's own, code in this process): how messages word its values."""
        return self.transport.language

    def _called(self, op: str, args: dict) -> str:
        return self.called(op, args, self.transport.language)

    def called(self, op: str, args: dict, language: str) -> str:
        """The contract's name, in `language` ("": ol's own, code in this process), of the function `op` calls; a
        chapter's client maps its ops."""
        return op

    def call_words(self, op: str, args: dict, language: str) -> str:
        """The call `op` makes with `args`, as `language`'s contract writes it; a chapter's client spells it."""
        return call_text(self.called(op, args, language), self.shown_args(op, args))

    def value_words(self, language: str) -> Callable[[Any], str]:
        """How a value of a call is written in `language`, briefly (an argument the call changed)."""
        return brief

    def shown_args(self, op: str, args: dict) -> dict:
        """The arguments of the contract's call `op` makes, as an error shows them (harness.transport.feedback.call_text);
        a chapter's client leaves out what only the protocol carries (handles, flags)."""
        return args

    def conform(self, op: str, args: dict, value):
        """The answer checked against the op's declared shape (non-finite floats decoded). A mismatch is the
        student's function returning the wrong type (k = 4.0 where an int is due): a WrongType, a `fail` that says
        so; the worker that died or sent what is no message of the protocol is Crashed, by the transport."""
        shape = self.ANSWERS.get(op)
        if shape is None:
            return floats(value)
        try:
            return conform(shape(args) if callable(shape) else shape, value, "result")
        except ShapeError as e:
            self.transport.restart()  # it may yet send the answer it owes: a fresh worker serves the next call
            raise WrongType(f"{self.call_words(op, args, self.language)} returned the wrong type: {e}") from None

    def adopt(self, path: Path) -> None:
        """Remove `path` (a scratch folder this Impl depends on) when the Impl closes."""
        self.scratch.append(path)

    def close(self) -> None:
        self.transport.close()
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)
        self.scratch = []
