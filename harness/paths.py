"""Where things live in the repository, and the reference loaded by path (never installed)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO / "reference"  # holds the package directory `tinyllm/`
FIXTURES = REPO / "fixtures"
MUTANTS = REPO / "mutants"
ORACLE = REPO / "oracle"
TESTS = REPO / "tests"


def use_reference() -> None:
    """Make `import tinyllm` in the judge process the reference.

    Student code never runs in this process (it runs in the worker), so this cannot shadow a
    submission; mutants are loaded under names of their own (harness.loader).
    """
    if str(REFERENCE_DIR) not in sys.path:
        sys.path.insert(0, str(REFERENCE_DIR))
