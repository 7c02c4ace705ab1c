"""The Python language's hooks: how its failures read, and how `ol check` and `ol diff` speak of a Python workspace.

A Python submission runs from source (no build step) in the worker harness/protocol/worker.py, launched by
harness.languages (PYTHON_WORKER_KIT); its stub is harness.languages.stub's. Python is also the language ol runs
in, so a trusted Python subject (the reference, a mutant) can run inside ol's own process (Language.in_process).
"""

from ..errors import Words

# The stub's NotImplementedError names its function ("rollback: not implemented yet") and a frame reads as Python
# prints a traceback: Words' defaults. A failing check's next step offers the test alone through ol, and a golden
# case pasted as a pytest function.
WORDS = Words(rerun="", case="a pytest function", case_short="a pytest function", label="Python")
