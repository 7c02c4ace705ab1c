"""Shared test setup. The reference is loaded by path (never installed): `import tinyllm` here is it
(harness.paths.use_reference). The `ol` pytest plugin gives every test the implementation under test
(`--impl`, default reference)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.paths import use_reference  # noqa: E402

use_reference()
pytest_plugins = ["harness.pytest_plugin"]
