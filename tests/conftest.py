"""Shared test setup: the reference is loaded by path (never installed), so `import tinyllm` here is it."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "reference") not in sys.path:
    sys.path.insert(0, str(REPO / "reference"))
