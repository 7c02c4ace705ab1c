"""Shared test setup. The reference is loaded by path (never installed): `import tinyllm` here is it.
The `ol` pytest plugin gives every test the implementation under test (`--impl`, default reference)."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "reference"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

pytest_plugins = ["harness.pytest_plugin"]
