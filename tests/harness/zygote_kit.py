"""Judges for tests/harness/test_zygote.py: each is what a zygote's fork runs instead of `ol` (its `main`),
called as ol's would be, with the request's argv."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def where(args, prog_name):
    """Print what the fork runs with (argv, environment, folder, temporary folder, session), exit 7."""
    print(json.dumps({"args": args, "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(),
                      "tmp": tempfile.gettempdir(), "sid": os.getsid(0), "pid": os.getpid()}))
    print("to stderr", file=sys.stderr)
    sys.exit(7)


def dies(args, prog_name):
    """Killed by a signal before it reports."""
    print("about to die", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def hangs(args, prog_name):
    """Starts a child in its session, says both pids, and never ends (args[0]: a file for the pids)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(args[0], "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    print("pids written", flush=True)
    time.sleep(120)


def changes_the_zygote(args, prog_name):
    """Changes its own copy of a module the zygote imported: the next fork must not see it."""
    import harness.grading.grade

    seen = getattr(harness.grading.grade, "_ol_test_mark", None)
    harness.grading.grade._ol_test_mark = "set by an earlier judge"
    print(json.dumps({"seen": seen}))
    sys.exit(0)


def warmed(args, prog_name):
    """Print how many of the reference's answers this fork inherited (harness.pack.differential keeps them by
    domain) and how many threads it has; exit 0."""
    import threading

    from harness.pack import differential

    print(json.dumps({"answers": sum(len(kept[2]) for kept in differential._kept.values()),
                      "threads": threading.active_count()}))
    sys.exit(0)
