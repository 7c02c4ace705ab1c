"""`-m harness` is how ./ol runs ol: a check through the judge server when one is up (harness.served), else
in this process, and then a server started for the next check; its help and errors say `ol`. The entry of the
program, above every package of harness/ (tests/harness/test_imports.py: its own floor)."""

import os
import signal
import sys

from harness import served


def main() -> None:
    argv = sys.argv[1:]
    use = served.enabled(argv)
    if use:
        environ, key = dict(os.environ), served.key()  # before the check sets anything in it
        code = served.served(argv, key)
        if code is not None:
            if code < 0:  # the check was killed by a signal: so is this process, as the check's own would be
                signal.signal(-code, signal.SIG_DFL)
                os.kill(os.getpid(), -code)
            sys.exit(code)
        served.report("in-process")
    try:
        from harness.cli import main as ol  # here: a served check never imports the CLI (the client's start is ~70 ms)

        ol(args=argv, prog_name="ol")
    finally:
        if use:
            served.start(argv, key, environ)


main()
