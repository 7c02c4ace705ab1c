"""harness/sandbox/confine.py and harness/transport/shapes.py: the sandbox modes a worker runs in, the copies it reads, the
uid fallback where namespaces are refused, and the judge's check of an answer's shape.

The uid fallback runs where bubblewrap cannot (Docker's default profile) and the judge is root. This
machine has namespaces, so the uid tests force it (OL_SANDBOX=uid) inside a private mount namespace in
which the interpreter, its venv and the checkout are reachable by an unprivileged uid, as they are in a
Gradescope image (tests/harness/uid_kit.py). Nothing of the host changes.
"""

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.sandbox.confine import Mode, SandboxError, answers_exposed, choose, readable_copy
from harness.kernel.errors import BadSubmission
from harness.registry import load_chapter
from harness.sandbox.bwrap import available
from harness.transport.shapes import ShapeError, conform
from tests.harness import uid_kit
from tests.harness.hostile_kit import marked

REPO = Path(__file__).resolve().parents[2]
CH = load_chapter("L10.8")
S07 = REPO / "examples" / "submissions" / "s07-draws-u-resample-only-on-rejection"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


# ---- choosing a mode ------------------------------------------------------------------------------

def test_an_unknown_mode_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv("OL_SANDBOX", "chroot")
    with pytest.raises(SandboxError, match="bwrap, uid, none or auto"):
        choose()


def test_auto_takes_bwrap_where_it_runs_and_none_is_never_silent(monkeypatch):
    monkeypatch.setenv("OL_SANDBOX", "none")
    assert choose() == Mode("none", "OL_SANDBOX=none asked for it") and not choose().confined
    monkeypatch.delenv("OL_SANDBOX")
    if available() is None:
        assert choose().name == "bwrap"
    else:
        assert choose().why, "a mode below bwrap always says why"


@pytest.mark.slow
def test_ol_grade_refuses_to_run_submissions_unconfined_unless_told(tmp_path):
    subs = tmp_path / "subs"
    shutil.copytree(S07, subs / "s07")
    cmd = [sys.executable, "-m", "harness.cli", "grade", "L10.8", str(subs), "--ref-deps", "--out", str(tmp_path / "g.csv"),
           "--jobs", "1", "--seed", "3"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, "OL_SANDBOX": "none"}, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "will not run it unconfined" in r.stderr and "--no-sandbox" in r.stderr, r.stderr
    assert not (tmp_path / "g.csv").exists(), "refused before anyone is graded"
    r = subprocess.run(cmd + ["--no-sandbox"], capture_output=True, text=True, env={**ENV, "OL_SANDBOX": "none"},
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "g.csv").read_text())))
    assert [r["submission"] for r in rows] == ["s07"] and rows[0]["status"] == "graded", rows
    assert rows[0]["sandbox"] == "none", rows  # the mode is on the grade's row
    must_fail = CH.mutant("s07").must_fail  # graded, not zeroed: its pitfall's test fails, most others pass
    assert rows[0][must_fail] != "pass" and 0 < float(rows[0]["score"]) < float(rows[0]["max_score"]), rows


# ---- the copies a worker reads --------------------------------------------------------------------

def test_a_copy_for_the_worker_is_readable_follows_no_symlink_and_is_capped(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("x = 1\n")
    (src / "pkg" / "a.py").chmod(0o600)
    (src / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    (src / "pkg" / "answers.json").symlink_to(CH.golden)   # a link to the answers, resolved by the judge: never
    (src / "pkg" / "tree").symlink_to(REPO, target_is_directory=True)
    out = readable_copy(src, tmp_path / "out")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["pkg", "pkg/a.py"]
    assert (out / "pkg" / "a.py").stat().st_mode & 0o777 == 0o644 and (out / "pkg").stat().st_mode & 0o777 == 0o755
    (src / "pkg" / "big.bin").write_bytes(b"\0" * 2048)
    with pytest.raises(BadSubmission, match="more than"):
        readable_copy(src, tmp_path / "out2", cap_bytes=1024)


# ---- the shape of an answer ------------------------------------------------------------------------

@pytest.mark.parametrize("shape, value, problem", [
    (["int"], [1, True, 3], "[1] is True (boolean), expected an integer"),
    (["int"], [1, 7.0], "[1] is 7.0 (float), expected an integer"),
    (["int"], [1, "nan"], "[1] is 'nan' (str), expected an integer"),
    (["int"], {"0": 1}, "expected a list"),
    ("int", None, "expected an integer"),
    ({"tokens": ["int"], "n": "int"}, {"tokens": [1]}, "has the keys ['tokens'], expected ['n', 'tokens']"),
    ({"tokens": ["int"]}, [[1]], "expected an object"),
    (("tuple", "int", "bool"), [3, 1], "[1] is 1 (int), expected true or false"),
    ([["float"]], [[0.5], [[[[0.5]]]]], "[1][0] is [[[0.5]]] (list), expected a number"),
])
def test_an_answer_of_the_wrong_shape_is_named_where_it_breaks(shape, value, problem):
    with pytest.raises(ShapeError) as e:
        conform(shape, value, "ans")
    assert problem in str(e.value), str(e.value)


def test_non_finite_floats_are_decoded_at_any_depth_and_ints_pass_as_they_are():
    got = conform({"rows": [["float"]], "stats": {"rate": "float"}, "ids": ["int"]},
                  {"rows": [[0.5, "-inf"], ["nan"]], "stats": {"rate": "inf"}, "ids": [1, 2]})
    assert got["rows"][0] == [0.5, -math.inf] and math.isnan(got["rows"][1][0]) and got["stats"]["rate"] == math.inf
    assert got["ids"] == [1, 2] and conform(("any", "int", "null"), None) is None


def test_a_nested_answer_is_checked_no_deeper_than_its_shape():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ShapeError, match=r"\[0\] is \[\[\[\[\.\.\.\]\]\]\] \(list\)"):
        conform(["int"], deep)


# ---- the uid fallback -------------------------------------------------------------------------------

DAEMON = '''
import os as _os, sys as _sys
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:  # a daemon outside the worker's session: the judge (a child subreaper) must reap it
        _os.execv(_sys.executable, [_sys.executable, "-c", "import time; time.sleep(300)", "ol-test-uid-daemon-{tag}"])
    _os._exit(0)
if _os.getuid() != {uid}:
    raise RuntimeError("not the fallback's uid")
try:
    open({golden!r}).read()
    raise RuntimeError("read the judge's 0600 answers")  # a load error: the score would show it
except PermissionError:
    pass
try:
    open({fixture!r}, "a").write("forged")
except PermissionError:
    pass
'''


@pytest.mark.slow
def test_the_uid_fallback_grades_as_an_unprivileged_uid_and_reaps_what_it_left(tmp_path, worker_uids):
    """Mode uid: the worker runs as an unprivileged uid, cannot write the project's files nor read a 0600
    golden file, its setsid daemon dies with the check, and the report says `uid`."""
    prefix = uid_kit.namespace()
    tag = str(time.time_ns())
    reachable = Path(tempfile.mkdtemp(prefix="ol-test-uid-", dir="/tmp"))  # every ancestor traversable by others
    reachable.chmod(0o755)
    secret = reachable / "fresh.json"  # stands for the fresh cases: the judge's, 0600, at a path the worker can reach
    secret.write_text("{}")
    secret.chmod(0o600)
    sub = tmp_path / "sub"
    shutil.copytree(S07, sub)
    spec = sub / "tinyllm" / "infer" / "spec.py"
    uid = worker_uids()[0]  # not 65534: the root-run bwrap sandboxes of tests running alongside count against that uid
    spec.write_text(DAEMON.format(tag=tag, golden=str(secret), fixture=str(CH.golden), uid=uid) + spec.read_text())
    before = CH.golden.read_bytes()
    out = tmp_path / "rep.json"
    try:
        _check_in_uid_mode(prefix, sub, out, uid, tag, before, tmp_path)
    finally:
        shutil.rmtree(reachable)


def _check_in_uid_mode(prefix, sub, out, uid, tag, before, tmp_path):
    r = subprocess.run([*prefix, sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(sub), "--ref-deps",
                        "--json", str(out)], capture_output=True, text=True, timeout=180, cwd=tmp_path,
                       env={**ENV, "OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(uid)})
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert rep["sandbox"] == "uid" and rep["summary"]["score"] == 15.0, rep["summary"]
    assert "sandbox mode uid" in r.stdout and "chmod -R go-rwx" in r.stdout, "the readable answers are named, with the remedy"
    assert CH.golden.read_bytes() == before, "the worker's uid cannot write the project's files"
    assert not marked(f"ol-test-uid-daemon-{tag}"), "the daemon must die with the check"


@pytest.mark.slow
def test_ol_grade_in_uid_mode_refuses_while_the_answers_are_readable(tmp_path, worker_uids):
    prefix = uid_kit.namespace()
    subs = tmp_path / "subs"
    shutil.copytree(S07, subs / "s07")
    r = subprocess.run([*prefix, sys.executable, "-m", "harness.cli", "grade", "L10.8", str(subs), "--ref-deps",
                        "--out", str(tmp_path / "g.csv")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**ENV, "OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(worker_uids()[0])})
    assert r.returncode == 2 and "chmod -R go-rwx" in r.stderr and str(CH.pack_dir) in r.stderr, r.stderr[-2000:]
    assert answers_exposed(CH, Mode("bwrap")) == [], "bwrap sees none of them"


@pytest.mark.slow
def test_ol_check_says_once_that_it_is_not_sandboxed_and_json_dash_is_stdouts_only_content(tmp_path):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(S07), "--ref-deps",
                        "--json", "-"], capture_output=True, text=True, timeout=180, cwd=tmp_path,
                       env={**ENV, "OL_SANDBOX": "none"})
    assert r.returncode == 1, r.stderr[-2000:]
    rep = json.loads(r.stdout)  # the whole of stdout is the report (ol grade reads it over a pipe)
    assert rep["sandbox"] == "none" and rep["summary"]["score"] == 15.0
    assert r.stderr.count("not sandboxed") == 1 and "15 of 16 passed" in r.stderr, r.stderr[-2000:]


def test_the_uid_fallback_refuses_a_worker_that_could_not_reach_its_files(tmp_path):
    """A model file the worker needs, behind a private folder: a clear refusal before any test, not a grade."""
    from harness.sandbox.confine import confine

    private = tmp_path / "private"
    (private / "model").mkdir(parents=True)
    (private / "model" / "w.bin").write_bytes(b"0")
    private.chmod(0o700)
    home = tmp_path / "w" / "home"
    home.mkdir(parents=True)
    with pytest.raises(SandboxError, match="cannot reach") as e:
        confine(Mode("uid"), ["true"], [private / "model" / "w.bin"], {}, home)
    assert str(private / "model" / "w.bin") in str(e.value)


@pytest.mark.slow(s=20)
def test_a_submission_too_large_to_copy_is_refused_and_leaves_no_worker_folder(tmp_path, monkeypatch):
    """More files than the worker's copy takes: BadSubmission with the reason, and its folder removed. (The
    upload's own walk refuses such a folder first, harness.subjects.upload.ENTRY_CAP; lifted here, the copy's cap is
    the one left to refuse it: the defence behind the first.)"""
    from harness.subjects import upload
    from harness.sandbox.confine import COPY_CAP_FILES
    from harness.subjects.open import open_impl

    monkeypatch.setattr(upload, "ENTRY_CAP", 2 * COPY_CAP_FILES)

    sub = tmp_path / "big"
    shutil.copytree(S07, sub)
    junk = sub / "tinyllm" / "junk"
    junk.mkdir()
    for i in range(COPY_CAP_FILES + 1):
        (junk / f"{i}.txt").write_text("x")
    scratch = tmp_path / "scratch"  # this test's temporary folder: other tests' workers come and go in /tmp
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    impl = open_impl(CH, str(sub))  # its own package, copied whole for the worker
    try:
        with pytest.raises(BadSubmission, match="more than"):
            impl.transport.spawn()
    finally:
        impl.close()
    assert not list(scratch.glob("ol-worker-*")), "the worker's folder must go"
