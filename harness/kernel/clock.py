"""The judge's clock for deadlines: monotonic time less the time this process spent stopped by job control.

A deadline measures how long the implementation had to answer. While the judge is stopped at a terminal (Ctrl-Z,
SIGTSTP; resumed by `fg`), it answers no callback and reads no answer, and its own deadlines would go on running:
a student who stopped `ol check` for longer than a call's deadline came back to a timeout of right code (the
reference, stopped 65 s in the middle of a test whose call waited on the judge's callbacks, 2026-12-07: past the
call's 15 s). So every deadline of a check (a call's, a test's budget, the whole check's limit, a build's, `ol
grade`'s for its judges) reads `now()`, which stands still while the process is stopped.

    install()   ol's SIGTSTP handler (from the CLI, in the main thread, as a command starts): the time the process
                then spends stopped, as the default action stops it, is taken out of now()
    now()       time.monotonic() less every such stop so far

Only a stop this process hears is known: SIGSTOP (which no process can catch) is counted as time. A suspended
machine needs nothing: the monotonic clock stands still through a suspend. A process whose group is orphaned (no
terminal's job control above it) is not stopped by SIGTSTP, with the handler or without.
"""

import os
import signal
import threading
import time

_stopped_s = 0.0  # this process's time stopped by SIGTSTP so far


def now() -> float:
    """Monotonic seconds, stopped while the process is (after install)."""
    return time.monotonic() - _stopped_s


def _stop(signum, frame) -> None:
    """SIGTSTP: stop as the default action would, and on SIGCONT count the time stopped."""
    global _stopped_s
    began = time.monotonic()
    signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    try:
        os.kill(os.getpid(), signal.SIGTSTP)  # the process stops here; `fg` (SIGCONT) goes on from here
    finally:
        signal.signal(signal.SIGTSTP, _stop)
        _stopped_s += time.monotonic() - began


def install() -> None:
    """ol's SIGTSTP handler in place of the default one (main thread only; a handler someone else set is kept)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL:
        signal.signal(signal.SIGTSTP, _stop)
