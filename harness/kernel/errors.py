"""Errors of the harness. Each says the cause and the remedy; each maps to an exit code of `ol`.

Exit codes (the contract of every `ol` command):
  0  success (all tests passed, fixtures up to date, every mutant killed, ...)
  1  the thing checked is wrong (a test failed, fixtures differ, a mutant survived)
  2  bad input: usage, unknown chapter, a missing path, a malformed submission directory, a refused cache folder
  3  the harness itself failed (a bug in ol: please report it with the output)
"""

from contextlib import contextmanager
from dataclasses import dataclass
import signal
import threading
from typing import Callable

from .outcomes import Outcome


# Ctrl-C, kept where the interpreter drops it: a KeyboardInterrupt raised inside an at-fork hook, a finalizer or a weakref
# callback is printed as "Exception ignored" and lost. Measured: a Ctrl-C typed as `ol mutants` forked its pool's
# processes was raised in logging's at-fork hook (_releaseLock), dropped, and the run went on to a kill matrix and
# exit 0 (1 run in about 4 of the interrupt tests under a loaded -n 4). ol's handler notes it before raising it.
_INTERRUPTED = threading.Event()


def _heard(signum, frame) -> None:
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def hear_interrupts() -> None:
    """ol's Ctrl-C handler in place of the interpreter's default (from the CLI, in the main thread, as a command
    starts): the same KeyboardInterrupt, noted first, so that raise_if_interrupted() raises it again where a run
    decides or writes. A command starts unnoted: a Ctrl-C belongs to the run it interrupted (a process that runs
    several commands, as a test's does, carries none into the next)."""
    _INTERRUPTED.clear()
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _heard)


def raise_if_interrupted() -> None:
    """KeyboardInterrupt when Ctrl-C came in this process (hear_interrupts), whatever swallowed it since."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


@contextmanager
def interrupts_deferred():
    """Ctrl-C heard inside the block acts at its end (through the handler it replaced: ol's notes it), so that what
    the block writes is written whole (the ledger's entry file and its record of it: a Ctrl-C between the two once
    left a finished grade on disk that the run, stopping, overwrote as "interrupted before it was graded"). Signal
    handlers belong to the main thread: elsewhere, as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    heard: list = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: heard.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if heard and callable(previous):
            previous(signal.SIGINT, heard[0])  # the handler's own KeyboardInterrupt, here
        elif heard and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


SIGNALLED = 128  # a shell's exit status for a process killed by signal N is SIGNALLED + N (subprocess's is -N)


def check_exit(ok: bool, ungraded: bool) -> int:
    """The exit code of an `ol check` whose report is `ok` (every test passed) or `ungraded` (the grader failed)."""
    return 3 if ungraded else 0 if ok else 1


def verdict_of(code: int) -> tuple[str, int | None]:
    """What an `ol check`'s exit code says of its submission, and the signal that ended it: "graded" (0 or 1),
    "refused" (2: bad input, the submission's fault only where the output names it so), "killed" (-N as subprocess
    gives it, SIGNALLED + N as a shell does), else "fault" (the grader's: ungraded). The inverse of `check_exit`."""
    if code in (0, 1):
        return "graded", None
    if code == 2:
        return "refused", None
    if code < 0 or code > SIGNALLED:
        return "killed", -code if code < 0 else code - SIGNALLED
    return "fault", None


class OlError(Exception):
    exit_code = 3


class UsageError(OlError):
    exit_code = 2


class UnknownChapter(UsageError):
    def __init__(self, chapter: str, known: list[str]) -> None:
        super().__init__(f"unknown chapter {chapter!r}: ol knows {', '.join(known)}. Check the spelling.")


class BadSubmission(UsageError):
    """The submission path is missing or not laid out as a course workspace."""


class SandboxError(UsageError):
    """The sandbox asked for cannot run here."""


class RegistryError(OlError):
    """A chapter registry or mutant manifest is inconsistent (staff error)."""


# ---- failures of the implementation under test: raised inside tests, become per-test outcomes ----

class SubmissionFailure(Exception):
    """Something the implementation under test did; the test reports it, the run goes on."""

    outcome = Outcome.ERROR


def _stub_named(message: str) -> str:
    """The function a stub's NotImplementedError names ("rollback: not implemented yet"), ol's own stub convention."""
    return message.split(": ", 1)[0] if message.endswith("not implemented yet") else ""


def _traceback_frame(f: dict) -> str:
    """One frame of the student's own code, as ol's own interpreter prints a traceback."""
    return f"\n  {f.get('file')}, line {f.get('line')}, in {f.get('function')}" + (f"\n    {f.get('source')}" if f.get("source") else "")


@dataclass(frozen=True)
class Words:
    """How a language's failures read (Language.words): the function whose stub body ran ("" when none), a frame of
    the student's code; and how `ol check`'s next step speaks of it: `rerun`, added after `ol check -k` ("{failed}":
    the test), and how `ol diff --case` prints a case, `case` ("{file}": the student file) and `case_short`."""

    stub_hit: Callable[[str], str] = _stub_named
    frame: Callable[[dict], str] = _traceback_frame
    rerun: str = ""
    case: str = ""
    case_short: str = ""
    label: str = ""  # the language's name in a sentence


class Raised(SubmissionFailure):
    """The implementation raised an exception."""

    def __init__(self, op: str, data: dict, language: str = "", words: Words = Words()) -> None:
        """`language`: the worker's language; "" for code that ran in ol's own process (harness.transport.inprocess)."""
        self.op = op
        self.language = language
        self.words = words
        self.type = data.get("type", "Exception")
        self.message = data.get("message", "")
        self.spec_error = bool(data.get("spec_error"))
        self.traceback = data.get("traceback", "")
        frames = data.get("frames")
        self.frames = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
        self.called: str | None = None  # the contract's function the test called (Impl.call names it), else the op
        self.call: str | None = None  # that call with its input, shown literally and abbreviated (Impl.call writes it)
        changed = data.get("changed")  # the worker's check after the call: an argument the function changed
        self.changed = changed if isinstance(changed, dict) else None
        if self.changed is not None:
            self.outcome = Outcome.FAIL  # a wrong effect of an answered call, as a wrong answer is
        self.show: Callable = repr  # how the changed argument's values are shown (Impl.call gives feedback's brief)
        super().__init__(self.describe())

    def name_call(self, called: str, call: str | None = None, show: Callable | None = None) -> None:
        """The contract's name of what the test called (as the contract spells it, not the op's), and the call with
        its input (harness.transport.feedback); `show` writes a value (feedback's `brief`)."""
        self.called, self.call = called, call
        self.show = show or self.show
        self.args = (self.describe(),)

    def _changed(self) -> str:
        """The call that changed an argument, the argument, and what it held before and after."""
        c = self.changed or {}
        return (f"{self.call or self.called or self.op} changed its argument {c.get('argument')}: before the call it was "
                f"{self.show(c.get('before'))}, after it {self.show(c.get('after'))}. The contract's functions leave their "
                "arguments as the caller gave them: copy a list before changing it")

    def _not_implemented(self) -> str:
        """One line: `not implemented: f`, f the function the test called; another when its stub is what ran."""
        called, hit = self.called or self.op, self.words.stub_hit(self.message)
        if not hit or hit == called or called.endswith(("." + hit, "::" + hit)):
            return f"not implemented: {called}"
        return f"not implemented: {hit} (the test called {called}, which needs it)"

    @property
    def not_implemented(self) -> bool:
        return self.type == "NotImplementedError"

    @property
    def import_failed(self) -> bool:
        return self.type in ("ImportError", "ModuleNotFoundError", "SyntaxError")

    def where(self) -> str:
        """The innermost lines of the student's own files, as the language shows them (a traceback, a compiler's arrows)."""
        return "".join(self.words.frame(f) for f in self.frames)

    def describe(self) -> str:
        if self.changed is not None:
            return self._changed()
        if self.not_implemented:
            return self._not_implemented()
        if self.type == "panic":
            if self.call:  # "your code panicked at spec.rs:3:9: ..." -> "prompt_lookup(...) panicked at spec.rs:3:9: ..."
                return f"{self.call} {self.message.removeprefix('your code ')}{self.where()}"
            return f"{self.op}: {self.message}{self.where()}"
        if self.import_failed:
            return (f"{self.op}: your submission could not be imported: {self.type}: {self.message}{self.where()}\n"
                    "Fix the import; if an earlier chapter's module is what is missing, try --ref-deps.")
        if self.call:
            return f"{self.call} raised {self.type}: {self.message}{self.where()}"
        return f"{self.op}: your code raised {self.type}: {self.message}{self.where()}"


class Timeout(SubmissionFailure):
    outcome = Outcome.TIMEOUT


class WrongType(SubmissionFailure):
    """The implementation returned a value of the wrong type or shape (4.0 where an int is due): a wrong answer."""

    outcome = Outcome.FAIL


class Crashed(SubmissionFailure):
    """The worker process died (exit, signal, out of memory) or broke the protocol."""

    outcome = Outcome.CRASHED


class BuildFailed(SubmissionFailure):
    """A compiled language's build of the submission failed or did not finish: no test runs, and each says
    `summary`, the build's first error in the language's words (harness.languages: its build raises it)."""

    outcome = Outcome.ERROR

    def __init__(self, message: str, summary: str) -> None:
        self.summary = summary
        super().__init__(message)
