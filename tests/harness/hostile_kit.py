"""What the hostile-submission tests share: a submission made from the reference with code appended,
one call with a short deadline as data, and process checks."""

import os
import shutil
import textwrap
import time
from pathlib import Path

from harness.errors import SubmissionFailure
from harness.paths import REFERENCE_DIR
from harness.registry import load_chapter

CH = load_chapter("L10.8")
HAND_PL = dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1)  # the reference answers [7, 8, 5]
SLACK_S = 3.0  # killing and reaping a worker, on a loaded machine


def submission(root: Path, code: str, name: str = "sub") -> Path:
    """The reference package in root/name/tinyllm, with `code` appended to infer/spec.py."""
    d = root / name
    shutil.copytree(REFERENCE_DIR / "tinyllm", d / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    with open(d / "tinyllm" / "infer" / "spec.py", "a") as f:
        f.write("\n\n# ---- appended by a hostile test ----\n" + textwrap.dedent(code))
    return d


def attempt(impl, op: str, args: dict, deadline_s: float = 2.0):
    """(value or the SubmissionFailure, seconds)."""
    start = time.monotonic()
    try:
        return impl.call(op, args, deadline_s=deadline_s), time.monotonic() - start
    except SubmissionFailure as e:
        return e, time.monotonic() - start


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def outcomes(rep) -> dict:
    return {t.name: t.outcome for t in rep.tests}
