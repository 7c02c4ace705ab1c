"""The jobs harness/ does in one place (issue 40, item 2), on their own: the exit code of a check and what a
judge's exit says of its submission, writing a file whole, loading a module by its path, killing a process group."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from harness.kernel.errors import SIGNALLED, check_exit, verdict_of
from harness.kernel.paths import write_atomic
from harness.protocol.session import load_module
from harness.sandbox.confine import kill_group


@pytest.mark.parametrize("ok, ungraded, code", [(True, False, 0), (False, False, 1), (True, True, 3), (False, True, 3)])
def test_a_checks_exit_reads_back_as_its_verdict(ok, ungraded, code):
    assert check_exit(ok, ungraded) == code
    assert verdict_of(code) == (("fault", None) if ungraded else ("graded", None))


@pytest.mark.parametrize("code, verdict", [
    (2, ("refused", None)),
    (-9, ("killed", 9)),  # subprocess's spelling of a signal
    (SIGNALLED + 9, ("killed", 9)),  # a shell's (run_autograder's bash)
    (SIGNALLED, ("fault", None)),  # 128 itself is an exit status, no signal
    (4, ("fault", None)),
])
def test_every_other_exit_is_a_refusal_a_kill_or_the_graders_fault(code, verdict):
    assert verdict_of(code) == verdict


def test_a_file_written_whole_is_its_owners_alone_and_a_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "grades.csv"
    target.write_text("old\n")
    write_atomic(target, "é,1\n")
    assert target.read_bytes() == "é,1\n".encode("utf-8") and stat.S_IMODE(target.stat().st_mode) == 0o600

    taken = tmp_path / "taken"  # a folder where the file should go: the rename fails, after the data is written aside
    (taken / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_atomic(taken, "new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv", "taken"], "no temporary file is left"


def test_a_module_loaded_by_path_is_left_registered_and_a_failed_one_is_not(tmp_path):
    good = tmp_path / "pkg"
    good.mkdir()
    (good / "__init__.py").write_text("from .part import VALUE\n")
    (good / "part.py").write_text("VALUE = 7\n")
    module = load_module(good / "__init__.py", "ol_test_pkg_one_home", package=True)
    assert module.VALUE == 7 and sys.modules["ol_test_pkg_one_home"] is module
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError):
        load_module(bad, "ol_test_bad_one_home")
    assert "ol_test_bad_one_home" not in sys.modules
    with pytest.raises(ImportError):
        load_module(tmp_path / "notes.txt", "ol_test_txt_one_home")


def test_a_group_killed_takes_what_its_leader_started_and_a_gone_group_is_no_error():
    p = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(p.stdout.readline())
    assert kill_group(p.pid) is True
    p.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":  # dead, not yet reaped by whoever adopted it
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the leader's child outlived its group's kill")
    done = subprocess.Popen(["true"], start_new_session=True)
    done.wait(timeout=10)
    assert kill_group(done.pid, signal.SIGTERM) is False  # a group that is gone: nothing to signal, no error
