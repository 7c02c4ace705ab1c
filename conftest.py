"""Shared test setup for ol's own suite (tests/ and every pack's tests under chapters/). The reference
is loaded by path (never installed): `import tinyllm` here is it (harness.reference.use_reference).
The `ol` pytest plugin gives every chapter test the implementation under test (`--impl`, default
the reference)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.reference import use_reference  # noqa: E402

use_reference()
pytest_plugins = ["harness.pytest_plugin"]
