"""Where things live in the repository, and the reference loaded by path (never installed).

The reference plays two parts, kept apart:
  * the judge's own answer key (`judge_module`): a pristine copy loaded under the private name
    `ol_judge_tinyllm`, which no implementation under test can be;
  * the in-process implementation under test `reference` (`use_reference`): `import tinyllm`.
With OL_TINYLLM_FROM_PATH set, `tinyllm` is whatever sys.path already gives (mutmut's mutated
copy), while the judge keeps its pristine copy: a mutant cannot move the expected answers with it.
"""

import importlib
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO / "reference"  # holds the package directory `tinyllm/`
FIXTURES = REPO / "fixtures"
MUTANTS = REPO / "mutants"
ORACLE = REPO / "oracle"
TESTS = REPO / "tests"
JUDGE_PACKAGE = "ol_judge_tinyllm"


def use_reference() -> None:
    """Make `import tinyllm` in this process the reference (unless OL_TINYLLM_FROM_PATH says otherwise).

    Student code never runs in the judge process (it runs in the worker), so this cannot shadow a
    submission; mutants are loaded under names of their own (load_package).
    """
    if os.environ.get("OL_TINYLLM_FROM_PATH"):
        return
    if str(REFERENCE_DIR) not in sys.path:
        sys.path.insert(0, str(REFERENCE_DIR))


def load_package(package_dir: Path, alias: str):
    """Import the package at `package_dir` under the module name `alias` (its imports are relative)."""
    if alias in sys.modules:
        return sys.modules[alias]
    spec = importlib.util.spec_from_file_location(alias, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module


def judge_module(name: str):
    """A module of the judge's pristine reference, e.g. judge_module("infer.spec")."""
    load_package(REFERENCE_DIR / "tinyllm", JUDGE_PACKAGE)
    return importlib.import_module(f"{JUDGE_PACKAGE}.{name}")
