"""The Python language's hooks: how its failures read, and how `ol check` and `ol diff` speak of a Python workspace.

A Python submission runs from source (no build step) in the worker harness/protocol/worker.py, launched by
harness.languages (PYTHON_WORKER_KIT); its stub is harness.languages.stub's. Python is also the language ol runs
in, so a trusted Python subject (the reference, a mutant) can run inside ol's own process (Language.in_process).
"""

import platform

from ..kernel.errors import Words

# The stub's NotImplementedError names its function ("rollback: not implemented yet") and a frame reads as Python
# prints a traceback: Words' defaults. A failing check's next step offers the test alone through ol, and a golden
# case pasted as a pytest function.
WORDS = Words(rerun="", case="a pytest function", case_short="a pytest function", label="Python")

# ol's own interpreter, as the harness version document and the staff's commands name it
INTERPRETER = "python"  # the version document's key for its major.minor (harness.subjects.version)
RUN_MODULE = "python -m"  # how a module of ol is run as a command (`python -m harness.staff.rules CHAPTER`)


def interpreter_version() -> str:
    """This interpreter's major.minor ("3.11"): a patch release grades alike."""
    return ".".join(platform.python_version_tuple()[:2])


# ol's own runtime in an autograder image (harness.staff.gradescope): what setup.sh installs, and the file in
# source/ where it records the interpreter it chose, for run_autograder
OL_RUNTIME = "Python 3.11+"
INTERPRETER_FILE = ".ol-python"
