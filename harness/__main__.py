"""`-m harness` is how ./ol runs ol (in this process, always: no server outlives a check); its help and errors say
`ol`. The entry of the program, above every package of harness/ (tests/harness/test_imports.py: its own floor).
./ol starts it isolated (`-P -s`, PYTHONPATH this checkout's root alone): no folder but ol's own is on its
import path, so a `json.py` or `harness/` in the folder it runs in is never imported."""

import sys

from harness.cli import main

main(args=sys.argv[1:], prog_name="ol")
