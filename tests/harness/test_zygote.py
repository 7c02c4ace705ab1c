"""harness.grading.zygote: each judge of a grading run is a fork of a process that imported the judge once. A
fork must run as a new interpreter would (the request's environment, folder, temporary folder, session
and pipes; nothing carried over from an earlier judge), report its exit status (a signal too), be killed
with everything in its session at its deadline, and die with the grading run however that ends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.grading.judge import JUDGE_PRELOAD, judge_env
from harness.grading.zygote import Zygote, ZygoteError
from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
KIT = Path(__file__).resolve().parent  # zygote_kit.py: what the forks run
SETTLE_S = 30.0  # how long a test waits for processes to be gone: a wait that ends when they are, not a bound


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_within(pids, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    env = judge_env("bwrap") | {"PYTHONPATH": f"{REPO}{os.pathsep}{KIT}"}
    z = Zygote("L10.8", env, tmp_path_factory.mktemp("z") / "home", preload=JUDGE_PRELOAD)
    yield z
    z.close()


def test_a_fork_runs_with_its_own_environment_folder_and_pipes(zygote, tmp_path):
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), "OL_ONLY_THIS_JUDGE": "yes"}
    r = zygote.run(["check", "x"], env, tmp_path, 30, main="zygote_kit:where")
    assert r.returncode == 7 and r.stderr == "to stderr\n", (r.returncode, r.stderr)
    seen = json.loads(r.stdout)
    assert seen["args"] == ["check", "x"] and seen["argv"] == ["ol", "check", "x"]
    assert seen["env"] == env, "the fork's environment is the request's, whole: nothing of the zygote's"
    assert seen["cwd"] == str(tmp_path) and seen["tmp"] == str(tmp_path)
    assert seen["sid"] == seen["pid"], "each judge leads a session of its own"


def test_nothing_a_judge_changes_reaches_the_next(zygote, tmp_path):
    first = zygote.run([], {"PATH": os.environ["PATH"]}, tmp_path, 30, main="zygote_kit:changes_the_zygote")
    second = zygote.run([], {"PATH": os.environ["PATH"]}, tmp_path, 30, main="zygote_kit:changes_the_zygote")
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert json.loads(first.stdout) == json.loads(second.stdout) == {"seen": None}


def test_a_judge_killed_by_a_signal_reports_that_signal(zygote, tmp_path):
    r = zygote.run([], {"PATH": os.environ["PATH"]}, tmp_path, 30, main="zygote_kit:dies")
    assert r.returncode == -signal.SIGKILL and r.stdout == "about to die\n", (r.returncode, r.stdout, r.stderr)


@pytest.mark.slow  # its deadline is 3 s
def test_a_judge_past_its_deadline_is_killed_with_its_session(zygote, tmp_path):
    """The judge (which would sleep 120 s) is stopped by the run's own 3 s timeout, which the TimeoutExpired names;
    its output up to then is kept; it and the child in its session are killed."""
    pids = tmp_path / "pids"
    with pytest.raises(subprocess.TimeoutExpired) as e:
        zygote.run([str(pids)], {"PATH": os.environ["PATH"]}, tmp_path, 3, main="zygote_kit:hangs")
    assert e.value.timeout == 3 and "pids written" in (e.value.output or ""), (e.value.timeout, e.value.output)
    judge, child = map(int, pids.read_text().split())
    assert gone_within([judge, child], SETTLE_S), "the judge or the child it started outlived the deadline"


def test_the_zygote_and_its_judges_end_with_the_grading_run(tmp_path):
    """A grading run killed outright (SIGKILL: no cleanup runs) takes its zygote and running judges with it."""
    pids = tmp_path / "pids"
    run = subprocess.Popen([sys.executable, "-c", f"""
import os, sys
sys.path[:0] = [{str(REPO)!r}, {str(KIT)!r}]
from pathlib import Path
from harness.grading.judge import judge_env
from harness.grading.zygote import Zygote
z = Zygote("L10.8", judge_env("bwrap") | {{"PYTHONPATH": {f"{REPO}{os.pathsep}{KIT}"!r}}}, Path({str(tmp_path / "home")!r}))
print(z.proc.pid, flush=True)
z.run([{str(pids)!r}], {{"PATH": os.environ["PATH"]}}, Path({str(tmp_path)!r}), 600, main="zygote_kit:hangs")
"""], stdout=subprocess.PIPE, text=True)
    zygote_pid = int(run.stdout.readline())
    end = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < end:
        time.sleep(0.05)
    judge, child = map(int, pids.read_text().split())
    run.kill()
    run.wait()
    assert gone_within([zygote_pid, judge], SETTLE_S), "the zygote or its judge outlived the grading run"
    os.kill(child, signal.SIGKILL) if alive(child) else None  # the judge's own child: its worker's sandbox reaps such


def test_only_its_user_reaches_the_zygote(zygote):
    folder = Path(zygote.path).parent
    assert folder.stat().st_mode & 0o777 == 0o700, oct(folder.stat().st_mode)


def test_a_zygote_that_cannot_start_says_why(tmp_path):
    with pytest.raises(ZygoteError, match="did not start .*L99"):
        Zygote("L99", judge_env("bwrap"), tmp_path / "home")


def test_a_zygote_deep_in_a_long_folder_starts_and_forks(tmp_path):
    """A Dask worker's scratch sits deep (`/scratch/users/NAME/dask-worker-space/...`): the socket's path is past
    AF_UNIX's 108 bytes, and the zygote binds and is reached all the same, still in its user's 0700 folder."""
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "home"
    deep.parent.mkdir(parents=True)
    assert len(os.fsencode(str(deep / "zygote.sock"))) > 108
    env = judge_env("bwrap") | {"PYTHONPATH": f"{REPO}{os.pathsep}{KIT}"}
    z = Zygote("L10.8", env, deep)
    try:
        r = z.run(["check", "deep"], {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)}, tmp_path, 30, main="zygote_kit:where")
        assert r.returncode == 7 and json.loads(r.stdout)["args"] == ["check", "deep"], (r.returncode, r.stderr)
        assert Path(z.path).is_socket() and Path(z.path).parent.stat().st_mode & 0o777 == 0o700
    finally:
        z.close()


@pytest.mark.slow(s=30)
@pytest.mark.parametrize("warm", [True, False])
def test_a_warmed_zygote_hands_every_judge_the_references_answers(warm, tmp_path):
    """warm=(the run's golden file, seed): the zygote checks the reference on those cases before it forks, so a judge
    starts with the reference's answers to the property inputs (and a single thread, as a fork must); unwarmed, none."""
    env = judge_env("bwrap") | {"PYTHONPATH": f"{REPO}{os.pathsep}{KIT}"}
    z = Zygote("L10.8", env, tmp_path / "home", preload=JUDGE_PRELOAD,
               warm=(load_chapter("L10.8").golden, None) if warm else None)
    try:
        r = z.run([], {"PATH": os.environ["PATH"]}, tmp_path, 60, main="zygote_kit:warmed")
    finally:
        z.close()
    got = json.loads(r.stdout)
    assert got["threads"] == 1, got
    assert (got["answers"] > 1000) == warm, got
    assert "warm-up check failed" not in (tmp_path / "home" / "zygote.log").read_text()
