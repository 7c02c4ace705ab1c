"""Bounded work on every answer (issue 36, item 4): what the judge reads of a worker's error answer is capped (frames,
texts, the source files a frame names) and read before the call's deadline; and a submission that sleeps 80 % of each
call's deadline gets its verdict within the whole check's limit (its remaining tests `timeout`, failures), not
`ungraded` when `ol grade` stops its check. Small limits (OL_CHECK_LIMIT_S), so it runs in seconds; no assertion on
elapsed time: the verdicts, and the message naming the limit."""

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kernel.errors import Raised, Timeout
from harness.registry import load_chapter
from harness.transport import error_answer
from harness.transport.impl import CHECK_LIMIT_ENV, CallInfo, Impl

REPO = Path(__file__).resolve().parents[2]
CORRECT = REPO / "examples/submissions/correct"
N = len(load_chapter("L10.8").tests)


def huge_error(root: Path) -> dict:
    """An error answer listing 4,000 frames, each naming an 8 MiB file of the upload (the issue's attack)."""
    big = root / "big.rs"
    big.write_bytes(b"// x\n" * ((8 << 20) // 5))
    frames = [{"file": "big.rs", "line": 1_000_000 + i, "function": "f" * 10_000} for i in range(4000)]
    return {"type": "panic", "message": "m" * 1_000_000, "frames": frames}


def test_an_error_answer_is_read_within_caps(tmp_path, monkeypatch):
    reads = []
    real = error_answer._source_lines
    monkeypatch.setattr(error_answer, "_source_lines", lambda p: reads.append(p) or real(p))
    data = error_answer.with_sources(error_answer.bounded(huge_error(tmp_path)), tmp_path, time.monotonic() + 60)
    assert len(data["frames"]) == error_answer.FRAMES_CAP
    assert len(reads) <= error_answer.SOURCE_FILES_CAP and len(reads) == 1, reads  # one file, read once
    assert all(len(f["function"]) < 400 for f in data["frames"]) and len(data["message"]) < 4100
    e = Raised("generate", data, "rust")
    assert len(str(e)) < 20_000 and "more characters" in str(e)


def test_nothing_is_read_past_the_calls_deadline(tmp_path, monkeypatch):
    reads = []
    monkeypatch.setattr(error_answer, "_source_lines", lambda p: reads.append(p) or [])
    (tmp_path / "spec.rs").write_text("fn f() {}\n")
    data = {"type": "panic", "message": "boom", "frames": [{"file": "spec.rs", "line": 1}]}
    assert error_answer.with_sources(data, tmp_path, time.monotonic() - 1)["frames"] == data["frames"]
    assert reads == []
    assert error_answer.with_sources(data, tmp_path, time.monotonic() + 60)["frames"][0]["file"] == "spec.rs"
    assert len(reads) == 1


class Sleepy:
    """A transport whose every call answers after 80 % of its deadline."""

    language, mode = "", None

    def run(self, op, args, callbacks, deadline_s):
        time.sleep(0.8 * deadline_s)
        return CallInfo(op, value=None, duration_s=0.8 * deadline_s)


def test_calls_after_the_whole_checks_limit_time_out_at_once_naming_it(monkeypatch):
    monkeypatch.setenv(CHECK_LIMIT_ENV, "0.5")
    impl = Impl(Sleepy(), "sleepy")
    impl.arm_check_limit()  # as a check does when it opens the submission
    outcomes = []
    for _ in range(8):  # each test's budget is fresh; the check's limit is not
        impl.start_budget(60)
        try:
            impl.call("load", {}, deadline_s=0.2)
            outcomes.append("answered")
        except Timeout as e:
            outcomes.append(str(e))
    assert outcomes[0] == "answered" and "the whole check's limit of 0.5 s ran out" in outcomes[-1], outcomes


SLEEP = '''
import functools as _functools
import inspect as _inspect
import time as _time


def _slow(fn):
    @_functools.wraps(fn)
    def slow(*args, **kwargs):
        _time.sleep(4.0)  # 80 % of the judge's 5 s deadline of a call
        return fn(*args, **kwargs)
    return slow


for _name, _value in list(globals().items()):
    if _inspect.isfunction(_value) and _value.__module__ == __name__ and not _name.startswith("_"):
        globals()[_name] = _slow(_value)
'''


@pytest.mark.slow(s=60)
def test_a_submission_slow_on_every_call_is_graded_with_timeouts_not_ungraded(tmp_path):
    sub = tmp_path / "class" / "sleepy"
    shutil.copytree(CORRECT, sub)
    spec = sub / "tinyllm" / "infer" / "spec.py"
    spec.write_text(spec.read_text() + SLEEP)
    out = tmp_path / "out" / "grades.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO), CHECK_LIMIT_ENV: "20"}
    r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(tmp_path / "class"), "--ref-deps",
                        "--jobs", "1", "--seed", "3", "--no-similar", "--out", str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    row = next(csv.DictReader(out.open()))
    assert row["status"] == "graded", row
    outcomes = [row[t.name] for t in load_chapter("L10.8").tests]
    assert "timeout" in outcomes and int(row["passed"]) < N, row
    report = (out.parent / "grades-results" / "sleepy.json").read_text()
    assert "the whole check's limit of 20 s ran out" in report
